/* SPDX-License-Identifier: MIT */
/* PT hardware model: ToPA / single-range output.  See ptm.h and docs/pt-facts.md. */
#include "model/ptm.h"

#include <string.h>

#include "pt/rtit.h"

#define BYTECNT_MAX 0x1ffffull

void ptm_init(struct ptm *m, uint8_t *mem, uint64_t mem_size, unsigned maxphyaddr, bool multi)
{
    memset(m, 0, sizeof(*m));
    m->mem = mem;
    m->mem_size = mem_size;
    m->maxphyaddr = maxphyaddr;
    m->topa_multi = multi;
}

bool ptm_active(const struct ptm *m)
{
    return (m->ctl & RTIT_CTL_TRACEEN) && (m->status & RTIT_STATUS_TRIGGEREN) &&
           !(m->status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED));
}

/* D.4: STATUS.Error = 1, TriggerEn = 0; TraceEn stays 1; no #GP. */
static void operr(struct ptm *m, const char *why)
{
    m->status |= RTIT_STATUS_ERROR;
    m->status &= ~RTIT_STATUS_TRIGGEREN;
    m->error = why;
    m->cached = false;
}

static bool xlate(struct ptm *m, uint64_t *addr)
{
    if (!m->xlate || m->xlate(m->xlate_ctx, *addr, addr))
        return true;
    m->eptv = true;
    m->eptv_gpa = *addr;
    return false;
}

static bool load64(struct ptm *m, uint64_t pa, uint64_t *v)
{
    if (!xlate(m, &pa))
        return false;
    if (pa + 8 > m->mem_size) {
        m->wild += 8;
        return false;
    }
    memcpy(v, m->mem + pa, 8);
    return true;
}

static uint32_t cur_index(const struct ptm *m)
{
    return (uint32_t)PTV_FIELD(m->output_mask_ptrs, RTIT_MASK_TABLE_OFFSET_SHIFT, 0x1ffffff);
}

static uint64_t cur_offset(const struct ptm *m)
{
    return m->output_mask_ptrs >> RTIT_MASK_OUTPUT_OFFSET_SHIFT;
}

static void set_ptrs(struct ptm *m, uint32_t idx, uint64_t off)
{
    m->output_mask_ptrs = RTIT_MASK_LOWER | ((uint64_t)idx << RTIT_MASK_TABLE_OFFSET_SHIFT) |
                          (off << RTIT_MASK_OUTPUT_OFFSET_SHIFT);
}

/* Find the current ToPA output region (D.1-D.3), following at most one END. */
static bool topa_resolve(struct ptm *m)
{
    uint64_t rsvd = TOPA_RSVD_LOW | ~((1ull << m->maxphyaddr) - 1);

    if (m->output_base & 0xf80) {
        operr(m, "OUTPUT_BASE bits 11:7"); /* D.4 */
        return false;
    }
    for (int hop = 0; hop < 2; hop++) {
        uint32_t idx = cur_index(m);
        uint64_t e, next;

        if (!m->topa_multi && idx > 1) {
            operr(m, "single-entry: table offset"); /* D.2 */
            return false;
        }
        if (!load64(m, m->output_base + 8ull * idx, &e)) {
            if (!m->eptv) /* an EPT violation exits instead (twin.c) */
                operr(m, "table outside memory");
            return false;
        }
        if (e & rsvd) {
            operr(m, "entry reserved bits");
            return false;
        }
        if (e & TOPA_END) {
            if (e & (TOPA_INT | TOPA_STOP)) {
                operr(m, "END with INT/STOP"); /* D.3 */
                return false;
            }
            if (idx == 0) {
                operr(m, "END in entry 0"); /* D.3 (pt-facts unconfirmed #7) */
                return false;
            }
            if (!m->topa_multi && (e & TOPA_BASE_MASK(m->maxphyaddr)) != m->output_base) {
                /* SDM "ToPA Errors": single-output-entry, entry 1 base != table base */
                operr(m, "single-entry: END base != table base");
                return false;
            }
            m->output_base = e & TOPA_BASE_MASK(m->maxphyaddr);
            set_ptrs(m, 0, 0);
            continue;
        }
        if (!m->topa_multi) {
            /* D.2: entry 0 output, entry 1 END */
            if (idx != 0 || !load64(m, m->output_base + 8, &next) || !(next & TOPA_END) ||
                (next & TOPA_BASE_MASK(m->maxphyaddr)) != m->output_base) {
                operr(m, "single-entry layout");
                return false;
            }
        }
        m->rsize = TOPA_REGION_SIZE(e);
        m->rbase = e & TOPA_BASE_MASK(m->maxphyaddr);
        m->rflags = e & (TOPA_INT | TOPA_STOP);
        if (m->rbase & (m->rsize - 1)) {
            operr(m, "region misaligned"); /* D.1 */
            return false;
        }
        if (cur_offset(m) >= m->rsize) {
            operr(m, "OutputOffset >= region size"); /* D.4 */
            return false;
        }
        m->cached = true;
        return true;
    }
    operr(m, "END chain"); /* unreachable: END in entry 0 is an error */
    return false;
}

