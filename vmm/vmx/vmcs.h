/* SPDX-License-Identifier: MIT */
/*
 * VMCS field names and width-checked accessors, all generated from
 * vmcs_fields.def.  vmcs_read32(GUEST_RIP) does not compile: GUEST_RIP is
 * natural width.  The instructions are in vmcs_insn.h, the encodings in vmcs_fields.h.
 */
#ifndef PTV_VMX_VMCS_H
#define PTV_VMX_VMCS_H

#include <stdint.h>
#include <stdbool.h>

#include "vmx/vmcs_fields.h"

#ifdef PTV_VMM
#include "vmx/vmcs_insn.h"
#include "vmx/vmx_insn.h" /* __vmread / __vmwrite: the raw forms */

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
 * (emul/guest_check.h) */
#define VMCS_SEG_WRITE(SEG, s)                                                                     \
    do {                                                                                           \
        vmcs_write16(GUEST_##SEG##_SELECTOR, (s).sel);                                             \
        vmcs_writel(GUEST_##SEG##_BASE, (s).base);                                                 \
        vmcs_write32(GUEST_##SEG##_LIMIT, (s).limit);                                              \
        vmcs_write32(GUEST_##SEG##_AR_BYTES, (s).ar);                                              \
    } while (0)
#endif

#endif
