/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace perf DIR|LOG -o perf.data: the dump as a perf.data file that perf's own Intel
 * PT decoder reads (`perf script --itrace=...`, `perf report`).  The format work is in
 * perfdata.c; here: options, the dump and its code (the session of image.c: snapshots, -e /
 * -k / -m files and their symbols), the code files perf reads, the messages.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <intel-pt.h>

#include "image.h"
#include "perfdata.h"
#include "ptt.h"

static const char help[] =
    "NAME\n"
    "    ptvisor-trace perf - a ptvisor trace dump as a perf.data file\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace perf DIR|LOG [-o perf.data] [-k vmlinux] [-m System.map]\n"
    "                       [--kallsyms FILE] [-e ELF[@BASE]]... [--kaslr OFF] [--cpu N]\n"
    "                       [-q]\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes the PT trace of a dump (a directory from `ptvisor-trace extract`, or a\n"
    "    serial log, extracted first) as a perf.data file, as `perf record -e intel_pt//`\n"
    "    would have: the trace as AUX data of an intel_pt event, with the sideband perf\n"
    "    needs to decode it with its own Intel PT decoder.  perf does not need an Intel PT\n"
    "    CPU, the guest, or any option to read the file.\n"
    "\n"
    "    The code perf decodes against is written next to the output, in OUT.code/: one\n"
    "    small ELF file per run of contiguous code, holding the bytes that ran (the dump's\n"
    "    snapshots; -e/-k files only where no snapshot covers an address) and the symbols\n"
    "    of the -e/-k/-m files.  perf.data names these files by absolute path: keep\n"
    "    OUT.code/ where it is, or export again after moving it.  Nothing is looked up in\n"
    "    ~/.debug or on the network: the files have no build-id.\n"
    "\n"
    "    The guest is one perf process: the traced program, its name and pid, where the\n"
    "    guest named it (dump.meta's comm and pid, from `ptvisor-ctl trace -d`), else pid\n"
    "    1000 (\"guest\"); CPU n is its thread 1001+n (a named program traced on one CPU:\n"
    "    the process itself). Every user address space (CR3) of the dump is mapped into\n"
    "    it.  Where two snapshots give different bytes for one address, neither is written\n"
    "    (a warning says where; perf reports a decode error there instead of wrong\n"
    "    instructions; `ptvisor-trace decode` follows the CR3s).  Kernel code (addresses from "
    "2^63) is\n"
    "    in perf's kernel maps.  Each piece of a CPU's trace between ranges lost in\n"
    "    transit is its own decoder queue, decoded from its first PSB; perf reports\n"
    "    \"Lost trace data\" for that CPU.  The trace has no timestamps for perf: each\n"
    "    CPU is decoded on its own, CPU after CPU.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output FILE   the perf.data to write (default: perf.data)\n"
    "    -k, --vmlinux FILE  the guest's vmlinux: kernel symbols (and code where no\n"
    "                        snapshot covers it), shifted by the KASLR offset\n"
    "    -m, --map FILE      a System.map: kernel symbols (shifted the same way)\n"
    "    --kallsyms FILE     the guest's /proc/kallsyms: kernel symbols at their run\n"
    "                        addresses (default: the dump's own kallsyms, when the\n"
    "                        guest sent it)\n"
    "    -e, --elf FILE[@BASE]  a user program or library, loaded at BASE (hex): symbols\n"
    "                        (and code where no snapshot covers it)\n"
    "    --kaslr OFF         the kernel's KASLR offset (default: as ptvisor-trace --help\n"
    "                        says under KERNEL SYMBOLS)\n"
    "    --cpu N             only CPU N's trace\n"
    "    -q, --quiet         no warnings, no summary\n"
    "    -h, --help          this text\n"
    "\n"
    "READING IT WITH PERF\n"
    "    perf script -i perf.data --itrace=i1i -F cpu,ip,sym    every instruction\n"
    "    perf script -i perf.data --itrace=b -F ip,addr,sym     every taken branch\n"
    "    perf script -i perf.data --itrace=cre                  calls, returns, errors\n"
    "    perf report -i perf.data --itrace=i1000i --stdio       where the time went\n"
    "    Add e to --itrace (i1ie) to see where perf lost the flow.\n"
    "\n"
    "LIMITS\n"
    "    perf decodes each code file with its ELF class: all are 64-bit, so 16- and\n"
    "    32-bit code in a trace (a warning says so) is decoded wrongly by perf.\n"
    "    Functions cut by the edge of a code file keep their name, not their offset.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 written, 1 an error (one line on stderr says why).\n";

