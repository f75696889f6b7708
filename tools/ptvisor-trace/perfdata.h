/* SPDX-License-Identifier: MIT */
/*
 * perf.data writer (`ptvisor-trace perf`): a perf.data file (the on-disk format of
 * linux-perf, "PERFILE2") that Debian's `perf script --itrace=...` decodes with perf's own
 * Intel PT decoder, as if `perf record -e intel_pt//` had written it.
 *
 * What perf needs (learned from tools/perf/util/{header,session,auxtrace,intel-pt}.c and
 * checked against perf 6.1):
 *   - two attrs with identical sample_type / read_format / sample_id_all: the intel_pt event
 *     (attr.type = the PMU type that AUXTRACE_INFO priv[0] names; perf never asks the local
 *     machine for an intel_pt PMU, it matches the two numbers) and the dummy sideband event;
 *     every id a record carries must be in an attr's id list;
 *   - AUXTRACE_INFO (type PERF_AUXTRACE_INTEL_PT, the intel-pt priv array) before any
 *     AUXTRACE record; the NoRETComp bit in priv and in attr.config (return compression
 *     off), no TSC bit in the config (decoding without timestamps);
 *   - per CPU: ITRACE_START (who runs there: perf sets the CPU's current thread from it,
 *     through the CPU field of the sample_id trailer), then the PT bytes as AUXTRACE records;
 *     one queue per uninterrupted piece of stream (perf starts each queue at its first PSB);
 *   - MMAP2 records: code perf reads at file offset (ip - start + pgoff) of the named file;
 *     user maps in the task's pid, kernel maps (ip >= 2^63) with pid -1 and the kernel
 *     cpumode, named by an absolute path.
 * Features: AUXTRACE (the index of the AUXTRACE records) is needed: without it
 * `perf script -F ...,addr` refuses, since the intel_pt attr has no ADDR (the samples perf
 * synthesizes have it; perf trusts that only when the file has the AUXTRACE feature).  The
 * others written (HOSTNAME, OSRELEASE, VERSION, ARCH, NRCPUS, CMDLINE, EVENT_DESC: the
 * event names, PMU_MAPPINGS) only name things in perf's headers and output.
 *
 * perfdata.c is the format alone: it builds the whole file in memory (pd_build) so that the
 * fuzzer and the tests check it with pd_parse, the structural reader of the same format, and
 * writes the small ELF files that hold the code.  perf.c plans what a dump becomes (the
 * pd_plan_* functions below) and is the command.
 */
#ifndef PTV_TOOLS_PERFDATA_H
#define PTV_TOOLS_PERFDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* intel_pt PMU config bits (the names of /sys/bus/event_source/devices/intel_pt/format) */
#define PD_PT_CFG_PT        (1ull << 0) /* pass-through */
#define PD_PT_CFG_CYC       (1ull << 1)
#define PD_PT_CFG_MTC       (1ull << 9)
#define PD_PT_CFG_TSC       (1ull << 10)
#define PD_PT_CFG_NORETCOMP (1ull << 11)
#define PD_PT_CFG_BRANCH    (1ull << 13)
#define PD_PT_CFG_MTC_FREQ  (0xfull << 14)

#define PD_PMU_TYPE_DEFAULT 8u           /* attr.type of intel_pt: any dynamic PMU number works */
#define PD_KERNEL_START     (1ull << 63) /* perf's kernel_start on x86_64 */
#define PD_MAX_PATH         4000u        /* MMAP2 filename (a record is at most 64 KiB) */
#define PD_MAX_ITEMS        (1u << 20)

struct pd_task { /* COMM: a thread and its name (<= 15 characters) */
    int32_t pid, tid;
    const char *comm;
};

struct pd_map {       /* MMAP2: [start, start + len) is file `path` from offset pgoff */
    int32_t pid, tid; /* ignored for kernel maps (pid -1) */
    bool kernel;      /* kernel cpumode: start >= PD_KERNEL_START */
    uint64_t start, len, pgoff;
    const char *path; /* absolute */
};

struct pd_cpu { /* ITRACE_START: the thread tracing starts in on this CPU */
    uint32_t cpu;
    int32_t pid, tid;
};

struct pd_aux { /* AUXTRACE: PT bytes of one CPU; `queue` = perf's decoder queue (idx) */
    uint32_t cpu, queue;
    const uint8_t *data;
    size_t len;
    bool lost_before; /* trace was lost before these bytes: the AUX record says TRUNCATED */
};

struct pd_spec {
    uint32_t pmu_type;  /* >= 6 (PERF_TYPE_MAX), < 2^31 */
    uint64_t pt_config; /* attr.config of the intel_pt event (PD_PT_CFG_*) */
    bool trace_user, trace_kernel;
    uint32_t nr_cpus;     /* NRCPUS feature; 0: highest CPU + 1 */
    const char *hostname; /* features; NULL: "" */
    const char *osrelease;
    const char *const *cmdline; /* CMDLINE feature, NULL-terminated; NULL: none */
    const char *filter;         /* intel_pt address filter string; NULL: none */
    const struct pd_task *task;
    unsigned ntask;
    const struct pd_map *map;
    unsigned nmap;
    const struct pd_cpu *cpu;
    unsigned ncpu;
    const struct pd_aux *aux;
    unsigned naux;
};

