/* SPDX-License-Identifier: MIT */
/*
 * What `ptvisor-trace extract`'s reassembly core (fx.c) builds and its output side (fx_out.c:
 * the report, the list and the dump directory) reads: findings, blocks, streams, sections
 * and dumps, as fx.c's header comment describes them.  Internal to those two files.
 */
#ifndef PTT_FX_INT_H
#define PTT_FX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame_dec.h"

#define HASH_SIZE 1024

/* ---- findings ---- */
struct msg {
    unsigned long line; /* 0: not tied to a line (sorted last) */
    bool note;          /* harmless (hidden by -q) */
    char *text;
};

struct msgs {
    struct msg *m;
    size_t n, cap;
};

/* fx.c's helpers that fx_finish.c uses too: memory (exit(1) when there is none), a finding,
 * a stream's name, the report of a pending run of duplicate DATA frames */
void *fx_xrealloc(void *p, size_t n);
void *fx_xcalloc(size_t n, size_t s);
void fx_say(struct msgs *ms, unsigned long line, bool note, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define GROW(v, n, cap)                                                                            \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? 2 * (cap) : 8;                                                         \
            (v) = fx_xrealloc((v), (cap) * sizeof(*(v)));                                          \
        }                                                                                          \
    } while (0)

/* ---- blocks, streams, sections, dumps ---- */
enum { BLK_PARTIAL, BLK_OK, BLK_BAD, BLK_DROPPED };

struct blk {
    uint64_t off;
    uint32_t raw, crc, enc;
    bool lz4;
    int state;
    uint8_t *ebuf, *have; /* while partial: encoded bytes and which of them came */
    uint32_t got;
    uint8_t *data; /* raw bytes once verified */
    unsigned long line0, line1;
};

struct strm {
    struct blk **b; /* sorted by key */
    size_t n, cap;
    /* assembled (fx_finish) */
    struct fx_seg *seg;
    size_t nseg, segcap;
    uint64_t len, have, missing;
    bool known_len, conflict, used;
    int crc;
};

struct seqent {
    uint64_t seq;
    unsigned long line;
};

struct sect {
    bool guest; /* a guest note's records (types b, d, e), not the VMM's */
    uint32_t dump, cpu;
    struct sect *hnext; /* hash chain of the latest section per key */
    struct sect *older; /* the section this one replaced for its key */
    unsigned long line0, line1;
    char **bpart;
    unsigned long *bline;
    unsigned bn;
    struct seqent *seq; /* DATA frames: sequence number, line */
    size_t nseq, capseq;
    char **epart; /* the latest END record */
    unsigned long *eline;
    unsigned en;
    struct strm st[FRAME_MAX_STREAMS];
    struct msgs msgs;
    uint64_t frames_ok, frames_bad, frames_missing;
    /* a run of duplicate DATA frames, reported as one finding */
    unsigned long dup_l0, dup_l1;
    uint64_t dup_n, dup_s0, dup_s1;
    /* fx_finish */
    struct frame_meta *meta;
    struct frame_note *note; /* guest: its BEGIN record */
    struct frame_endrec *end;
    bool boot_known;
    uint32_t boot;
    int dumpidx;
};

/* what the guest sent beside the VMM's dumps (section 12 of the protocol), or a console line
 * of ptvisor-ctl naming a dump's program */
struct gnote {
    enum frame_note_kind kind;
    unsigned long line0, line1;
    /* kallsyms: the symbols as /proc/kallsyms text (malloc'd) */
    char *text;
    size_t len;
    unsigned nsym;
    uint64_t entry; /* entry_SYSCALL_64's address in it, 0: none */
    /* comm */
    uint32_t dump;
    bool has_pid, from_console;
    uint64_t pid;
    char comm[FRAME_COMM_MAX + 1];
};

struct dump {
    uint32_t boot, id;
    bool boot_known;
    struct sect **s;
    size_t n, cap;
    unsigned long line0, line1;
    struct msgs msgs;
    int status;
    bool complete;
    int kallsyms, comm; /* the gnote each one takes (fx_finish), -1: none */
};

struct fx {
    struct sect *hash[HASH_SIZE];
    struct sect **all; /* creation order */
    size_t nall, capall;
    struct dump *d;
    size_t nd, capd;
    struct sect *last;  /* section of the last valid frame */
    struct msg *orphan; /* bad lines before any valid frame */
    size_t norphan, caporphan;
    struct msgs global;
    struct gnote *note;
    size_t nnote, capnote;
    struct frame_line fl;
    unsigned long lines, frame_lines;
};

const char *fx_sname(unsigned stream, char *buf, size_t len);
void fx_dup_flush(struct sect *s);

#endif
