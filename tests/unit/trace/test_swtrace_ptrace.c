/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's stepping logic (vmm/trace/swtrace.c) over real programs, with
 * its decode cache (vmm/trace/bcache.c) on and off.  Each program is single-stepped with
 * PTRACE_SINGLESTEP (ASLR off); every code page it runs is copied at first execution into
 * a fake guest-physical memory behind 4-level page tables built as it goes, exactly as
 * the VMM reads guest code through guest paging.  The RIP sequence is then replayed into
 * swtrace as MTF exits would show it, without the cache, with it, and with it given a
 * larger table: the rings must be equal byte for byte, and libipt must decode the cached
 * one back to the stepped instruction sequence.
 *
 * --bench [program args...]: the figure of `make bench-swtrace` (mk/48-swtrace-bench.mk):
 * the replay of one recorded run timed with and without the cache (and the guest memory
 * reads per step, each of which is an EPT translation in the VMM).  Under callgrind the
 * replays are the functions replay_nocache, replay_cached (the 64 entries inside struct
 * swtrace) and replay_cached_big (a 32 KiB table given with swtrace_cache_mem).
 *
 * Exit 77 (SKIP) with the reason when ptrace is not permitted here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace/swtrace.h"
#include "fakes/ptrace_probe.h"
#include "fakes/swpt_dec.h"

#define PG          4096ull
#define PHYS_PAGES  16384u /* 64 MiB of fake guest-physical memory */
#define CR3         0x1000ull
#define TEST_STEPS  150000u /* per program in the test */
#define BENCH_STEPS 300000u /* the bench's one program */
#define IND_MAX     16384u  /* indirect JMP / CALL steps kept per program */

/* ---- fake guest-physical memory and the page tables ---- */

static uint8_t *phys;
static uint64_t nphys;
static uint64_t nreads; /* guest memory reads (each an EPT translation in the VMM) */

static bool phys_read(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    (void)ctx;
    nreads++;
    if (gpa >= nphys * PG || len > nphys * PG - gpa)
        return false;
    memcpy(buf, phys + gpa, len);
    return true;
}
static const struct gw_mem mem = {.read = phys_read};

/* gw_mem.map as the VMM's shim gives it (trace/shim/trace_step.c map_step): the page in place */
static const uint8_t *phys_map(void *ctx, uint64_t gpa)
{
    (void)ctx;
    return gpa < nphys * PG ? phys + (gpa & ~(PG - 1)) : NULL;
}
static const struct gw_mem mem_mapped = {.read = phys_read, .map = phys_map};
static const struct gw_paging paging = {
    .cr0 = 0x80000001, .cr3 = CR3, .cr4 = 0x20, .efer = 1 << 10};

static uint64_t page_new(void)
{
    if (nphys >= PHYS_PAGES)
        fail_msg("fake guest memory full");
    memset(phys + nphys * PG, 0, PG);
    return nphys++ * PG;
}

static void phys_reset(void)
{
    if (!phys)
        phys = malloc((size_t)PHYS_PAGES * PG);
    assert_non_null(phys);
    nphys = 0;
    page_new(); /* page 0 unused */
    assert_true(page_new() == CR3);
}

/* map the user page at va (copied from the tracee) if it is not yet */
/* the last-level page table entry of va, tables made as needed */
static uint64_t *pte_of(uint64_t va)
{
    uint64_t table = CR3, *e;
    for (int shift = 39; shift >= 21; shift -= 9) {
        e = (uint64_t *)(phys + table + 8 * ((va >> shift) & 511));
        if (!(*e & 1))
            *e = page_new() | 7;
        table = *e & ~0xfffull;
    }
    return (uint64_t *)(phys + table + 8 * ((va >> 12) & 511));
}

/* the 8 bytes at stack address va are val (the stack page made as needed) */
static bool stack_put(uint64_t va, uint64_t val)
{
    if ((va & (PG - 1)) > PG - 8)
        return false;
    uint64_t *e = pte_of(va);
    if (!(*e & 1))
        *e = page_new() | 7;
    memcpy(phys + (*e & ~0xfffull) + (va & (PG - 1)), &val, 8);
    return true;
}

static bool map_code(uint64_t va, int memfd)
{
    uint64_t table = CR3, *e;
    for (int shift = 39; shift >= 21; shift -= 9) {
        e = (uint64_t *)(phys + table + 8 * ((va >> shift) & 511));
        if (!(*e & 1))
            *e = page_new() | 7;
        table = *e & ~0xfffull;
    }
    e = (uint64_t *)(phys + table + 8 * ((va >> 12) & 511));
    if (*e & 1)
        return true;
    uint64_t gpa = page_new();
    if (pread(memfd, phys + gpa, PG, (off_t)(va & ~(PG - 1))) != (ssize_t)PG) {
        nphys--;
        return false;
    }
    *e = gpa | 7;
    return true;
}

/* ---- recording ---- */

