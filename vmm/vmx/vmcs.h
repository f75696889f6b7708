/* SPDX-License-Identifier: MIT */
/*
 * VMCS field names and width-checked accessors, all generated from
 * vmcs_fields.def.  vmcs_read32(GUEST_RIP) does not compile: GUEST_RIP is
 * natural width.  Only vmm/vmx/ includes this header.
 */
#ifndef PTV_VMX_VMCS_H
#define PTV_VMX_VMCS_H

#include <stdint.h>
#include <stdbool.h>

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

#ifdef PTV_VMM
/* raw instructions: return 0 on success, -1 on VMfail (see vmx_insn_error()).
 * Inline: they sit on the exit path, which every VM exit pays for. */
static inline __attribute__((warn_unused_result)) int __vmread(uint32_t field, uint64_t *val)
{
    uint8_t fail;
    uint64_t v = 0;
    asm volatile("vmread %2, %1; setna %0" : "=r"(fail), "=rm"(v) : "r"((uint64_t)field) : "cc");
    *val = v;
    return fail ? -1 : 0;
}

static inline __attribute__((warn_unused_result)) int __vmwrite(uint32_t field, uint64_t val)
{
    uint8_t fail;
    asm volatile("vmwrite %2, %1; setna %0"
                 : "=r"(fail)
                 : "r"((uint64_t)field), "rm"(val)
                 : "cc", "memory");
    return fail ? -1 : 0;
}

/* a failed VMREAD/VMWRITE is a VMM bug: panic with the VM-instruction error by name */
__attribute__((noreturn, cold)) void vmcs_access_failed(uint32_t field, bool write, uint64_t val);

/* VMREAD / VMWRITE and a branch on VMfail (CF or ZF): three instructions where __vmread's
 * flag byte and test took five, on the exit path's every field */
static inline uint64_t vmcs_read_checked(uint32_t field)
{
    uint64_t v;
    asm goto("vmread %1, %0; jbe %l[failed]" : "=r"(v) : "r"((uint64_t)field) : "cc" : failed);
    return v;
failed:
    vmcs_access_failed(field, false, 0);
}

static inline void vmcs_write_checked(uint32_t field, uint64_t val)
{
    asm goto("vmwrite %1, %0; jbe %l[failed]"
             :
             : "r"((uint64_t)field), "rm"(val)
             : "cc", "memory"
             : failed);
    return;
failed:
    vmcs_access_failed(field, true, val);
}

#define vmcs_read16(f)                                                                             \
    ({                                                                                             \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W16, #f " is not a 16-bit field");                 \
        (uint16_t) vmcs_read_checked(f);                                                           \
    })
#define vmcs_read32(f)                                                                             \
    ({                                                                                             \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W32, #f " is not a 32-bit field");                 \
        (uint32_t) vmcs_read_checked(f);                                                           \
    })
#define vmcs_read64(f)                                                                             \
    ({                                                                                             \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W64, #f " is not a 64-bit field");                 \
        (uint64_t) vmcs_read_checked(f);                                                           \
    })
#define vmcs_readl(f)                                                                              \
    ({                                                                                             \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_WNAT, #f " is not a natural-width field");         \
        (uint64_t) vmcs_read_checked(f);                                                           \
    })
#define vmcs_write16(f, v)                                                                         \
    do {                                                                                           \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W16, #f " is not a 16-bit field");                 \
        vmcs_write_checked(f, (uint16_t)(v));                                                      \
    } while (0)
#define vmcs_write32(f, v)                                                                         \
    do {                                                                                           \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W32, #f " is not a 32-bit field");                 \
        vmcs_write_checked(f, (uint32_t)(v));                                                      \
    } while (0)
#define vmcs_write64(f, v)                                                                         \
    do {                                                                                           \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_W64, #f " is not a 64-bit field");                 \
        vmcs_write_checked(f, (uint64_t)(v));                                                      \
    } while (0)
#define vmcs_writel(f, v)                                                                          \
    do {                                                                                           \
        _Static_assert(VMCS_WIDTH_OF(f) == VMCS_WNAT, #f " is not a natural-width field");         \
        vmcs_write_checked(f, (uint64_t)(v));                                                      \
    } while (0)
/* the four guest-state fields of segment SEG (ES, CS, ...) from a struct vmx_seg
 * (vmx/guest_check.h) */
#define VMCS_SEG_WRITE(SEG, s)                                                                     \
    do {                                                                                           \
        vmcs_write16(GUEST_##SEG##_SELECTOR, (s).sel);                                             \
        vmcs_writel(GUEST_##SEG##_BASE, (s).base);                                                 \
        vmcs_write32(GUEST_##SEG##_LIMIT, (s).limit);                                              \
        vmcs_write32(GUEST_##SEG##_AR_BYTES, (s).ar);                                              \
    } while (0)
#endif

#endif
