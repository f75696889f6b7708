/* SPDX-License-Identifier: MIT */
/* Hardware task switches, emulated: the rules and deviations are in emul/task_switch.h. */
#include <stddef.h>
#include "emul/task_switch.h"

#define AR_UNUSABLE (1u << 16)
#define AR_TYPE(ar) ((ar)&0xfu)
#define AR_S        (1u << 4)
#define AR_DPL(ar)  (((ar) >> 5) & 3u)
#define AR_P        (1u << 7)
#define AR_DB       (1u << 14)
#define AR_G        (1u << 15)

/* descriptor types (SDM Vol. 3A 3.4.5.1, 3.5 Table 3-2) */
#define TYPE_CODE      0x8u /* S = 1: code; else data */
#define TYPE_CONFORM   0x4u /* code: conforming; data: expand-down */
#define TYPE_RW        0x2u /* code: readable; data: writable */
#define TYPE_ACCESSED  0x1u
#define TYPE_LDT       0x2u
#define TYPE_TSS16     0x1u
#define TYPE_TSS16_BSY 0x3u
#define TYPE_TSS32     0x9u
#define TYPE_TSS32_BSY 0xbu
#define TYPE_TSS_BUSY  0x2u /* the busy bit of a TSS type */

#define CR0_TS      (1ull << 3)
#define CR0_PG      (1ull << 31)
#define EFLAGS_NT   (1u << 14)
#define EFLAGS_VM   (1u << 17)
#define EFLAGS_KEEP 0x003f7fd5u /* CF PF AF ZF SF TF IF DF OF IOPL NT RF VM AC VIF VIP ID */
#define EFLAGS_ONE  0x2u
#define DR7_LOCAL   0x155ull /* L0-L3, LE (SDM Vol. 3A 17.2.4: cleared on a task switch) */

/* where a TSS keeps a task's state (SDM Vol. 3A 7.2.1 Figure 7-2, 7.6 Figure 7-11) */
struct tss_layout {
    unsigned size; /* minimum limit + 1 */
    unsigned w;    /* register width in the TSS */
    unsigned cr3, eip, eflags, gpr, seg, nseg, ldt, trap;
    unsigned dyn_lo, dyn_hi; /* the fields a save writes: [dyn_lo, dyn_hi) */
};
static const struct tss_layout tss32 = {
    .size = 0x68,
    .w = 4,
    .cr3 = 0x1c,
    .eip = 0x20,
    .eflags = 0x24,
    .gpr = 0x28,
    .seg = 0x48,
    .nseg = 6,
    .ldt = 0x60,
    .trap = 0x64,
    .dyn_lo = 0x20,
    .dyn_hi = 0x60,
};
static const struct tss_layout tss16 = {
    .size = 0x2c,
    .w = 2,
    .cr3 = 0,
    .eip = 0x0e,
    .eflags = 0x10,
    .gpr = 0x12,
    .seg = 0x22,
    .nseg = 4,
    .ldt = 0x2a,
    .trap = 0,
    .dyn_lo = 0x0e,
    .dyn_hi = 0x2a,
};

/* the TSS's selector slots in order (ES, CS, SS, DS, FS, GS) */
static const unsigned seg_slot[6] = {VSEG_ES, VSEG_CS, VSEG_SS, VSEG_DS, VSEG_FS, VSEG_GS};

/* one switch in progress: the memory interface and how much of it was used */
struct ts_run {
    const struct ts_mem *m;
    unsigned calls;
    struct ts_out *out;
    const struct ts_state *cur;
    uint32_t ext; /* EXT bit of error codes: the switch delivers a hardware event */
};

static bool mem_read(struct ts_run *r, uint64_t cr3, uint32_t lin, void *buf, unsigned len,
                     bool for_write)
{
    if (r->calls >= TS_MAX_ACCESSES || len == 0 || len > TS_MAX_LEN ||
        (uint64_t)lin + len > (1ull << 32))
        return false;
    r->calls++;
    return r->m->read(r->m->ctx, cr3, lin, buf, len, for_write);
}

/* a write after the commit point: its bytes were probed with for_write, so it fails only if
 * another vCPU changed the memory map in between; the switch goes on regardless */
static void mem_write(struct ts_run *r, uint64_t cr3, uint32_t lin, const void *buf, unsigned len)
{
    if (r->calls >= TS_MAX_ACCESSES || len == 0 || len > TS_MAX_LEN ||
        (uint64_t)lin + len > (1ull << 32))
        return;
    r->calls++;
    (void)r->m->write(r->m->ctx, cr3, lin, buf, len);
}