/* ---- planning: a ptvisor dump -> regions, CPUs, AUX pieces ---- */

_Static_assert(PTT_MAX_CPUS == 64, "pd_plan's arrays follow PTT_MAX_CPUS");

void pd_plan_free(struct pd_plan *p)
{
    for (unsigned i = 0; i < p->nregion; i++)
        free(p->region[i].bytes);
    free(p->region);
    free(p->conflict);
    free(p->aux);
    memset(p, 0, sizeof(*p));
}

static const struct pd_src *sort_src; /* qsort context */

static int src_cmp(const void *a, const void *b)
{
    const struct pd_src *x = &sort_src[*(const unsigned *)a], *y = &sort_src[*(const unsigned *)b];

    if (x->va != y->va)
        return x->va < y->va ? -1 : 1;
    return *(const unsigned *)a < *(const unsigned *)b ? -1 : 1;
}

enum { B_UNSET, B_SNAP, B_CONFLICT, B_ELF };

static bool push_region(struct pd_plan *p, uint64_t va, uint64_t len, bool kernel,
                        const uint8_t *bytes)
{
    struct pd_region *r = realloc(p->region, (p->nregion + 1) * sizeof(*r));

    if (!r)
        return false;
    p->region = r;
    r = &p->region[p->nregion];
    r->bytes = malloc(len);
    if (!r->bytes)
        return false;
    memcpy(r->bytes, bytes, len);
    r->va = va;
    r->len = len;
    r->kernel = kernel;
    p->nregion++;
    p->code_bytes += len;
    return true;
}

static bool push_conflict(struct pd_plan *p, uint64_t va, uint64_t len)
{
    struct pd_range *c = realloc(p->conflict, (p->nconflict + 1) * sizeof(*c));

    if (!c)
        return false;
    p->conflict = c;
    c[p->nconflict++] = (struct pd_range){va, len};
    return true;
}

/* one union interval [lo, lo + n) of the sources idx[0..k) */
static int fill_interval(struct pd_plan *p, const struct pd_src *src, const unsigned *idx,
                         unsigned k, uint64_t lo, uint64_t n, bool kernel, char *err, size_t errlen)
{
    uint8_t *bytes = malloc(n), *state = calloc(n, 1);
    int r = -1;

    if (!bytes || !state) {
        snprintf(err, errlen, "out of memory for %llu code bytes", (unsigned long long)n);
        goto out;
    }
    for (unsigned pass = 0; pass < 2; pass++) /* snapshots, then ELF code where none is */
        for (unsigned j = 0; j < k; j++) {
            const struct pd_src *s = &src[idx[j]];
            uint8_t *st = state + (s->va - lo), *by = bytes + (s->va - lo);
            const uint8_t mine = pass ? B_ELF : B_SNAP;
            bool differ = false;
            if (s->from_elf != (pass == 1))
                continue;
            for (uint64_t b = 0; b < s->len; b++) {
                if (st[b] == B_UNSET || by[b] == s->bytes[b])
                    continue;
                if (st[b] == B_SNAP && pass)
                    p->elf_differs++; /* the snapshot is what ran: kept */
                else
                    differ = true;
            }
            for (uint64_t b = 0; b < s->len; b++) {
                if (st[b] == B_UNSET) {
                    by[b] = s->bytes[b];
                    st[b] = mine;
                } else if (differ && st[b] == mine) {
                    /* two sources of one kind disagree: neither is surely what ran */
                    st[b] = B_CONFLICT;
                }
            }
        }
    for (uint64_t b = 0; b < n;) {
        uint64_t e = b;
        bool code = state[b] == B_SNAP || state[b] == B_ELF;
        while (e < n && (state[e] == B_SNAP || state[e] == B_ELF) == code &&
               (code || state[e] == state[b]))
            e++;
        if (code && !push_region(p, lo + b, e - b, kernel, bytes + b))
            goto oom;
        if (state[b] == B_CONFLICT && !push_conflict(p, lo + b, e - b))
            goto oom;
        b = e;
    }
    r = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory for code regions");
out:
    free(bytes);
    free(state);
    return r;
}

