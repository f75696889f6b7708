/* SPDX-License-Identifier: MIT */
/*
 * Host tests for the MADT aid (boot/acpi_madt.c): firmware tables laid out in
 * fake physical memory, scanned, extended with an MADT, the result placed in
 * the fake memory and scanned and parsed back; every refusal of a hostile
 * table (truncated, overlong, looping, bad checksums) by its message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../boot/acpi_madt.h"

#define FW_BASE  0xe0000ull /* the firmware's tables */
#define FW_LEN   0x10000
#define OUT_BASE 0x7f000000ull /* where the loader puts the new ones */
#define OUT_LEN  0x4000
#define RSDP_AT  (FW_BASE + 0x000)
#define XSDT_AT  (FW_BASE + 0x100)
#define RSDT_AT  (FW_BASE + 0x300)
#define FADT_AT  (FW_BASE + 0x500)
#define HPET_AT  (FW_BASE + 0x700)
#define MADT_AT  (FW_BASE + 0x800)

static uint8_t fw[FW_LEN], outmem[OUT_LEN];

struct region {
    uint64_t base;
    uint8_t *bytes;
    size_t len;
};
static struct region regions[2] = {{FW_BASE, fw, FW_LEN}, {OUT_BASE, outmem, OUT_LEN}};

static bool fake_read(void *ctx, uint64_t phys, void *buf, size_t n)
{
    (void)ctx;
    for (unsigned i = 0; i < 2; i++) {
        struct region *r = &regions[i];
        if (phys >= r->base && n <= r->len && phys - r->base <= r->len - n) {
            if (buf)
                memcpy(buf, r->bytes + (phys - r->base), n);
            return true;
        }
    }
    return false;
}

static const struct acpi_view view = {fake_read, NULL};

