/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: reading the serial frame protocol (docs/serial-protocol.md, version 1).
 *
 *   frame_dec.c  one log line -> a validated frame (or the one-line reason why not);
 *                BEGIN / END records -> their metadata; one block -> its raw bytes
 *                (LZ4 blocks through Debian's liblz4, an oracle independent of the VMM's
 *                compressor); its own CRC32, derived from the polynomial at run time.
 *   extract.c    the extractor core below (sections, blocks by offset, dumps, reports)
 *                and the `extract` subcommand that writes the dump directory of ptt.h.
 *
 * Only the protocol's constants and record entries are shared with the VMM, through
 * include/ptv/frame.h (one spelling of the wire format); none of the VMM's code or headers is
 * used by the tool.
 */
#ifndef PTV_TOOLS_FRAME_DEC_H
#define PTV_TOOLS_FRAME_DEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ptv/frame.h"

/* ---- one line ---- */

enum frame_kind {
    FRAME_NONE = 0, /* no "@PTV" in the line: console output */
    FRAME_BAD,      /* a frame that failed validation: why[] says how */
    FRAME_BEGIN,
    FRAME_DATA,
    FRAME_END,
};

struct frame_line {
    enum frame_kind kind;
    bool guest;      /* a guest record (types b, d, e: docs/serial-protocol.md section 12) */
    size_t at;       /* offset of "@PTV" in the line: the text before it is console output */
    bool prefix_bad; /* FRAME_BAD at "@PTV" itself: likely console text, kept whole */
    uint32_t dump, cpu;
    /* BEGIN / END: part `part` of `nparts`, body = its key=value tokens */
    unsigned part, nparts;
    char body[FRAME_LINE_MAX];
    /* DATA: plen bytes at `pos` of the encoded block (raw bytes [off, off + rawlen) of
     * `stream`, CRC32 crc, LZ4 with enclen bytes or stored) */
    uint64_t seq, off;
    unsigned stream;
    uint32_t rawlen, crc, enclen, pos, plen;
    bool lz4;
    uint8_t payload[FRAME_LINE_MAX];
    char why[120];
};

/* s[0..n) is one line without its '\n' ('\r' and blanks at its end are ignored) */
enum frame_kind frame_parse(const char *s, size_t n, struct frame_line *f);

/* CRC-32 as frame_crc32() in the VMM (IEEE, zlib's): an independent implementation */
uint32_t frame_dec_crc32(uint32_t crc, const void *p, size_t n);

/* base 85 of the protocol: decode n characters into out (room for n bytes); the byte count,
 * or -1 (a character outside the alphabet, a group above 2^32 - 1, a 1-character group) */
long frame_b85_decode(const char *s, size_t n, uint8_t *out);

/* ---- records ---- */

struct frame_meta { /* a BEGIN record */
    uint32_t boot, ncpus;
    enum frame_reason reason;
    enum frame_source source;
    uint32_t filter;
    uint64_t filter_cr3, ring, overflows, tsc_hz, kernel_base, trace_len, crash_len;
    uint64_t syscall_entry; /* optional key lstar= (0: not given) */
    bool wrapped;
    unsigned nranges, ncr3, nsnap;
    struct frame_range range[FRAME_MAX_RANGES];
    uint64_t cr3[FRAME_MAX_CR3S];
    struct frame_snap snap[FRAME_MAX_SNAPS];
};

struct frame_endrec { /* an END record */
    uint64_t frames;
    struct {
        bool present, crc_known;
        uint64_t len;
        uint32_t crc;
    } st[FRAME_MAX_STREAMS];
};

/* bodies of parts 1..n in order; 0, or -1 with the reason in why */
int frame_meta_parse(const char *const *body, unsigned n, struct frame_meta *m, char *why,
                     size_t whylen);
int frame_end_parse(const char *const *body, unsigned n, struct frame_endrec *r, char *why,
                    size_t whylen);

/* a guest note's BEGIN record (type b): what it carries */
enum frame_note_kind { FRAME_NOTE_KALLSYMS = 1, FRAME_NOTE_COMM };

#define FRAME_COMM_MAX 15 /* the kernel's TASK_COMM_LEN - 1 */

struct frame_note {
    enum frame_note_kind kind;
    uint64_t len;           /* t=: bytes of the note's data stream */
    bool has_dump, has_pid; /* comm: the dump it names, the process */
    uint32_t dump;
    uint64_t pid;
    char comm[FRAME_COMM_MAX + 1]; /* printable ASCII, no space */
};