static int plan_code(struct pd_plan *p, const struct pd_src *src, unsigned nsrc, char *err,
                     size_t errlen)
{
    unsigned *idx = malloc((nsrc ? nsrc : 1) * sizeof(*idx));
    uint64_t total = 0;
    int r = -1;

    if (!idx) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < nsrc; i++) {
        const struct pd_src *s = &src[i];
        if (s->len && (s->va + s->len < s->va ||
                       (s->va < PD_KERNEL_START && s->va + s->len > PD_KERNEL_START))) {
            snprintf(err, errlen, "%s %u at %#llx+%#llx wraps or straddles the user/kernel line",
                     s->from_elf ? "ELF segment" : "snapshot", i, (unsigned long long)s->va,
                     (unsigned long long)s->len);
            goto out;
        }
        if (s->len && !s->bytes) {
            snprintf(err, errlen, "source %u: no bytes", i);
            goto out;
        }
    }
    for (unsigned space = 0; space < 2; space++) { /* user, kernel */
        unsigned k = 0;
        for (unsigned i = 0; i < nsrc; i++)
            if (src[i].len && (src[i].va >= PD_KERNEL_START) == (space == 1))
                idx[k++] = i;
        sort_src = src;
        qsort(idx, k, sizeof(*idx), src_cmp);
        for (unsigned a = 0; a < k;) {
            uint64_t lo = src[idx[a]].va, hi = lo + src[idx[a]].len;
            unsigned b = a + 1;
            while (b < k && src[idx[b]].va <= hi) {
                uint64_t e = src[idx[b]].va + src[idx[b]].len;
                hi = e > hi ? e : hi;
                b++;
            }
            total += hi - lo;
            if (hi - lo > PD_MAX_CODE || total > PD_MAX_CODE) {
                snprintf(err, errlen, "more than %llu MiB of code (at %#llx)",
                         (unsigned long long)(PD_MAX_CODE >> 20), (unsigned long long)lo);
                goto out;
            }
            if (fill_interval(p, src, idx + a, b - a, lo, hi - lo, space == 1, err, errlen))
                goto out;
            a = b;
        }
        if (k && space == 0)
            p->any_user = true;
        if (k && space == 1)
            p->any_kernel = true;
    }
    r = 0;
out:
    free(idx);
    return r;
}