struct pd_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

void pd_buf_free(struct pd_buf *b);

/* the whole perf.data image in *out (freed by the caller): 0, or -1 with a one-line reason
 * (the spec is checked first: nothing is built from a spec perf would misread) */
int pd_build(const struct pd_spec *s, struct pd_buf *out, char *err, size_t errlen);

/* pd_build, then write it to `path` (created or truncated, mode 0644) */
int pd_write_file(const struct pd_spec *s, const char *path, char *err, size_t errlen);

/* ---- the reader: structure of a perf.data image as perf reads it ---- */

#define PD_INFO_MAX_QUEUES 256

struct pd_info {
    uint32_t pmu_type;
    uint64_t pt_config, noretcomp_bit;
    unsigned nattr, nids;
    uint64_t features; /* bits 0..63 of the feature bitmap */
    unsigned nrec;     /* records in the data section */
    unsigned ncomm, nmmap, nitrace, naux, nauxtrace, nround, nid_index, nauxtrace_info;
    unsigned naux_index; /* entries of the AUXTRACE feature (the index) */
    uint64_t aux_bytes;  /* AUXTRACE payload bytes */
    uint64_t queue_bytes[PD_INFO_MAX_QUEUES];
    unsigned nqueue; /* highest queue + 1 */
};

/* 0, or -1 with a one-line reason (what perf would refuse or misread, and where) */
int pd_parse(const uint8_t *p, size_t len, struct pd_info *info, char *err, size_t errlen);

/* ---- code files perf reads through MMAP2 ---- */

struct pd_sym {
    const char *name;
    uint64_t addr, size; /* a function at [addr, addr + size) */
};

/*
 * A minimal ELF64 x86-64 executable: `len` code bytes that ran at `va` as one PT_LOAD
 * segment and one .text section at file offset PD_ELF_CODE_OFF, plus a .symtab of the
 * given functions (those inside [va, va + len)).  Name it in an MMAP2 record with
 * pgoff = PD_ELF_CODE_OFF: perf reads the code from there and its symbols from .symtab.
 */
#define PD_ELF_CODE_OFF 4096u
uint64_t pd_code_elf_offset(uint64_t va); /* where the code starts in the file (the pgoff) */
int pd_code_elf(struct pd_buf *out, uint64_t va, const uint8_t *code, size_t len,
                const struct pd_sym *sym, unsigned nsym, char *err, size_t errlen);

/* write a pd_buf to a file */
int pd_buf_save(const struct pd_buf *b, const char *path, char *err, size_t errlen);

/* ---- from a ptvisor dump (ptt.h) to what goes into perf.data: perf.c ---- */

struct ptt_dump;

#define PD_GUEST_PID 1000         /* the guest as one perf process; CPU n runs tid 1001 + n */
#define PD_MAX_CODE  (1ull << 30) /* code bytes a perf.data may name */

struct pd_src { /* code bytes at va: a dump snapshot, or an ELF file's code (lower precedence) */
    uint64_t va, len;
    const uint8_t *bytes;
    bool from_elf;
};

struct pd_region { /* code perf reads: the sources of one address space, merged */
    uint64_t va, len;
    bool kernel;
    uint8_t *bytes; /* malloc'd */
};

struct pd_range {
    uint64_t va, len;
};

struct pd_plan {
    struct pd_region *region;
    unsigned nregion;
    struct pd_range *conflict; /* snapshots that overlap with different bytes: left out */
    unsigned nconflict;
    uint64_t elf_differs; /* bytes where an ELF file differs from a snapshot (snapshot kept) */
    uint64_t code_bytes;
    struct pd_task task[1 + 64];
    unsigned ntask;
    struct pd_cpu cpu[64];
    unsigned ncpu;
    struct pd_aux *aux; /* pieces of the CPUs' streams between holes, one queue each */
    unsigned naux;
    uint64_t pt_bytes;
    unsigned ncr3; /* distinct CR3s the CPUs saw (all user code is one perf process) */
    bool any_user, any_kernel;
};

/* every user address space of the dump becomes one perf process (pid PD_GUEST_PID), the
 * kernel half its kernel maps; 0, or -1 with a one-line reason */
int pd_plan_dump(const struct ptt_dump *d, const struct pd_src *src, unsigned nsrc,
                 struct pd_plan *p, char *err, size_t errlen);
void pd_plan_free(struct pd_plan *p);

/* the spec of the plan, with the MMAP2 maps the caller made of its regions */
void pd_plan_spec(const struct pd_plan *p, const struct pd_map *map, unsigned nmap,
                  struct pd_spec *s);

#endif