/* a note's BEGIN record (parts 1..n); 0, or -1 with the reason in why (an unknown kind
 * included: the note is then ignored) */
int frame_note_parse(const char *const *body, unsigned n, struct frame_note *nt, char *why,
                     size_t whylen);

/* the data of a kallsyms note ("+DELTA TYPE NAME[\t[MODULE]]" lines, each address the
 * previous one plus DELTA, from 0) as /proc/kallsyms text in *out (malloc'd); *entry: the
 * address of entry_SYSCALL_64 in it (0: none), *nsym: its lines; 0, or -1 with a one-line
 * reason */
int frame_kallsyms_text(const char *in, size_t n, char **out, size_t *outlen, uint64_t *entry,
                        unsigned *nsym, char *err, size_t errlen);

const char *frame_reason_name(enum frame_reason r);
const char *frame_source_name(enum frame_source s);
/* "trace", "crash", "snapshot N" */
const char *frame_stream_name(unsigned stream, char *buf, size_t len);

/* one whole block: enc[0..enclen) -> out[0..rawlen), checked against crc; 0, or -1 with the
 * reason (LZ4 error, wrong length, CRC mismatch) */
int frame_block_decode(const uint8_t *enc, uint32_t enclen, bool lz4, uint32_t rawlen, uint32_t crc,
                       uint8_t *out, char *why, size_t whylen);

/* ---- the extractor core (extract.c): feed lines, finish, read back dumps ---- */

struct fx;

struct fx_seg { /* assembled bytes of a stream */
    uint64_t off, len;
    const uint8_t *p;
};

struct fx_stream_view {
    bool known_len;     /* the BEGIN record gave the length */
    uint64_t len;       /* declared length (or the end of the data when unknown) */
    struct fx_seg *seg; /* present ranges, ascending, not adjacent-merged */
    size_t nseg;
    uint64_t have, missing; /* bytes */
    int crc;                /* 1 whole-stream CRC32 matches END, 0 mismatch, -1 unknown */
};

struct fx *fx_new(void);
void fx_free(struct fx *x);
/* one line of the log (without '\n'), numbered from 1; console text goes to `console` */
void fx_line(struct fx *x, const char *s, size_t n, unsigned long lineno, FILE *console);
/* after the last line: group sections into dumps, assemble every stream */
void fx_finish(struct fx *x);
unsigned fx_ndumps(const struct fx *x);
/* frame lines read so far (progress); dump i's id */
unsigned long fx_frame_lines(const struct fx *x);
uint32_t fx_dump_id(const struct fx *x, unsigned i);
/* status of dump i: 0 complete, 2 incomplete but usable, 1 nothing usable */
int fx_status(const struct fx *x, unsigned i);
/* the index of the last dump with id `dump_id`, or of the last dump (dump_id < 0); -1: none */
int fx_pick(const struct fx *x, long long dump_id);
/* every finding of dump i, by line number; the summary; `quiet`: no notes on harmless things */
void fx_report(const struct fx *x, unsigned i, FILE *out, bool quiet);
/* the same in two parts: the findings of no dump (bad lines before any frame, guest notes),
 * and one dump's (for a report of every dump) */
void fx_report_global(const struct fx *x, FILE *out, bool quiet);
void fx_report_dump(const struct fx *x, unsigned i, FILE *out, bool quiet);
/* one line per dump */
void fx_list(const struct fx *x, FILE *out);
/* the directory name of dump i when every dump is extracted: dump-ID-REASON, with -bBOOT (or
 * -nINDEX) where another dump of the log has the same id and reason */
void fx_dump_name(const struct fx *x, unsigned i, char *buf, size_t len);
/* its line in that directory's index: "NAME ID BOOT REASON STATUS" */
void fx_dump_line(const struct fx *x, unsigned i, FILE *out);
/* stream `stream` of CPU section `cpu` of dump i; false when there is no such section */
bool fx_stream(const struct fx *x, unsigned i, uint32_t cpu, unsigned stream,
               struct fx_stream_view *v);
/* write the dump directory of ptt.h (console.log aside; with the guest's kallsyms and the
 * traced program's name where the log has them for this dump); 0, or -1 with the reason */
int fx_write(const struct fx *x, unsigned i, const char *dir, char *why, size_t whylen);

#endif