static int plan_cpus(struct pd_plan *p, const struct ptt_dump *d, char *err, size_t errlen)
{
    uint64_t seen[64];
    unsigned nseen = 0;

    if (d->ncpu > PTT_MAX_CPUS || !d->ncpu) {
        snprintf(err, errlen, "%u CPUs in the dump (1 .. %u)", d->ncpu, PTT_MAX_CPUS);
        return -1;
    }
    /* the guest is one process: the traced program where the guest named it (comm, pid in
     * dump.meta), else "guest" */
    const char *comm = d->comm[0] ? d->comm : "guest";
    int32_t pid = d->has_pid && d->pid && d->pid <= INT32_MAX ? (int32_t)d->pid : PD_GUEST_PID;
    p->task[p->ntask++] = (struct pd_task){pid, pid, comm};
    for (unsigned i = 0; i < d->ncpu; i++) {
        const struct ptt_cpu *c = &d->cpu[i];
        if (c->cpu >= 4096) {
            snprintf(err, errlen, "cpu %u: number too large", c->cpu);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (d->cpu[j].cpu == c->cpu) {
                snprintf(err, errlen, "cpu %u twice in the dump", c->cpu);
                return -1;
            }
        if (c->pt_len && !c->pt) {
            snprintf(err, errlen, "cpu %u: no trace bytes", c->cpu);
            return -1;
        }
        if (c->holes && !c->hole) {
            snprintf(err, errlen, "cpu %u: hole list missing", c->cpu);
            return -1;
        }
        /* one thread per CPU; a named process traced on one CPU is its own thread */
        int32_t tid =
            pid != PD_GUEST_PID && d->ncpu == 1 ? pid : PD_GUEST_PID + 1 + (int32_t)c->cpu;
        if (tid != pid)
            p->task[p->ntask++] = (struct pd_task){pid, tid, comm};
        p->cpu[p->ncpu++] = (struct pd_cpu){c->cpu, pid, tid};
        for (unsigned j = 0; j < c->ncr3 && c->cr3s; j++) {
            unsigned s;
            for (s = 0; s < nseen && seen[s] != c->cr3s[j]; s++)
                ;
            if (s == nseen && nseen < 64)
                seen[nseen++] = c->cr3s[j];
        }

        /* the stream between holes: each piece its own queue (perf syncs at its first PSB) */
        uint64_t pos = 0, removed = 0, prev_end = 0;
        for (unsigned h = 0; h <= c->holes; h++) {
            uint64_t cut = c->pt_len;
            if (h < c->holes) {
                const struct ptt_hole *o = &c->hole[h];
                if (!o->len || o->off < prev_end || o->off + o->len < o->off ||
                    o->off - removed < pos || o->off - removed > c->pt_len) {
                    snprintf(err, errlen,
                             "cpu %u: hole %u (%#llx+%#llx) out of order, empty or past the "
                             "trace",
                             c->cpu, h, (unsigned long long)o->off, (unsigned long long)o->len);
                    return -1;
                }
                cut = o->off - removed;
                prev_end = o->off + o->len;
                removed += o->len;
            }
            if (cut > pos) {
                struct pd_aux *a = realloc(p->aux, (p->naux + 1) * sizeof(*a));
                if (!a) {
                    snprintf(err, errlen, "out of memory");
                    return -1;
                }
                p->aux = a;
                a[p->naux] = (struct pd_aux){c->cpu, p->naux, c->pt + pos, cut - pos, h > 0};
                p->naux++;
                p->pt_bytes += cut - pos;
            }
            pos = cut;
        }
    }
    p->ncr3 = nseen;
    return 0;
}

int pd_plan_dump(const struct ptt_dump *d, const struct pd_src *src, unsigned nsrc,
                 struct pd_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (nsrc > PD_MAX_ITEMS) {
        snprintf(err, errlen, "more than %u code sources", PD_MAX_ITEMS);
        return -1;
    }
    if (plan_cpus(p, d, err, errlen) != 0 || plan_code(p, src, nsrc, err, errlen) != 0) {
        pd_plan_free(p);
        return -1;
    }
    return 0;
}

void pd_plan_spec(const struct pd_plan *p, const struct pd_map *map, unsigned nmap,
                  struct pd_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->pmu_type = PD_PMU_TYPE_DEFAULT;
    s->pt_config = PD_PT_CFG_PT | PD_PT_CFG_BRANCH | PD_PT_CFG_NORETCOMP;
    s->trace_user = p->any_user || !p->any_kernel;
    s->trace_kernel = p->any_kernel;
    s->task = p->task;
    s->ntask = p->ntask;
    s->map = map;
    s->nmap = nmap;
    s->cpu = p->cpu;
    s->ncpu = p->ncpu;
    s->aux = p->aux;
    s->naux = p->naux;
}

/* MODE.Exec packets that name 16- or 32-bit code in a piece of trace */
static uint64_t narrow_modes(const uint8_t *buf, size_t len)
{
    struct pt_config cfg;
    struct pt_packet_decoder *d;
    struct pt_packet p;
    uint64_t n = 0;

    if (!len)
        return 0;
    pt_config_init(&cfg);
    cfg.begin = (uint8_t *)buf;
    cfg.end = (uint8_t *)buf + len;
    d = pt_pkt_alloc_decoder(&cfg);
    if (!d)
        return 0;
    while (pt_pkt_sync_forward(d) >= 0)
        while (pt_pkt_next(d, &p, sizeof(p)) >= 0)
            if (p.type == ppt_mode && p.payload.mode.leaf == pt_mol_exec &&
                pt_get_exec_mode(&p.payload.mode.bits.exec) != ptem_64bit)
                n++;
    pt_pkt_free_decoder(d);
    return n;
}

static int mkdir_code(const char *dir, char *err, size_t errlen)
{
    DIR *d;
    struct dirent *e;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    /* code files of an earlier export: they would only confuse */
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 6 && (e->d_name[0] == 'u' || e->d_name[0] == 'k') && e->d_name[1] == '-' &&
            !strcmp(e->d_name + n - 4, ".elf"))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    return 0;
}

