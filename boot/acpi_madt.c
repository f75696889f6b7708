/* SPDX-License-Identifier: MIT */
/*
 * An MADT for firmware that has none (see acpi_madt.h): scan the firmware's
 * tables, then build RSDP + XSDT/RSDT + MADT.  Every field is read with a
 * bounds-checked copy out of the caller's view of memory; nothing the
 * firmware wrote is trusted before its length and checksum are checked.
 */
#include <stdarg.h>
#include "lib/fmt.h"
#include "lib/ptv_string.h"
#include "acpi_madt.h"

/* ACPI 5.2.5.3 (RSDP), 5.2.6 (system description table header) */
#define RSDP_SIG        "RSD PTR "
#define RSDP_V1_LEN     20
#define RSDP_V2_LEN     36
#define RSDP_MAX_LEN    64 /* a longer "extended" RSDP is refused */
#define RSDP_OFF_CSUM   8
#define RSDP_OFF_OEM    9
#define RSDP_OFF_REV    15
#define RSDP_OFF_RSDT   16
#define RSDP_OFF_LEN    20
#define RSDP_OFF_XSDT   24
#define RSDP_OFF_XCSUM  32
#define HDR_LEN         36
#define HDR_OFF_LEN     4
#define HDR_OFF_REV     8
#define HDR_OFF_CSUM    9
#define HDR_OFF_OEM     10
#define HDR_OFF_TABLE   16
#define HDR_OFF_OEMREV  24
#define HDR_OFF_CREATOR 28
#define HDR_OFF_CRREV   32

/* ACPI 5.2.9: FADT field SCI_INT (2 bytes at offset 46) */
#define FADT_OFF_SCI_INT 46

/* ACPI 5.2.12: MADT and its interrupt controller structures */
#define MADT_OFF_LAPIC_ADDR 36
#define MADT_OFF_FLAGS      40
#define MADT_FIXED_LEN      44
#define MADT_PCAT_COMPAT    (1u << 0) /* dual 8259s present */
#define MADT_REVISION       1         /* every structure used here is ACPI 1.0 */
#define MADT_TYPE_LAPIC     0
#define MADT_TYPE_IOAPIC    1
#define MADT_TYPE_ISO       2
#define MADT_TYPE_LAPIC_NMI 4
#define MADT_LAPIC_LEN      8
#define MADT_IOAPIC_LEN     12
#define MADT_ISO_LEN        10
#define MADT_LAPIC_NMI_LEN  6
#define MADT_LAPIC_ENABLED  (1u << 0)
#define MPS_INTI_CONFORMS   0x0000u /* polarity/trigger of the bus (ISA: edge, high) */
#define MPS_INTI_HIGH_LEVEL 0x000du /* active high, level */
#define LAPIC_NMI_ALL_CPUS  0xff
#define LAPIC_NMI_LINT1     1

#define PIT_IRQ     0 /* the PC's timer ... */
#define PIT_GSI     2 /* ... is wired to I/O APIC pin 2 */
#define ISA_IRQS    16
#define APIC_ID_MAX 0xfe /* 0xff is the xAPIC broadcast ID */
#define TABLE_ALIGN 16

#define NEW_OEM_ID   "PTVISR"
#define NEW_TABLE_ID "PTVISOR "
#define NEW_CREATOR  "PTV "
#define NEW_REVISION 1

#define ROOT_BUF_MAX (HDR_LEN + ACPI_ROOT_MAX_ENTRIES * 8)

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

uint8_t acpi_sum(const uint8_t *p, size_t n)
{
    uint8_t s = 0;
    while (n--)
        s = (uint8_t)(s + *p++);
    return s;
}

static bool rd(const struct acpi_view *m, uint64_t phys, void *buf, size_t n)
{
    if (phys == 0 || phys + n < phys)
        return false;
    return m->read(m->ctx, phys, buf, n);
}

