/* SPDX-License-Identifier: MIT */
/* The perf.data format's constants and two helpers, shared by the writer (perfdata.c) and the
 * reader (perfdata_read.c).  Private to those two files. */
#ifndef PTV_TOOLS_PERFDATA_ABI_H
#define PTV_TOOLS_PERFDATA_ABI_H

#include <stddef.h>
#include <stdint.h>

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

/* a one-line reason into err (if any) */
void pd_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* n little-endian bytes */
static inline uint64_t pd_rd(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
