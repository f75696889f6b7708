/* SPDX-License-Identifier: MIT */
/* VMCS field table consistency: declared widths agree with the encodings,
 * no encoding or name appears twice, and the encodings are well formed
 * (SDM Vol. 3D B: bit 0 access type 0 = full, bits 9:1 index, 11:10 type,
 * bit 12 reserved, bits 14:13 width). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "vmx/vmcs.h"

static void test_width_matches_encoding(void **state)
{
    for (unsigned i = 0; i < vmcs_field_count; i++) {
        const struct vmcs_field_info *f = &vmcs_field_table[i];
        if (VMCS_WIDTH_OF(f->encoding) != f->width)
            fail_msg("%s: declared width %u, encoding %#x says %u", f->name, f->width, f->encoding,
                     VMCS_WIDTH_OF(f->encoding));
    }
}

static void test_encodings_well_formed(void **state)
{
    for (unsigned i = 0; i < vmcs_field_count; i++) {
        uint32_t enc = vmcs_field_table[i].encoding;
        assert_int_equal(enc & 1, 0);          /* full access, never the HIGH half */
        assert_int_equal(enc & (1u << 12), 0); /* reserved */
        assert_true(enc < 0x8000);
    }
}

static void test_unique(void **state)
{
    for (unsigned i = 0; i < vmcs_field_count; i++)
        for (unsigned j = i + 1; j < vmcs_field_count; j++) {
            if (vmcs_field_table[i].encoding == vmcs_field_table[j].encoding)
                fail_msg("encoding %#x twice (%s, %s)", vmcs_field_table[i].encoding,
                         vmcs_field_table[i].name, vmcs_field_table[j].name);
            assert_string_not_equal(vmcs_field_table[i].name, vmcs_field_table[j].name);
        }
}

static void test_known_fields(void **state)
{
    /* spot checks against Linux vmx.h / pt-facts A.1 */
    assert_int_equal(GUEST_IA32_RTIT_CTL, 0x2814);
    assert_int_equal(VMCS_LINK_POINTER, 0x2800);
    assert_int_equal(GUEST_RIP, 0x681e);
    assert_int_equal(HOST_RIP, 0x6c16);
    assert_int_equal(SECONDARY_VM_EXEC_CONTROL, 0x401e);
    assert_int_equal(EPT_POINTER, 0x201a);
    assert_string_equal(vmcs_field_name(0x681e), "GUEST_RIP");
    assert_null(vmcs_field_name(0x7fff));
    assert_true(vmcs_field_count > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_width_matches_encoding),
        cmocka_unit_test(test_encodings_well_formed),
        cmocka_unit_test(test_unique),
        cmocka_unit_test(test_known_fields),
    };
    return cmocka_run_group_tests_name("vmcs_table", tests, NULL, NULL);
}
