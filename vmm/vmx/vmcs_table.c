/* SPDX-License-Identifier: MIT */
/* The VMCS field table as data (names for dumps), generated from vmcs_fields.def. */
#include "vmx/vmcs.h"
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