/* a signature for messages: 4 bytes, unprintable ones as '?' */
static void sig4(char out[5], const uint8_t *p)
{
    for (int i = 0; i < 4; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    out[4] = 0;
}

/* the byte sum of a table of len bytes at phys, read in chunks */
static bool sum_table(const struct acpi_view *m, uint64_t phys, uint32_t len, uint8_t *sum)
{
    uint8_t chunk[256];
    uint8_t s = 0;
    for (uint32_t done = 0; done < len;) {
        uint32_t n = len - done < sizeof(chunk) ? len - done : (uint32_t)sizeof(chunk);
        if (!rd(m, phys + done, chunk, n))
            return false;
        s = (uint8_t)(s + acpi_sum(chunk, n));
        done += n;
    }
    *sum = s;
    return true;
}

struct span {
    uint64_t base, len; /* len 0: none */
};

static bool overlaps(uint64_t base, uint64_t len, struct span sp)
{
    return sp.len && base < sp.base + sp.len && sp.base < base + len;
}

static bool overlaps_any(uint64_t base, uint64_t len, const struct span *sp, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (overlaps(base, len, sp[k]))
            return true;
    return false;
}

#define LOOP_MSG "%s entry %u '%s' at %#llx: overlaps the RSDP or a root table (a loop)"

/* read and check the XSDT (esz 8) or RSDT (esz 4) at phys into its header and entries */
static bool read_root(const struct acpi_view *m, const char *name, uint64_t phys, unsigned esz,
                      struct span rsdp, uint8_t *head, uint64_t *entries, uint32_t *n,
                      struct span *self, char *err, size_t cap)
{
    static const char *const want[] = {[4] = "RSDT", [8] = "XSDT"};
    uint8_t buf[ROOT_BUF_MAX];
    char sig[5];
    uint32_t len;

    if (!rd(m, phys, buf, HDR_LEN))
        return ptv_fail(err, cap, "%s at %#llx: header not readable (truncated)", name,
                        (unsigned long long)phys);
    sig4(sig, buf);
    if (memcmp(buf, want[esz], 4) != 0)
        return ptv_fail(err, cap, "%s at %#llx: signature '%s', not %s", name,
                        (unsigned long long)phys, sig, name);
    len = get32(buf + HDR_OFF_LEN);
    if (len < HDR_LEN)
        return ptv_fail(err, cap, "%s at %#llx: length %u is shorter than its header", name,
                        (unsigned long long)phys, len);
    if ((len - HDR_LEN) % esz != 0)
        return ptv_fail(err, cap,
                        "%s at %#llx: length %u is not the header plus whole %u-byte entries", name,
                        (unsigned long long)phys, len, esz);
    if ((len - HDR_LEN) / esz > ACPI_ROOT_MAX_ENTRIES)
        return ptv_fail(err, cap, "%s at %#llx: length %u lists more than %u tables (overlong)",
                        name, (unsigned long long)phys, len, ACPI_ROOT_MAX_ENTRIES);
    if (!rd(m, phys, buf, len))
        return ptv_fail(err, cap, "%s at %#llx: length %u runs past readable memory (truncated)",
                        name, (unsigned long long)phys, len);
    if (acpi_sum(buf, len) != 0)
        return ptv_fail(err, cap, "%s at %#llx: checksum wrong", name, (unsigned long long)phys);
    if (overlaps(phys, len, rsdp))
        return ptv_fail(err, cap, "%s at %#llx: overlaps the RSDP", name, (unsigned long long)phys);
    memcpy(head, buf, HDR_LEN);
    *n = (len - HDR_LEN) / esz;
    for (uint32_t i = 0; i < *n; i++)
        entries[i] = esz == 8 ? get64(buf + HDR_LEN + 8 * i) : get32(buf + HDR_LEN + 4 * i);
    self->base = phys;
    self->len = len;
    return true;
}

/* check the tables one root lists; note an MADT and the FADT's SCI */
static bool check_entries(const struct acpi_view *m, const char *name, const uint64_t *entries,
                          uint32_t n, const struct span *avoid, unsigned n_avoid,
                          struct acpi_scan *s, char *err, size_t cap)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e = entries[i];
        unsigned long long ea = (unsigned long long)e;
        uint8_t h[HDR_LEN];
        char sig[5];
        uint32_t len;

        if (e == 0) /* a null entry: skipped by OSes, copied as it is */
            continue;
        for (uint32_t j = 0; j < i; j++)
            if (entries[j] == e)
                return ptv_fail(err, cap,
                                "%s entries %u and %u are the same table at %#llx (a loop)", name,
                                j, i, ea);
        if (!rd(m, e, h, HDR_LEN))
            return ptv_fail(err, cap, "%s entry %u at %#llx: header not readable (truncated)", name,
                            i, ea);
        sig4(sig, h);
        len = get32(h + HDR_OFF_LEN);
        if (overlaps_any(e, HDR_LEN, avoid, n_avoid))
            return ptv_fail(err, cap, LOOP_MSG, name, i, sig, ea);
        if (len < HDR_LEN)
            return ptv_fail(err, cap,
                            "%s entry %u '%s' at %#llx: length %u is shorter than its header", name,
                            i, sig, ea, len);
        if (len > ACPI_TABLE_MAX_LEN)
            return ptv_fail(err, cap, "%s entry %u '%s' at %#llx: length %u is over %u (overlong)",
                            name, i, sig, ea, len, ACPI_TABLE_MAX_LEN);
        if (e + len < e || !rd(m, e, NULL, len))
            return ptv_fail(
                err, cap,
                "%s entry %u '%s' at %#llx: length %u runs past readable memory (truncated)", name,
                i, sig, ea, len);
        if (overlaps_any(e, len, avoid, n_avoid))
            return ptv_fail(err, cap, LOOP_MSG, name, i, sig, ea);
        if (memcmp(h, "APIC", 4) == 0)
            s->has_madt = true;
        if (memcmp(h, "FACP", 4) == 0) {
            uint8_t sci[2], sum;
            if (len < FADT_OFF_SCI_INT + 2)
                return ptv_fail(err, cap, "%s entry %u FADT at %#llx: length %u has no SCI_INT",
                                name, i, ea, len);
            if (!sum_table(m, e, len, &sum) || !rd(m, e + FADT_OFF_SCI_INT, sci, 2))
                return ptv_fail(err, cap, "%s entry %u FADT at %#llx: not readable", name, i, ea);
            if (sum != 0)
                return ptv_fail(err, cap, "%s entry %u FADT at %#llx: checksum wrong", name, i, ea);
            s->has_fadt = true;
            s->sci_irq = get16(sci);
        }
    }
    return true;
}

