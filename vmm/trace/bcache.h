/* SPDX-License-Identifier: MIT */
/*
 * The software tracer's decode cache: code-page translations and decoded
 * instructions, so that a guest loop the tracer steps costs neither a guest page walk
 * nor a decode per instruction.  Fixed size, no allocation: it lives inside struct
 * swtrace (one page per vCPU in the VMM, vmm/trace/shim/trace_step.c).  Pure code, run
 * unchanged by the host tests.
 *
 * THE RULE: a hit never gives a different length / class than re-reading the bytes and
 * decoding them would.
 *   Instructions: an entry keeps the instruction's bytes.  Every fetch reads the code
 *     bytes again (through the translation below) and an entry is used only when its
 *     bytes equal the bytes there now, at the same linear address and code size.  The
 *     decode is a function of those bytes and the code size only (x86_classify reads no
 *     byte past the instruction's end: test_bcache checks it), so a hit is the decode.
 *     Code patched at run time (alternatives, static keys, ftrace, self-modifying
 *     code) misses and is decoded again.  No CR3 in the key: the bytes decide, so the
 *     kernel's entries stay good across process switches and two processes' code at
 *     one address can never be confused.
 *   Translations (linear page -> guest-physical page of the code, and of the stack an
 *     event frame is looked for on: bc_read) are a TLB: kept
 *     only while the paging state they were made under (CR0, CR3, CR4, EFER as the
 *     tracer observes them before each instruction) stays exactly the same, and all
 *     dropped after any instruction that invalidates TLB entries or may change paging
 *     (MOV to CR0/CR3/CR4, INVLPG, INVPCID, INVLPGA/INVLPGB: X86_F_MOV_CR,
 *     X86_F_INVLPG), after a step the tracer could not explain (a gap), and when a
 *     window opens.  Failed walks are never kept.  So a guest that remaps a code page
 *     and then invalidates as the SDM requires (Vol. 3A 4.10.4) is read through the new
 *     mapping.  One case differs from a fresh walk, and it is the one where the CPU's
 *     own TLB may differ too: a guest that changes a present mapping and does not
 *     invalidate it (SDM: the CPU may use the old or the new translation).  The
 *     tracer then reads the old page, as a CPU with the old TLB entry would; if that
 *     was not what ran, the next RIP does not fit the instruction and the step is a
 *     gap (OVF), never an invented path.
 *   The code pages in place (gw_mem.map, the VMM's identity-mapped guest RAM): each
 *     translation kept keeps the page it maps as a pointer once it was read in place, and
 *     the page of the last fetch is kept in front of them, read without a copy while the
 *     next instructions stay on it.  They are cached translations, dropped with the TLB
 *     (same rules), and also whenever gw_mem.gen moved (the VMM: an EPT shootdown, after
 *     which the page may no longer be guest RAM).  The bytes are still read, and compared
 *     with the entry's, at every fetch and at every use of a block.
 * With the cache off every fetch is the plain walk and decode (the differential tests
 * run both and compare the packets byte for byte).
 */
#ifndef PTV_BCACHE_H
#define PTV_BCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include "trace/gwalk.h"
#include "trace/x86_class.h"

#ifndef BC_TLB_SIZE
#define BC_TLB_SIZE 32 /* code pages; power of 2 */
#endif
#ifndef BC_INSN_SIZE
#define BC_INSN_SIZE 64 /* instructions kept inside struct bcache; power of 2 */
#endif

struct bc_tlb_entry {
    uint64_t vpn1; /* (linear >> 12) + 1; 0 = empty */
    uint64_t gpa;  /* guest-physical address of the page */
    /* the page read in place (gw_mem.map) while gw_mem.gen is page_gen; NULL: not mapped yet */
    const uint8_t *page;
    uint64_t page_gen;
};

struct bc_insn_entry {
    uint64_t lin;
    struct x86_insn insn; /* insn.len == 0: empty */
    uint8_t cs;           /* enum x86_code_size */
    uint8_t bytes[X86_MAX_INSN];
};

/*
 * A straight-line block (swtrace.h's block stepping): the lengths of its n plain
 * instructions from lin and the bytes of all of them and of the instruction that ends it.
 * Under THE RULE as the instructions are: used only when those bytes are the bytes at lin
 * now (on the code page read in place), and kept only after its own copy of the bytes was
 * decoded again to the very instructions the caller decoded (bc_blk_put), so its lengths
 * are always those of its bytes.
 */
