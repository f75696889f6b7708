/* SPDX-License-Identifier: MIT */
/*
 * Host tests of the DMAR parser (vmm/iommu/dmar.c): QEMU's table and a client platform's parse;
 * every refusal of a bad table comes with its one-line reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "iommu/dmar.h"
#include "fakes/dmar_build.h"

static struct dmar_buf d;
static struct dmar_info info;
static char err[DMAR_ERR_MAX];

static bool parse(void)
{
    return dmar_parse(d.b, d.len, &info, err, sizeof(err));
}

/* refused, with msg in the reason */
static void refused(const char *msg)
{
    bool ok = parse();
    if (ok || !strstr(err, msg))
        fail_msg("expected a refusal naming \"%s\", got %s: \"%s\"", msg, ok ? "ok" : "refused",
                 err);
    assert_int_equal(strncmp(err, "DMAR: ", 6), 0);
}

/* QEMU 7.2's intel-iommu: one unit for all devices at 0xfed90000, 39-bit host width */
static void qemu_table(void)
{
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_seal(&d);
}

static void test_qemu(void **state)
{
    qemu_table();
    assert_true(parse());
    assert_string_equal(err, "");
    assert_int_equal(info.haw, 39);
    assert_int_equal(info.n_units, 1);
    assert_int_equal(info.units[0].reg_base, 0xfed90000);
    assert_int_equal(info.units[0].reg_size, 4096);
    assert_true(info.units[0].include_all);
    assert_int_equal(info.n_rmrr, 0);
    assert_false(info.listed_only);
}

/* QEMU 7.2's real table (-device intel-iommu,intremap=off, q35 -nodefaults + edu), as its
 * firmware hands it over: one unit listing the I/O APIC and the root bus's five devices, no
 * INCLUDE_PCI_ALL */
static void test_qemu72_as_dumped(void **state)
{
    static const uint8_t t[] = {
        0x44, 0x4d, 0x41, 0x52, 0x70, 0x00, 0x00, 0x00, 0x01, 0x29, 0x42, 0x4f, 0x43, 0x48,
        0x53, 0x20, 0x42, 0x58, 0x50, 0x43, 0x20, 0x20, 0x20, 0x20, 0x01, 0x00, 0x00, 0x00,
        0x42, 0x58, 0x50, 0x43, 0x01, 0x00, 0x00, 0x00, 0x26, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0xd9, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x03, 0x08, 0x00, 0x00, 0x00, 0xff,
        0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x00, 0x01, 0x08,
        0x00, 0x00, 0x00, 0x00, 0x1f, 0x02, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x1f, 0x03};
    assert_true(dmar_parse(t, sizeof(t), &info, err, sizeof(err)));
    assert_int_equal(info.n_units, 1);
    assert_int_equal(info.units[0].reg_base, 0xfed90000);
    assert_int_equal(info.units[0].n_scopes, 6);
    assert_false(info.units[0].include_all);
    assert_true(info.listed_only);
    assert_int_equal(info.haw, 39);
}

/* a laptop: graphics unit listing one device, the rest unit, a USB RMRR, an ATSR-type extra */
static void test_client_platform(void **state)
{
    db_start(&d, 38, 1 | 2);
    db_drhd(&d, 0, 0, 0, 0xfed90000, 2);
    db_drhd(&d, 1, 1, 0, 0xfed91000 + 0x1000, -1);
    db_rmrr(&d, 0, 0x7c000000, 0x7c7fffff);
    db_other(&d, 2, 8);
    db_seal(&d);
    assert_true(parse());
    assert_int_equal(info.n_units, 2);
    assert_false(info.units[0].include_all);
    assert_int_equal(info.units[0].n_scopes, 1);
    assert_int_equal(info.units[1].reg_size, 8192);
    assert_int_equal(info.n_rmrr, 1);
    assert_int_equal(info.rmrr[0].base, 0x7c000000);
    assert_int_equal(info.rmrr[0].end, 0x7c800000);
    assert_int_equal(info.n_other, 1);
    assert_int_equal(info.flags, 3);
}

