/* SPDX-License-Identifier: MIT */
/* Guest linear-address reads (gwalk.h): the four paging modes of SDM Vol. 3A chapter 4. */
#include "trace/gwalk.h"

#define CR0_PG   (1ull << 31)
#define CR4_PSE  (1ull << 4)
#define CR4_PAE  (1ull << 5)
#define CR4_LA57 (1ull << 12)
#define EFER_LMA (1ull << 10)

#define E_P       1ull
#define E_RW      (1ull << 1)
#define E_US      (1ull << 2)
#define E_PS      (1ull << 7)
#define CR0_WP    (1ull << 16)
#define CR4_SMAP  (1ull << 21)
#define RFLAGS_AC (1ull << 18)
#define E_ADDR    0x000ffffffffff000ull

static int read_entry(const struct gw_mem *m, uint64_t gpa, unsigned size, uint64_t *e)
{
    uint64_t v = 0;
    if (!m->read(m->ctx, gpa, &v, size))
        return GW_E_MEM;
    *e = v;
    return (v & E_P) ? 0 : GW_E_NOTPRESENT;
}

/* 32-bit paging: 2 levels of 4-byte entries, 4 MiB pages with CR4.PSE (Vol. 3A 4.3) */
static int walk32(const struct gw_mem *m, const struct gw_paging *p, uint32_t lin, uint64_t *gpa,
                  uint64_t *rights)
{
    uint64_t pde, pte;
    int rc = read_entry(m, (p->cr3 & 0xfffff000u) + ((lin >> 22) << 2), 4, &pde);
    if (rc)
        return rc;
    *rights &= pde;
    if ((pde & E_PS) && (p->cr4 & CR4_PSE)) {
        /* PSE-36: PDE bits 20:13 are physical address bits 39:32 (Table 4-4) */
        *gpa = (pde & 0xffc00000u) | ((pde >> 13 & 0xff) << 32) | (lin & 0x3fffff);
        return 0;
    }
    rc = read_entry(m, (pde & 0xfffff000u) + ((lin >> 12 & 0x3ff) << 2), 4, &pte);
    if (rc)
        return rc;
    *rights &= pte;
    *gpa = (pte & 0xfffff000u) | (lin & 0xfff);
    return 0;
}

/* PAE, 4-level and 5-level paging: 8-byte entries, 9 bits per level (Vol. 3A 4.4, 4.5) */
static int walk64(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, uint64_t *gpa,
                  uint64_t *rights)
{
    unsigned levels, shift;
    uint64_t table, e;
    int rc;

    if (!(p->efer & EFER_LMA)) {
        /* PAE: CR3 bits 31:5 name 4 PDPTEs (the CPU caches them at MOV CR3; this reads the
         * table as it is now) */
        rc = read_entry(m, (p->cr3 & 0xffffffe0u) + ((lin >> 30 & 3) << 3), 8, &e);
        if (rc)
            return rc;
        table = e & E_ADDR;
        levels = 2;
        lin &= 0xffffffffu;
    } else {
        levels = (p->cr4 & CR4_LA57) ? 5 : 4;
        table = p->cr3 & E_ADDR;
    }
    for (shift = 12 + 9 * (levels - 1);; shift -= 9) {
        rc = read_entry(m, table + ((lin >> shift & 0x1ff) << 3), 8, &e);
        if (rc)
            return rc;
        *rights &= e; /* PAE's PDPTEs have no R/W, U/S: they are read above, not here */
        /* 1 GiB (PDPTE of 4/5-level) and 2 MiB (PDE) pages */
        bool leaf = shift == 12 || ((e & E_PS) && (shift == 21 || (shift == 30 && levels >= 4)));
        if (leaf) {
            uint64_t size = 1ull << shift;
            *gpa = ((e & E_ADDR) & ~(size - 1)) | (lin & (size - 1));
            return 0;
        }
        table = e & E_ADDR;
    }
}

static int translate(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, uint64_t *gpa,
                     uint64_t *rights)
{
    *rights = E_RW | E_US;
    if (!(p->cr0 & CR0_PG)) {
        *gpa = lin & 0xffffffffu; /* no paging: linear = physical, 32 bits */
        return 0;
    }
    if (p->cr4 & CR4_PAE)
        return walk64(m, p, lin, gpa, rights);
    return walk32(m, p, (uint32_t)lin, gpa, rights);
}

int gw_translate(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, uint64_t *gpa)
{
    uint64_t rights;
    return translate(m, p, lin, gpa, &rights);
}

int gw_translate_write(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin,
                       unsigned cpl, uint64_t rflags, uint64_t *gpa)
{
    uint64_t r;
    int rc = translate(m, p, lin, gpa, &r);
    if (rc)
        return rc;
    if (!(p->cr0 & CR0_PG))
        return 0;
    bool writable = r & E_RW, user = r & E_US;
    if (cpl == 3) /* a user-mode write: every level user and writable (Vol. 3A 4.6.1) */
        return user && writable ? 0 : GW_E_RIGHTS;
    /* a supervisor-mode write: to a read-only page only with CR0.WP = 0; to a user page not
     * with CR4.SMAP and RFLAGS.AC = 0 */
    if (!writable && (p->cr0 & CR0_WP))
        return GW_E_RIGHTS;
    if (user && (p->cr4 & CR4_SMAP) && !(rflags & RFLAGS_AC))
        return GW_E_RIGHTS;
    return 0;
}

int gw_read(const struct gw_mem *m, const struct gw_paging *p, uint64_t lin, void *buf,
            unsigned len, unsigned *got)
{
    uint8_t *out = buf;
    unsigned done = 0;
    int rc = 0;
    struct range_walk w;

    range_for_each(&w, lin, len, 4096, gw_space(p))
    {
        uint64_t gpa;
        rc = gw_translate(m, p, w.addr, &gpa);
        if (!rc && !m->read(m->ctx, gpa, out + done, (unsigned)w.len))
            rc = GW_E_MEM;
        if (rc)
            break;
        done += (unsigned)w.len;
    }
    if (got)
        *got = done;
    return rc;
}