static uint8_t *at(uint64_t phys)
{
    if (phys >= OUT_BASE)
        return outmem + (phys - OUT_BASE);
    return fw + (phys - FW_BASE);
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* the host is little-endian, as ACPI is */
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void seal(uint8_t *t, size_t len, size_t off)
{
    t[off] = 0;
    t[off] = (uint8_t)(0x100 - acpi_sum(t, len));
}

static void table(uint64_t phys, const char *sig, uint32_t len)
{
    uint8_t *t = at(phys);
    memset(t, 0, len);
    memcpy(t, sig, 4);
    put32(t + 4, len);
    t[8] = 1;
    memcpy(t + 10, "FWOEM1", 6);
    memcpy(t + 16, "FWTABLE1", 8);
    seal(t, len, 9);
}

static void rsdp(uint8_t rev, uint32_t rsdt, uint64_t xsdt)
{
    uint8_t *r = at(RSDP_AT);
    memset(r, 0, 36);
    memcpy(r, "RSD PTR ", 8);
    memcpy(r + 9, "FWOEM1", 6);
    r[15] = rev;
    put32(r + 16, rsdt);
    seal(r, 20, 8);
    if (rev >= 2) {
        put32(r + 20, 36);
        put64(r + 24, xsdt);
        seal(r, 36, 32);
    }
}

/* a root table listing n entries */
static void root(uint64_t phys, const char *sig, const uint64_t *e, unsigned n)
{
    unsigned esz = sig[0] == 'X' ? 8 : 4;
    table(phys, sig, 36 + esz * n);
    for (unsigned i = 0; i < n; i++) {
        if (esz == 8)
            put64(at(phys) + 36 + 8 * i, e[i]);
        else
            put32(at(phys) + 36 + 4 * i, (uint32_t)e[i]);
    }
    seal(at(phys), 36 + esz * n, 9);
}

/* ACPI 2.0 firmware: RSDP -> XSDT and RSDT -> FADT (SCI 9) + HPET, no MADT */
static void firmware_v2(void)
{
    const uint64_t e[] = {FADT_AT, HPET_AT};
    memset(fw, 0, sizeof(fw));
    table(FADT_AT, "FACP", 116);
    at(FADT_AT)[46] = 9;
    seal(at(FADT_AT), 116, 9);
    table(HPET_AT, "HPET", 56);
    root(XSDT_AT, "XSDT", e, 2);
    root(RSDT_AT, "RSDT", e, 2);
    rsdp(2, (uint32_t)RSDT_AT, XSDT_AT);
}

static const uint32_t two_ids[] = {0, 1};
static const struct acpi_madt_in two_cpus = {
    .apic_ids = two_ids,
    .n_cpus = 2,
    .ioapic = {.present = true, .id = 2, .addr = ACPI_IOAPIC_DEFAULT_ADDR, .gsi_base = 0},
};

static void scan_ok(uint64_t r, struct acpi_scan *s)
{
    char err[ACPI_ERR_MAX];
    bool ok = acpi_scan(&view, r, s, err, sizeof(err));
    if (!ok)
        fail_msg("scan refused: %s", err);
}

static void scan_fails(const char *want)
{
    static struct acpi_scan s;
    char err[ACPI_ERR_MAX];
    assert_false(acpi_scan(&view, RSDP_AT, &s, err, sizeof(err)));
    if (!strstr(err, want))
        fail_msg("error '%s' does not say '%s'", err, want);
}

static struct acpi_built build(const struct acpi_scan *s, const struct acpi_madt_in *in)
{
    struct acpi_built b;
    char err[ACPI_ERR_MAX];
    memset(outmem, 0xaa, sizeof(outmem));
    if (!acpi_madt_build(s, in, outmem, sizeof(outmem), OUT_BASE, &b, err, sizeof(err)))
        fail_msg("build refused: %s", err);
    assert_int_equal(b.size, acpi_madt_size(s, in));
    assert_true(b.size <= sizeof(outmem));
    for (size_t i = b.size; i < sizeof(outmem); i++)
        assert_int_equal(outmem[i], 0xaa); /* nothing written past the end */
    return b;
}

struct madt_seen {
    unsigned lapics, ioapics, isos, nmis;
    uint8_t lapic_id[256], lapic_uid[256];
    uint8_t ioapic_id;
    uint32_t ioapic_addr, ioapic_gsi;
    uint8_t iso_src[4];
    uint32_t iso_gsi[4];
    uint16_t iso_flags[4];
};

/* walk the MADT's structures: each must fit exactly */
static void parse_madt(const uint8_t *t, struct madt_seen *m)
{
    uint32_t len = get32(t + 4);
    memset(m, 0, sizeof(*m));
    assert_memory_equal(t, "APIC", 4);
    assert_int_equal(acpi_sum(t, len), 0);
    assert_int_equal(get32(t + 36), 0xfee00000u);
    assert_int_equal(get32(t + 40), 1); /* PCAT_COMPAT */
    for (uint32_t off = 44; off < len;) {
        const uint8_t *e = t + off;
        assert_true(off + 2 <= len);
        assert_true(e[1] >= 2 && off + e[1] <= len);
        switch (e[0]) {
        case 0:
            assert_int_equal(e[1], 8);
            assert_int_equal(get32(e + 4), 1); /* enabled */
            m->lapic_uid[m->lapics] = e[2];
            m->lapic_id[m->lapics++] = e[3];
            break;
        case 1:
            assert_int_equal(e[1], 12);
            m->ioapics++;
            m->ioapic_id = e[2];
            m->ioapic_addr = get32(e + 4);
            m->ioapic_gsi = get32(e + 8);
            break;
        case 2:
            assert_int_equal(e[1], 10);
            assert_int_equal(e[2], 0); /* ISA */
            m->iso_src[m->isos] = e[3];
            m->iso_gsi[m->isos] = get32(e + 4);
            m->iso_flags[m->isos++] = (uint16_t)(e[8] | e[9] << 8);
            break;
        case 4:
            assert_int_equal(e[1], 6);
            assert_int_equal(e[2], 0xff);
            assert_int_equal(e[5], 1); /* LINT1 */
            m->nmis++;
            break;
        default:
            fail_msg("unexpected MADT structure type %u", e[0]);
        }
        off += e[1];
    }
}

/* the new tables as an OS sees them: scan them back, find the MADT last in each root */
static const uint8_t *rescan(const struct acpi_built *b, struct acpi_scan *s)
{
    scan_ok(OUT_BASE + b->rsdp_off, s);
    assert_true(s->has_madt);
    uint64_t madt = OUT_BASE + b->madt_off;
    if (s->xsdt)
        assert_int_equal(s->xsdt_entries[s->xsdt_n - 1], madt);
    if (s->rsdt)
        assert_int_equal(s->rsdt_entries[s->rsdt_n - 1], madt);
    assert_int_equal(get32(at(madt) + 4), b->madt_len);
    return at(madt);
}

static void test_no_tables_at_all(void **state)
{
    struct acpi_scan s, back;
    struct madt_seen m;
    scan_ok(0, &s);
    assert_int_equal(s.rsdp, 0);
    assert_false(s.has_madt);

    struct acpi_built b = build(&s, &two_cpus);
    assert_int_equal(b.rsdp_off, 0);
    assert_int_not_equal(b.xsdt_off, SIZE_MAX);
    assert_int_not_equal(b.rsdt_off, SIZE_MAX);
    /* RSDP: revision 2, both checksums */
    assert_memory_equal(outmem, "RSD PTR ", 8);
    assert_int_equal(outmem[15], 2);
    assert_int_equal(acpi_sum(outmem, 20), 0);
    assert_int_equal(acpi_sum(outmem, 36), 0);
    assert_int_equal(get32(outmem + 20), 36);
    assert_int_equal(get64(outmem + 24), OUT_BASE + b.xsdt_off);
    assert_int_equal(get32(outmem + 16), OUT_BASE + b.rsdt_off);
    assert_int_equal(get32(outmem + b.xsdt_off + 4), 36 + 8);
    assert_int_equal(get32(outmem + b.rsdt_off + 4), 36 + 4);
    /* 44 + 2 x 8 (LAPIC) + 12 (I/O APIC) + 10 (IRQ0) + 6 (NMI), no FADT: no SCI override */
    assert_int_equal(b.madt_len, 44 + 16 + 12 + 10 + 6);
    assert_int_equal(b.madt_off % 16, 0);
    assert_int_equal(b.xsdt_off % 16, 0);
    assert_int_equal(b.rsdt_off % 16, 0);

    const uint8_t *t = rescan(&b, &back);
    assert_int_equal(back.revision, 2);
    assert_int_equal(back.xsdt_n, 1);
    assert_int_equal(back.rsdt_n, 1);
    assert_false(back.has_fadt);
    assert_memory_equal(t + 10, "PTVISR", 6);
    parse_madt(t, &m);
    assert_int_equal(m.lapics, 2);
    assert_int_equal(m.lapic_id[0], 0);
    assert_int_equal(m.lapic_id[1], 1);
    assert_int_equal(m.lapic_uid[1], 1);
    assert_int_equal(m.ioapics, 1);
    assert_int_equal(m.ioapic_id, 2);
    assert_int_equal(m.ioapic_addr, 0xfec00000u);
    assert_int_equal(m.ioapic_gsi, 0);
    assert_int_equal(m.isos, 1);
    assert_int_equal(m.iso_src[0], 0);
    assert_int_equal(m.iso_gsi[0], 2);
    assert_int_equal(m.iso_flags[0], 0);
    assert_int_equal(m.nmis, 1);
}

static void test_acpi2_firmware_keeps_its_tables(void **state)
{
    struct acpi_scan s, back;
    struct madt_seen m;
    firmware_v2();
    scan_ok(RSDP_AT, &s);
    assert_int_equal(s.revision, 2);
    assert_int_equal(s.xsdt_n, 2);
    assert_int_equal(s.rsdt_n, 2);
    assert_true(s.has_fadt);
    assert_int_equal(s.sci_irq, 9);
    assert_false(s.has_madt);

    struct acpi_built b = build(&s, &two_cpus);
    const uint8_t *t = rescan(&b, &back);
    assert_int_equal(back.xsdt_n, 3);
    assert_int_equal(back.rsdt_n, 3);
    assert_int_equal(back.xsdt_entries[0], FADT_AT);
    assert_int_equal(back.xsdt_entries[1], HPET_AT);
    assert_int_equal(back.rsdt_entries[1], HPET_AT);
    assert_true(back.has_fadt);
    /* OEM fields of the old roots and the RSDP are kept */
    assert_memory_equal(outmem + 9, "FWOEM1", 6);
    assert_memory_equal(outmem + b.xsdt_off + 16, "FWTABLE1", 8);
    assert_memory_equal(t + 10, "FWOEM1", 6);
    parse_madt(t, &m);
    assert_int_equal(m.isos, 2);
    assert_int_equal(m.iso_src[1], 9);
    assert_int_equal(m.iso_gsi[1], 9);
    assert_int_equal(m.iso_flags[1], 0x000d); /* level, active high */
    /* the firmware's tables are untouched */
    struct acpi_scan again;
    scan_ok(RSDP_AT, &again);
    assert_int_equal(again.xsdt_n, 2);
}

static void test_madt_present(void **state)
{
    const uint64_t e[] = {FADT_AT, MADT_AT, HPET_AT};
    struct acpi_scan s;
    firmware_v2();
    table(MADT_AT, "APIC", 44);
    root(XSDT_AT, "XSDT", e, 3);
    scan_ok(RSDP_AT, &s);
    assert_true(s.has_madt);
    /* listed in the RSDT only counts too */
    firmware_v2();
    table(MADT_AT, "APIC", 44);
    root(RSDT_AT, "RSDT", e, 3);
    scan_ok(RSDP_AT, &s);
    assert_true(s.has_madt);
}

/* the DMAR for the VMM: found through either root, renamed with its checksum kept, then not
 * found under its old name */
static void test_dmar_find_and_hide(void **state)
{
    const uint64_t e[] = {FADT_AT, MADT_AT, HPET_AT};
    struct acpi_scan s;
    firmware_v2();
    table(MADT_AT, "DMAR", 80);
    root(XSDT_AT, "XSDT", e, 3);
    scan_ok(RSDP_AT, &s);
    assert_int_equal(acpi_find_table(&view, &s, "DMAR"), MADT_AT);
    assert_int_equal(acpi_find_table(&view, &s, "SRAT"), 0);
    acpi_resign(at(MADT_AT), ACPI_DMAR_HIDDEN_SIG);
    assert_memory_equal(at(MADT_AT), "PTVD", 4);
    assert_int_equal(acpi_sum(at(MADT_AT), 80), 0);
    assert_int_equal(get32(at(MADT_AT) + 4), 80);
    scan_ok(RSDP_AT, &s); /* the roots still check out */
    assert_int_equal(acpi_find_table(&view, &s, "DMAR"), 0);
    assert_int_equal(acpi_find_table(&view, &s, ACPI_DMAR_HIDDEN_SIG), MADT_AT);
    /* an ACPI 1.0 firmware: RSDT only */
    firmware_v2();
    table(MADT_AT, "DMAR", 48);
    root(RSDT_AT, "RSDT", e, 3);
    rsdp(0, (uint32_t)RSDT_AT, 0);
    scan_ok(RSDP_AT, &s);
    assert_int_equal(acpi_find_table(&view, &s, "DMAR"), MADT_AT);
}

static void test_acpi1_firmware(void **state)
{
    const uint64_t e[] = {FADT_AT};
    struct acpi_scan s, back;
    memset(fw, 0, sizeof(fw));
    table(FADT_AT, "FACP", 116);
    root(RSDT_AT, "RSDT", e, 1);
    rsdp(0, (uint32_t)RSDT_AT, 0);
    scan_ok(RSDP_AT, &s);
    assert_int_equal(s.revision, 0);
    assert_int_equal(s.xsdt, 0);
    assert_true(s.has_fadt);
    assert_int_equal(s.sci_irq, 0); /* no SCI: no override for it */

    struct acpi_built b = build(&s, &two_cpus);
    assert_int_equal(b.xsdt_off, SIZE_MAX);
    assert_int_equal(b.rsdt_off, 32); /* after a 20-byte RSDP, 16-aligned */
    assert_int_equal(outmem[15], 0);
    assert_int_equal(acpi_sum(outmem, 20), 0);
    rescan(&b, &back);
    assert_int_equal(back.rsdt_n, 2);
    assert_int_equal(back.xsdt, 0);
}

static void test_no_ioapic_and_many_cpus(void **state)
{
    static uint32_t ids[ACPI_MADT_MAX_CPUS];
    struct acpi_madt_in in = {.apic_ids = ids, .n_cpus = ACPI_MADT_MAX_CPUS};
    struct acpi_scan s, back;
    struct madt_seen m;
    for (unsigned i = 0; i < ACPI_MADT_MAX_CPUS; i++)
        ids[i] = (i + 3) % ACPI_MADT_MAX_CPUS; /* 3 ... 254, 0, 1, 2 */
    firmware_v2();
    scan_ok(RSDP_AT, &s);
    struct acpi_built b = build(&s, &in);
    parse_madt(rescan(&b, &back), &m);
    assert_int_equal(m.lapics, ACPI_MADT_MAX_CPUS);
    assert_int_equal(m.lapic_id[0], 3);
    assert_int_equal(m.lapic_id[254], 2);
    assert_int_equal(m.lapic_uid[254], 254);
    assert_int_equal(m.ioapics, 0);
    assert_int_equal(m.isos, 0); /* overrides only with an I/O APIC */
}

static void expect_build_refused(const struct acpi_scan *s, const struct acpi_madt_in *in,
                                 size_t cap, uint64_t phys, const char *want)
{
    struct acpi_built b;
    char err[ACPI_ERR_MAX];
    memset(outmem, 0xaa, sizeof(outmem));
    bool ok = !acpi_madt_build(s, in, outmem, cap, phys, &b, err, sizeof(err));
    if (!ok || !strstr(err, want))
        fail_msg("build %s, error '%s' does not say '%s'", ok ? "refused" : "accepted", err, want);
    for (size_t i = 0; i < sizeof(outmem); i++)
        assert_int_equal(outmem[i], 0xaa); /* validate, then commit */
}

static void test_build_refusals(void **state)
{
    static struct acpi_scan s;
    uint32_t ids[3] = {0, 1, 0};
    struct acpi_madt_in in = two_cpus;
    scan_ok(0, &s);

    in.n_cpus = 0;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "0 CPUs");
    assert_int_equal(acpi_madt_size(&s, &in), 0);
    in.n_cpus = 256;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "256 CPUs");
    in = two_cpus;
    in.apic_ids = ids;
    in.n_cpus = 3;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "CPUs 0 and 2 both have APIC ID 0");
    ids[2] = 0xff;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "APIC ID 255: needs an x2APIC entry");
    ids[2] = 0x100;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "APIC ID 256");
    in = two_cpus;
    expect_build_refused(&s, &in, acpi_madt_size(&s, &in) - 1, OUT_BASE, "need");
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE + 8, "16-byte aligned");
    expect_build_refused(&s, &in, OUT_LEN, 0, "16-byte aligned");
    expect_build_refused(&s, &in, OUT_LEN, 0xffffff80ull, "below 4 GiB");
    expect_build_refused(&s, &in, OUT_LEN, 0xfffffffffffffff0ull, "wrap past the top");
    /* a full root table has no room for one more entry */
    s.rsdp = RSDP_AT;
    s.revision = 2;
    s.xsdt = XSDT_AT;
    s.xsdt_n = ACPI_ROOT_MAX_ENTRIES;
    expect_build_refused(&s, &in, OUT_LEN, OUT_BASE, "root table is full");
}

