/* SPDX-License-Identifier: MIT */
/* The software tracer's decode cache (bcache.h: the invalidation rule is there). */
#include "trace/bcache.h"
#include "lib/ptv_string.h"

void bc_init(struct bcache *bc, bool on, void *mem, uint64_t bytes)
{
    uint64_t n = BC_INSN_SIZE;
    memset(bc, 0, sizeof(*bc));
    bc->off = !on;
    bc->insn = bc->own;
    if (mem && bytes / sizeof(struct bc_insn_entry) > n) {
        n = bc_pow2_fit(bytes, sizeof(struct bc_insn_entry), 1u << 24);
        bc->insn = mem;
        memset(mem, 0, n * sizeof(struct bc_insn_entry));
    }
    bc->insn_mask = (uint32_t)(n - 1);
}

void bc_flush(struct bcache *bc)
{
    memset(bc->tlb, 0, sizeof(bc->tlb));
    bc->hot_vpn1 = 0; /* the mapped code page is a translation too */
    bc->st.flushes++;
}

void bc_retired(struct bcache *bc, const struct x86_insn *in)
{
    if (in->flags & (X86_F_MOV_CR | X86_F_MOV_CR3 | X86_F_INVLPG))
        bc_flush(bc);
}

/* the translations are kept only under the exact paging state they were made in */
static inline __attribute__((always_inline)) void check_key(struct bcache *bc,
                                                            const struct gw_paging *p)
{
    if (bc->keyed && bc->key.cr3 == p->cr3 && bc->key.cr0 == p->cr0 && bc->key.cr4 == p->cr4 &&
        bc->key.efer == p->efer)
        return;
    if (bc->keyed)
        bc_flush(bc);
    bc->key = *p;
    bc->keyed = true;
}

static int translate(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p,
                     uint64_t lin, uint64_t *gpa)
{
    uint64_t vpn1 = (lin >> 12) + 1;
    struct bc_tlb_entry *e = &bc->tlb[(lin >> 12) & (BC_TLB_SIZE - 1)];
    if (e->vpn1 == vpn1) {
        bc->st.tlb_hits++;
        *gpa = e->gpa | (lin & 0xfff);
        return 0;
    }
    bc->st.tlb_misses++;
    int rc = gw_translate(m, p, lin, gpa);
    if (rc == 0) { /* failed walks are never kept: a page mapped later is seen at once */
        e->vpn1 = vpn1;
        e->gpa = *gpa & ~0xfffull;
        e->page = NULL;
    }
    return rc;
}

/* the page at lin read in place, through the cached translation (the caller checked the key),
 * kept in its TLB entry while gw_mem.gen keeps its value: or NULL */
static const uint8_t *tlb_page(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p,
                               uint64_t lin)
{
    uint64_t gpa;
    if (translate(bc, m, p, lin, &gpa))
        return NULL;
    struct bc_tlb_entry *e = &bc->tlb[(lin >> 12) & (BC_TLB_SIZE - 1)];
    if (!e->page || e->page_gen != m->gen) {
        e->page = m->map(m->ctx, e->gpa);
        e->page_gen = m->gen;
    }
    return e->page;
}

const uint8_t *bc_page_bytes(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p,
                             uint64_t lin, unsigned len)
{
    if (bc->off || !m->map || (lin & 0xfff) + len > 0x1000)
        return NULL;
    check_key(bc, p);
    const uint8_t *page = tlb_page(bc, m, p, lin);
    return page ? page + (lin & 0xfff) : NULL;
}

int bc_translate(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
                 uint64_t *gpa)
{
    if (bc->off)
        return gw_translate(m, p, lin, gpa);
    check_key(bc, p);
    return translate(bc, m, p, lin, gpa);
}

/* gw_read through the cached translations (the caller checked the key): bytes read */
static unsigned read_code(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p,
                          uint64_t lin, uint8_t *buf, unsigned len)
{
    unsigned done = 0;
    struct range_walk w;
    range_for_each(&w, lin, len, 4096, gw_space(p))
    {
        uint64_t gpa;
        if (translate(bc, m, p, w.addr, &gpa) || !m->read(m->ctx, gpa, buf + done, (unsigned)w.len))
            break;
        done += (unsigned)w.len;
    }
    return done;
}

int bc_read(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
            void *buf, unsigned len)
{
    if (bc->off)
        return gw_read(m, p, lin, buf, len, NULL);
    check_key(bc, p);
    return read_code(bc, m, p, lin, buf, len) == len ? 0 : GW_E_MEM;
}

static unsigned insn_slot(const struct bcache *bc, uint64_t lin)
{
    /* consecutive instructions of a 64-byte block never collide; blocks are spread (the
     * same hash as bc_fetch_hot's, bcache.h) */
    return (unsigned)(lin ^ (lin >> 6) ^ (lin >> 12)) & bc->insn_mask;
}

/* the instruction whose bytes start at code[0] (got of them readable, a copy or the mapped
 * page): from the entry when its bytes are these, else decoded and kept */
static bool decode_miss(struct bcache *bc, struct bc_insn_entry *e, const uint8_t *code,
                        unsigned got, uint64_t lin, enum x86_code_size cs, struct x86_insn *out);