bool acpi_scan(const struct acpi_view *m, uint64_t rsdp, struct acpi_scan *s, char *err, size_t cap)
{
    uint8_t r[RSDP_MAX_LEN];
    uint64_t tmp[ACPI_ROOT_MAX_ENTRIES];
    struct span avoid[3] = {{0, 0}, {0, 0}, {0, 0}};
    unsigned long long ra = (unsigned long long)rsdp;
    uint32_t rlen = RSDP_V1_LEN;

    memset(s, 0, sizeof(*s));
    if (err && cap)
        err[0] = 0;
    if (rsdp == 0)
        return true;
    s->rsdp = rsdp;
    if (!rd(m, rsdp, r, RSDP_V1_LEN))
        return ptv_fail(err, cap, "RSDP at %#llx: not readable", ra);
    if (memcmp(r, RSDP_SIG, 8) != 0)
        return ptv_fail(err, cap, "RSDP at %#llx: no \"RSD PTR \" signature", ra);
    if (acpi_sum(r, RSDP_V1_LEN) != 0)
        return ptv_fail(err, cap, "RSDP at %#llx: checksum wrong", ra);
    s->revision = r[RSDP_OFF_REV];
    memcpy(s->oem_id, r + RSDP_OFF_OEM, 6);
    s->rsdt = get32(r + RSDP_OFF_RSDT);
    if (s->revision >= 2) {
        if (!rd(m, rsdp, r, RSDP_V2_LEN))
            return ptv_fail(err, cap, "RSDP at %#llx: revision %u but not readable to 36 bytes", ra,
                            s->revision);
        rlen = get32(r + RSDP_OFF_LEN);
        if (rlen < RSDP_V2_LEN || rlen > RSDP_MAX_LEN)
            return ptv_fail(err, cap, "RSDP at %#llx: length %u (ACPI 2.0+ needs %u..%u)", ra, rlen,
                            RSDP_V2_LEN, RSDP_MAX_LEN);
        if (!rd(m, rsdp, r, rlen))
            return ptv_fail(err, cap, "RSDP at %#llx: length %u runs past readable memory", ra,
                            rlen);
        if (acpi_sum(r, rlen) != 0)
            return ptv_fail(err, cap, "RSDP at %#llx: extended checksum wrong", ra);
        s->xsdt = get64(r + RSDP_OFF_XSDT);
    }
    avoid[0] = (struct span){rsdp, rlen};
    if (!s->xsdt && !s->rsdt)
        return ptv_fail(err, cap, "RSDP at %#llx: lists neither an XSDT nor an RSDT", ra);
    if (s->xsdt && !read_root(m, "XSDT", s->xsdt, 8, avoid[0], s->xsdt_head, s->xsdt_entries,
                              &s->xsdt_n, &avoid[1], err, cap))
        return false;
    if (s->rsdt) {
        if (!read_root(m, "RSDT", s->rsdt, 4, avoid[0], s->rsdt_head, tmp, &s->rsdt_n, &avoid[2],
                       err, cap))
            return false;
        if (overlaps(avoid[2].base, avoid[2].len, avoid[1]))
            return ptv_fail(err, cap, "RSDT at %#llx overlaps the XSDT",
                            (unsigned long long)s->rsdt);
        for (uint32_t i = 0; i < s->rsdt_n; i++)
            s->rsdt_entries[i] = (uint32_t)tmp[i];
    }
    if (s->xsdt && !check_entries(m, "XSDT", s->xsdt_entries, s->xsdt_n, avoid, 3, s, err, cap))
        return false;
    return !s->rsdt || check_entries(m, "RSDT", tmp, s->rsdt_n, avoid, 3, s, err, cap);
}

