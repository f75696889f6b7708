/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: the host tool that turns a serial log into traces a user can read
 * (docs/serial-protocol.md).  One binary, one subcommand per file:
 *
 *   extract LOG -o DIR      extract.c   serial log -> dump directory (below)
 *   decode DIR              decode.c    instruction flow with symbols (perf-script-like)
 *   stacks DIR              stacks.c    folded call stacks
 *   flamegraph DIR -o SVG   flame.c     self-contained SVG
 *   summary DIR             summary.c   instructions, branches, top functions
 *   perf DIR -o perf.data   perf.c      perf.data with the trace as AUX data
 *
 * Every command that reads a trace accepts either a dump directory or a serial log (it then
 * extracts into a temporary directory first).
 *
 * The dump directory (the contract between `extract` and everything that reads a trace):
 *
 *   DIR/dump.meta      text, one "key value" per line, keys in any order, unknown keys ignored:
 *                        protocol N        frame protocol version
 *                        dump N            dump id (the VMM counts dumps since boot)
 *                        reason S          vmcall | crash | serial | boot
 *                        source S          hardware | software
 *                        cpus N            CPUs with a trace in this dump
 *                        tsc_hz N          0 when unknown
 *                        kernel_base 0xX   guest kernel text base as the VMM saw it (0: unknown)
 *                        syscall_entry 0xX the guest's IA32_LSTAR when the VMM read it (optional):
 *                                          with -k/-m, its distance to entry_SYSCALL_64 is the
 *                                          KASLR offset where kernel_base is unknown
 *                        complete yes|no   END seen and every frame accounted for
 *                        frames_ok N, frames_bad N, frames_missing N
 *                        comm NAME         the traced program's name as the guest kernel
 *                                          knows it (1..15 printable bytes, no space), when
 *                                          the guest named it (optional)
 *                        pid N             its process id in the guest (optional)
 *   DIR/cpuN.pt        the PT bytes of CPU N, oldest first (the VMM starts a wrapped ring's
 *                      dump at a PSB); a range lost in transit is absent, never zero-filled:
 *                      cpuN.meta says which byte ranges are missing
 *   DIR/cpuN.meta      cpu N, bytes N, ring_size N, wrapped 0|1, overflows N, filters S,
 *                      cr3 0xX (one line per CR3 seen), missing OFF+LEN (one line per hole),
 *                      crc ok|bad|unknown
 *                      bytes: the length of the stream as the VMM sent it, holes included;
 *                      missing OFF+LEN: OFF and LEN in that stream's offsets (decimal, or hex
 *                      with 0x), sorted, not overlapping; cpuN.pt is the stream with the holes
 *                      cut out, so its size is bytes - the sum of LEN.  Readers decode the
 *                      pieces between holes separately (never across a hole).
 *   DIR/snapshots      one line per code snapshot: "VA_HEX LEN CR3_HEX|any FILE"
 *                      (FILE relative to DIR, raw bytes that ran at VA in address space CR3;
 *                      VA_HEX, CR3_HEX: hex, 0x optional; LEN: decimal, or hex with 0x; the
 *                      file holds exactly LEN bytes; FILE has no "..", is not absolute, and
 *                      resolves inside DIR)
 *   DIR/snap/...       the snapshot files
 *   DIR/crash.txt      the crash report (guest registers, exit ring, LBR), when reason = crash
 *   DIR/kallsyms       the guest kernel's code symbols in /proc/kallsyms form (runtime
 *                      addresses), when the guest sent them for the dump's boot (optional)
 *   DIR/console.log    the log with every frame line removed (the guest's console as it was)
 *
 * `extract` without --dump / --last writes every dump of a log into TOP/NAME (NAME =
 * dump-ID-REASON, see fx_dump_name) and lists them in TOP/dumps, one "NAME ID BOOT REASON
 * STATUS" line per dump in log order; the reading commands given TOP read its last dump.
 */
#ifndef PTV_TOOLS_PTT_H
#define PTV_TOOLS_PTT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PTT_MAX_CPUS 64
#define PTT_CR3_ANY  0xffffffffffffffffull

struct ptt_snap {
    uint64_t va, len, cr3; /* cr3: PTT_CR3_ANY = every address space */
    char *path;            /* absolute or DIR-relative path of the bytes */
};

struct ptt_hole {
    uint64_t off, len; /* a range of the CPU's stream lost in transit (stream offsets) */
};

struct ptt_cpu {
    unsigned cpu;
    uint8_t *pt; /* cpuN.pt, malloc'd */
    size_t pt_len;
    uint64_t ring_size, overflows;
    int wrapped;
    uint64_t *cr3s;
    unsigned ncr3;
    unsigned holes;        /* "missing" lines */
    struct ptt_hole *hole; /* [holes], sorted by off; malloc'd */
    int crc_bad;           /* "crc bad" */
};

struct ptt_dump {
    char *dir;
    unsigned protocol, dump_id;
    char reason[16], source[16];
    uint64_t tsc_hz, kernel_base, syscall_entry;
    int complete;
    char comm[16]; /* "": not named */
    bool has_pid;
    uint64_t pid;
    unsigned ndumps; /* dumps in what was given (a log, or an extract's TOP directory) */
    char *given;     /* what was given, when it held several dumps (for messages) */
    struct ptt_cpu cpu[PTT_MAX_CPUS];
    unsigned ncpu;
    struct ptt_snap *snap;
    unsigned nsnap;
};

/* a hex digit's value (either case), or -1 */
static inline int ptt_hexdig(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* dump.c: load DIR (or extract LOG into a temporary directory first); 0, or -1 with a
 * one-line reason in err */
int ptt_dump_load(const char *dir_or_log, struct ptt_dump *d, char *err, size_t errlen);
void ptt_dump_free(struct ptt_dump *d);

/* subcommands: argv[0] is the subcommand name; return the process exit status */
int ptt_cmd_extract(int argc, char **argv);
int ptt_cmd_decode(int argc, char **argv);
int ptt_cmd_stacks(int argc, char **argv);
int ptt_cmd_flamegraph(int argc, char **argv);
int ptt_cmd_summary(int argc, char **argv);
int ptt_cmd_perf(int argc, char **argv);

/* extract.c, for ptt_dump_load on a log: its last dump into dir; *ndumps (may be NULL): the
 * dumps the log holds; 0, or -1 with a one-line reason */
int ptt_extract_log(const char *log, const char *dir, int quiet, unsigned *ndumps, char *err,
                    size_t errlen);

#endif