/* at an indirect JMP / CALL: the registers and the 8 bytes of a memory operand there */
struct ind_rec {
    uint64_t gpr[16]; /* as encoded: RAX RCX RDX RBX RSP RBP RSI RDI R8 .. R15 */
    uint64_t ea, val;
    bool mem;
};

struct run {
    const char *name;
    uint64_t *rip;
    /* per step, for block stepping's prediction: RFLAGS, RSP and the 8 bytes at RSP */
    uint64_t *fl, *sp, *top;
    int32_t *ind; /* the step's ind_rec at an indirect JMP / CALL, else -1 */
    struct ind_rec *rec;
    uint8_t *other; /* the step runs as "another process" in a one-process window (mark_other) */
    unsigned n, nrec;
};

static uint64_t get_regs(pid_t pid, uint64_t *fl, uint64_t *sp, uint64_t *top,
                         struct user_regs_struct *all)
{
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, pid, NULL, &r) != 0)
        fail_msg("PTRACE_GETREGS: %s", strerror(errno));
    *fl = r.eflags;
    *sp = r.rsp;
    errno = 0;
    *top = (uint64_t)ptrace(PTRACE_PEEKDATA, pid, (void *)r.rsp, NULL);
    *all = r;
    return r.rip;
}

/* the step about to run the instruction at r->rip: where it is an indirect JMP / CALL the
 * tracer can predict (x86_indirect_operand), its registers and operand are kept for the
 * replay; a wrong operand is caught there: the prediction would not be where the CPU went */
static void record_ind(struct run *r, pid_t pid, int memfd, const struct user_regs_struct *u)
{
    uint8_t code[X86_MAX_INSN];
    struct x86_insn in;
    struct x86_ind op;
    r->ind[r->n] = -1;
    ssize_t got = pread(memfd, code, sizeof(code), (off_t)u->rip);
    if (got <= 0 || x86_classify(code, (size_t)got, X86_CODE64, &in) ||
        (in.branch != X86_BR_JMP_INDIRECT && in.branch != X86_BR_CALL_INDIRECT) ||
        x86_indirect_operand(code, in.len, X86_CODE64, &op) || r->nrec >= IND_MAX)
        return;
    struct ind_rec *k = &r->rec[r->nrec];
    const uint64_t g[16] = {u->rax, u->rcx, u->rdx, u->rbx, u->rsp, u->rbp, u->rsi, u->rdi,
                            u->r8,  u->r9,  u->r10, u->r11, u->r12, u->r13, u->r14, u->r15};
    memcpy(k->gpr, g, sizeof(g));
    k->mem = op.kind == X86_IND_MEM;
    if (k->mem) {
        k->ea = (uint64_t)(int64_t)op.disp +
                (op.base == X86_IND_RIP    ? u->rip + in.len
                 : op.base == X86_IND_NONE ? 0
                                           : g[op.base]) +
                (op.index == X86_IND_NONE ? 0 : g[op.index] * op.scale);
        errno = 0;
        k->val = (uint64_t)ptrace(PTRACE_PEEKDATA, pid, (void *)k->ea, NULL);
        if (errno)
            return;
    }
    r->ind[r->n] = (int32_t)r->nrec++;
}

static void record(struct run *r, char *const argv[], unsigned max)
{
    int st;
    char path[64];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        personality(ADDR_NO_RANDOMIZE);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP)
        fail_msg("%s: no exec stop (status %#x)", argv[0], st);
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int memfd = open(path, O_RDONLY);
    assert_true(memfd >= 0);
    phys_reset();
    r->name = argv[0];
    r->rip = malloc(max * sizeof(uint64_t));
    r->fl = malloc(max * sizeof(uint64_t));
    r->sp = malloc(max * sizeof(uint64_t));
    r->top = malloc(max * sizeof(uint64_t));
    r->ind = malloc(max * sizeof(int32_t));
    r->rec = malloc(IND_MAX * sizeof(struct ind_rec));
    r->other = calloc(max, 1);
    assert_true(r->rip && r->fl && r->sp && r->top && r->ind && r->rec && r->other);
    r->n = r->nrec = 0;
    int sig = 0;
    while (r->n < max) {
        struct user_regs_struct u;
        uint64_t rip = get_regs(pid, &r->fl[r->n], &r->sp[r->n], &r->top[r->n], &u);
        record_ind(r, pid, memfd, &u);
        r->rip[r->n++] = rip;
        if (!map_code(rip, memfd))
            fail_msg("%s: code at %#lx unreadable", argv[0], (unsigned long)rip);
        if ((rip & (PG - 1)) > PG - X86_MAX_INSN)
            map_code(rip + PG, memfd); /* may be unmapped: the instruction then ends before */
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) != 0)
            fail_msg("PTRACE_SINGLESTEP: %s", strerror(errno));
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st) || WIFSIGNALED(st))
            break;
        sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    close(memfd);
}

/* ---- replay ---- */

struct replay {
    struct swtrace t;
    struct swpt_ring ring;
    uint64_t reads;
    double ns;
    bool blocks; /* block stepping with the block table (swtrace_block_mem), as the VMM */
};