static void raise_pmi(struct ptm *m)
{
    /* D.3 / A.8: GLOBAL_STATUS bit 55, PMI through LVT perfmon */
    m->global_status |= GLOBAL_STATUS_TRACE_TOPAPMI;
    if (m->pmis < sizeof(m->pmi_at) / sizeof(m->pmi_at[0]))
        m->pmi_at[m->pmis] = m->bytes;
    m->pmis++;
    if (m->pmi_cb)
        m->pmi_cb(m, m->pmi_arg);
}

static void put_byte(struct ptm *m, uint64_t pa, uint8_t b)
{
    if (!xlate(m, &pa))
        return;
    if (pa >= m->mem_size)
        m->wild++;
    else
        m->mem[pa] = b;
}

static void topa_byte(struct ptm *m, uint8_t b)
{
    uint64_t off;

    if (!m->cached && !topa_resolve(m))
        return;
    off = cur_offset(m);
    put_byte(m, m->rbase + off, b);
    m->bytes++;
    off++;
    if (off < m->rsize) {
        set_ptrs(m, cur_index(m), off);
        return;
    }
    m->cached = false;
    if (m->rflags & TOPA_INT)
        raise_pmi(m);
    if (m->rflags & TOPA_STOP) {
        /* D.3: Stopped = 1, TriggerEn = 0, OutputOffset left = region size */
        set_ptrs(m, cur_index(m), off);
        m->status |= RTIT_STATUS_STOPPED;
        m->status &= ~RTIT_STATUS_TRIGGEREN;
        return;
    }
    set_ptrs(m, cur_index(m) + 1, 0);
    if (m->eager_end)
        topa_resolve(m);
}

static bool single_check(struct ptm *m)
{
    uint64_t mask = (m->output_mask_ptrs & 0xffffffffull) | RTIT_MASK_LOWER;

    /* B.5: contiguous mask, base not overlapping it, offset <= mask */
    if ((mask & (mask + 1)) || (m->output_base & mask) || cur_offset(m) > mask) {
        operr(m, "single-range setup");
        return false;
    }
    return true;
}

static void single_byte(struct ptm *m, uint8_t b)
{
    uint64_t mask = (m->output_mask_ptrs & 0xffffffffull) | RTIT_MASK_LOWER;
    uint64_t off = cur_offset(m);

    put_byte(m, (m->output_base & ~mask) | (off & mask), b);
    m->bytes++;
    off = (off + 1) & mask; /* circular, no PMI */
    m->output_mask_ptrs = (m->output_mask_ptrs & 0xffffffffull) | (off << 32);
}

void ptm_enable(struct ptm *m, uint64_t ctl, uint64_t status, uint64_t base, uint64_t mask)
{
    m->ctl = ctl | RTIT_CTL_TRACEEN;
    m->output_base = base;
    m->output_mask_ptrs = mask | RTIT_MASK_LOWER; /* bits 6:0 read as 1 */
    m->status = status;
    m->cached = false;
    m->bytes = 0;
    m->error = NULL;
    if (!(m->status & (RTIT_STATUS_ERROR | RTIT_STATUS_STOPPED)))
        m->status |= RTIT_STATUS_TRIGGEREN; /* no filters in the model */
    if (!(ctl & RTIT_CTL_TOPA))
        single_check(m);
}

void ptm_touch(struct ptm *m)
{
    if (ptm_active(m) && (m->ctl & RTIT_CTL_TOPA) && !m->cached)
        topa_resolve(m);
}

void ptm_disable(struct ptm *m)
{
    m->ctl &= ~RTIT_CTL_TRACEEN;
    m->status &= ~RTIT_STATUS_TRIGGEREN;
    m->cached = false;
}

void ptm_packet(struct ptm *m, const uint8_t *bytes, size_t n, bool psb)
{
    uint64_t cnt = PTV_FIELD(m->status, RTIT_STATUS_BYTECNT_SHIFT, BYTECNT_MAX);

    if (!ptm_active(m))
        return;
    if (psb)
        cnt = 0;
    for (size_t i = 0; i < n && ptm_active(m); i++) {
        uint64_t before = m->bytes;
        if (m->ctl & RTIT_CTL_TOPA)
            topa_byte(m, bytes[i]);
        else
            single_byte(m, bytes[i]);
        if (m->bytes != before && cnt < BYTECNT_MAX)
            cnt++;
    }
    m->status = (m->status & ~RTIT_STATUS_BYTECNT) | (cnt << RTIT_STATUS_BYTECNT_SHIFT);
}