/* ---- hostile firmware tables ---- */

static void test_hostile_rsdp(void **state)
{
    static struct acpi_scan s;
    char err[ACPI_ERR_MAX];
    assert_false(acpi_scan(&view, 0x1000, &s, err, sizeof(err))); /* outside memory */
    assert_non_null(strstr(err, "RSDP at 0x1000: not readable"));
    assert_false(acpi_scan(&view, FW_BASE + FW_LEN - 10, &s, err, sizeof(err)));
    assert_non_null(strstr(err, "not readable"));

    firmware_v2();
    at(RSDP_AT)[0] = 'X';
    scan_fails("no \"RSD PTR \" signature");
    firmware_v2();
    at(RSDP_AT)[9] ^= 1;
    scan_fails("RSDP at 0xe0000: checksum wrong");
    firmware_v2();
    at(RSDP_AT)[33] = 1;
    scan_fails("extended checksum wrong");
    firmware_v2();
    put32(at(RSDP_AT) + 20, 20);
    seal(at(RSDP_AT), 36, 32);
    scan_fails("length 20 (ACPI 2.0+ needs 36..64)");
    firmware_v2();
    put32(at(RSDP_AT) + 20, 1000);
    seal(at(RSDP_AT), 36, 32);
    scan_fails("length 1000");
    firmware_v2();
    rsdp(2, 0, 0);
    scan_fails("lists neither an XSDT nor an RSDT");
}