#define BC_BLK_INSNS 16
#define BC_BLK_BYTES 64
struct bc_blk_entry {
    uint64_t lin;
    uint8_t cs;     /* enum x86_code_size */
    uint8_t n;      /* plain instructions (0: the block is its ending instruction alone) */
    uint8_t pbytes; /* theirs */
    uint8_t nbytes; /* theirs and the ending instruction's; 0: empty */
    uint8_t len[BC_BLK_INSNS];
    uint64_t gen; /* moves at every bc_blk_put into this entry: what was kept from it is stale */
    struct x86_insn end; /* the instruction that ends it */
    uint8_t bytes[BC_BLK_BYTES];
};

struct bc_stats {
    uint64_t tlb_hits, tlb_misses;
    uint64_t insn_hits, insn_misses;
    uint64_t insn_stale; /* same address and code size, other bytes (patched code) */
    uint64_t flushes;    /* translations dropped (paging change, MOV CR, INVLPG...) */
    uint64_t hot_hits;   /* fetches from the mapped code page of the last fetch */
    uint64_t blk_hits, blk_misses, blk_kept;
};

struct bcache {
    bool off;   /* every fetch walks and decodes; nothing kept */
    bool keyed; /* key holds the paging state of the translations */
    struct gw_paging key;
    struct bc_tlb_entry tlb[BC_TLB_SIZE];
    /* the code page of the last fetch, read in place (gw_mem.map): a translation like the
     * TLB's, dropped with them, and kept only while gw_mem.gen keeps its value */
    uint64_t hot_vpn1; /* (linear >> 12) + 1; 0 = none */
    uint64_t hot_gen;
    const uint8_t *hot;
    struct bc_insn_entry *insn; /* own[], or the caller's larger table (bc_init) */
    uint32_t insn_mask;         /* entries - 1 */
    struct bc_insn_entry own[BC_INSN_SIZE];
    struct bc_blk_entry *blk; /* the caller's block table (bc_blocks), or NULL: none */
    uint32_t blk_mask;
    struct bc_stats st;
};

/* the largest power of 2 of `size`-byte entries that fits in `bytes`, at most `cap` (a power
 * of 2); 0 where not even 2 fit */
static inline uint64_t bc_pow2_fit(uint64_t bytes, uint64_t size, uint64_t cap)
{
    uint64_t n = 1;
    if (bytes / size < 2)
        return 0;
    while (n * 2 <= bytes / size && n < cap)
        n *= 2;
    return n;
}

/*
 * Empty, on or off (off: bc_fetch is gw_read + x86_classify, as without a cache).  mem /
 * bytes: an optional larger instruction table the caller owns (the largest power of 2 of
 * entries that fits is used, when that is more than BC_INSN_SIZE); NULL / 0: the entries
 * inside struct bcache.  Nothing is ever allocated.
 */
void bc_init(struct bcache *bc, bool on, void *mem, uint64_t bytes);

/* give the cache a block table in mem (the largest power of 2 of entries that fits; none
 * when NULL or too small), emptied; after bc_init, which forgets it */
void bc_blocks(struct bcache *bc, void *mem, uint64_t bytes);

/* the code page read in place (the last fetch's) holds [lin, lin + len) under the paging key
 * *p: its bytes there, or NULL */
static inline const uint8_t *bc_hot_bytes(const struct bcache *bc, const struct gw_mem *m,
                                          const struct gw_paging *p, uint64_t lin, unsigned len)
{
    if (bc->hot_vpn1 != (lin >> 12) + 1 || bc->hot_gen != m->gen || !m->map ||
        (lin & 0xfff) + len > 0x1000 || !bc->keyed || bc->key.cr3 != p->cr3 ||
        bc->key.cr0 != p->cr0 || bc->key.cr4 != p->cr4 || bc->key.efer != p->efer)
        return NULL;
    return bc->hot + (lin & 0xfff);
}

/* [lin, lin + len) on one code page read in place through the cached translations (made under
 * the paging key *p, mapped while gw_mem.gen keeps its value), mapped now if it was not: its
 * bytes there, or NULL (another key, a walk that fails, not guest RAM, across a page) */
const uint8_t *bc_page_bytes(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p,
                             uint64_t lin, unsigned len);

/* bc_page_bytes with the last fetch's page first */
static inline const uint8_t *bc_code_bytes(struct bcache *bc, const struct gw_mem *m,
                                           const struct gw_paging *p, uint64_t lin, unsigned len)
{
    const uint8_t *code = bc_hot_bytes(bc, m, p, lin, len);
    return code ? code : bc_page_bytes(bc, m, p, lin, len);
}