static struct bc_insn_entry big_table[1024]; /* 32 KiB: the shim's optional larger table */

/*
 * Filtered windows: the steps the run marks `other` are shown to the tracer in a context the
 * filter leaves out (the same code and page tables: only the context differs), and RSP is the
 * recorded one (a departure's return is judged by it).  W_WHOLE: none of this.
 *   W_CR3: a one-process window (ptvisor-ctl trace): CR3 matched, `other` under another CR3;
 *   W_CPL: a user-only window, `other` at CPL 0 (as the kernel);
 *   W_RANGE: W_CR3 and an IP range around a code page of the run (traced code it excludes);
 *   W_TRIGGER: W_CR3 and a start trigger at an IP the process reaches a third of the way in.
 */
enum window { W_WHOLE, W_CR3, W_CPL, W_RANGE, W_TRIGGER };
#define CR3_OTHER 0x7000ull
static enum window window;
static uint64_t window_ip; /* W_RANGE: the range's page; W_TRIGGER: the trigger */

/* the vCPU at step i of the run */
static void at_step(const struct run *r, unsigned i, struct swtrace_cpu *c)
{
    c->rip = r->rip[i];
    if (window == W_WHOLE)
        return;
    c->rsp = r->sp[i];
    c->ctx.cpl = window == W_CPL && r->other[i] ? 0 : 3;
    c->ctx.cr3 = window != W_CPL && r->other[i] ? CR3_OTHER : CR3;
}

/* the spans from every other system call to the next run as "another process": the SYSCALL
 * is where a context switch can happen (the return comes elsewhere: the tracer sees a gap) */
static unsigned mark_other(struct run *r)
{
    bool in_other = false;
    unsigned spans = 0;
    for (unsigned i = 0; i < r->n; i++) {
        uint8_t code[X86_MAX_INSN];
        unsigned got = 0;
        struct x86_insn in;
        r->other[i] = in_other;
        gw_read(&mem, &paging, r->rip[i], code, sizeof(code), &got);
        if (got && x86_classify(code, got, X86_CODE64, &in) == 0 && in.branch == X86_BR_SYSCALL) {
            in_other = !in_other;
            spans += in_other;
        }
    }
    return spans;
}
static uint8_t blk_table[32 * 4096]; /* the shim's block table */

/* a window opened on the run's first state, with an empty ring: the vCPU as it is seen there */
static struct swtrace_cpu replay_open(const struct run *r, bool nocache, bool big,
                                      const struct gw_mem *m, struct replay *o)
{
    struct swpt_cfg cfg = {.filter = {.user = true, .kernel = window != W_CPL},
                           .psb_period = 1u << 14};
    if (window != W_WHOLE && window != W_CPL) {
        cfg.filter.cr3_match = true;
        cfg.filter.cr3 = CR3;
    }
    if (window == W_RANGE) {
        cfg.filter.nranges = 1;
        cfg.filter.range[0].lo = window_ip & ~0xfffull;
        cfg.filter.range[0].hi = (window_ip | 0xfff) + 0x1000;
    }
    if (window == W_TRIGGER) {
        cfg.filter.start_at = true;
        cfg.filter.start_ip = window_ip;
    }
    struct swtrace_cpu c = {.rip = r->rip[0],
                            .cs_sel = 0x33,
                            .rsp = 0x10, /* no stack mapped: no event frames */
                            .ctx = {.cr3 = CR3, .cpl = 3, .cs = X86_CODE64},
                            .paging = paging};
    memset(&o->t, 0, sizeof(o->t));
    o->t.nocache = nocache;
    if (big)
        swtrace_cache_mem(&o->t, big_table, sizeof(big_table));
    if (big && o->blocks)
        swtrace_block_mem(&o->t, blk_table, sizeof(blk_table));
    o->ring.head = o->ring.dropped = 0;
    o->ring.stopped = false;
    swtrace_start(&o->t, &cfg, &o->ring, m, &c, 0);
    return c;
}

static void replay(const struct run *r, bool nocache, bool big, struct replay *o)
{
    struct timespec t0, t1;
    uint64_t reads0 = nreads;
    const struct gw_mem *m = big ? &mem_mapped : &mem; /* big: the VMM's set-up */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct swtrace_cpu c = replay_open(r, nocache, big, m, o);
    for (unsigned i = 1; i < r->n; i++) {
        at_step(r, i, &c);
        swtrace_observe(&o->t, m, &c, true);
    }
    swtrace_stop(&o->t);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    o->reads = nreads - reads0;
    o->ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
}

/* the two functions callgrind measures (mk/48-swtrace-bench.mk) */
__attribute__((noinline)) void replay_nocache(const struct run *r, struct replay *o);
__attribute__((noinline)) void replay_cached(const struct run *r, struct replay *o);
__attribute__((noinline)) void replay_cached_big(const struct run *r, struct replay *o);
void replay_nocache(const struct run *r, struct replay *o)
{
    replay(r, true, false, o);
}
void replay_cached(const struct run *r, struct replay *o)
{
    replay(r, false, false, o);
}
void replay_cached_big(const struct run *r, struct replay *o)
{
    replay(r, false, true, o);
}

