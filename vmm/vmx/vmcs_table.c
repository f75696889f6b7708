/* SPDX-License-Identifier: MIT */
/* The VMCS field table as data (names for dumps), generated from vmcs_fields.def, and the report
 * of a failed VMREAD/VMWRITE by field and error name. */
#include "vmx/vmcs_fields.h"
#include "vmx/vmcs_fail.h"
#include "hw/vmx.h"
#include "base/panic.h"
#include <stdbool.h>
#include <stddef.h>

#define VMCS_W_16  VMCS_W16
#define VMCS_W_32  VMCS_W32
#define VMCS_W_64  VMCS_W64
#define VMCS_W_NAT VMCS_WNAT

const struct vmcs_field_info vmcs_field_table[] = {
#define VMCS_FIELD(name, enc, width) {enc, VMCS_W_##width, #name},
#include "vmcs_fields.def"
#undef VMCS_FIELD
};
const unsigned vmcs_field_count = sizeof(vmcs_field_table) / sizeof(vmcs_field_table[0]);

const char *vmcs_field_name(uint32_t encoding)
{
    for (unsigned i = 0; i < vmcs_field_count; i++)
        if (vmcs_field_table[i].encoding == encoding)
            return vmcs_field_table[i].name;
    return NULL;
}

#ifdef PTV_VMM
#include "vmx/vmx_insn.h"

uint32_t vmx_insn_error(void)
{
    /* the raw VMREAD, not the checked accessor: the report of a failed access stands below
     * the accessors that call it */
    uint64_t e = 0;
    return __vmread(VM_INSTRUCTION_ERROR, &e) ? ~0u : (uint32_t)e;
}

void vmcs_access_failed(uint32_t field, bool write, uint64_t val)
{
    if (write)
        panic("VMWRITE %s (%#x) = %#lx failed: %s", vmcs_field_name(field), field, val,
              vmx_insn_error_name(vmx_insn_error()));
    panic("VMREAD %s (%#x) failed: %s", vmcs_field_name(field), field,
          vmx_insn_error_name(vmx_insn_error()));
}
#endif
