/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace, the reading side (decode, stacks, flamegraph, summary): the options they
 * share, the code image a trace decodes against (image.c), the instruction walker that
 * drives libipt over every CPU of a dump (decode.c), and dump.c's text parsers (public for
 * the fuzzer, tests/fuzz/fuzz_ptt_dump.c).
 *
 * Code bytes, in order of precedence (docs: `ptvisor-trace --help`, "CODE BYTES"):
 *   1. the dump's snapshots (the bytes that ran), libipt file sections, per CR3 or any;
 *   2. the ELF files named by the user (-e FILE[@BASE], -k vmlinux), PT_LOAD segments with
 *      PF_X, served by libipt's read callback, i.e. only where no snapshot covers the address
 *      in the address space being decoded.
 * Where both cover an address and the bytes differ, one warning per dump gives the count.
 */
#ifndef PTV_TOOLS_PTT_IMAGE_H
#define PTV_TOOLS_PTT_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <intel-pt.h>

#include "ptt.h"
#include "symbols.h"

#define PTT_MAX_FILES 64

/* ---- options shared by the reading commands (image.c) ---- */

struct ptt_elf_opt {
    const char *path;
    uint64_t base; /* where the lowest PT_LOAD page of the file is loaded */
    bool has_base;
};

struct ptt_opts {
    const char *cmd;   /* "decode", ... (for messages) */
    const char *input; /* DIR or LOG */
    const char *out;   /* -o FILE, or NULL (stdout) */
    struct ptt_elf_opt elf[PTT_MAX_FILES];
    unsigned nelf;
    const char *kernel; /* -k / --vmlinux FILE */
    const char *map[PTT_MAX_FILES];
    unsigned nmap;
    const char *kallsyms; /* --kallsyms FILE (else the dump's own DIR/kallsyms) */
    bool has_kaslr;
    uint64_t kaslr;     /* --kaslr OFF */
    int cpu;            /* --cpu N, -1: every CPU */
    bool progress;      /* --progress (else only when stderr is a tty) */
    bool quiet;         /* -q: no warnings */
    bool branches;      /* decode --branches */
    bool events;        /* decode --events */
    unsigned top;       /* summary --top N */
    unsigned depth;     /* stacks / flamegraph --depth N */
    bool per_cpu;       /* stacks / flamegraph --per-cpu: a root frame per CPU */
    const char *title;  /* flamegraph --title */
    const char *folded; /* flamegraph --folded FILE (instead of a dump) */
    unsigned width;     /* flamegraph --width PX */
};

/* option letters a command accepts beyond the common ones (-e -k -m --kaslr --cpu -q
 * --progress) */
#define PTT_OPT_OUT      (1u << 0) /* -o FILE */
#define PTT_OPT_BRANCHES (1u << 1)
#define PTT_OPT_EVENTS   (1u << 2)
#define PTT_OPT_TOP      (1u << 3)
#define PTT_OPT_DEPTH    (1u << 4)
#define PTT_OPT_FLAME    (1u << 5) /* --title --folded --width */
#define PTT_OPT_PERCPU   (1u << 6)

/* parse argv (argv[0] = the command); 0, 1 when --help was printed (exit 0), or -1 after a
 * one-line error on stderr (exit 1).  `help` is the command's help text. */
int ptt_opts_parse(int argc, char **argv, unsigned accept, const char *help, struct ptt_opts *o);