static void test_hostile_roots(void **state)
{
    const uint64_t e[] = {FADT_AT};
    firmware_v2();
    memcpy(at(XSDT_AT), "RSDT", 4);
    seal(at(XSDT_AT), 36 + 16, 9);
    scan_fails("XSDT at 0xe0100: signature 'RSDT', not XSDT");
    firmware_v2();
    put32(at(XSDT_AT) + 4, 20);
    seal(at(XSDT_AT), 20, 9);
    scan_fails("length 20 is shorter than its header");
    firmware_v2();
    put32(at(XSDT_AT) + 4, 36 + 12);
    seal(at(XSDT_AT), 48, 9);
    scan_fails("length 48 is not the header plus whole 8-byte entries");
    firmware_v2();
    put32(at(XSDT_AT) + 4, 36 + 8 * 257);
    scan_fails("lists more than 256 tables (overlong)");
    /* a root table at the very end of memory, longer than what is left: truncated */
    firmware_v2();
    rsdp(2, 0, FW_BASE + FW_LEN - 40);
    table(FW_BASE + FW_LEN - 40, "XSDT", 40);
    put32(at(FW_BASE + FW_LEN - 40) + 4, 36 + 8 * 2);
    scan_fails("length 52 runs past readable memory (truncated)");
    firmware_v2();
    rsdp(2, 0, FW_BASE + FW_LEN - 20);
    scan_fails("XSDT at 0xeffec: header not readable (truncated)");
    firmware_v2();
    at(XSDT_AT)[20] ^= 0x40;
    scan_fails("XSDT at 0xe0100: checksum wrong");
    firmware_v2();
    at(RSDT_AT)[20] ^= 0x40;
    scan_fails("RSDT at 0xe0300: checksum wrong");
    /* roots overlapping each other or the RSDP */
    firmware_v2();
    rsdp(2, (uint32_t)RSDT_AT, RSDP_AT + 16);
    scan_fails("XSDT at 0xe0010");
    firmware_v2();
    root(XSDT_AT + 8, "XSDT", e, 1);
    rsdp(2, (uint32_t)XSDT_AT, XSDT_AT + 8);
    scan_fails("signature"); /* the RSDT's signature is read where the XSDT's bytes are */
    firmware_v2();
    root(XSDT_AT + 36, "RSDT", e, 1); /* 40 bytes inside the XSDT's entries ... */
    put32(at(XSDT_AT) + 4, 36 + 40);  /* ... which the XSDT then lists as 5 entries */
    seal(at(XSDT_AT), 36 + 40, 9);
    rsdp(2, (uint32_t)(XSDT_AT + 36), XSDT_AT);
    scan_fails("RSDT at 0xe0124 overlaps the XSDT");
}