/* the bytes of block entry e are the bytes at its address now (bc_code_bytes) */
static inline bool bc_blk_fresh(struct bcache *bc, const struct gw_mem *m,
                                const struct gw_paging *p, const struct bc_blk_entry *e)
{
    const uint8_t *code = bc_code_bytes(bc, m, p, e->lin, e->nbytes);
    if (!code)
        return false;
    uint64_t x, y, diff = 0;
    unsigned i = 0, nb = e->nbytes;
    if (nb >= 8) { /* 8 bytes at a time, the last 8 overlapping: all inside [code, code + nb) */
        for (; i + 8 < nb; i += 8) {
            __builtin_memcpy(&x, e->bytes + i, 8);
            __builtin_memcpy(&y, code + i, 8);
            diff |= x ^ y;
        }
        __builtin_memcpy(&x, e->bytes + nb - 8, 8);
        __builtin_memcpy(&y, code + nb - 8, 8);
        diff |= x ^ y;
    } else
        for (; i < nb; i++)
            diff |= e->bytes[i] ^ code[i];
    return !diff;
}

static inline unsigned bc_blk_slot(const struct bcache *bc, uint64_t lin)
{
    return (unsigned)(lin ^ (lin >> 7) ^ (lin >> 13)) & bc->blk_mask;
}

/* the block at lin (code size cs, paging *p) whose bytes are those there now (bc_code_bytes), or
 * NULL */
static inline const struct bc_blk_entry *bc_blk_get(struct bcache *bc, const struct gw_mem *m,
                                                    const struct gw_paging *p, uint64_t lin,
                                                    enum x86_code_size cs)
{
    if (!bc->blk)
        return NULL;
    const struct bc_blk_entry *e = &bc->blk[bc_blk_slot(bc, lin)];
    if (!e->nbytes || e->lin != lin || e->cs != (uint8_t)cs || !bc_blk_fresh(bc, m, p, e)) {
        bc->st.blk_misses++;
        return NULL;
    }
    bc->st.blk_hits++;
    return e;
}

/* keep the block the caller decoded at lin: in[0..n-1] its plain instructions, in[n] the one
 * that ends it, all on one code page read in place; kept only when the copy of their bytes
 * decodes to exactly in[] (nothing changed them meanwhile) and it fits an entry: the entry, or
 * NULL */
const struct bc_blk_entry *bc_blk_put(struct bcache *bc, const struct gw_mem *m,
                                      const struct gw_paging *p, uint64_t lin,
                                      enum x86_code_size cs, const struct x86_insn *in, unsigned n);

/* forget every translation (instructions stay: their bytes are checked at each use) */
void bc_flush(struct bcache *bc);

/* the instruction that just ran (or was about to) was *in: flush if it may have changed
 * translations (MOV CR, INVLPG-class) */
void bc_retired(struct bcache *bc, const struct x86_insn *in);

/*
 * The instruction at linear `lin` executed with code size `cs` under paging *p: true and
 * *out when X86_MAX_INSN bytes (or as many as are readable before an unmapped page)
 * decode to an instruction; false when nothing is readable or the bytes do not decode.
 * Same answer as the plain walk + decode, whether the cache is on or off.
 */
bool bc_fetch(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
              enum x86_code_size cs, struct x86_insn *out);

/* gw_read through the cached translations (the stepping logic's event-frame reads): 0, or
 * nonzero when not all len bytes could be read */
int bc_read(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
            void *buf, unsigned len);

/*
 * bc_fetch's common case, inline: the paging key unchanged, lin on the code page read in
 * place (all 15 bytes on it), and an entry whose bytes are the bytes there now.  True with *out
 * as bc_fetch would give it; false: nothing decided, call bc_fetch.
 */
static inline bool bc_fetch_hot(struct bcache *bc, const struct gw_mem *m,
                                const struct gw_paging *p, uint64_t lin, enum x86_code_size cs,
                                struct x86_insn *out)
{
    const uint8_t *code = bc_hot_bytes(bc, m, p, lin, X86_MAX_INSN);
    if (!code)
        return false;
    const struct bc_insn_entry *e =
        &bc->insn[(unsigned)(lin ^ (lin >> 6) ^ (lin >> 12)) & bc->insn_mask];
    if (e->lin != lin || e->cs != (uint8_t)cs || !e->insn.len)
        return false;
    for (unsigned i = 0; i < e->insn.len; i++)
        if (e->bytes[i] != code[i])
            return false;
    bc->st.hot_hits++;
    bc->st.insn_hits++;
    *out = e->insn;
    return true;
}

/* bc_fetch with its common case inline */
static inline bool bc_fetch_fast(struct bcache *bc, const struct gw_mem *m,
                                 const struct gw_paging *p, uint64_t lin, enum x86_code_size cs,
                                 struct x86_insn *out)
{
    return bc_fetch_hot(bc, m, p, lin, cs, out) || bc_fetch(bc, m, p, lin, cs, out);
}

/* linear -> guest-physical through the cached translations (as gw_translate) */
int bc_translate(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
                 uint64_t *gpa);

#endif