/*
 * The run as the VMM's block stepping traces it (swtrace.h): from each state a block is
 * planned and the recorded run followed through it, as the vCPU runs it unstepped; at its end
 * (the breakpoint) the next block is predicted from the recorded RFLAGS and return address,
 * and the recording must go there (the prediction against the real CPU); one block in `every`
 * (0: none) is cut short by an exit at a random instruction in it (an interrupt), after which one
 * instruction is stepped, as the shim does.  Returns the VM exits the VMM would take.
 */
struct block_stats {
    uint64_t exits, blocks, leads, cut, steps, chained, indirect, loops, dark;
};

static void replay_blocks(const struct run *r, unsigned every, struct replay *o,
                          struct block_stats *bs)
{
    struct swtrace_block b;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    bool out = false, cool = false;
    unsigned i = 0;

    memset(bs, 0, sizeof(*bs));
    struct swtrace_cpu c = replay_open(r, false, true, &mem_mapped, o); /* as the VMM */
    while (i + 1 < r->n) {
        at_step(r, i, &c);
        if (!out) {
            if (cool || !swtrace_block_plan(&o->t, &mem_mapped, &c, &b)) {
                cool = false; /* a trap-flag step */
                bs->exits++;
                bs->steps++;
                at_step(r, ++i, &c);
                swtrace_observe(&o->t, &mem_mapped, &c, true);
                continue;
            }
            out = true;
        }
        bs->dark += !o->t.pt.pkt_en; /* a block out of the traced context */
        /* the vCPU runs the block: where each of its instructions is in the recording */
        unsigned at[SWTRACE_BLOCK_MAX + 2], npos = 0, j = i;
        if (b.lead) {
            if (r->rip[i] != b.lead_ip)
                fail_msg("%s: block led by %#lx, vCPU at %#lx", r->name, (unsigned long)b.lead_ip,
                         (unsigned long)r->rip[i]);
            at[npos++] = j++;
            if (j < r->n && r->rip[j] != b.ip)
                fail_msg("%s: branch at %#lx predicted to %#lx, the CPU went to %#lx", r->name,
                         (unsigned long)b.lead_ip, (unsigned long)b.ip, (unsigned long)r->rip[j]);
        }
        uint64_t ip = b.ip;
        for (unsigned k = 0; k <= b.n && j < r->n; k++) {
            if (r->rip[j] != ip)
                fail_msg("%s: block at %#lx: instruction %u ran at %#lx, not %#lx", r->name,
                         (unsigned long)b.ip, k, (unsigned long)r->rip[j], (unsigned long)ip);
            at[npos++] = j;
            if (k == b.n)
                break;
            while (j + 1 < r->n && r->rip[j + 1] == ip)
                j++; /* the iterations of a REP string instruction */
            ip = swtrace_block_ip(&b, k + 1, X86_CODE64);
            j++;
        }
        bs->exits++;
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        /* the recording ends before the block does: cut there */
        bool cut =
            (every && seed % every == 0) || npos != b.lead + b.n + 1u || at[npos - 1] + 1 >= r->n;
        unsigned stop = cut ? at[(seed >> 32) % npos] : at[npos - 1];
        at_step(r, stop, &c);
        c.rf = b.lead && stop == at[0]; /* stopped before the lead ran: RF still set */
        int s = swtrace_block_settle(&o->t, &mem_mapped, &c, &b);
        bs->loops += b.lead_rf;
        assert_int_equal(s, SWTRACE_SETTLED);
        bs->blocks++;
        bs->leads += b.lead;
        bs->chained += b.nseg > 1;
        i = stop;
        if (cut || stop != at[npos - 1]) {
            bs->cut++;
            out = false;
            cool = true; /* the shim steps once after an exit in a block */
            continue;
        }
        /* the breakpoint: the next block, predicted from the state there */
        struct swtrace_cpu at_bp = c;
        struct swtrace_regs regs = {.rflags = r->fl[i]};
        at_bp.rsp = r->sp[i];
        const struct ind_rec *k = r->ind[i] >= 0 ? &r->rec[r->ind[i]] : NULL;
        if (k)
            regs.gpr = k->gpr;
        out = stack_put(r->sp[i], r->top[i]) && (!k || !k->mem || stack_put(k->ea, k->val)) &&
              swtrace_block_next(&o->t, &mem_mapped, &at_bp, &regs, &b);
        bs->indirect += out && k;
    }
    swtrace_stop(&o->t);
}

/* the window leaves ctx out in the way free running needs: by its CR3 filter (every MOV to CR3
 * exits) or, in the user-only window, at CPL 0 (every fetch of a user-mode page exits) */
