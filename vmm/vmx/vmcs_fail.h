/* SPDX-License-Identifier: MIT */
/* What a failed VMX instruction reports (vmcs_table.c). */
#ifndef PTV_VMX_VMCS_FAIL_H
#define PTV_VMX_VMCS_FAIL_H

#include <stdint.h>
#include <stdbool.h>

/* a failed VMREAD/VMWRITE is a VMM bug: panic with the VM-instruction error by name */
__attribute__((noreturn, cold)) void vmcs_access_failed(uint32_t field, bool write, uint64_t val);
/* VM_INSTRUCTION_ERROR of the last failed VMX instruction, ~0 if unreadable (vmcs_table.c) */
uint32_t vmx_insn_error(void);

#endif