uint64_t acpi_find_table(const struct acpi_view *m, const struct acpi_scan *s, const char *sig)
{
    uint8_t h[4];
    for (uint32_t i = 0; i < s->xsdt_n; i++)
        if (s->xsdt_entries[i] && rd(m, s->xsdt_entries[i], h, 4) && !memcmp(h, sig, 4))
            return s->xsdt_entries[i];
    for (uint32_t i = 0; i < s->rsdt_n; i++)
        if (s->rsdt_entries[i] && rd(m, s->rsdt_entries[i], h, 4) && !memcmp(h, sig, 4))
            return s->rsdt_entries[i];
    return 0;
}

void acpi_resign(uint8_t *hdr, const char *sig)
{
    uint8_t delta = 0;
    for (int i = 0; i < 4; i++) {
        delta = (uint8_t)(delta + hdr[i] - (uint8_t)sig[i]);
        hdr[i] = (uint8_t)sig[i];
    }
    hdr[HDR_OFF_CSUM] = (uint8_t)(hdr[HDR_OFF_CSUM] + delta);
}

/* ---- building ---- */

static size_t align16(size_t n)
{
    return (n + TABLE_ALIGN - 1) & ~(size_t)(TABLE_ALIGN - 1);
}

static bool sci_override(const struct acpi_scan *s, const struct acpi_madt_in *in)
{
    return in->ioapic.present && s->has_fadt && s->sci_irq < ISA_IRQS && s->sci_irq != PIT_IRQ &&
           s->sci_irq != PIT_GSI;
}

static uint32_t madt_len(const struct acpi_scan *s, const struct acpi_madt_in *in)
{
    uint32_t len = MADT_FIXED_LEN + in->n_cpus * MADT_LAPIC_LEN + MADT_LAPIC_NMI_LEN;
    if (in->ioapic.present)
        len += MADT_IOAPIC_LEN + MADT_ISO_LEN + (sci_override(s, in) ? MADT_ISO_LEN : 0);
    return len;
}

static bool build_xsdt(const struct acpi_scan *s)
{
    return !s->rsdp || s->xsdt;
}

static bool build_rsdt(const struct acpi_scan *s)
{
    return !s->rsdp || s->rsdt;
}

static uint8_t rsdp_revision(const struct acpi_scan *s)
{
    return s->rsdp ? s->revision : 2;
}