static inline __attribute__((always_inline)) bool decode(struct bcache *bc, const uint8_t *code,
                                                         unsigned got, uint64_t lin,
                                                         enum x86_code_size cs,
                                                         struct x86_insn *out)
{
    struct bc_insn_entry *e = &bc->insn[insn_slot(bc, lin)];
    if (e->insn.len && e->lin == lin && e->cs == (uint8_t)cs && e->insn.len <= got) {
        unsigned i = 0;
        while (i < e->insn.len && e->bytes[i] == code[i])
            i++;
        if (i == e->insn.len) {
            bc->st.insn_hits++;
            *out = e->insn;
            return true;
        }
        bc->st.insn_stale++;
    }
    return decode_miss(bc, e, code, got, lin, cs, out);
}

/* decode() without a usable entry: classify, and keep it in e */
static bool decode_miss(struct bcache *bc, struct bc_insn_entry *e, const uint8_t *code,
                        unsigned got, uint64_t lin, enum x86_code_size cs, struct x86_insn *out)
{
    bc->st.insn_misses++;
    /* decoded from a copy: bytes another CPU changes meanwhile cannot make the entry's
     * bytes differ from the bytes its decode saw */
    uint8_t copy[X86_MAX_INSN];
    if (got > X86_MAX_INSN) /* bc_blk_put decodes from a block's bytes: up to BC_BLK_BYTES */
        got = X86_MAX_INSN;
    memcpy(copy, code, got);
    if (x86_classify(copy, got, cs, out) != 0)
        return false;
    e->lin = lin;
    e->cs = (uint8_t)cs;
    e->insn = *out;
    memcpy(e->bytes, copy, out->len);
    return true;
}

bool bc_fetch(struct bcache *bc, const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
              enum x86_code_size cs, struct x86_insn *out)
{
    uint8_t code[X86_MAX_INSN];
    unsigned got = 0;

    if (bc->off) {
        /* the instruction may end before a page the guest has not mapped: classify
         * what could be read, X86_E_SHORT says whether that was enough */
        gw_read(m, p, lin, code, sizeof(code), &got);
        return got && x86_classify(code, got, cs, out) == 0;
    }
    check_key(bc, p);
    /* the code page in place: all 15 bytes on it, through a translation of this TLB made
     * under the same paging key and a mapping of the same generation */
    if (m->map && (lin & 0xfff) <= 0x1000 - X86_MAX_INSN) {
        uint64_t vpn1 = (lin >> 12) + 1;
        if (bc->hot_vpn1 == vpn1 && bc->hot_gen == m->gen) {
            bc->st.hot_hits++;
            return decode(bc, bc->hot + (lin & 0xfff), X86_MAX_INSN, lin, cs, out);
        }
        bc->hot_vpn1 = 0;
        const uint8_t *page = tlb_page(bc, m, p, lin);
        if (page) {
            bc->hot = page;
            bc->hot_vpn1 = vpn1;
            bc->hot_gen = m->gen;
            return decode(bc, page + (lin & 0xfff), X86_MAX_INSN, lin, cs, out);
        }
    }
    got = read_code(bc, m, p, lin, code, sizeof(code));
    if (!got)
        return false;
    return decode(bc, code, got, lin, cs, out);
}

/* ---- straight-line blocks (bcache.h) ---- */

void bc_blocks(struct bcache *bc, void *mem, uint64_t bytes)
{
    uint64_t n = mem ? bc_pow2_fit(bytes, sizeof(struct bc_blk_entry), 1u << 20) : 0;
    bc->blk = NULL;
    bc->blk_mask = 0;
    if (!n || bc->off)
        return;
    memset(mem, 0, n * sizeof(struct bc_blk_entry));
    bc->blk = mem;
    bc->blk_mask = (uint32_t)(n - 1);
}

static struct bc_blk_entry *blk_slot(const struct bcache *bc, uint64_t lin)
{
    return &bc->blk[bc_blk_slot(bc, lin)];
}

const struct bc_blk_entry *bc_blk_put(struct bcache *bc, const struct gw_mem *m,
                                      const struct gw_paging *p, uint64_t lin,
                                      enum x86_code_size cs, const struct x86_insn *in, unsigned n)
{
    unsigned nbytes = 0;
    if (!bc->blk || n > BC_BLK_INSNS)
        return NULL;
    for (unsigned i = 0; i <= n; i++)
        nbytes += in[i].len;
    const uint8_t *code = nbytes > BC_BLK_BYTES ? NULL : bc_code_bytes(bc, m, p, lin, nbytes);
    if (!code)
        return NULL;
    struct bc_blk_entry *e = blk_slot(bc, lin);
    e->nbytes = 0;
    e->gen++;
    memcpy(e->bytes, code, nbytes);
    /* the copy decoded again (from the instruction entries, bytes compared): the block is
     * what its bytes are, whatever changed the page meanwhile */
    unsigned off = 0;
    for (unsigned i = 0; i <= n; i++) {
        struct x86_insn d;
        if (!decode(bc, e->bytes + off, nbytes - off, lin + off, cs, &d) || d.len != in[i].len ||
            d.branch != in[i].branch || d.flags != in[i].flags || d.rel != in[i].rel)
            return NULL;
        if (i < n)
            e->len[i] = d.len;
        else
            e->end = d;
        off += d.len;
    }
    e->lin = lin;
    e->cs = (uint8_t)cs;
    e->nbytes = (uint8_t)nbytes;
    e->pbytes = (uint8_t)(nbytes - in[n].len);
    e->n = (uint8_t)n;
    bc->st.blk_kept++;
    return e;
}
