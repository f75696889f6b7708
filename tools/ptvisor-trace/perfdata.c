/* SPDX-License-Identifier: MIT */
/*
 * perf.data writer and reader (see perfdata.h).  The layout, from the format perf documents
 * (tools/perf/Documentation/perf.data-file-format.txt) and reads (util/header.c):
 *
 *   file header (104 bytes)  "PERFILE2", sizes, the attrs / data sections, feature bitmap
 *   ids                      u64 ids of each attr
 *   attrs                    { perf_event_attr (128 bytes, PERF_ATTR_SIZE_VER7), ids section }
 *   data                     records: header { u32 type; u16 misc; u16 size } + body; every
 *                            non-sample record ends with the sample_id trailer that
 *                            sample_type selects (here TID, CPU, IDENTIFIER)
 *   feature sections         { offset, size } per feature bit set, then their contents
 *
 * Everything is little-endian (x86 perf.data) and written field by field, never as a C
 * struct, so the layout does not depend on this compiler's padding.
 */
#define _GNU_SOURCE
#include "perfdata.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* perf_event ABI (include/uapi/linux/perf_event.h) */
#define PERF_TYPE_SOFTWARE       1u
#define PERF_TYPE_MAX            6u
#define PERF_COUNT_SW_DUMMY      9u
#define PERF_SAMPLE_IP           (1u << 0)
#define PERF_SAMPLE_TID          (1u << 1)
#define PERF_SAMPLE_CPU          (1u << 7)
#define PERF_SAMPLE_IDENTIFIER   (1u << 16)
#define PERF_RECORD_MMAP2        10u
#define PERF_RECORD_AUX          11u
#define PERF_RECORD_ITRACE_START 12u
#define PERF_RECORD_COMM         3u
#define PERF_RECORD_MISC_KERNEL  1u
#define PERF_RECORD_MISC_USER    2u
#define PERF_AUX_FLAG_TRUNCATED  1u
#define ATTR_SIZE                128u /* PERF_ATTR_SIZE_VER7 */
/* attr flag bits, in the order of struct perf_event_attr's bitfield */
#define AF_DISABLED       (1ull << 0)
#define AF_EXCLUDE_USER   (1ull << 4)
#define AF_EXCLUDE_KERNEL (1ull << 5)
#define AF_EXCLUDE_HV     (1ull << 6)
#define AF_MMAP           (1ull << 8)
#define AF_COMM           (1ull << 9)
#define AF_TASK           (1ull << 13)
#define AF_SAMPLE_ID_ALL  (1ull << 18)
#define AF_MMAP2          (1ull << 23)
#define AF_COMM_EXEC      (1ull << 24)

/* perf-tool records (tools/lib/perf/include/perf/event.h) */
#define PERF_RECORD_FINISHED_ROUND 68u
#define PERF_RECORD_ID_INDEX       69u
#define PERF_RECORD_AUXTRACE_INFO  70u
#define PERF_RECORD_AUXTRACE       71u
#define PERF_AUXTRACE_INTEL_PT     1u
#define AUXTRACE_REC_SIZE          48u

/* the intel-pt AUXTRACE_INFO priv array (tools/perf/util/intel-pt.h) */
enum {
    PT_PMU_TYPE,
    PT_TIME_SHIFT,
    PT_TIME_MULT,
    PT_TIME_ZERO,
    PT_CAP_USER_TIME_ZERO,
    PT_TSC_BIT,
    PT_NORETCOMP_BIT,
    PT_HAVE_SCHED_SWITCH,
    PT_SNAPSHOT_MODE,
    PT_PER_CPU_MMAPS,
    PT_MTC_BIT,
    PT_MTC_FREQ_BITS,
    PT_TSC_CTC_N,
    PT_TSC_CTC_D,
    PT_CYC_BIT,
    PT_MAX_NONTURBO_RATIO,
    PT_FILTER_STR_LEN,
    PT_PRIV_MAX
};

/* header features (util/header.h HEADER_*) */
enum {
    FEAT_HOSTNAME = 3,
    FEAT_OSRELEASE = 4,
    FEAT_VERSION = 5,
    FEAT_ARCH = 6,
    FEAT_NRCPUS = 7,
    FEAT_CMDLINE = 11,
    FEAT_EVENT_DESC = 12,
    FEAT_PMU_MAPPINGS = 16,
    FEAT_AUXTRACE = 18, /* the index of AUXTRACE records; perf script -F checks trust it */
};

#define FILE_HEADER_SIZE 104u
#define FEAT_BITS        256u
#define NAME_ALIGN       64u
#define TRAILER_SIZE     24u /* TID (pid, tid), CPU (cpu, res), IDENTIFIER */
#define SAMPLE_TYPE      (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- growing little-endian buffer ---- */