/* the layout in res; false if in is not buildable */
static bool layout(const struct acpi_scan *s, const struct acpi_madt_in *in, struct acpi_built *res,
                   char *err, size_t cap)
{
    size_t off;

    if (in->n_cpus == 0 || in->n_cpus > ACPI_MADT_MAX_CPUS)
        return ptv_fail(err, cap, "%u CPUs: an MADT of xAPIC entries holds 1..%u", in->n_cpus,
                        ACPI_MADT_MAX_CPUS);
    for (unsigned i = 0; i < in->n_cpus; i++) {
        if (in->apic_ids[i] > APIC_ID_MAX)
            return ptv_fail(err, cap, "CPU %u has APIC ID %u: needs an x2APIC entry (not built)", i,
                            in->apic_ids[i]);
        for (unsigned j = 0; j < i; j++)
            if (in->apic_ids[j] == in->apic_ids[i])
                return ptv_fail(err, cap, "CPUs %u and %u both have APIC ID %u", j, i,
                                in->apic_ids[i]);
    }
    if (s->xsdt_n >= ACPI_ROOT_MAX_ENTRIES || s->rsdt_n >= ACPI_ROOT_MAX_ENTRIES)
        return ptv_fail(err, cap, "the root table is full (%u entries)", ACPI_ROOT_MAX_ENTRIES);
    off = align16(rsdp_revision(s) >= 2 ? RSDP_V2_LEN : RSDP_V1_LEN);
    res->rsdp_off = 0;
    res->xsdt_off = res->rsdt_off = SIZE_MAX;
    if (build_xsdt(s)) {
        res->xsdt_off = off;
        off = align16(off + HDR_LEN + 8 * (s->xsdt_n + 1));
    }
    if (build_rsdt(s)) {
        res->rsdt_off = off;
        off = align16(off + HDR_LEN + 4 * (s->rsdt_n + 1));
    }
    res->madt_off = off;
    res->madt_len = madt_len(s, in);
    res->size = off + res->madt_len;
    return true;
}

size_t acpi_madt_size(const struct acpi_scan *s, const struct acpi_madt_in *in)
{
    struct acpi_built b;
    char err[ACPI_ERR_MAX];
    return layout(s, in, &b, err, sizeof(err)) ? b.size : 0;
}

/* a fresh header, or a copy of old (kept OEM fields), with sig, len and rev set */
static void header(uint8_t *t, const char *sig, uint32_t len, uint8_t rev, const uint8_t *old,
                   const char oem_id[6])
{
    if (old) {
        memcpy(t, old, HDR_LEN);
    } else {
        memcpy(t + HDR_OFF_OEM, oem_id, 6);
        memcpy(t + HDR_OFF_TABLE, NEW_TABLE_ID, 8);
        put32(t + HDR_OFF_OEMREV, NEW_REVISION);
        memcpy(t + HDR_OFF_CREATOR, NEW_CREATOR, 4);
        put32(t + HDR_OFF_CRREV, NEW_REVISION);
        t[HDR_OFF_REV] = rev;
    }
    memcpy(t, sig, 4);
    put32(t + HDR_OFF_LEN, len);
    t[HDR_OFF_CSUM] = 0;
}

static void seal(uint8_t *t, size_t len, size_t csum_off)
{
    t[csum_off] = (uint8_t)(0x100 - acpi_sum(t, len));
}

static uint8_t *madt_entry(uint8_t *p, uint8_t type, uint8_t len)
{
    p[0] = type;
    p[1] = len;
    return p + 2;
}

static void write_madt(const struct acpi_scan *s, const struct acpi_madt_in *in, uint8_t *t,
                       uint32_t len, const char oem_id[6])
{
    uint8_t *p = t + MADT_FIXED_LEN, *q;

    header(t, "APIC", len, MADT_REVISION, NULL, oem_id);
    put32(t + MADT_OFF_LAPIC_ADDR, ACPI_LAPIC_DEFAULT_ADDR);
    put32(t + MADT_OFF_FLAGS, MADT_PCAT_COMPAT);
    for (unsigned i = 0; i < in->n_cpus; i++) {
        q = madt_entry(p, MADT_TYPE_LAPIC, MADT_LAPIC_LEN);
        q[0] = (uint8_t)i; /* ACPI processor UID */
        q[1] = (uint8_t)in->apic_ids[i];
        put32(q + 2, MADT_LAPIC_ENABLED);
        p += MADT_LAPIC_LEN;
    }
    if (in->ioapic.present) {
        q = madt_entry(p, MADT_TYPE_IOAPIC, MADT_IOAPIC_LEN);
        q[0] = in->ioapic.id;
        q[1] = 0;
        put32(q + 2, in->ioapic.addr);
        put32(q + 6, in->ioapic.gsi_base);
        p += MADT_IOAPIC_LEN;
        /* the PC's IRQ 0 arrives on pin 2 (as every PC BIOS's MADT says) */
        q = madt_entry(p, MADT_TYPE_ISO, MADT_ISO_LEN);
        q[0] = 0; /* bus: ISA */
        q[1] = PIT_IRQ;
        put32(q + 2, PIT_GSI);
        put16(q + 6, MPS_INTI_CONFORMS);
        p += MADT_ISO_LEN;
        if (sci_override(s, in)) {
            /* the SCI is level triggered; active high as the Bochs and SeaBIOS MADTs
             * describe the PIIX4's (the only firmware family seen without an MADT) */
            q = madt_entry(p, MADT_TYPE_ISO, MADT_ISO_LEN);
            q[0] = 0;
            q[1] = (uint8_t)s->sci_irq;
            put32(q + 2, s->sci_irq);
            put16(q + 6, MPS_INTI_HIGH_LEVEL);
            p += MADT_ISO_LEN;
        }
    }
    /* NMI on LINT1 of every CPU, as PCs wire it */
    q = madt_entry(p, MADT_TYPE_LAPIC_NMI, MADT_LAPIC_NMI_LEN);
    q[0] = LAPIC_NMI_ALL_CPUS;
    put16(q + 1, MPS_INTI_CONFORMS);
    q[3] = LAPIC_NMI_LINT1;
    p += MADT_LAPIC_NMI_LEN;
    seal(t, len, HDR_OFF_CSUM);
}

