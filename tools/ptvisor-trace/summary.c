/* SPDX-License-Identifier: MIT */
/* ptvisor-trace summary: instructions, branches by kind, events and gaps per CPU and in
 * total, and the functions where most instructions ran (self). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "image.h"

enum {
    C_BYTES,
    C_INSNS,
    C_KINSNS,
    C_KNAMED,
    C_UINSNS,
    C_UNAMED,
    C_BRANCHES,
    C_COND_TAKEN,
    C_COND_NOT,
    C_COND_UNKNOWN,
    C_JMP,
    C_JMP_IND,
    C_CALL,
    C_CALL_IND,
    C_RET,
    C_FAR,
    C_ASYNC,
    C_ENABLE,
    C_DISABLE,
    C_CR3,
    C_GAPS,
    C_ERRORS,
    C_OVERFLOWS,
    C_HOLES,
    C_NOSYNC,
    C_N
};

static const char *const label[C_N] = {
    "trace bytes",
    "instructions",
    "  at kernel addresses (from 2^63)",
    "    named by a symbol",
    "  at user addresses (below 2^63: also boot code, firmware)",
    "    named by a symbol",
    "branches",
    "  conditional taken",
    "  conditional not taken",
    "  conditional, direction unknown",
    "  jumps direct",
    "  jumps indirect",
    "  calls direct",
    "  calls indirect",
    "  returns",
    "  far transfers (syscall, sysret, int, iret, far call/jmp/ret)",
    "interrupts and events (asynchronous branches)",
    "trace enables",
    "trace disables",
    "cr3 changes",
    "gaps",
    "  decode errors",
    "  overflows",
    "  ranges lost in transit",
    "  trace without a sync point",
};

struct sum_ctx {
    uint64_t c[PTT_MAX_CPUS][C_N];
    uint64_t *self; /* per symbol; [nsym] = unknown */
    size_t nsym;
    struct ptt_syms *syms;
    unsigned slot; /* index of the current CPU in c */
    unsigned ncpu;
    unsigned cpus[PTT_MAX_CPUS];
};

static int sum_step(const struct ptt_step *s, void *ctx)
{
    struct sum_ctx *x = ctx;
    uint64_t *c;

    if (s->kind == PTT_STEP_CPU) {
        x->slot = x->ncpu;
        x->cpus[x->ncpu++] = s->cpu;
        return 0;
    }
    c = x->c[x->slot];
    switch (s->kind) {
    case PTT_STEP_INSN: {
        const struct ptt_sym *sym = ptt_syms_find(x->syms, s->ip);
        enum ptt_br b = ptt_branch_of(s);

        c[C_INSNS]++;
        if (s->ip >> 63) {
            c[C_KINSNS]++;
            c[C_KNAMED] += sym != NULL;
        } else {
            c[C_UINSNS]++;
            c[C_UNAMED] += sym != NULL;
        }
        x->self[sym ? (size_t)(sym - x->syms->s) : x->nsym]++;
        if (b != PTT_BR_NONE)
            c[C_BRANCHES]++;
        switch (b) {
        case PTT_BR_COND:
            if (!s->next_valid)
                c[C_COND_UNKNOWN]++;
            else
                c[s->next_ip == s->ip + s->size ? C_COND_NOT : C_COND_TAKEN]++;
            break;
        case PTT_BR_JMP:
            c[C_JMP]++;
            break;
        case PTT_BR_JMP_IND:
            c[C_JMP_IND]++;
            break;
        case PTT_BR_CALL:
            c[C_CALL]++;
            break;
        case PTT_BR_CALL_IND:
            c[C_CALL_IND]++;
            break;
        case PTT_BR_RET:
            c[C_RET]++;
            break;
        case PTT_BR_FAR:
            c[C_FAR]++;
            break;
        case PTT_BR_NONE:
            break;
        }
        return 0;
    }
    case PTT_STEP_ASYNC:
        c[C_ASYNC]++;
        return 0;
    case PTT_STEP_GAP:
        c[C_GAPS]++;
        c[s->gap == PTT_GAP_ERROR      ? C_ERRORS
          : s->gap == PTT_GAP_OVERFLOW ? C_OVERFLOWS
          : s->gap == PTT_GAP_HOLE     ? C_HOLES
                                       : C_NOSYNC]++;
        return 0;
    case PTT_STEP_EVENT:
        if (!strncmp(s->what, "trace enabled", 13))
            c[C_ENABLE]++;
        else if (!strncmp(s->what, "trace disabled", 14))
            c[C_DISABLE]++;
        else if (!strncmp(s->what, "cr3 ", 4))
            c[C_CR3]++;
        return 0;
    default:
        return 0;
    }
}