static bool free_out(const struct replay *o, const struct swpt_ctx *ctx)
{
    return window == W_CPL ? ctx->cpl == 0 : swpt_cr3_off(&o->t.pt, ctx->cr3);
}

/*
 * The run as free running traces it (trace_step.c): wherever the tracer stands where the
 * window leaves it out (free_out), the vCPU runs on unstepped and the next look is at an exit
 * -- one time in `every`, an exit on the way (an interrupt, a CPUID); at the end, the MOV to CR3
 * that brings the window's CR3 back (the last state under the other CR3), or the fetch of the
 * first user-mode instruction (the vCPU there, before it ran) -- where the tracer is put by
 * swtrace_resync; then it steps on.  The packets must be those of stepping every instruction.
 */
static bool free_uncaught;     /* the user-only window's way back not caught (code at CPL 1, 2) */
static bool free_entry_unseen; /* ... and the way out not seen (trap-flag steps: an event) */

static void replay_free(const struct run *r, unsigned every, struct replay *o)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    struct swtrace_cpu c = replay_open(r, false, true, &mem_mapped, o), k = c;
    for (unsigned i = 1; i < r->n; i++) {
        if (free_out(o, &o->t.ctx)) {
            unsigned j = i - 1; /* where the tracer let the vCPU go */
            for (;;) {
                if (j + 1 >= r->n)
                    break;
                at_step(r, j + 1, &k);
                if (!free_out(o, &k.ctx))
                    break; /* step j + 1 is in the window's context: the exit is there */
                j++;
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                if (every && seed % every == 0) {
                    at_step(r, j, &c);
                    swtrace_resync(&o->t, &mem_mapped, &c, false);
                }
            }
            /* the MOV to CR3 exits before it runs (state j); the fetch of a user-mode page
             * before the instruction there runs (state j + 1) */
            if (window == W_CPL && j + 1 < r->n)
                j++;
            at_step(r, j, &c);
            swtrace_resync(&o->t, &mem_mapped, &c, window == W_CPL && !free_uncaught);
            i = j + 1;
            if (i >= r->n)
                break;
        }
        at_step(r, i, &c);
        if (free_entry_unseen && o->t.ctx.cpl == 3 && i + 1 < r->n) {
            /* the way into the kernel not seen (state i is the SYSCALL): the tracer first looks
             * in the kernel, from the instruction before it -- a step nothing explains */
            at_step(r, i + 1, &k);
            if (k.ctx.cpl == 0) {
                c = k;
                i++;
            }
        }
        swtrace_observe(&o->t, &mem_mapped, &c, true);
    }
    swtrace_stop(&o->t);
}

/* block stepping as the VMM runs it, measured by callgrind (mk/48-swtrace-bench.mk) */
__attribute__((noinline)) void replay_blocks_bench(const struct run *r, struct replay *o,
                                                   struct block_stats *bs);
void replay_blocks_bench(const struct run *r, struct replay *o, struct block_stats *bs)
{
    replay_blocks(r, 0, o, bs);
}

static void replay_init(struct replay *o)
{
    memset(o, 0, sizeof(*o));
    o->ring.size = 32u << 20;
    o->ring.stop_on_full = true;
    o->ring.buf = malloc(o->ring.size);
    assert_non_null(o->ring.buf);
}

/* ---- the decode of the cached ring equals the stepped sequence ---- */

struct expect {
    const struct run *r;
    unsigned pos, n;
    uint64_t *ip;
    char err[200];
};

static int read_cb(uint8_t *buf, size_t size, uint64_t cr3, uint64_t ip, void *ctx)
{
    (void)cr3, (void)ctx;
    unsigned got = 0;
    gw_read(&mem, &paging, ip, buf, (unsigned)size, &got);
    return got ? (int)got : -1;
}

static int insn_cb(uint64_t ip, uint64_t cr3, void *ctx)
{
    (void)cr3;
    struct expect *e = ctx;
    if (e->pos >= e->n || e->ip[e->pos] != ip) {
        snprintf(e->err, sizeof(e->err), "decoded #%u %#lx, stepped %#lx", e->pos,
                 (unsigned long)ip, e->pos < e->n ? (unsigned long)e->ip[e->pos] : 0ul);
        return 1;
    }
    e->pos++;
    return 0;
}

