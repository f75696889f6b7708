/* SPDX-License-Identifier: MIT */
/*
 * perf.data writer (see perfdata.h; the reader is perfdata_read.c, the format's constants
 * perfdata_abi.h).  The layout, from the format perf documents
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

#include "perfdata_abi.h"

void pd_set_err(char *err, size_t errlen, const char *fmt, ...)
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

/* ---- checking a spec ---- */

static bool str_ok(const char *s, size_t max)
{
    return s && memchr(s, 0, max + 1) != NULL;
}

static int check_spec(const struct pd_spec *s, char *err, size_t errlen)
{
    if (s->pmu_type < PERF_TYPE_MAX || s->pmu_type >= (1u << 31)) {
        pd_set_err(err, errlen, "intel_pt PMU type %u: must be a dynamic PMU number (6 .. 2^31-1)",
                   s->pmu_type);
        return -1;
    }
    if (!s->trace_user && !s->trace_kernel) {
        pd_set_err(err, errlen, "neither user nor kernel traced");
        return -1;
    }
    if (s->ntask > PD_MAX_ITEMS || s->nmap > PD_MAX_ITEMS || s->ncpu > PD_MAX_ITEMS ||
        s->naux > PD_MAX_ITEMS) {
        pd_set_err(err, errlen, "more than %u tasks, maps, CPUs or AUX buffers", PD_MAX_ITEMS);
        return -1;
    }
    if (!s->ncpu) {
        pd_set_err(err, errlen, "no CPU (nothing was traced)");
        return -1;
    }
    if (s->filter && !str_ok(s->filter, PD_MAX_PATH)) {
        pd_set_err(err, errlen, "filter string longer than %u bytes", PD_MAX_PATH);
        return -1;
    }
    for (unsigned i = 0; i < s->ntask; i++) {
        const struct pd_task *t = &s->task[i];
        if (t->pid < 0 || t->tid < 0 || !str_ok(t->comm, 15)) {
            pd_set_err(err, errlen, "task %u: pid %d tid %d, comm missing or longer than 15", i,
                       t->pid, t->tid);
            return -1;
        }
    }
    for (unsigned i = 0; i < s->ncpu; i++) {
        const struct pd_cpu *c = &s->cpu[i];
        if (c->cpu >= 4096 || c->pid < 0 || c->tid < 0) {
            pd_set_err(err, errlen, "cpu entry %u: cpu %u pid %d tid %d out of range", i, c->cpu,
                       c->pid, c->tid);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (s->cpu[j].cpu == c->cpu) {
                pd_set_err(err, errlen, "cpu %u listed twice", c->cpu);
                return -1;
            }
    }
    for (unsigned i = 0; i < s->nmap; i++) {
        const struct pd_map *m = &s->map[i];
        if (!str_ok(m->path, PD_MAX_PATH) || m->path[0] != '/') {
            pd_set_err(err, errlen, "map %u: path missing, not absolute or longer than %u", i,
                       PD_MAX_PATH);
            return -1;
        }
        if (!m->len || m->start + m->len < m->start || m->pgoff + m->len < m->pgoff) {
            pd_set_err(err, errlen, "map %u (%s): empty or wrapping range %#llx+%#llx", i, m->path,
                       (unsigned long long)m->start, (unsigned long long)m->len);
            return -1;
        }
        /* perf decides the cpumode of an IP by IP >= 2^63 (x86_64 kernel_start) */
        bool k = m->start >= PD_KERNEL_START;
        if (k != m->kernel || (!k && m->start + m->len > PD_KERNEL_START)) {
            pd_set_err(err, errlen, "map %u (%s): %#llx+%#llx is not wholly %s space", i, m->path,
                       (unsigned long long)m->start, (unsigned long long)m->len,
                       m->kernel ? "kernel" : "user");
            return -1;
        }
        if (!m->kernel && (m->pid < 0 || m->tid < 0)) {
            pd_set_err(err, errlen, "map %u: user map without a pid", i);
            return -1;
        }
        for (unsigned j = 0; j < i; j++) {
            const struct pd_map *o = &s->map[j];
            bool same_space = m->kernel ? o->kernel : (!o->kernel && o->pid == m->pid);
            if (same_space && m->start < o->start + o->len && o->start < m->start + m->len) {
                pd_set_err(err, errlen,
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
            pd_set_err(err, errlen, "AUX buffer %u: cpu %u has no cpu entry", i, a->cpu);
            return -1;
        }
        if (a->len && !a->data) {
            pd_set_err(err, errlen, "AUX buffer %u: no data", i);
            return -1;
        }
        if (a->queue >= PD_MAX_ITEMS) {
            pd_set_err(err, errlen, "AUX buffer %u: queue %u too large", i, a->queue);
            return -1;
        }
        for (unsigned j = 0; j < i; j++)
            if (s->aux[j].queue == a->queue && s->aux[j].cpu != a->cpu) {
                pd_set_err(err, errlen, "AUX buffers %u and %u: queue %u on cpus %u and %u", j, i,
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
        pd_set_err(err, errlen, "out of memory building perf.data");
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
        pd_set_err(err, errlen, "out of memory building perf.data");
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
        pd_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (done < b->len) {
        ssize_t n = write(fd, b->p + done, b->len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            pd_set_err(err, errlen, "%s: write: %s", path, n < 0 ? strerror(errno) : "no progress");
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    if (close(fd) != 0) {
        pd_set_err(err, errlen, "%s: close: %s", path, strerror(errno));
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
        pd_set_err(err, errlen, "code %#llx+%#zx: empty or wrapping", (unsigned long long)va, len);
        return -1;
    }
    if (nsym > PD_MAX_ITEMS) {
        pd_set_err(err, errlen, "more than %u symbols", PD_MAX_ITEMS);
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
        pd_set_err(err, errlen, "out of memory building an ELF file of %zu bytes", len);
        pd_buf_free(out);
        return -1;
    }
    return 0;
}