bool acpi_madt_build(const struct acpi_scan *s, const struct acpi_madt_in *in, uint8_t *out,
                     size_t cap, uint64_t out_phys, struct acpi_built *res, char *err, size_t ecap)
{
    const char *oem = s->rsdp ? s->oem_id : NEW_OEM_ID;
    uint8_t rev = rsdp_revision(s);
    struct acpi_built b;
    uint64_t madt;

    if (err && ecap)
        err[0] = 0;
    if (!layout(s, in, &b, err, ecap))
        return false;
    if (b.size > cap)
        return ptv_fail(err, ecap, "the new tables need %zu bytes, the buffer has %zu", b.size,
                        cap);
    if (out_phys == 0 || out_phys % TABLE_ALIGN != 0)
        return ptv_fail(err, ecap, "buffer at %#llx: not a 16-byte aligned address",
                        (unsigned long long)out_phys);
    if (out_phys + b.size < out_phys)
        return ptv_fail(err, ecap, "buffer at %#llx: %zu bytes wrap past the top of memory",
                        (unsigned long long)out_phys, b.size);
    if (b.rsdt_off != SIZE_MAX && out_phys + b.size > 0x100000000ull)
        return ptv_fail(err, ecap, "buffer at %#llx: an RSDT needs its tables below 4 GiB",
                        (unsigned long long)out_phys);
    /* nothing can fail from here on */
    memset(out, 0, b.size);
    madt = out_phys + b.madt_off;
    write_madt(s, in, out + b.madt_off, b.madt_len, oem);
    if (b.xsdt_off != SIZE_MAX) {
        uint8_t *t = out + b.xsdt_off;
        uint32_t n = s->xsdt_n, len = HDR_LEN + 8 * (n + 1);
        header(t, "XSDT", len, 1, s->xsdt ? s->xsdt_head : NULL, oem);
        for (uint32_t i = 0; i < n; i++)
            put64(t + HDR_LEN + 8 * i, s->xsdt_entries[i]);
        put64(t + HDR_LEN + 8 * n, madt);
        seal(t, len, HDR_OFF_CSUM);
    }
    if (b.rsdt_off != SIZE_MAX) {
        uint8_t *t = out + b.rsdt_off;
        uint32_t n = s->rsdt_n, len = HDR_LEN + 4 * (n + 1);
        header(t, "RSDT", len, 1, s->rsdt ? s->rsdt_head : NULL, oem);
        for (uint32_t i = 0; i < n; i++)
            put32(t + HDR_LEN + 4 * i, s->rsdt_entries[i]);
        put32(t + HDR_LEN + 4 * n, (uint32_t)madt);
        seal(t, len, HDR_OFF_CSUM);
    }
    memcpy(out, RSDP_SIG, 8);
    memcpy(out + RSDP_OFF_OEM, oem, 6);
    out[RSDP_OFF_REV] = rev;
    if (b.rsdt_off != SIZE_MAX)
        put32(out + RSDP_OFF_RSDT, (uint32_t)(out_phys + b.rsdt_off));
    seal(out, RSDP_V1_LEN, RSDP_OFF_CSUM);
    if (rev >= 2) {
        put32(out + RSDP_OFF_LEN, RSDP_V2_LEN);
        if (b.xsdt_off != SIZE_MAX)
            put64(out + RSDP_OFF_XSDT, out_phys + b.xsdt_off);
        seal(out, RSDP_V2_LEN, RSDP_OFF_XCSUM);
    }
    *res = b;
    return true;
}