/* the snapshot bytes (the file holds exactly len bytes: ptt.h) */
static int load_snap(const struct ptt_snap *s, uint8_t **bytes, char *err, size_t errlen)
{
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    struct stat st;

    *bytes = NULL;
    if (fd < 0) {
        snprintf(err, errlen, "snapshot %s: %s", s->path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->len ||
        s->len > PD_MAX_CODE) {
        snprintf(err, errlen, "snapshot %s: not a regular file of %llu bytes", s->path,
                 (unsigned long long)s->len);
        close(fd);
        return -1;
    }
    if (s->len) {
        void *m = mmap(NULL, (size_t)s->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "snapshot %s: %s", s->path, strerror(errno));
            close(fd);
            return -1;
        }
        *bytes = m;
    }
    close(fd);
    return 0;
}

/* the symbols of [va, va + len), clipped to it */
static struct pd_sym *region_syms(const struct ptt_syms *y, uint64_t va, uint64_t len, unsigned *n)
{
    size_t lo = 0, hi = y->n;
    struct pd_sym *out = NULL;
    unsigned k = 0, cap = 0;

    *n = 0;
    while (lo < hi) { /* first symbol ending after va */
        size_t mid = lo + (hi - lo) / 2;
        if (y->s[mid].end <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < y->n && y->s[i].addr < va + len; i++) {
        const struct ptt_sym *s = &y->s[i];
        if (s->end <= va)
            continue;
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            struct pd_sym *t = realloc(out, cap * sizeof(*t));
            if (!t)
                break;
            out = t;
        }
        uint64_t a = s->addr < va ? va : s->addr;
        out[k++] = (struct pd_sym){s->name, a, s->end - a};
    }
    *n = k;
    return out;
}