static uint32_t get(const uint8_t *p, unsigned w)
{
    uint32_t v = 0;
    for (unsigned i = 0; i < w; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static void put(uint8_t *p, unsigned w, uint32_t v)
{
    for (unsigned i = 0; i < w; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static enum ts_result fault(struct ts_run *r, unsigned vector, uint16_t sel, const char *why)
{
    r->out->vector = vector;
    r->out->error = (sel & 0xfffcu) | r->ext;
    r->out->why = why;
    if (!r->out->committed) /* before the commit: the old task, unchanged */
        r->out->next = *r->cur;
    return TS_FAULT;
}

/* a descriptor as read from its table */
struct desc {
    uint8_t raw[8];
    uint32_t lin; /* where it is (for the accessed / busy bit) */
    uint32_t base, limit, ar;
};

static void desc_decode(struct desc *d)
{
    const uint8_t *b = d->raw;
    d->ar = b[5] | ((uint32_t)(b[6] & 0xf0) << 8);
    d->base = b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[7] << 24;
    d->limit = b[0] | (uint32_t)b[1] << 8 | (uint32_t)(b[6] & 0x0f) << 16;
    if (d->ar & AR_G)
        d->limit = (d->limit << 12) | 0xfff;
}

enum dread { D_OK, D_LIMIT, D_MEM };

/* the descriptor of sel in the GDT or (TI = 1) in the LDT given */
static enum dread desc_read(struct ts_run *r, uint64_t cr3, uint16_t sel, uint32_t gdt_base,
                            uint32_t gdt_limit, const struct vmx_seg *ldt, bool for_write,
                            struct desc *d)
{
    uint32_t base = gdt_base, limit = gdt_limit, off = sel & 0xfff8u;
    if (sel & 4) {
        if (ldt->ar & AR_UNUSABLE)
            return D_LIMIT;
        base = (uint32_t)ldt->base;
        limit = ldt->limit;
    }
    if ((uint64_t)off + 7 > limit)
        return D_LIMIT;
    d->lin = base + off; /* wraps at 4 GiB, as linear addresses outside IA-32e mode do */
    if (!mem_read(r, cr3, d->lin, d->raw, 8, for_write))
        return D_MEM;
    desc_decode(d);
    return D_OK;
}

static struct vmx_seg seg_of(uint16_t sel, const struct desc *d)
{
    return (struct vmx_seg){.sel = sel, .base = d->base, .limit = d->limit, .ar = d->ar};
}

static struct vmx_seg seg_unusable(uint16_t sel)
{
    return (struct vmx_seg){.sel = sel, .ar = AR_UNUSABLE};
}

/* the new task's registers as its TSS holds them */
struct tss_image {
    uint32_t cr3, eip, eflags, gpr[8], ldt;
    uint16_t seg[6];
    bool trap;
};

static void tss_parse(const struct tss_layout *L, const uint8_t *b, struct tss_image *t)
{
    t->cr3 = L->cr3 ? get(b + L->cr3, 4) : 0;
    t->eip = get(b + L->eip, L->w);
    t->eflags = get(b + L->eflags, L->w);
    for (unsigned i = 0; i < 8; i++)
        t->gpr[i] = get(b + L->gpr + i * L->w, L->w);
    for (unsigned i = 0; i < 6; i++)
        t->seg[i] = i < L->nseg ? (uint16_t)get(b + L->seg + i * L->w, 2) : 0;
    t->ldt = get(b + L->ldt, 2);
    t->trap = L->trap && (b[L->trap] & 1);
}

/* the new LDTR (Table 7-1 items 5 and 10: #TS(LDT selector)); null is allowed */
static enum ts_result load_ldtr(struct ts_run *r, const struct ts_in *in, struct ts_state *n)
{
    uint16_t sel = n->seg[VSEG_LDTR].sel;
    struct desc d;
    if ((sel & 0xfffc) == 0) {
        n->seg[VSEG_LDTR] = seg_unusable(sel);
        return TS_OK;
    }
    if (sel & 4)
        return fault(r, TS_VEC_TS, sel, "the new LDT selector points into the LDT");
    switch (desc_read(r, n->cr3, sel, in->cur.gdtr_base, in->cur.gdtr_limit, NULL, false, &d)) {
    case D_LIMIT:
        return fault(r, TS_VEC_TS, sel, "the new LDT selector is beyond the GDT limit");
    case D_MEM:
        return fault(r, TS_VEC_TS, in->sel, "the new LDT descriptor is not in guest memory");
    case D_OK:
        break;
    }
    if ((d.ar & AR_S) || AR_TYPE(d.ar) != TYPE_LDT)
        return fault(r, TS_VEC_TS, sel, "the new LDT selector is not an LDT descriptor");
    if (!(d.ar & AR_P))
        return fault(r, TS_VEC_TS, sel, "the new LDT is not present");
    n->seg[VSEG_LDTR] = seg_of(sel, &d);
    return TS_OK;
}

/* set a loaded segment's accessed bit, in its cache and (later) in its descriptor */
struct abit {
    uint32_t lin;
    uint8_t byte;
    bool write;
};

static void mark_accessed(struct desc *d, struct abit *a)
{
    a->write = !(d->ar & TYPE_ACCESSED);
    d->raw[5] |= TYPE_ACCESSED;
    d->ar |= TYPE_ACCESSED;
    a->lin = d->lin + 5;
    a->byte = d->raw[5];
}

/* CS and SS of the new task (Table 7-1 items 6-13), before the commit: see task_switch.h */
static enum ts_result load_cs_ss(struct ts_run *r, const struct ts_in *in, struct ts_state *n,
                                 struct abit ab[2])
{
    uint16_t cs = n->seg[VSEG_CS].sel, ss = n->seg[VSEG_SS].sel;
    unsigned cpl = cs & 3;
    struct desc d;
    if ((cs & 0xfffc) == 0)
        return fault(r, TS_VEC_TS, cs, "the new CS is null");
    switch (desc_read(r, n->cr3, cs, in->cur.gdtr_base, in->cur.gdtr_limit, &n->seg[VSEG_LDTR],
                      true, &d)) {
    case D_LIMIT:
        return fault(r, TS_VEC_TS, cs, "the new CS is beyond its table's limit");
    case D_MEM:
        return fault(r, TS_VEC_TS, in->sel, "the new CS descriptor is not in guest memory");
    case D_OK:
        break;
    }
    if (!(d.ar & AR_S) || !(AR_TYPE(d.ar) & TYPE_CODE))
        return fault(r, TS_VEC_TS, cs, "the new CS is not a code segment");
    if ((AR_TYPE(d.ar) & TYPE_CONFORM) ? AR_DPL(d.ar) > cpl : AR_DPL(d.ar) != cpl)
        return fault(r, TS_VEC_TS, cs, "the new CS's DPL does not match its RPL");
    if (d.ar & (1u << 13)) /* L: no 64-bit code outside IA-32e mode (VM entry refuses it) */
        return fault(r, TS_VEC_TS, cs, "the new CS has the L bit set");
    if (!(d.ar & AR_P))
        return fault(r, TS_VEC_NP, cs, "the new CS is not present");
    mark_accessed(&d, &ab[0]);
    n->seg[VSEG_CS] = seg_of(cs, &d);

    if ((ss & 0xfffc) == 0)
        return fault(r, TS_VEC_TS, ss, "the new SS is null");
    if ((ss & 3) != cpl)
        return fault(r, TS_VEC_TS, ss, "the new SS's RPL is not the new CPL");
    switch (desc_read(r, n->cr3, ss, in->cur.gdtr_base, in->cur.gdtr_limit, &n->seg[VSEG_LDTR],
                      true, &d)) {
    case D_LIMIT:
        return fault(r, TS_VEC_TS, ss, "the new SS is beyond its table's limit");
    case D_MEM:
        return fault(r, TS_VEC_TS, in->sel, "the new SS descriptor is not in guest memory");
    case D_OK:
        break;
    }
    if (!(d.ar & AR_S) || (AR_TYPE(d.ar) & TYPE_CODE) || !(AR_TYPE(d.ar) & TYPE_RW))
        return fault(r, TS_VEC_TS, ss, "the new SS is not a writable data segment");
    if (!(d.ar & AR_P)) /* present before DPL (SDM Vol. 3A table 7-1, items 8 and 9) */
        return fault(r, TS_VEC_SS, ss, "the new SS is not present");
    if (AR_DPL(d.ar) != cpl)
        return fault(r, TS_VEC_TS, ss, "the new SS's DPL is not the new CPL");
    mark_accessed(&d, &ab[1]);
    n->seg[VSEG_SS] = seg_of(ss, &d);
    return TS_OK;
}

/* a data segment of the new task (Table 7-1 items 14-17), after the commit: a failing one is
 * left unusable; the first failure is returned as the fault */
static enum ts_result load_data(struct ts_run *r, const struct ts_in *in, struct ts_state *n,
                                unsigned i, struct abit *ab)
{
    uint16_t sel = n->seg[i].sel;
    unsigned cpl = n->seg[VSEG_CS].sel & 3;
    struct desc d;
    ab->write = false;
    n->seg[i] = seg_unusable(sel);
    if ((sel & 0xfffc) == 0)
        return TS_OK;
    switch (desc_read(r, n->cr3, sel, in->cur.gdtr_base, in->cur.gdtr_limit, &n->seg[VSEG_LDTR],
                      true, &d)) {
    case D_LIMIT:
        return fault(r, TS_VEC_TS, sel, "a new data segment is beyond its table's limit");
    case D_MEM:
        return fault(r, TS_VEC_TS, sel, "a new data segment's descriptor is not in guest memory");
    case D_OK:
        break;
    }
    unsigned type = AR_TYPE(d.ar);
    if (!(d.ar & AR_S) || ((type & TYPE_CODE) && !(type & TYPE_RW)))
        return fault(r, TS_VEC_TS, sel, "a new data segment is not readable");
    if ((!(type & TYPE_CODE) || !(type & TYPE_CONFORM)) &&
        (AR_DPL(d.ar) < cpl || AR_DPL(d.ar) < (sel & 3u)))
        return fault(r, TS_VEC_TS, sel, "a new data segment's DPL is below CPL or RPL");
    if (!(d.ar & AR_P))
        return fault(r, TS_VEC_NP, sel, "a new data segment is not present");
    mark_accessed(&d, ab);
    n->seg[i] = seg_of(sel, &d);
    return TS_OK;
}

/* where the error code of the event goes on the new stack: false if beyond SS's limit */
static bool push_slot(const struct ts_state *n, unsigned w, uint32_t *lin, uint32_t *esp)
{
    const struct vmx_seg *ss = &n->seg[VSEG_SS];
    bool big = ss->ar & AR_DB;
    uint32_t sp = n->gpr[4];
    uint32_t off = big ? sp - w : (uint16_t)(sp - w);
    uint32_t top = big ? 0xffffffffu : 0xffffu;
    if ((uint64_t)off + w - 1 > top)
        return false;
    if (AR_TYPE(ss->ar) & TYPE_CONFORM) { /* expand-down: valid offsets are (limit, top] */
        if (off <= ss->limit)
            return false;
    } else if ((uint64_t)off + w - 1 > ss->limit) {
        return false;
    }
    *lin = (uint32_t)ss->base + off;
    *esp = big ? off : (sp & 0xffff0000u) | off;
    return true;
}

enum ts_result task_switch(const struct ts_in *in, const struct ts_mem *m, struct ts_out *out)
{
    const struct ts_state *cur = &in->cur;
    struct ts_run run = {.m = m,
                         .out = out,
                         .cur = cur,
                         .ext = in->source == TS_GATE && in->event != TS_EV_SOFT ? 1u : 0u};
    struct ts_run *r = &run;
    bool iret = in->source == TS_IRET, nest = in->source == TS_CALL || in->source == TS_GATE;
    unsigned bad_sel_vec = iret ? TS_VEC_TS : TS_VEC_GP;
    uint16_t sel = in->sel, old_sel = cur->seg[VSEG_TR].sel;
    struct desc nd, od;
    *out = (struct ts_out){.next = *cur};

    /* --- the new TSS descriptor (SDM Vol. 3A 7.3 steps 1-4, Table 7-1 items 1-3) --- */
    if ((sel & 0xfffc) == 0 || (sel & 4))
        return fault(r, bad_sel_vec, sel, "the new TSS selector is null or in the LDT");
    switch (desc_read(r, cur->cr3, sel, cur->gdtr_base, cur->gdtr_limit, NULL, !iret, &nd)) {
    case D_LIMIT:
        return fault(r, bad_sel_vec, sel, "the new TSS selector is beyond the GDT limit");
    case D_MEM:
        return fault(r, TS_VEC_TS, sel, "the GDT entry of the new TSS is not in guest memory");
    case D_OK:
        break;
    }
    unsigned ntype = AR_TYPE(nd.ar);
    bool n32 = ntype == TYPE_TSS32 || ntype == TYPE_TSS32_BSY;
    if ((nd.ar & AR_S) || !(n32 || ntype == TYPE_TSS16 || ntype == TYPE_TSS16_BSY))
        return fault(r, bad_sel_vec, sel, "the new TSS selector is not a TSS descriptor");
    if (iret != !!(ntype & TYPE_TSS_BUSY))
        return fault(r, bad_sel_vec, sel,
                     iret ? "IRET to a TSS that is not busy" : "task switch to a busy TSS");
    if (!(nd.ar & AR_P))
        return fault(r, TS_VEC_NP, sel, "the new TSS is not present");
    const struct tss_layout *NL = n32 ? &tss32 : &tss16;
    if (nd.limit < NL->size - 1)
        return fault(r, TS_VEC_TS, sel, "the new TSS's limit is too small");

    /* --- the old TSS: its kind from TR's cache, its descriptor where the busy bit clears --- */
    const struct vmx_seg *otr = &cur->seg[VSEG_TR];
    unsigned otype = AR_TYPE(otr->ar);
    if ((otr->ar & AR_UNUSABLE) || (otype != TYPE_TSS32_BSY && otype != TYPE_TSS16_BSY))
        return fault(r, TS_VEC_TS, sel, "TR does not hold a busy TSS");
    const struct tss_layout *OL = otype == TYPE_TSS32_BSY ? &tss32 : &tss16;
    if (otr->limit < OL->dyn_hi - 1)
        return fault(r, TS_VEC_TS, old_sel, "the old TSS's limit is too small");
    uint8_t obuf[TS_MAX_LEN];
    uint32_t obase = (uint32_t)otr->base;
    if (!mem_read(r, cur->cr3, obase + OL->dyn_lo, obuf, OL->dyn_hi - OL->dyn_lo, true))
        return fault(r, TS_VEC_TS, sel, "the old TSS is not in guest memory");
    bool clear_old = in->source == TS_JMP || iret;
    if (clear_old) {
        if ((old_sel & 4) || (old_sel & 0xfffc) == 0)
            return fault(r, TS_VEC_TS, sel, "the old TR selector is null or in the LDT");
        if (desc_read(r, cur->cr3, old_sel, cur->gdtr_base, cur->gdtr_limit, NULL, true, &od) !=
            D_OK)
            return fault(r, TS_VEC_TS, sel, "the old TSS descriptor is not reachable");
    }

    /* --- the old task's state as the save will write it (step 6-7) --- */
    uint32_t eip = cur->eip;
    if (in->source != TS_GATE || in->event != TS_EV_HW)
        eip += in->insn_len;
    uint32_t eflags = cur->eflags & ~(iret ? EFLAGS_NT : 0u);
    /* obuf holds the old TSS from offset dyn_lo on */
    put(obuf + (OL->eip - OL->dyn_lo), OL->w, eip);
    put(obuf + (OL->eflags - OL->dyn_lo), OL->w, eflags);
    for (unsigned i = 0; i < 8; i++)
        put(obuf + (OL->gpr - OL->dyn_lo) + i * OL->w, OL->w, cur->gpr[i]);
    for (unsigned i = 0; i < OL->nseg; i++)
        put(obuf + (OL->seg - OL->dyn_lo) + i * OL->w, 2, cur->seg[seg_slot[i]].sel);

    /* --- the new TSS's contents --- */
    uint8_t nbuf[TS_MAX_LEN];
    if (!mem_read(r, cur->cr3, nd.base, nbuf, NL->size, nest))
        return fault(r, TS_VEC_TS, sel, "the new TSS is not in guest memory");
    /* the TSSes may overlap (IRET to the task itself): hardware loads after the save, so the
     * new task sees the bytes just saved (same linear addresses; aliases are not followed) */
    for (unsigned i = 0; i < NL->size; i++) {
        uint32_t at = nd.base + i - (obase + OL->dyn_lo);
        if (at < OL->dyn_hi - OL->dyn_lo)
            nbuf[i] = obuf[at];
    }
    struct tss_image t;
    tss_parse(NL, nbuf, &t);

    /* --- the new task's state, computed and checked before anything is written --- */
    struct ts_state *n = &out->next;
    n->eip = t.eip;
    n->eflags = (t.eflags & EFLAGS_KEEP) | EFLAGS_ONE;
    if (nest)
        n->eflags |= EFLAGS_NT;
    for (unsigned i = 0; i < 8; i++)
        n->gpr[i] = t.gpr[i];
    if (n32 && (cur->cr0 & CR0_PG)) {
        if (m->cr3_ok && !m->cr3_ok(m->ctx, t.cr3))
            return fault(r, TS_VEC_GP, 0, "the new CR3 cannot be loaded (PDPTEs)");
        n->cr3 = t.cr3;
        out->cr3_loaded = true;
    }
    n->cr0 = cur->cr0 | CR0_TS;
    n->dr7 = cur->dr7 & ~DR7_LOCAL;
    for (unsigned i = 0; i < 6; i++)
        n->seg[seg_slot[i]].sel = t.seg[i];
    n->seg[VSEG_LDTR].sel = (uint16_t)t.ldt;
    nd.raw[5] |= TYPE_TSS_BUSY;
    desc_decode(&nd);
    n->seg[VSEG_TR] = seg_of(sel, &nd);
    out->t_bit = t.trap;

    struct abit ab[6] = {{0}};
    if (load_ldtr(r, in, n) != TS_OK)
        return TS_FAULT;
    bool v86 = n->eflags & EFLAGS_VM;
    if (v86) { /* SDM Vol. 3A 20.2.1: base = selector << 4, limit 0xffff, DPL 3 */
        for (unsigned i = 0; i < 6; i++) {
            struct vmx_seg *s = &n->seg[seg_slot[i]];
            *s = (struct vmx_seg){
                .sel = s->sel, .base = (uint32_t)s->sel << 4, .limit = 0xffff, .ar = 0xf3};
        }
    } else if (load_cs_ss(r, in, n, ab) != TS_OK) {
        return TS_FAULT;
    }
    uint32_t push_lin = 0, push_esp = 0;
    bool push = in->source == TS_GATE && in->has_error, push_ok = false;
    if (push) {
        push_ok = push_slot(n, NL->w, &push_lin, &push_esp);
        uint8_t probe[4];
        if (push_ok && !mem_read(r, n->cr3, push_lin, probe, NL->w, true))
            return fault(r, TS_VEC_TS, sel, "the new stack is not in guest memory");
    }

    /* --- commit (steps 5-11): nothing below faults in the old task any more --- */
    out->committed = true;
    if (clear_old) {
        uint8_t b = od.raw[5] & (uint8_t)~TYPE_TSS_BUSY;
        mem_write(r, cur->cr3, od.lin + 5, &b, 1);
    }
    mem_write(r, cur->cr3, obase + OL->dyn_lo, obuf, OL->dyn_hi - OL->dyn_lo);
    if (nest) {
        uint8_t link[2];
        put(link, 2, old_sel);
        mem_write(r, cur->cr3, nd.base, link, 2);
    }
    if (!iret)
        mem_write(r, cur->cr3, nd.lin + 5, &nd.raw[5], 1);
    /* --- step 12-13 after the commit: accessed bits, data segments, the error code --- */
    for (unsigned i = 0; i < 2; i++)
        if (ab[i].write)
            mem_write(r, n->cr3, ab[i].lin, &ab[i].byte, 1);
    enum ts_result res = TS_OK;
    if (!v86) {
        /* the first failure ends the loads (as Bochs and KVM do): the segments after it stay
         * unusable with their selectors, and no error code is pushed */
        static const unsigned data[4] = {VSEG_ES, VSEG_DS, VSEG_FS, VSEG_GS};
        unsigned i = 0;
        for (; i < 4; i++) {
            res = load_data(r, in, n, data[i], &ab[2 + i]);
            if (res != TS_OK)
                break;
            if (ab[2 + i].write)
                mem_write(r, n->cr3, ab[2 + i].lin, &ab[2 + i].byte, 1);
        }
        for (unsigned k = i + 1; k < 4; k++)
            n->seg[data[k]] = seg_unusable(n->seg[data[k]].sel);
    }
    if (push && res == TS_OK) {
        if (!push_ok) {
            if (res == TS_OK)
                res = fault(r, TS_VEC_SS, 0, "the error code does not fit the new stack");
        } else {
            uint8_t e[4];
            put(e, NL->w, in->error);
            mem_write(r, n->cr3, push_lin, e, NL->w);
            n->gpr[4] = push_esp;
        }
    }
    if (res == TS_OK && n->eip > n->seg[VSEG_CS].limit)
        res = fault(r, TS_VEC_GP, 0, "the new EIP is beyond the CS limit");
    return res;
}