/* "ptvisor-trace: CMD: ..." on stderr; returns 1 (the exit status) */
int ptt_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ptt_warn(const struct ptt_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* open -o FILE (or stdout); NULL after a one-line error */
FILE *ptt_open_out(const struct ptt_opts *o);
/* close it; 0, or 1 after a one-line error (a write that failed) */
int ptt_close_out(const struct ptt_opts *o, FILE *f);

/* ---- the image ---- */

struct ptt_seg {
    uint64_t va, len; /* runtime address, bytes in the file */
    const uint8_t *data;
    unsigned file; /* index into ptt_image.file */
};

struct ptt_file {
    char *path;
    void *map;
    size_t size;
};

struct ptt_image {
    struct pt_image *pt;
    struct pt_image_section_cache *iscache; /* the snapshots, kept mapped */
    struct ptt_seg *seg;                    /* ELF code, sorted by va, not overlapping */
    unsigned nseg;
    struct ptt_file file[PTT_MAX_FILES + 1];
    unsigned nfile;
    struct ptt_syms syms;
    uint64_t kaslr;        /* the shift applied to -k / -m */
    const char *kaslr_how; /* where it came from (for messages), NULL: no -k / -m */
    const char *kallsyms;  /* the kallsyms file used, NULL: none (owned by the options or
                            * by kallsyms_path) */
    char *kallsyms_path;   /* DIR/kallsyms, when that is the one */
};

/* the dump's snapshots + the option's ELF files + symbols; 0, or -1 with a one-line reason */
int ptt_image_build(struct ptt_image *im, const struct ptt_dump *d, const struct ptt_opts *o,
                    char *err, size_t errlen);
void ptt_image_free(struct ptt_image *im);

/* ---- the walker (decode.c) ---- */

enum ptt_step_kind {
    PTT_STEP_INSN,  /* an instruction that ran */
    PTT_STEP_ASYNC, /* an interrupt / exception / event: from (not executed) -> to */
    PTT_STEP_GAP,   /* the decode lost the flow here: an error, a hole, an overflow */
    PTT_STEP_EVENT, /* any other libipt event (text in `what`) */
    PTT_STEP_CPU,   /* a CPU's trace begins (cpu) */
};

enum ptt_gap_kind { PTT_GAP_ERROR, PTT_GAP_HOLE, PTT_GAP_OVERFLOW, PTT_GAP_NOSYNC };

struct ptt_step {
    enum ptt_step_kind kind;
    unsigned cpu;
    /* INSN */
    uint64_t ip, cr3;
    uint8_t size;
    enum pt_insn_class iclass;
    enum pt_exec_mode mode;
    const uint8_t *raw;
    bool next_valid; /* next_ip is where the flow went after this instruction */
    bool next_flows; /* ... and the next INSN / ASYNC step continues from there */
    uint64_t next_ip;
    /* ASYNC: ip = from, next_ip = to; GAP and EVENT: */
    enum ptt_gap_kind gap;
    uint64_t offset; /* in cpuN.pt */
    const char *what;
};

/* return nonzero to stop the walk */
typedef int ptt_step_fn(const struct ptt_step *s, void *ctx);

struct ptt_walk_stats {
    uint64_t insns, gaps, bytes;
};

/* every selected CPU of the dump, in CPU order; 0, 1 if a callback stopped it, -1 with a
 * one-line reason in err (only for what prevents any decode: allocation failures) */
int ptt_walk(const struct ptt_dump *d, struct ptt_image *im, const struct ptt_opts *o,
             ptt_step_fn *fn, void *ctx, struct ptt_walk_stats *st, char *err, size_t errlen);

/* the common prologue: options parsed, dump loaded, image built; 0, or the exit status */
struct ptt_session {
    struct ptt_opts o;
    struct ptt_dump d;
    struct ptt_image im;
};
int ptt_session_open(struct ptt_session *s, int argc, char **argv, unsigned accept,
                     const char *help, int *exit_status);
/* the same after ptt_opts_parse into s->o (s otherwise zeroed) */
int ptt_session_load(struct ptt_session *s, int *exit_status);
void ptt_session_close(struct ptt_session *s);

/* branch classes of a decoded instruction (from its raw bytes and libipt's class) */
enum ptt_br {
    PTT_BR_NONE,
    PTT_BR_COND,
    PTT_BR_JMP,
    PTT_BR_JMP_IND,
    PTT_BR_CALL,
    PTT_BR_CALL_IND,
    PTT_BR_RET,
    PTT_BR_FAR, /* far call / jump / return, SYSCALL, SYSRET, INT, IRET, ... */
};
enum ptt_br ptt_branch_of(const struct ptt_step *s);

/* ---- folded call stacks (stacks.c), also the flame graph's input ---- */

struct ptt_node {
    uint32_t parent, name;   /* name: index into ptt_stacks.names */
    uint32_t child, sibling; /* first child, next sibling (0: none; node 0 is the root) */
    uint64_t self, total;
};

struct ptt_stacks {
    struct ptt_node *node;
    uint32_t nnode, capnode;
    uint32_t *hash; /* (parent, name) -> node + 1 */
    uint32_t hsize;
    char **names; /* interned */
    uint32_t nname, capname;
    uint32_t *nhash; /* name -> index + 1 */
    uint32_t nhsize;
    uint32_t *sym_name; /* ptt_syms index -> name + 1 (a cache) */
    size_t nsym;
    /* the walk's state */
    uint32_t cur, base; /* current node; the node stacks start from (root or a CPU frame) */
    unsigned depth, hidden, max_depth;
    bool per_cpu;
    uint64_t total, resets, capped, unmatched;
};

void ptt_stacks_init(struct ptt_stacks *k, unsigned max_depth, bool per_cpu);
/* one walker step (symbols from syms); 0, or -1 when out of memory */
int ptt_stacks_step(struct ptt_stacks *k, struct ptt_syms *syms, const struct ptt_step *s);
/* add folded stacks ("a;b;c COUNT" lines) */
int ptt_stacks_add_folded(struct ptt_stacks *k, const char *text, size_t len, const char *name,
                          char *err, size_t errlen);
/* totals per node (after the steps / adds) */
void ptt_stacks_totals(struct ptt_stacks *k);
/* "a;b;c COUNT" lines, sorted; 0 or -1 (out of memory) */
int ptt_stacks_write_folded(const struct ptt_stacks *k, FILE *f);
void ptt_stacks_free(struct ptt_stacks *k);

/* ---- dump.c's parsers (text, not files; for the loader and the fuzzer) ---- */

/* a whole regular file of at most max bytes, NUL-terminated (malloc'd); 0 or -1 */
int ptt_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen);

/* frames (may be NULL): frames_ok, frames_bad, frames_missing */
int ptt_parse_dump_meta(const char *text, size_t len, struct ptt_dump *d, uint64_t frames[3],
                        char *err, size_t errlen);
/* *bytes: the "bytes" line (stream length, holes included) */
int ptt_parse_cpu_meta(const char *text, size_t len, struct ptt_cpu *c, uint64_t *bytes, char *err,
                       size_t errlen);
/* the snapshot list; paths are checked for shape ("..", absolute), not opened */
int ptt_parse_snapshots(const char *text, size_t len, struct ptt_dump *d, char *err, size_t errlen);

#endif
