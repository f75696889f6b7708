/* SPDX-License-Identifier: MIT */
/*
 * VMCS field encodings and widths, generated from vmcs_fields.def: data only, for the accessors
 * (vmcs.h), the name table (vmcs_table.c) and the host tests' VMCS stand-in.
 */
#ifndef PTV_VMX_VMCS_FIELDS_H
#define PTV_VMX_VMCS_FIELDS_H

#include <stdint.h>

enum vmcs_field {
#define VMCS_FIELD(name, enc, width) name = enc,
#include "vmcs_fields.def"
#undef VMCS_FIELD
};

enum vmcs_width { VMCS_W16 = 0, VMCS_W64 = 1, VMCS_W32 = 2, VMCS_WNAT = 3 };
#define VMCS_WIDTH_OF(enc) (((enc) >> 13) & 3)

struct vmcs_field_info {
    uint32_t encoding;
    uint8_t width; /* enum vmcs_width, as declared in the table */
    const char *name;
};
extern const struct vmcs_field_info vmcs_field_table[];
extern const unsigned vmcs_field_count;
const char *vmcs_field_name(uint32_t encoding);

#endif