static void test_hostile_entries(void **state)
{
    firmware_v2();
    uint64_t loop[] = {FADT_AT, XSDT_AT};
    root(XSDT_AT, "XSDT", loop, 2);
    scan_fails("XSDT entry 1 'XSDT' at 0xe0100: overlaps the RSDP or a root table (a loop)");
    firmware_v2();
    uint64_t into_rsdt[] = {FADT_AT, RSDT_AT + 4};
    root(XSDT_AT, "XSDT", into_rsdt, 2);
    scan_fails("overlaps the RSDP or a root table (a loop)");
    firmware_v2();
    uint64_t to_rsdp[] = {RSDP_AT};
    root(XSDT_AT, "XSDT", to_rsdp, 1);
    scan_fails("XSDT entry 0 'RSD ' at 0xe0000: overlaps the RSDP or a root table (a loop)");
    firmware_v2();
    uint64_t twice[] = {FADT_AT, HPET_AT, FADT_AT};
    root(RSDT_AT, "RSDT", twice, 3);
    scan_fails("RSDT entries 0 and 2 are the same table at 0xe0500 (a loop)");
    firmware_v2();
    uint64_t outside[] = {0x1000};
    root(XSDT_AT, "XSDT", outside, 1);
    scan_fails("XSDT entry 0 at 0x1000: header not readable (truncated)");
    firmware_v2();
    uint64_t wrap[] = {0xffffffffffffffe0ull};
    root(XSDT_AT, "XSDT", wrap, 1);
    scan_fails("header not readable (truncated)");
    firmware_v2();
    put32(at(HPET_AT) + 4, 10);
    scan_fails("XSDT entry 1 'HPET' at 0xe0700: length 10 is shorter than its header");
    firmware_v2();
    put32(at(HPET_AT) + 4, 0x7fffffff);
    scan_fails("XSDT entry 1 'HPET' at 0xe0700: length 2147483647 is over 16777216 (overlong)");
    firmware_v2();
    put32(at(HPET_AT) + 4, FW_LEN);
    scan_fails("XSDT entry 1 'HPET' at 0xe0700: length 65536 runs past readable memory");
    firmware_v2();
    put32(at(FADT_AT) + 4, 40);
    scan_fails("XSDT entry 0 FADT at 0xe0500: length 40 has no SCI_INT");
    firmware_v2();
    at(FADT_AT)[100] ^= 1;
    scan_fails("XSDT entry 0 FADT at 0xe0500: checksum wrong");
    /* unprintable signatures are shown as '?' */
    firmware_v2();
    at(HPET_AT)[0] = 0x01;
    put32(at(HPET_AT) + 4, 10);
    scan_fails("'?PET'");
    /* a null entry is skipped, not refused */
    static struct acpi_scan s;
    firmware_v2();
    uint64_t null_entry[] = {0, FADT_AT};
    root(XSDT_AT, "XSDT", null_entry, 2);
    scan_ok(RSDP_AT, &s);
    assert_int_equal(s.xsdt_n, 2);
    assert_true(s.has_fadt);
}

static void test_error_buffer_bounded(void **state)
{
    static struct acpi_scan s;
    char err[16];
    memset(err, 'x', sizeof(err));
    firmware_v2();
    at(XSDT_AT)[20] ^= 0x40;
    assert_false(acpi_scan(&view, RSDP_AT, &s, err, sizeof(err)));
    assert_int_equal(strlen(err), sizeof(err) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_tables_at_all),
        cmocka_unit_test(test_acpi2_firmware_keeps_its_tables),
        cmocka_unit_test(test_madt_present),
        cmocka_unit_test(test_acpi1_firmware),
        cmocka_unit_test(test_dmar_find_and_hide),
        cmocka_unit_test(test_no_ioapic_and_many_cpus),
        cmocka_unit_test(test_build_refusals),
        cmocka_unit_test(test_hostile_rsdp),
        cmocka_unit_test(test_hostile_roots),
        cmocka_unit_test(test_hostile_entries),
        cmocka_unit_test(test_error_buffer_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