static void test_header_refusals(void **state)
{
    qemu_table();
    d.b[20] ^= 1;
    refused("checksum wrong");
    qemu_table();
    memcpy(d.b, "DMAX", 4);
    db_seal(&d);
    refused("signature");
    qemu_table();
    assert_false(dmar_parse(d.b, 40, &info, err, sizeof(err)));
    assert_non_null(strstr(err, "shorter than its 48-byte header"));
    qemu_table();
    assert_false(dmar_parse(d.b, d.len - 1, &info, err, sizeof(err))); /* length beyond buffer */
    assert_non_null(strstr(err, "length"));
    qemu_table();
    db_put(&d, 4, 70000, 4);
    assert_false(dmar_parse(d.b, sizeof(d.b), &info, err, sizeof(err)));
    assert_non_null(strstr(err, "length 70000"));
    db_start(&d, 20, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_seal(&d);
    refused("host address width 21 bits");
    db_start(&d, 38, 0);
    db_seal(&d);
    refused("no DRHD");
    assert_false(dmar_parse(NULL, 100, &info, err, sizeof(err)));
}

static void test_structure_refusals(void **state)
{
    size_t at;
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_other(&d, 7, 4);
    d.b[d.len - 2] = 0; /* length 0: would loop forever */
    db_seal(&d);
    refused("has length 0");
    db_start(&d, 38, 0);
    at = db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    d.len += 2;
    db_seal(&d);
    refused("structure at +64 truncated");
    (void)at;
    db_start(&d, 38, 0);
    at = db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_put(&d, at + 2, 12, 2);
    d.len = at + 12;
    db_seal(&d);
    refused("DRHD 0: length 12");
}

static void test_drhd_refusals(void **state)
{
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90800, -1);
    db_seal(&d);
    refused("not a 4 KiB aligned");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0, -1);
    db_seal(&d);
    refused("not a 4 KiB aligned");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 5, 0, 0xfed90000, -1);
    db_seal(&d);
    refused("2^5 pages");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 1ull << 39, -1);
    db_seal(&d);
    refused("beyond the 39-bit host width");
    db_start(&d, 38, 0);
    db_drhd(&d, 0, 1, 0, 0xfed90000, 2);
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("register sets overlap");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("both INCLUDE_PCI_ALL for segment 0");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_drhd(&d, 0, 0, 1, 0xfed91000, 3);
    db_seal(&d);
    assert_true(parse()); /* segment 1's devices only as listed: accepted, and said */
    assert_true(info.listed_only);
    db_start(&d, 38, 0);
    for (unsigned i = 0; i <= DMAR_MAX_UNITS; i++)
        db_drhd(&d, 0, 0, (uint16_t)i, 0xfed00000 + 0x1000 * i, -1);
    db_seal(&d);
    refused("more than 16 DRHDs");
}

static void test_scope_refusals(void **state)
{
    size_t at;
    db_start(&d, 38, 0);
    at = db_drhd(&d, 0, 0, 0, 0xfed90000, 2);
    d.b[at + 16] = 9; /* unknown type */
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("unknown type 9");
    db_start(&d, 38, 0);
    at = db_drhd(&d, 0, 0, 0, 0xfed90000, 2);
    d.b[at + 17] = 7; /* odd length */
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("device scope at +0 has length 7");
    db_start(&d, 38, 0);
    at = db_drhd(&d, 0, 0, 0, 0xfed90000, 2);
    d.b[at + 17] = 40; /* past its structure */
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("has length 40");
    db_start(&d, 38, 0);
    at = db_drhd(&d, 0, 0, 0, 0xfed90000, 2);
    d.b[at + 17] = 6; /* a PCI scope without a path; 2 bytes left over */
    db_drhd(&d, 1, 0, 0, 0xfed91000, -1);
    db_seal(&d);
    refused("no path");
}

static void test_rmrr_refusals(void **state)
{
    size_t at;
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_rmrr(&d, 0, 0x7c000800, 0x7c7fffff);
    db_seal(&d);
    refused("RMRR 0: [0x7c000800, 0x7c7fffff] is not 4 KiB aligned");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    db_rmrr(&d, 0, 0x7c000000, 0x7bffffff);
    db_seal(&d);
    refused("empty");
    db_start(&d, 38, 0);
    db_drhd(&d, 1, 0, 0, 0xfed90000, -1);
    at = db_rmrr(&d, 0, 0x7c000000, 0x7c000fff);
    db_put(&d, at + 2, 24, 2);
    d.len -= 8;
    db_seal(&d);
    refused("RMRR 0: no device scope");
}

static void test_error_bounded(void **state)
{
    char small[12];
    memset(small, 'x', sizeof(small));
    qemu_table();
    d.b[20] ^= 1;
    assert_false(dmar_parse(d.b, d.len, &info, small, sizeof(small)));
    assert_int_equal(strlen(small), sizeof(small) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qemu),
        cmocka_unit_test(test_client_platform),
        cmocka_unit_test(test_qemu72_as_dumped),
        cmocka_unit_test(test_header_refusals),
        cmocka_unit_test(test_structure_refusals),
        cmocka_unit_test(test_drhd_refusals),
        cmocka_unit_test(test_scope_refusals),
        cmocka_unit_test(test_rmrr_refusals),
        cmocka_unit_test(test_error_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