struct top {
    size_t sym;
    uint64_t n;
};

static int top_cmp(const void *a, const void *b)
{
    const struct top *x = a, *y = b;

    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return x->sym < y->sym ? -1 : x->sym > y->sym;
}

static const char summary_help[] =
    "NAME\n"
    "    ptvisor-trace summary - what a dump's trace contains, in numbers\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace summary [OPTIONS] DIR|LOG\n"
    "\n"
    "DESCRIPTION\n"
    "    Per CPU and in total: trace bytes, instructions, branches (conditional taken / not\n"
    "    taken, jumps and calls direct / indirect, returns, far transfers), interrupts and\n"
    "    other asynchronous events, trace enables / disables, CR3 changes, gaps (decode\n"
    "    errors, overflows, ranges lost in transit); then the functions in which most\n"
    "    instructions ran (self: not counting what they called).\n"
    "\n"
    "    gaps: every place where the decode loses the flow.  overflows: the OVF packets\n"
    "    decoded, each where the trace lost the path of traced code; the VMM counts the same\n"
    "    packets as the window's gaps (TRACE_STATUS, ptvisor-ctl, a dump's overflows, over\n"
    "    the whole window), so for a dump that holds its whole window intact gaps ==\n"
    "    overflows == that count.  ranges lost in transit: stream bytes the dump did not\n"
    "    deliver (DIR/cpuN.meta's missing ranges), one gap each.\n"
    "\n"
    "    Then which share of the instructions at kernel and at user addresses a symbol names,\n"
    "    and where the kernel's symbols came from (the vmlinux or System.map with the KASLR\n"
    "    offset and how it was found, the kallsyms).\n"
    "\n"
    "OPTIONS\n"
    "    -e FILE[@BASE], -k/--vmlinux VMLINUX, -m SYSTEM.MAP, --kallsyms FILE, --kaslr OFF,\n"
    "    --cpu N, -q, --progress\n"
    "                    as for decode (ptvisor-trace --help)\n"
    "    --top N         the N busiest functions (default 20)\n"
    "    -o FILE         write to FILE instead of standard output\n";