void pd_buf_free(struct pd_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static bool grow(struct pd_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (more > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void put(struct pd_buf *b, const void *v, size_t n)
{
    if (!n || !grow(b, n))
        return;
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

static void zeros(struct pd_buf *b, size_t n)
{
    if (!n || !grow(b, n))
        return;
    memset(b->p + b->len, 0, n);
    b->len += n;
}

static void le(uint8_t *d, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        d[i] = (uint8_t)(v >> (8 * i));
}

static void put_le(struct pd_buf *b, uint64_t v, unsigned n)
{
    uint8_t d[8];

    le(d, v, n);
    put(b, d, n);
}

static void u16(struct pd_buf *b, uint64_t v)
{
    put_le(b, v, 2);
}
static void u32(struct pd_buf *b, uint64_t v)
{
    put_le(b, v, 4);
}
static void u64(struct pd_buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

static void patch_le(struct pd_buf *b, size_t at, uint64_t v, unsigned n)
{
    if (!b->oom && at + n <= b->len)
        le(b->p + at, v, n);
}

static void align8(struct pd_buf *b)
{
    zeros(b, (8 - (b->len & 7)) & 7);
}

static uint64_t rd(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- checking a spec ---- */

static bool str_ok(const char *s, size_t max)
{
    return s && memchr(s, 0, max + 1) != NULL;
}

static int check_spec(const struct pd_spec *s, char *err, size_t errlen)
{
    if (s->pmu_type < PERF_TYPE_MAX || s->pmu_type >= (1u << 31)) {
        set_err(err, errlen, "intel_pt PMU type %u: must be a dynamic PMU number (6 .. 2^31-1)",
                s->pmu_type);
        return -1;
    }
    if (!s->trace_user && !s->trace_kernel) {
        set_err(err, errlen, "neither user nor kernel traced");
        return -1;
    }
    if (s->ntask > PD_MAX_ITEMS || s->nmap > PD_MAX_ITEMS || s->ncpu > PD_MAX_ITEMS ||
        s->naux > PD_MAX_ITEMS) {
        set_err(err, errlen, "more than %u tasks, maps, CPUs or AUX buffers", PD_MAX_ITEMS);
        return -1;
    }
    if (!s->ncpu) {
        set_err(err, errlen, "no CPU (nothing was traced)");
        return -1;
    }
    if (s->filter && !str_ok(s->filter, PD_MAX_PATH)) {
        set_err(err, errlen, "filter string longer than %u bytes", PD_MAX_PATH);
        return -1;
    }
    for (unsigned i = 0; i < s->ntask; i++) {
        const struct pd_task *t = &s->task[i];
        if (t->pid < 0 || t->tid < 0 || !str_ok(t->comm, 15)) {
            set_err(err, errlen, "task %u: pid %d tid %d, comm missing or longer than 15", i,
                    t->pid, t->tid);
            return -1;
        }
    }
    for (unsigned i = 0; i < s->ncpu; i++) {
        const struct pd_cpu *c = &s->cpu[i];
        if (c->cpu >= 4096 || c->pid < 0 || c->tid < 0) {
            set_err(err, errlen, "cpu entry %u: cpu %u pid %d tid %d out of range", i, c->cpu,
                    c->pid, c->tid);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (s->cpu[j].cpu == c->cpu) {
                set_err(err, errlen, "cpu %u listed twice", c->cpu);
                return -1;
            }
    }
    for (unsigned i = 0; i < s->nmap; i++) {
        const struct pd_map *m = &s->map[i];
        if (!str_ok(m->path, PD_MAX_PATH) || m->path[0] != '/') {
            set_err(err, errlen, "map %u: path missing, not absolute or longer than %u", i,
                    PD_MAX_PATH);
            return -1;
        }
        if (!m->len || m->start + m->len < m->start || m->pgoff + m->len < m->pgoff) {
            set_err(err, errlen, "map %u (%s): empty or wrapping range %#llx+%#llx", i, m->path,
                    (unsigned long long)m->start, (unsigned long long)m->len);
            return -1;
        }
        /* perf decides the cpumode of an IP by IP >= 2^63 (x86_64 kernel_start) */
        bool k = m->start >= PD_KERNEL_START;
        if (k != m->kernel || (!k && m->start + m->len > PD_KERNEL_START)) {
            set_err(err, errlen, "map %u (%s): %#llx+%#llx is not wholly %s space", i, m->path,
                    (unsigned long long)m->start, (unsigned long long)m->len,
                    m->kernel ? "kernel" : "user");
            return -1;
        }
        if (!m->kernel && (m->pid < 0 || m->tid < 0)) {
            set_err(err, errlen, "map %u: user map without a pid", i);
            return -1;
        }
        for (unsigned j = 0; j < i; j++) {
            const struct pd_map *o = &s->map[j];
            bool same_space = m->kernel ? o->kernel : (!o->kernel && o->pid == m->pid);
            if (same_space && m->start < o->start + o->len && o->start < m->start + m->len) {
                set_err(err, errlen,
                        "map %u %#llx+%#llx overlaps map %u %#llx+%#llx in the same address "
                        "space (perf would decode one of them against the other's bytes)",
                        i, (unsigned long long)m->start, (unsigned long long)m->len, j,
                        (unsigned long long)o->start, (unsigned long long)o->len);
                return -1;
            }
        }
    }
    for (unsigned i = 0; i < s->naux; i++) {
        const struct pd_aux *a = &s->aux[i];
        unsigned c;
        for (c = 0; c < s->ncpu && s->cpu[c].cpu != a->cpu; c++)
            ;
        if (c == s->ncpu) {
            set_err(err, errlen, "AUX buffer %u: cpu %u has no cpu entry", i, a->cpu);
            return -1;
        }
        if (a->len && !a->data) {
            set_err(err, errlen, "AUX buffer %u: no data", i);
            return -1;
        }
        if (a->queue >= PD_MAX_ITEMS) {
            set_err(err, errlen, "AUX buffer %u: queue %u too large", i, a->queue);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (s->aux[j].queue == a->queue && s->aux[j].cpu != a->cpu) {
                set_err(err, errlen, "AUX buffers %u and %u: queue %u on cpus %u and %u", j, i,
                        a->queue, s->aux[j].cpu, a->cpu);
                return -1;
            }
    }
    return 0;
}

/* ---- building ---- */

struct bld {
    struct pd_buf *b;
    const struct pd_spec *s;
    size_t rec;       /* offset of the record being written */
    uint64_t *auxrec; /* file offsets of the AUXTRACE records [s->naux] */
};

static uint64_t pt_id(unsigned cpu_index)
{
    return 1 + cpu_index;
}

static uint64_t dummy_id(const struct pd_spec *s, unsigned cpu_index)
{
    return 1 + s->ncpu + cpu_index;
}

static unsigned cpu_index(const struct pd_spec *s, uint32_t cpu)
{
    for (unsigned i = 0; i < s->ncpu; i++)
        if (s->cpu[i].cpu == cpu)
            return i;
    return 0;
}

static void rec_begin(struct bld *z, uint32_t type, uint16_t misc)
{
    z->rec = z->b->len;
    u32(z->b, type);
    u16(z->b, misc);
    u16(z->b, 0); /* size, patched by rec_end */
}

static void rec_end(struct bld *z)
{
    align8(z->b);
    patch_le(z->b, z->rec + 6, z->b->len - z->rec, 2);
}

static void trailer(struct bld *z, int32_t pid, int32_t tid, uint32_t cpu, uint64_t id)
{
    u32(z->b, (uint32_t)pid);
    u32(z->b, (uint32_t)tid);
    u32(z->b, cpu);
    u32(z->b, 0);
    u64(z->b, id);
}

static void put_string(struct pd_buf *b, const char *s)
{
    size_t n = strlen(s) + 1, padded = (n + NAME_ALIGN - 1) / NAME_ALIGN * NAME_ALIGN;

    u32(b, padded);
    put(b, s, n);
    zeros(b, padded - n);
}

static void put_attr(struct pd_buf *b, const struct pd_spec *s, bool pt)
{
    uint64_t flags = AF_SAMPLE_ID_ALL | AF_DISABLED | AF_EXCLUDE_HV;

    if (!s->trace_user)
        flags |= AF_EXCLUDE_USER;
    if (!s->trace_kernel)
        flags |= AF_EXCLUDE_KERNEL;
    if (!pt)
        flags |= AF_MMAP | AF_COMM | AF_TASK | AF_MMAP2 | AF_COMM_EXEC;
    u32(b, pt ? s->pmu_type : PERF_TYPE_SOFTWARE);
    u32(b, ATTR_SIZE);
    u64(b, pt ? s->pt_config : PERF_COUNT_SW_DUMMY);
    u64(b, 1);           /* sample_period */
    u64(b, SAMPLE_TYPE); /* identical in both attrs: perf refuses mixed ones */
    u64(b, 0);           /* read_format */
    u64(b, flags);
    zeros(b, ATTR_SIZE - 48);
}

static const char *evname(const struct pd_spec *s, bool pt)
{
    if (pt)
        return s->trace_kernel ? (s->trace_user ? "intel_pt//" : "intel_pt//k") : "intel_pt//u";
    return s->trace_kernel ? "dummy:" : "dummy:u";
}

static void data_section(struct bld *z)
{
    const struct pd_spec *s = z->s;
    struct pd_buf *b = z->b;
    const size_t flen = s->filter ? strlen(s->filter) : 0;
    uint64_t qoff[64] = {0}; /* per-queue aux offsets (queues >= 64 start at 0: unused) */

    /* which id means which CPU / event */
    rec_begin(z, PERF_RECORD_ID_INDEX, 0);
    u64(b, 2ull * s->ncpu);
    for (unsigned e = 0; e < 2; e++)
        for (unsigned i = 0; i < s->ncpu; i++) {
            u64(b, e ? dummy_id(s, i) : pt_id(i));
            u64(b, i);                     /* idx: the CPU's mmap */
            u64(b, s->cpu[i].cpu);         /* cpu */
            u64(b, 0xffffffffffffffffull); /* tid: -1, CPU-wide */
        }
    rec_end(z);

    rec_begin(z, PERF_RECORD_AUXTRACE_INFO, 0);
    u32(b, PERF_AUXTRACE_INTEL_PT);
    u32(b, 0);
    for (unsigned i = 0; i < PT_PRIV_MAX; i++) {
        uint64_t v = 0;
        switch (i) {
        case PT_PMU_TYPE:
            v = s->pmu_type;
            break;
        case PT_TSC_BIT:
            v = PD_PT_CFG_TSC;
            break;
        case PT_NORETCOMP_BIT:
            v = PD_PT_CFG_NORETCOMP;
            break;
        case PT_PER_CPU_MMAPS:
            v = 1;
            break;
        case PT_MTC_BIT:
            v = PD_PT_CFG_MTC;
            break;
        case PT_MTC_FREQ_BITS:
            v = PD_PT_CFG_MTC_FREQ;
            break;
        case PT_CYC_BIT:
            v = PD_PT_CFG_CYC;
            break;
        case PT_FILTER_STR_LEN:
            v = flen;
            break;
        default: /* no time conversion, no sched_switch, no snapshot mode */
            break;
        }
        u64(b, v);
    }
    if (flen) { /* NUL-terminated, padded to 8 */
        put(b, s->filter, flen);
        zeros(b, (flen + 1 + 7) / 8 * 8 - flen);
    }
    rec_end(z);

    for (unsigned i = 0; i < s->ntask; i++) {
        const struct pd_task *t = &s->task[i];
        rec_begin(z, PERF_RECORD_COMM, PERF_RECORD_MISC_USER);
        u32(b, (uint32_t)t->pid);
        u32(b, (uint32_t)t->tid);
        put(b, t->comm, strlen(t->comm) + 1);
        align8(b);
        trailer(z, t->pid, t->tid, s->cpu[0].cpu, dummy_id(s, 0));
        rec_end(z);
    }
    for (unsigned i = 0; i < s->nmap; i++) {
        const struct pd_map *m = &s->map[i];
        int32_t pid = m->kernel ? -1 : m->pid, tid = m->kernel ? -1 : m->tid;
        rec_begin(z, PERF_RECORD_MMAP2,
                  m->kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER);
        u32(b, (uint32_t)pid);
        u32(b, (uint32_t)tid);
        u64(b, m->start);
        u64(b, m->len);
        u64(b, m->pgoff);
        u32(b, 0); /* maj */
        u32(b, 0); /* min */
        u64(b, 0); /* ino */
        u64(b, 0); /* ino_generation */
        u32(b, 5); /* prot: PROT_READ | PROT_EXEC */
        u32(b, 2); /* flags: MAP_PRIVATE */
        put(b, m->path, strlen(m->path) + 1);
        align8(b);
        trailer(z, pid, tid, s->cpu[0].cpu, dummy_id(s, 0));
        rec_end(z);
    }
    rec_begin(z, PERF_RECORD_FINISHED_ROUND, 0);
    rec_end(z);

    for (unsigned i = 0; i < s->ncpu; i++) {
        const struct pd_cpu *c = &s->cpu[i];
        rec_begin(z, PERF_RECORD_ITRACE_START, 0);
        u32(b, (uint32_t)c->pid);
        u32(b, (uint32_t)c->tid);
        trailer(z, c->pid, c->tid, c->cpu, pt_id(i));
        rec_end(z);
    }
    for (unsigned i = 0; i < s->naux; i++) {
        const struct pd_aux *a = &s->aux[i];
        unsigned ci = cpu_index(s, a->cpu);
        uint64_t padded = (a->len + 7) & ~7ull;
        uint64_t off = a->queue < 64 ? qoff[a->queue] : 0;

        rec_begin(z, PERF_RECORD_AUX, 0);
        u64(b, off);
        u64(b, a->len);
        u64(b, a->lost_before ? PERF_AUX_FLAG_TRUNCATED : 0);
        trailer(z, s->cpu[ci].pid, s->cpu[ci].tid, a->cpu, pt_id(ci));
        rec_end(z);

        /* the AUXTRACE record's size is its own; the PT bytes follow it */
        z->auxrec[i] = b->len;
        rec_begin(z, PERF_RECORD_AUXTRACE, 0);
        u64(b, padded);
        u64(b, off);
        u64(b, 0);           /* reference */
        u32(b, a->queue);    /* idx */
        u32(b, 0xffffffffu); /* tid: -1, CPU-wide */
        u32(b, a->cpu);
        u32(b, 0);
        rec_end(z);
        put(b, a->data, a->len);
        zeros(b, padded - a->len); /* zero bytes are PAD packets */
        if (a->queue < 64)
            qoff[a->queue] += padded;
    }
    rec_begin(z, PERF_RECORD_FINISHED_ROUND, 0);
    rec_end(z);
}

static void feature(struct bld *z, unsigned feat)
{
    const struct pd_spec *s = z->s;
    struct pd_buf *b = z->b;

    switch (feat) {
    case FEAT_HOSTNAME:
        put_string(b, s->hostname ? s->hostname : "");
        break;
    case FEAT_OSRELEASE:
        put_string(b, s->osrelease ? s->osrelease : "");
        break;
    case FEAT_VERSION:
        put_string(b, "ptvisor-trace");
        break;
    case FEAT_ARCH:
        put_string(b, "x86_64");
        break;
    case FEAT_NRCPUS: {
        uint32_t n = s->nr_cpus;
        for (unsigned i = 0; i < s->ncpu; i++)
            if (s->cpu[i].cpu + 1 > n)
                n = s->cpu[i].cpu + 1;
        u32(b, n); /* available */
        u32(b, n); /* online */
        break;
    }
    case FEAT_CMDLINE: {
        unsigned n = 0;
        while (s->cmdline && s->cmdline[n] && n < 1024)
            n++;
        u32(b, n);
        for (unsigned i = 0; i < n; i++)
            put_string(b, s->cmdline[i]);
        break;
    }
    case FEAT_EVENT_DESC:
        u32(b, 2);
        u32(b, ATTR_SIZE);
        for (unsigned e = 0; e < 2; e++) {
            put_attr(b, s, e == 0);
            u32(b, s->ncpu);
            put_string(b, evname(s, e == 0));
            for (unsigned i = 0; i < s->ncpu; i++)
                u64(b, e ? dummy_id(s, i) : pt_id(i));
        }
        break;
    case FEAT_AUXTRACE: /* u64 count, then { u64 file offset, u64 record size } */
        u64(b, s->naux);
        for (unsigned i = 0; i < s->naux; i++) {
            u64(b, z->auxrec[i]);
            u64(b, AUXTRACE_REC_SIZE);
        }
        break;
    case FEAT_PMU_MAPPINGS:
        u32(b, 2);
        u32(b, s->pmu_type);
        put_string(b, "intel_pt");
        u32(b, PERF_TYPE_SOFTWARE);
        put_string(b, "software");
        break;
    }
}

int pd_build(const struct pd_spec *s, struct pd_buf *out, char *err, size_t errlen)
{
    static const unsigned feats[] = {FEAT_HOSTNAME,   FEAT_OSRELEASE,    FEAT_VERSION,
                                     FEAT_ARCH,       FEAT_NRCPUS,       FEAT_CMDLINE,
                                     FEAT_EVENT_DESC, FEAT_PMU_MAPPINGS, FEAT_AUXTRACE};
    const unsigned nfeat = sizeof(feats) / sizeof(feats[0]);
    struct bld z = {.b = out, .s = s};
    uint64_t bitmap = 0;

    memset(out, 0, sizeof(*out));
    if (check_spec(s, err, errlen) != 0)
        return -1;
    z.auxrec = calloc(s->naux + 1, sizeof(*z.auxrec));
    if (!z.auxrec) {
        set_err(err, errlen, "out of memory building perf.data");
        return -1;
    }

    /* header, patched at the end */
    zeros(out, FILE_HEADER_SIZE);

    /* ids: pt ids then dummy ids */
    size_t ids_at = out->len;
    for (unsigned e = 0; e < 2; e++)
        for (unsigned i = 0; i < s->ncpu; i++)
            u64(out, e ? dummy_id(s, i) : pt_id(i));

    size_t attrs_at = out->len;
    for (unsigned e = 0; e < 2; e++) {
        put_attr(out, s, e == 0);
        u64(out, ids_at + (size_t)e * s->ncpu * 8);
        u64(out, (uint64_t)s->ncpu * 8);
    }
    size_t attrs_size = out->len - attrs_at;

    size_t data_at = out->len;
    data_section(&z);
    size_t data_size = out->len - data_at;

    /* feature table, then the features */
    size_t table = out->len;
    zeros(out, (size_t)nfeat * 16);
    for (unsigned i = 0; i < nfeat; i++) {
        size_t at = out->len;
        feature(&z, feats[i]);
        patch_le(out, table + 16 * i, at, 8);
        patch_le(out, table + 16 * i + 8, out->len - at, 8);
        bitmap |= 1ull << feats[i];
    }
    free(z.auxrec);

    if (out->oom) {
        set_err(err, errlen, "out of memory building perf.data");
        pd_buf_free(out);
        return -1;
    }
    memcpy(out->p, "PERFILE2", 8);
    patch_le(out, 8, FILE_HEADER_SIZE, 8);
    patch_le(out, 16, ATTR_SIZE + 16, 8);
    patch_le(out, 24, attrs_at, 8);
    patch_le(out, 32, attrs_size, 8);
    patch_le(out, 40, data_at, 8);
    patch_le(out, 48, data_size, 8);
    /* 56..71: event_types section, unused */
    patch_le(out, 72, bitmap, 8);
    return 0;
}

int pd_buf_save(const struct pd_buf *b, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0;

    if (fd < 0) {
        set_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (done < b->len) {
        ssize_t n = write(fd, b->p + done, b->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            set_err(err, errlen, "%s: write: %s", path, n < 0 ? strerror(errno) : "no progress");
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    if (close(fd) != 0) {
        set_err(err, errlen, "%s: close: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int pd_write_file(const struct pd_spec *s, const char *path, char *err, size_t errlen)
{
    struct pd_buf b;

    if (pd_build(s, &b, err, errlen) != 0)
        return -1;
    int r = pd_buf_save(&b, path, err, errlen);
    pd_buf_free(&b);
    return r;
}

/* ---- the reader ---- */

struct rdr {
    const uint8_t *p;
    size_t len;
    char *err;
    size_t errlen;
};

static bool in_file(const struct rdr *r, uint64_t off, uint64_t size)
{
    return off <= r->len && size <= r->len - off;
}

static bool id_known(const uint64_t *ids, unsigned n, uint64_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

#define PARSE_MAX_IDS 8192

int pd_parse(const uint8_t *p, size_t len, struct pd_info *info, char *err, size_t errlen)
{
    struct rdr r = {p, len, err, errlen};
    static uint64_t ids[PARSE_MAX_IDS];
    uint32_t queue_cpu[PD_INFO_MAX_QUEUES];
    bool cpu_started[4096] = {false};
    unsigned nids = 0;
    uint32_t attr_type[2] = {0, 0};
    uint64_t attr_sample[2] = {0, 0};

    memset(info, 0, sizeof(*info));
    memset(queue_cpu, 0xff, sizeof(queue_cpu));
    if (len < FILE_HEADER_SIZE || memcmp(p, "PERFILE2", 8) != 0) {
        set_err(err, errlen, "not a perf.data file (no PERFILE2 header)");
        return -1;
    }
    uint64_t hsize = rd(p + 8, 8), attr_size = rd(p + 16, 8);
    uint64_t attrs_off = rd(p + 24, 8), attrs_sz = rd(p + 32, 8);
    uint64_t data_off = rd(p + 40, 8), data_sz = rd(p + 48, 8);
    info->features = rd(p + 72, 8);
    if (hsize != FILE_HEADER_SIZE || attr_size < 64 + 16 || attr_size > 4096 ||
        !in_file(&r, attrs_off, attrs_sz) || attrs_sz % attr_size ||
        !in_file(&r, data_off, data_sz)) {
        set_err(err, errlen, "bad file header (sizes or sections outside the file)");
        return -1;
    }
    info->nattr = (unsigned)(attrs_sz / attr_size);
    if (info->nattr < 1 || info->nattr > 2) {
        set_err(err, errlen, "%u attrs (expected the intel_pt and the dummy event)", info->nattr);
        return -1;
    }
    for (unsigned a = 0; a < info->nattr; a++) {
        const uint8_t *at = p + attrs_off + a * attr_size;
        uint64_t asz = rd(at + 4, 4);
        if (asz + 16 != attr_size) {
            set_err(err, errlen, "attr %u: size %llu, file says %llu", a, (unsigned long long)asz,
                    (unsigned long long)attr_size - 16);
            return -1;
        }
        attr_type[a] = (uint32_t)rd(at, 4);
        attr_sample[a] = rd(at + 24, 8);
        if (!(rd(at + 40, 8) & AF_SAMPLE_ID_ALL) || attr_sample[a] != attr_sample[0]) {
            set_err(err, errlen, "attr %u: sample_id_all off or sample_type differs", a);
            return -1;
        }
        if (a == 0)
            info->pt_config = rd(at + 8, 8);
        uint64_t ioff = rd(at + asz, 8), isz = rd(at + asz + 8, 8);
        if (!in_file(&r, ioff, isz) || isz % 8 || isz / 8 > PARSE_MAX_IDS - nids || !isz) {
            set_err(err, errlen, "attr %u: bad ids section", a);
            return -1;
        }
        for (uint64_t i = 0; i < isz / 8; i++) {
            uint64_t id = rd(p + ioff + 8 * i, 8);
            if (id_known(ids, nids, id)) {
                set_err(err, errlen, "id %llu in two attrs", (unsigned long long)id);
                return -1;
            }
            ids[nids++] = id;
        }
    }
    info->nids = nids;
    if (attr_sample[0] != SAMPLE_TYPE) {
        set_err(err, errlen, "sample_type %#llx (this reader knows IP|TID|CPU|IDENTIFIER)",
                (unsigned long long)attr_sample[0]);
        return -1;
    }

    /* records */
    bool have_info = false;
    uint64_t off = data_off, end = data_off + data_sz;
    while (off < end) {
        if (end - off < 8) {
            set_err(err, errlen, "record at %#llx: truncated header", (unsigned long long)off);
            return -1;
        }
        uint32_t type = (uint32_t)rd(p + off, 4);
        uint64_t size = rd(p + off + 6, 2);
        if (size < 8 || size % 8 || size > end - off) {
            set_err(err, errlen, "record at %#llx (type %u): size %llu", (unsigned long long)off,
                    type, (unsigned long long)size);
            return -1;
        }
        const uint8_t *rp = p + off;
        uint64_t payload = 0;
        bool has_trailer = type < 64; /* kernel records carry the sample_id trailer */
        if (has_trailer) {
            if (size < 8 + TRAILER_SIZE) {
                set_err(err, errlen, "record at %#llx (type %u): no room for sample_id",
                        (unsigned long long)off, type);
                return -1;
            }
            uint64_t id = rd(rp + size - 8, 8);
            if (!id_known(ids, nids, id)) {
                set_err(err, errlen, "record at %#llx (type %u): unknown id %llu",
                        (unsigned long long)off, type, (unsigned long long)id);
                return -1;
            }
        }
        uint64_t body = size - 8 - (has_trailer ? TRAILER_SIZE : 0);
        switch (type) {
        case PERF_RECORD_COMM:
        case PERF_RECORD_MMAP2: {
            uint64_t fixed = type == PERF_RECORD_COMM ? 8 : 64;
            if (body <= fixed || !memchr(rp + 8 + fixed, 0, body - fixed)) {
                set_err(err, errlen, "record at %#llx (type %u): name not terminated",
                        (unsigned long long)off, type);
                return -1;
            }
            if (type == PERF_RECORD_COMM) {
                info->ncomm++;
            } else {
                uint64_t start = rd(rp + 16, 8), l = rd(rp + 24, 8);
                bool k = (rd(rp + 4, 2) & 7) == PERF_RECORD_MISC_KERNEL;
                if (!l || start + l < start || (k != (start >= PD_KERNEL_START))) {
                    set_err(err, errlen, "MMAP2 at %#llx: bad range or cpumode",
                            (unsigned long long)off);
                    return -1;
                }
                info->nmmap++;
            }
            break;
        }
        case PERF_RECORD_ITRACE_START: {
            uint32_t cpu = (uint32_t)rd(rp + size - 16, 4);
            if (body != 8 || cpu >= 4096) {
                set_err(err, errlen, "ITRACE_START at %#llx: bad size or cpu",
                        (unsigned long long)off);
                return -1;
            }
            cpu_started[cpu] = true;
            info->nitrace++;
            break;
        }
        case PERF_RECORD_AUX:
            if (body != 24) {
                set_err(err, errlen, "AUX at %#llx: bad size", (unsigned long long)off);
                return -1;
            }
            info->naux++;
            break;
        case PERF_RECORD_FINISHED_ROUND:
            info->nround++;
            break;
        case PERF_RECORD_ID_INDEX: {
            uint64_t n = size >= 16 ? rd(rp + 8, 8) : ~0ull;
            if (n > (size - 16) / 32 || n * 32 != size - 16) {
                set_err(err, errlen, "ID_INDEX at %#llx: bad count", (unsigned long long)off);
                return -1;
            }
            for (uint64_t i = 0; i < n; i++)
                if (!id_known(ids, nids, rd(rp + 16 + 32 * i, 8))) {
                    set_err(err, errlen, "ID_INDEX at %#llx: unknown id", (unsigned long long)off);
                    return -1;
                }
            info->nid_index++;
            break;
        }
        case PERF_RECORD_AUXTRACE_INFO: {
            if (size < 16 + 8 * (PT_PER_CPU_MMAPS + 1) || rd(rp + 8, 4) != PERF_AUXTRACE_INTEL_PT) {
                set_err(err, errlen, "AUXTRACE_INFO at %#llx: not intel_pt or too short",
                        (unsigned long long)off);
                return -1;
            }
            const uint8_t *priv = rp + 16;
            uint64_t npriv = (size - 16) / 8;
            info->pmu_type = (uint32_t)rd(priv, 8);
            info->noretcomp_bit = rd(priv + 8 * PT_NORETCOMP_BIT, 8);
            if (npriv > PT_FILTER_STR_LEN) {
                uint64_t fl = rd(priv + 8 * PT_FILTER_STR_LEN, 8);
                uint64_t room = (npriv - PT_FILTER_STR_LEN - 1) * 8;
                if (fl && (fl >= room || priv[8 * PT_PRIV_MAX + fl] != 0)) {
                    set_err(err, errlen, "AUXTRACE_INFO: filter string length %llu",
                            (unsigned long long)fl);
                    return -1;
                }
            }
            have_info = true;
            info->nauxtrace_info++;
            break;
        }
        case PERF_RECORD_AUXTRACE: {
            if (size != AUXTRACE_REC_SIZE) {
                set_err(err, errlen, "AUXTRACE at %#llx: record size %llu", (unsigned long long)off,
                        (unsigned long long)size);
                return -1;
            }
            payload = rd(rp + 8, 8);
            uint32_t idx = (uint32_t)rd(rp + 32, 4), cpu = (uint32_t)rd(rp + 40, 4);
            if (!have_info || payload > end - off - size || payload % 8 || cpu >= 4096 ||
                !cpu_started[cpu] || idx >= PD_INFO_MAX_QUEUES) {
                set_err(err, errlen,
                        "AUXTRACE at %#llx: no AUXTRACE_INFO or ITRACE_START before it, or "
                        "data past the end, or cpu/idx out of range",
                        (unsigned long long)off);
                return -1;
            }
            if (queue_cpu[idx] != 0xffffffffu && queue_cpu[idx] != cpu) {
                set_err(err, errlen, "AUXTRACE at %#llx: queue %u on two cpus",
                        (unsigned long long)off, idx);
                return -1;
            }
            queue_cpu[idx] = cpu;
            info->queue_bytes[idx] += payload;
            if (idx + 1 > info->nqueue)
                info->nqueue = idx + 1;
            info->aux_bytes += payload;
            info->nauxtrace++;
            break;
        }
        default:
            set_err(err, errlen, "record at %#llx: type %u not written by this writer",
                    (unsigned long long)off, type);
            return -1;
        }
        info->nrec++;
        off += size + payload;
    }
    if (!have_info) {
        set_err(err, errlen, "no AUXTRACE_INFO record");
        return -1;
    }
    if (attr_type[0] != info->pmu_type || info->pmu_type < PERF_TYPE_MAX) {
        set_err(err, errlen, "intel_pt attr type %u, AUXTRACE_INFO PMU type %u", attr_type[0],
                info->pmu_type);
        return -1;
    }

    /* feature sections: the table at the end of the data */
    uint64_t table = data_off + data_sz;
    unsigned nfeat = 0;
    for (unsigned i = 0; i < 64; i++)
        nfeat += (info->features >> i) & 1;
    if (rd(p + 80, 8) || rd(p + 88, 8) || rd(p + 96, 8)) {
        set_err(err, errlen, "feature bits above 63 set (this writer sets none)");
        return -1;
    }
    if (!in_file(&r, table, (uint64_t)nfeat * 16)) {
        set_err(err, errlen, "feature table outside the file");
        return -1;
    }
    for (unsigned i = 0, bit = 0; i < nfeat; i++, bit++) {
        while (!((info->features >> bit) & 1))
            bit++;
        uint64_t fo = rd(p + table + 16 * i, 8), fs = rd(p + table + 16 * i + 8, 8);
        if (!in_file(&r, fo, fs)) {
            set_err(err, errlen, "feature section %u outside the file", bit);
            return -1;
        }
        if (bit != FEAT_AUXTRACE)
            continue;
        /* the index: every entry the start of an AUXTRACE record, every record listed */
        uint64_t n = fs >= 8 ? rd(p + fo, 8) : ~0ull;
        if (n > (fs - 8) / 16 || n != info->nauxtrace) {
            set_err(err, errlen, "AUXTRACE index: %llu entries for %u records",
                    (unsigned long long)n, info->nauxtrace);
            return -1;
        }
        for (uint64_t e = 0; e < n; e++) {
            uint64_t ro = rd(p + fo + 8 + 16 * e, 8), rs = rd(p + fo + 16 + 16 * e, 8);
            if (rs != AUXTRACE_REC_SIZE || ro < data_off || ro > end - AUXTRACE_REC_SIZE ||
                rd(p + ro, 4) != PERF_RECORD_AUXTRACE || rd(p + ro + 6, 2) != rs) {
                set_err(err, errlen, "AUXTRACE index entry %llu: no AUXTRACE record at %#llx",
                        (unsigned long long)e, (unsigned long long)ro);
                return -1;
            }
        }
        info->naux_index = (unsigned)n;
    }
    return 0;
}

/* ---- minimal ELF holding code ---- */

#define EH_SIZE  64u
#define PH_SIZE  56u
#define SH_SIZE  64u
#define SYM_SIZE 24u

uint64_t pd_code_elf_offset(uint64_t va)
{
    return PD_ELF_CODE_OFF + (va & 0xfff); /* p_offset == p_vaddr modulo the page size */
}

static void shdr(struct pd_buf *b, uint32_t name, uint32_t type, uint64_t flags, uint64_t addr,
                 uint64_t off, uint64_t size, uint32_t link, uint32_t info, uint64_t align,
                 uint64_t entsize)
{
    u32(b, name);
    u32(b, type);
    u64(b, flags);
    u64(b, addr);
    u64(b, off);
    u64(b, size);
    u32(b, link);
    u32(b, info);
    u64(b, align);
    u64(b, entsize);
}

int pd_code_elf(struct pd_buf *out, uint64_t va, const uint8_t *code, size_t len,
                const struct pd_sym *sym, unsigned nsym, char *err, size_t errlen)
{
    static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
    const uint64_t code_off = pd_code_elf_offset(va);
    struct pd_buf str = {0};

    memset(out, 0, sizeof(*out));
    if (!len || va + len < va || va + len > UINT64_MAX - 0x1000 || (len && !code)) {
        set_err(err, errlen, "code %#llx+%#zx: empty or wrapping", (unsigned long long)va, len);
        return -1;
    }
    if (nsym > PD_MAX_ITEMS) {
        set_err(err, errlen, "more than %u symbols", PD_MAX_ITEMS);
        return -1;
    }

    /* ELF header */
    static const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2 /* 64 */, 1 /* LE */, 1, 0};
    put(out, ident, 16);
    u16(out, 2);  /* ET_EXEC */
    u16(out, 62); /* EM_X86_64 */
    u32(out, 1);
    u64(out, va); /* entry */
    u64(out, EH_SIZE);
    u64(out, 0); /* shoff, patched */
    u32(out, 0);
    u16(out, EH_SIZE);
    u16(out, PH_SIZE);
    u16(out, 1);
    u16(out, SH_SIZE);
    u16(out, 5);
    u16(out, 4); /* .shstrtab */

    /* PT_LOAD R+X */
    u32(out, 1);
    u32(out, 5);
    u64(out, code_off);
    u64(out, va);
    u64(out, va);
    u64(out, len);
    u64(out, len);
    u64(out, 0x1000);

    zeros(out, code_off - out->len);
    put(out, code, len);
    align8(out);

    /* symbols inside the code, and their names */
    size_t symtab = out->len;
    zeros(out, SYM_SIZE); /* null symbol */
    zeros(&str, 1);
    for (unsigned i = 0; i < nsym; i++) {
        const struct pd_sym *s = &sym[i];
        if (!s->name || !s->name[0] || s->addr < va || s->addr - va >= len)
            continue;
        size_t nl = strnlen(s->name, 1024);
        uint64_t size = s->size;
        if (size > len - (s->addr - va))
            size = len - (s->addr - va);
        u32(out, str.len);
        put_le(out, 0x12, 1); /* STB_GLOBAL, STT_FUNC */
        put_le(out, 0, 1);
        u16(out, 1); /* .text */
        u64(out, s->addr);
        u64(out, size);
        put(&str, s->name, nl);
        zeros(&str, 1);
    }
    size_t symtab_size = out->len - symtab;
    size_t strtab = out->len;
    put(out, str.p, str.len);
    size_t strtab_size = str.len;
    size_t shstrtab = out->len;
    put(out, shstr, sizeof(shstr));
    align8(out);
    if (str.oom)
        out->oom = true;
    pd_buf_free(&str);

    size_t shoff = out->len;
    shdr(out, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    shdr(out, 1, 1 /* PROGBITS */, 6 /* ALLOC|EXEC */, va, code_off, len, 0, 0, 16, 0);
    shdr(out, 7, 2 /* SYMTAB */, 0, 0, symtab, symtab_size, 3, 1, 8, SYM_SIZE);
    shdr(out, 15, 3 /* STRTAB */, 0, 0, strtab, strtab_size, 0, 0, 1, 0);
    shdr(out, 23, 3, 0, 0, shstrtab, sizeof(shstr), 0, 0, 1, 0);
    patch_le(out, 40, shoff, 8);
    if (out->oom) {
        set_err(err, errlen, "out of memory building an ELF file of %zu bytes", len);
        pd_buf_free(out);
        return -1;
    }
    return 0;
}