static void check_program(char *const argv[])
{
    struct run r;
    struct replay off, on, big;
    char err[300];
    struct swpt_dec_stats st;

    record(&r, argv, TEST_STEPS);
    replay_init(&off);
    replay_init(&on);
    replay_init(&big);
    replay_nocache(&r, &off);
    replay_cached(&r, &on);
    replay_cached_big(&r, &big);
    assert_false(on.ring.stopped);
    assert_int_equal(on.ring.head, off.ring.head);
    assert_int_equal(big.ring.head, off.ring.head);
    if (memcmp(on.ring.buf, off.ring.buf, on.ring.head) != 0)
        fail_msg("%s: the cached run's packets differ from the uncached run's", argv[0]);
    if (memcmp(big.ring.buf, off.ring.buf, on.ring.head) != 0)
        fail_msg("%s: the big-table run's packets differ from the uncached run's", argv[0]);
    assert_memory_equal(&on.t.st, &off.t.st, sizeof(on.t.st));
    assert_memory_equal(&big.t.st, &off.t.st, sizeof(on.t.st));
    assert_int_equal(big.t.bc.insn_mask + 1, 1024);
    assert_int_equal(on.t.st.unexplained, 0);
    assert_int_equal(on.t.st.unreadable, 0);

    /* block stepping, with and without exits cut into blocks, gives the very same packets */
    static const unsigned cuts[] = {4, 0, 4}; /* 1 block in 4 cut short; none */
    for (unsigned ci = 0; ci < 3; ci++) {
        unsigned every = cuts[ci];
        struct replay blk;
        struct block_stats bs;
        replay_init(&blk);
        blk.blocks = ci < 2; /* the last without the block table: decoded one by one */
        replay_blocks(&r, every, &blk, &bs);
        if (blk.ring.head != off.ring.head || memcmp(blk.ring.buf, off.ring.buf, off.ring.head))
            fail_msg(
                "%s: block stepping (1 block in %u cut short, 0: none) wrote other packets (%lu "
                "bytes, stepping %lu)",
                argv[0], every, (unsigned long)blk.ring.head, (unsigned long)off.ring.head);
        assert_int_equal(blk.t.st.steps, off.t.st.steps);
        assert_int_equal(blk.t.st.unexplained, 0);
        assert_int_equal(blk.t.st.events, off.t.st.events);
        /* what a CPL 3 owner is told: the same */
        assert_int_equal(blk.t.pt.traced, off.t.pt.traced);
        assert_int_equal(blk.t.pt.win_events, off.t.pt.win_events);
        assert_true(bs.chained > 0);  /* real programs call and jump directly */
        assert_true(bs.indirect > 0); /* ... and through registers and memory */
        assert_true(bs.loops > 0);    /* ... and loop */
        /* with the table, most blocks after a lead come from the successor table (the packets
         * above are still byte for byte those of stepping) */
        if (blk.blocks)
            assert_true(blk.t.st.next_hits * 2 > bs.leads);
        else
            assert_int_equal(blk.t.st.next_hits, 0);
        print_message(
            "%-22s block stepping, 1 block in %u cut (0: none), block table %s: %lu "
            "exits for %lu instructions "
            "(%.3f per instruction): %lu blocks (%lu led by a predicted branch, %lu through "
            "a direct JMP / CALL, %lu led by a predicted indirect JMP / CALL, %lu loop bodies "
            "led by their own branch, %lu cut short), %lu single steps; block table %lu hits, "
            "%lu kept; %lu blocks after a lead from the successor table\n",
            argv[0], every, blk.blocks ? "on" : "off", (unsigned long)bs.exits,
            (unsigned long)off.t.st.steps, (double)bs.exits / (double)off.t.st.steps,
            (unsigned long)bs.blocks, (unsigned long)bs.leads, (unsigned long)bs.chained,
            (unsigned long)bs.indirect, (unsigned long)bs.loops, (unsigned long)bs.cut,
            (unsigned long)bs.steps, (unsigned long)blk.t.bc.st.blk_hits,
            (unsigned long)blk.t.bc.st.blk_kept, (unsigned long)blk.t.st.next_hits);
        free(blk.ring.buf);
    }

    /* filtered windows: blocks run in the contexts the filter leaves out too (PacketEn 0 there:
     * only the instruction count), with the very packets and counts of stepping */
    unsigned spans = mark_other(&r);
    assert_true(spans > 0);
    static const char *const wname[] = {"", "one-process", "user-only", "one-process IP-range",
                                        "one-process start-trigger"};
    for (window = W_CR3; window <= W_TRIGGER; window++) {
        unsigned third = r.n / 3;
        while (third < r.n && r.other[third])
            third++;
        window_ip = r.rip[third < r.n ? third : 0];
        struct replay one;
        replay_init(&one);
        replay_cached_big(&r, &one);
        if (window == W_CR3 || window == W_CPL)
            assert_true(one.t.st.departures > 0); /* its system calls leave the process */
        for (unsigned every = 0; every <= 8; every += 8) {
            /* free running: the spans left out unstepped, the very packets of stepping */
            struct replay fr;
            replay_init(&fr);
            replay_free(&r, every, &fr);
            if (fr.ring.head != one.ring.head || memcmp(fr.ring.buf, one.ring.buf, one.ring.head))
                fail_msg("%s: %s window, free running (an exit in %u) wrote other packets (%lu "
                         "bytes, stepping %lu)",
                         argv[0], wname[window], every, (unsigned long)fr.ring.head,
                         (unsigned long)one.ring.head);
            assert_int_equal(fr.t.pt.traced, one.t.pt.traced);
            assert_int_equal(fr.t.pt.win_events, one.t.pt.win_events);
            assert_int_equal(fr.t.st.departures, one.t.st.departures);
            assert_int_equal(swtrace_gaps(&fr.t), swtrace_gaps(&one.t));
            assert_true(fr.t.st.free_runs >= spans);
            assert_true(fr.t.st.steps < one.t.st.steps);
            print_message(
                "%-22s %s window, free running (an exit in %u): %lu steps for %lu traced "
                "(%.3f per traced; stepping all: %.3f), %lu free runs\n",
                argv[0], wname[window], every, (unsigned long)fr.t.st.steps,
                (unsigned long)fr.t.pt.traced, (double)fr.t.st.steps / (double)fr.t.pt.traced,
                (double)one.t.st.steps / (double)one.t.pt.traced, (unsigned long)fr.t.st.free_runs);
            free(fr.ring.buf);
        }
        if (window == W_CPL) {
            /* back in the window at an exit that did not catch the way back: what ran may have
             * been the window's (CPL 1 or 2), so a span that does not come back where it left
             * is an OVF, never a silent TIP.PGE */
            struct replay fr;
            replay_init(&fr);
            free_uncaught = true;
            replay_free(&r, 0, &fr);
            free_uncaught = false;
            assert_true(swtrace_gaps(&fr.t) > swtrace_gaps(&one.t));
            assert_int_equal(fr.t.pt.traced, one.t.pt.traced);
            print_message("%-22s %s window, free running, the way back not caught: %lu gaps "
                          "(stepping all: %lu)\n",
                          argv[0], wname[window], (unsigned long)swtrace_gaps(&fr.t),
                          (unsigned long)swtrace_gaps(&one.t));
            free(fr.ring.buf);
            /* the way back caught, but the way out was not seen: what ran before the span is
             * not known, so a span that comes back elsewhere is an OVF all the same */
            replay_init(&fr);
            free_entry_unseen = true;
            replay_free(&r, 0, &fr);
            free_entry_unseen = false;
            assert_true(fr.t.st.departures > 0);
            assert_true(swtrace_gaps(&fr.t) > swtrace_gaps(&one.t));
            print_message("%-22s %s window, free running, the way out not seen: %lu gaps\n",
                          argv[0], wname[window], (unsigned long)swtrace_gaps(&fr.t));
            free(fr.ring.buf);
        }
        for (unsigned every = 0; every <= 4; every += 4) {
            struct replay blk;
            struct block_stats bs;
            replay_init(&blk);
            blk.blocks = true;
            replay_blocks(&r, every, &blk, &bs);
            if (blk.ring.head != one.ring.head || memcmp(blk.ring.buf, one.ring.buf, one.ring.head))
                fail_msg("%s: %s window, block stepping (1 block in %u cut short) wrote other "
                         "packets (%lu bytes, stepping %lu)",
                         argv[0], wname[window], every, (unsigned long)blk.ring.head,
                         (unsigned long)one.ring.head);
            assert_int_equal(blk.t.st.steps, one.t.st.steps);
            assert_int_equal(blk.t.st.unexplained, one.t.st.unexplained);
            assert_int_equal(blk.t.st.events, one.t.st.events);
            assert_int_equal(blk.t.st.departures, one.t.st.departures);
            assert_int_equal(blk.t.pt.traced, one.t.pt.traced);
            assert_int_equal(blk.t.pt.win_events, one.t.pt.win_events);
            assert_int_equal(swtrace_gaps(&blk.t), swtrace_gaps(&one.t));
            assert_int_equal(blk.t.st.unreadable_in, one.t.st.unreadable_in);
            assert_true(one.t.pt.traced < one.t.st.steps); /* the other contexts' not in it */
            assert_true(bs.dark > 0); /* blocks ran out of the traced context */
            print_message("%-22s %s window (%u spans left out, %lu departures, %lu gaps): %lu "
                          "exits, %lu blocks, %lu of them out of context\n",
                          argv[0], wname[window], spans, (unsigned long)one.t.st.departures,
                          (unsigned long)swtrace_gaps(&one.t), (unsigned long)bs.exits,
                          (unsigned long)bs.blocks, (unsigned long)bs.dark);
            free(blk.ring.buf);
        }
        free(one.ring.buf);
    }
    window = W_WHOLE;

    /* the instructions that ran: every step but the repeats of a REP string op */
    struct expect e = {.r = &r, .ip = malloc(r.n * sizeof(uint64_t))};
    assert_non_null(e.ip);
    for (unsigned i = 0; i + 1 < r.n; i++) {
        struct x86_insn in;
        uint8_t b[X86_MAX_INSN];
        unsigned got = 0;
        gw_read(&mem, &paging, r.rip[i], b, sizeof(b), &got);
        assert_int_equal(x86_classify(b, got, X86_CODE64, &in), 0);
        if (!(r.rip[i + 1] == r.rip[i] && (in.flags & X86_F_REP)))
            e.ip[e.n++] = r.rip[i];
    }
    if (swpt_decode(on.ring.buf, on.ring.head, read_cb, insn_cb, &e, &st, err, sizeof(err)))
        fail_msg("%s: %s; %s", argv[0], err, e.err);
    assert_int_equal(e.pos, e.n);
    assert_int_equal(on.t.pt.traced, e.n); /* what a CPL 3 owner is told: what decodes */
    const struct bc_stats *b = &on.t.bc.st;
    print_message("%-22s %7u steps, %7lu PT bytes: cache %.1f%% (1024 entries: %.1f%%) "
                  "instruction hits (%lu stale), "
                  "%.1f%% translation hits, %lu flushes; guest reads/step %.2f -> %.2f; "
                  "%.0f -> %.0f ns/step\n",
                  argv[0], r.n, (unsigned long)on.ring.head,
                  100.0 * (double)b->insn_hits / (double)(b->insn_hits + b->insn_misses),
                  100.0 * (double)big.t.bc.st.insn_hits /
                      (double)(big.t.bc.st.insn_hits + big.t.bc.st.insn_misses),
                  (unsigned long)b->insn_stale,
                  100.0 * (double)b->tlb_hits / (double)(b->tlb_hits + b->tlb_misses),
                  (unsigned long)b->flushes, (double)off.reads / r.n, (double)on.reads / r.n,
                  off.ns / r.n, on.ns / r.n);
    free(e.ip);
    free(r.rip);
    free(r.fl);
    free(r.sp);
    free(r.top);
    free(r.ind);
    free(r.rec);
    free(r.other);
    free(on.ring.buf);
    free(off.ring.buf);
    free(big.ring.buf);
}