int ptt_cmd_summary(int argc, char **argv)
{
    struct ptt_session s;
    struct ptt_walk_stats st;
    struct sum_ctx *x;
    char err[300];
    int rc;
    FILE *f;

    if (ptt_session_open(&s, argc, argv, PTT_OPT_OUT | PTT_OPT_TOP, summary_help, &rc) != 0)
        return rc;
    x = calloc(1, sizeof(*x));
    if (x) {
        x->syms = &s.im.syms;
        x->nsym = s.im.syms.n;
        x->self = calloc(x->nsym + 1, sizeof(*x->self));
    }
    if (!x || !x->self) {
        if (x)
            free(x);
        ptt_session_close(&s);
        return ptt_fail(argv[0], "out of memory");
    }
    rc = ptt_walk(&s.d, &s.im, &s.o, sum_step, x, &st, err, sizeof(err));
    f = rc < 0 ? NULL : ptt_open_out(&s.o);
    if (rc < 0)
        ptt_fail(s.o.cmd, "%s", err);
    if (f) {
        uint64_t tot[C_N] = {0};

        for (unsigned i = 0; i < x->ncpu; i++) {
            const struct ptt_cpu *c = NULL;
            for (unsigned j = 0; j < s.d.ncpu; j++)
                if (s.d.cpu[j].cpu == x->cpus[i])
                    c = &s.d.cpu[j];
            x->c[i][C_BYTES] = c ? c->pt_len : 0;
        }
        fprintf(f, "ptvisor-trace summary of %s: dump %u, reason %s, source %s, %u CPU%s%s\n\n",
                s.d.dir, s.d.dump_id, s.d.reason[0] ? s.d.reason : "?",
                s.d.source[0] ? s.d.source : "?", x->ncpu, x->ncpu == 1 ? "" : "s",
                s.d.complete ? "" : ", INCOMPLETE");
        fprintf(f, "%-64s", "");
        for (unsigned i = 0; i < x->ncpu; i++) {
            char h[16];
            snprintf(h, sizeof(h), "cpu%u", x->cpus[i]);
            fprintf(f, " %12s", h);
        }
        fprintf(f, " %12s\n", "total");
        for (unsigned k = 0; k < C_N; k++) {
            for (unsigned i = 0; i < x->ncpu; i++)
                tot[k] += x->c[i][k];
            fprintf(f, "%-64s", label[k]);
            for (unsigned i = 0; i < x->ncpu; i++)
                fprintf(f, " %12llu", (unsigned long long)x->c[i][k]);
            fprintf(f, " %12llu\n", (unsigned long long)tot[k]);
        }
        /* where the symbols came from, and how many instructions they name */
        fprintf(f, "\nsymbols:");
        if (tot[C_KINSNS])
            fprintf(f, " kernel addresses %.2f%% of %llu instructions named",
                    100.0 * (double)tot[C_KNAMED] / (double)tot[C_KINSNS],
                    (unsigned long long)tot[C_KINSNS]);
        if (tot[C_UINSNS])
            fprintf(f, "%s user addresses %.2f%% of %llu named", tot[C_KINSNS] ? ";" : "",
                    100.0 * (double)tot[C_UNAMED] / (double)tot[C_UINSNS],
                    (unsigned long long)tot[C_UINSNS]);
        fprintf(f, "\n");
        if (s.o.kernel)
            fprintf(f, "  kernel: %s, KASLR offset %#llx from %s\n", s.o.kernel,
                    (unsigned long long)s.im.kaslr, s.im.kaslr_how);
        for (unsigned i = 0; i < s.o.nmap; i++)
            fprintf(f, "  kernel: %s, KASLR offset %#llx from %s\n", s.o.map[i],
                    (unsigned long long)s.im.kaslr, s.im.kaslr_how);
        if (s.im.kallsyms)
            fprintf(f, "  kernel: %s (runtime addresses)%s\n", s.im.kallsyms,
                    s.im.kallsyms_path ? ", the guest's own" : "");
        if (tot[C_KINSNS] && !s.o.kernel && !s.o.nmap && !s.im.kallsyms)
            fprintf(f, "  kernel: no symbols (give --vmlinux, --kallsyms or -m, or send the "
                       "guest's with `ptvisor-ctl kallsyms`)\n");
        if (s.d.comm[0]) {
            fprintf(f, "  traced program: %s", s.d.comm);
            if (s.d.has_pid)
                fprintf(f, " (pid %llu)", (unsigned long long)s.d.pid);
            fprintf(f, "\n");
        }
        /* top functions (self) */
        struct top *t = malloc((x->nsym + 1) * sizeof(*t));
        size_t nt = 0;
        if (t) {
            for (size_t i = 0; i <= x->nsym; i++)
                if (x->self[i])
                    t[nt++] = (struct top){i, x->self[i]};
            qsort(t, nt, sizeof(*t), top_cmp);
            fprintf(f, "\ntop %u functions by instructions (self):\n", s.o.top);
            fprintf(f, "%14s %7s  %s\n", "instructions", "share", "function (file)");
            for (size_t i = 0; i < nt && i < s.o.top; i++) {
                const struct ptt_sym *sym = t[i].sym < x->nsym ? &s.im.syms.s[t[i].sym] : NULL;
                fprintf(f, "%14llu %6.2f%%  %s (%s)\n", (unsigned long long)t[i].n,
                        tot[C_INSNS] ? 100.0 * (double)t[i].n / (double)tot[C_INSNS] : 0.0,
                        sym ? sym->name : "[unknown]",
                        sym ? s.im.syms.dso[sym->dso].name : "[unknown]");
            }
            free(t);
        } else {
            rc = ptt_fail(s.o.cmd, "out of memory");
        }
        rc |= ptt_close_out(&s.o, f);
    } else {
        rc = 1;
    }
    free(x->self);
    free(x);
    ptt_session_close(&s);
    return rc;
}