static int export(struct ptt_session *ss, const char *out, int argc, char **argv)
{
    const struct ptt_opts *o = &ss->o;
    struct ptt_dump *d = &ss->d;
    struct pd_src *src = calloc(d->nsnap + ss->im.nseg + 1, sizeof(*src));
    uint8_t **snap = calloc(d->nsnap + 1, sizeof(*snap));
    struct pd_map *map = NULL;
    char **paths = NULL;
    const char **cmdline = NULL;
    struct pd_plan plan;
    struct pd_spec spec;
    char err[PATH_MAX + 300], dir[PATH_MAX], absdir[PATH_MAX];
    unsigned nsrc = 0, nmap = 0, ncpu_sel = 0;
    int status = 1;

    memset(&plan, 0, sizeof(plan));
    if (!src || !snap) {
        ptt_fail(o->cmd, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < d->nsnap; i++) {
        if (load_snap(&d->snap[i], &snap[i], err, sizeof(err)) != 0) {
            ptt_fail(o->cmd, "%s", err);
            goto out;
        }
        src[nsrc++] = (struct pd_src){d->snap[i].va, d->snap[i].len, snap[i], false};
    }
    for (unsigned i = 0; i < ss->im.nseg; i++) {
        const struct ptt_seg *g = &ss->im.seg[i];
        src[nsrc++] = (struct pd_src){g->va, g->len, g->data, true};
    }

    /* --cpu: only that CPU's trace */
    struct ptt_dump sel = *d;
    if (o->cpu >= 0) {
        for (unsigned i = 0; i < d->ncpu; i++)
            if (d->cpu[i].cpu == (unsigned)o->cpu)
                sel.cpu[ncpu_sel++] = d->cpu[i];
        sel.ncpu = ncpu_sel;
    }
    if (pd_plan_dump(&sel, src, nsrc, &plan, err, sizeof(err)) != 0) {
        ptt_fail(o->cmd, "%s", err);
        goto out;
    }

    if (snprintf(dir, sizeof(dir), "%s.code", out) >= (int)sizeof(dir)) {
        ptt_fail(o->cmd, "%s: name too long", out);
        goto out;
    }
    if (mkdir_code(dir, err, sizeof(err)) != 0) {
        ptt_fail(o->cmd, "%s", err);
        goto out;
    }
    if (!realpath(dir, absdir)) {
        ptt_fail(o->cmd, "%s: %s", dir, strerror(errno));
        goto out;
    }
    map = calloc(plan.nregion + 1, sizeof(*map));
    paths = calloc(plan.nregion + 1, sizeof(*paths));
    if (!map || !paths) {
        ptt_fail(o->cmd, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < plan.nregion; i++) {
        const struct pd_region *r = &plan.region[i];
        struct pd_buf elf;
        unsigned nsym;
        struct pd_sym *sym = region_syms(&ss->im.syms, r->va, r->len, &nsym);
        int rc = pd_code_elf(&elf, r->va, r->bytes, r->len, sym, nsym, err, sizeof(err));

        free(sym);
        if (rc != 0 || asprintf(&paths[i], "%s/%c-%016llx.elf", absdir, r->kernel ? 'k' : 'u',
                                (unsigned long long)r->va) < 0) {
            ptt_fail(o->cmd, "%s", rc ? err : "out of memory");
            goto out;
        }
        rc = pd_buf_save(&elf, paths[i], err, sizeof(err));
        pd_buf_free(&elf);
        if (rc != 0) {
            ptt_fail(o->cmd, "%s", err);
            goto out;
        }
        map[nmap++] = (struct pd_map){plan.task[0].pid, plan.task[0].pid,          r->kernel, r->va,
                                      r->len,           pd_code_elf_offset(r->va), paths[i]};
    }

    pd_plan_spec(&plan, map, nmap, &spec);
    spec.hostname = "ptvisor-guest";
    spec.osrelease = "";
    cmdline = calloc((size_t)argc + 2, sizeof(*cmdline));
    if (!cmdline) {
        ptt_fail(o->cmd, "out of memory");
        goto out;
    }
    cmdline[0] = "ptvisor-trace";
    for (int i = 0; i < argc; i++)
        cmdline[i + 1] = argv[i];
    spec.cmdline = cmdline;
    if (pd_write_file(&spec, out, err, sizeof(err)) != 0) {
        ptt_fail(o->cmd, "%s", err);
        goto out;
    }

    for (unsigned i = 0; i < plan.nconflict && i < 8; i++)
        ptt_warn(o,
                 "code at %#llx+%#llx differs between snapshots: left out of %s (perf "
                 "reports a decode error there; `ptvisor-trace decode` follows the CR3s)",
                 (unsigned long long)plan.conflict[i].va, (unsigned long long)plan.conflict[i].len,
                 out);
    if (plan.nconflict > 8)
        ptt_warn(o, "... and %u more such ranges", plan.nconflict - 8);
    uint64_t narrow = 0;
    for (unsigned i = 0; i < plan.naux; i++)
        narrow += narrow_modes(plan.aux[i].data, plan.aux[i].len);
    if (narrow)
        ptt_warn(o,
                 "the trace runs 16- or 32-bit code (%llu MODE.Exec packets): perf decodes "
                 "every code file as 64-bit code, so its decode of those parts is wrong "
                 "(`ptvisor-trace decode` follows the modes)",
                 (unsigned long long)narrow);
    if (plan.ncr3 > 1)
        ptt_warn(o, "%u address spaces (CR3s) in the trace: perf sees them as one process",
                 plan.ncr3);
    if (!o->quiet)
        fprintf(stderr,
                "ptvisor-trace perf: wrote %s: %u CPU%s, %llu PT bytes in %u queue%s, %u code "
                "file%s (%llu bytes) in %s/\n"
                "  read it with: perf script -i %s --itrace=i1i -F ip,sym\n",
                out, plan.ncpu, plan.ncpu == 1 ? "" : "s", (unsigned long long)plan.pt_bytes,
                plan.naux, plan.naux == 1 ? "" : "s", nmap, nmap == 1 ? "" : "s",
                (unsigned long long)plan.code_bytes, absdir, out);
    status = 0;
out:
    for (unsigned i = 0; snap && i < d->nsnap; i++)
        if (snap[i])
            munmap(snap[i], (size_t)d->snap[i].len);
    for (unsigned i = 0; paths && i < plan.nregion; i++)
        free(paths[i]);
    pd_plan_free(&plan);
    free(paths);
    free(cmdline);
    free(map);
    free(snap);
    free(src);
    return status;
}

int ptt_cmd_perf(int argc, char **argv)
{
    struct ptt_session ss;
    int status;

    if (ptt_session_open(&ss, argc, argv, PTT_OPT_OUT, help, &status) != 0)
        return status;
    status = export(&ss, ss.o.out ? ss.o.out : "perf.data", argc, argv);
    ptt_session_close(&ss);
    return status;
}