static void test_sort(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sort", (char *)"/etc/passwd", NULL};
    (void)state;
    check_program(argv);
}

static void test_sha256sum(void **state)
{
    char *const argv[] = {(char *)"/usr/bin/sha256sum", (char *)"/etc/hostname", NULL};
    (void)state;
    check_program(argv);
}

static void test_busybox(void **state)
{
    char *const argv[] = {(char *)"/bin/busybox", (char *)"ls", (char *)"-l", (char *)"/etc", NULL};
    (void)state;
    check_program(argv);
}

/* the bench: one program, replays repeated, best time of each kept */
static int bench(char *const argv[])
{
    struct run r;
    struct replay off, on, big, blk;
    struct block_stats bs;
    double best_off = 1e30, best_on = 1e30, best_big = 1e30;

    record(&r, argv, BENCH_STEPS);
    replay_init(&off);
    replay_init(&on);
    replay_init(&big);
    replay_init(&blk);
    blk.blocks = true;
    for (int k = 0; k < 5; k++) {
        replay_nocache(&r, &off);
        replay_cached(&r, &on);
        replay_cached_big(&r, &big);
        replay_blocks_bench(&r, &blk, &bs);
        best_off = off.ns < best_off ? off.ns : best_off;
        best_on = on.ns < best_on ? on.ns : best_on;
        best_big = big.ns < best_big ? big.ns : best_big;
    }
    if (on.ring.head != off.ring.head || memcmp(on.ring.buf, off.ring.buf, on.ring.head) ||
        big.ring.head != off.ring.head || memcmp(big.ring.buf, off.ring.buf, on.ring.head)) {
        printf("bench-swtrace: the cached packets differ from the uncached ones\n");
        return 1;
    }
    const struct bc_stats *b = &on.t.bc.st, *g = &big.t.bc.st;
    printf("BENCH swtrace steps=%u ns_nocache=%.1f ns_cached=%.1f ns_big=%.1f "
           "reads_nocache=%.2f reads_cached=%.2f insn_hit=%.1f insn_hit_big=%.1f tlb_hit=%.1f "
           "blocks=%lu leads=%lu blk_hit=%.1f next_hit=%.1f prog=%s\n",
           r.n, best_off / r.n, best_on / r.n, best_big / r.n, (double)off.reads / r.n,
           (double)on.reads / r.n,
           100.0 * (double)b->insn_hits / (double)(b->insn_hits + b->insn_misses),
           100.0 * (double)g->insn_hits / (double)(g->insn_hits + g->insn_misses),
           100.0 * (double)b->tlb_hits / (double)(b->tlb_hits + b->tlb_misses),
           (unsigned long)bs.blocks, (unsigned long)bs.leads,
           100.0 * (double)blk.t.bc.st.blk_hits /
               (double)(blk.t.bc.st.blk_hits + blk.t.bc.st.blk_misses + !blk.t.bc.st.blk_hits),
           100.0 * (double)blk.t.st.next_hits / (double)(bs.leads + !bs.leads), argv[0]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *why = ptrace_unavailable();
    if (why) {
        printf("SKIP: ptrace not permitted here: %s\n", why);
        return 77;
    }
    if (argc > 2 && strcmp(argv[1], "--bench") == 0)
        return bench(argv + 2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort),
        cmocka_unit_test(test_sha256sum),
        cmocka_unit_test(test_busybox),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
