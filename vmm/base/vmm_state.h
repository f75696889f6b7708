/* SPDX-License-Identifier: MIT */
#ifndef PTV_VMM_H
#define PTV_VMM_H

#include <stdbool.h>
#include <stdint.h>
#include <ptv/handoff.h>

#define PTV_VERSION "0.1.0"

/* what ptv_vmm_entry (entry.S) captured of its caller: the future guest */
struct caller_state {
    uint64_t rbx, rbp, r12, r13, r14, r15, rflags, rip, rsp;
};
_Static_assert(sizeof(struct caller_state) == 72, "caller_state layout is used by entry.S");

/* cpu: 0 on the BSP, the MP-services processor number on an AP (entry.S: RSI) */
int vmm_main(struct ptv_handoff *h, struct caller_state *cs, uint64_t cpu);
uint64_t run_on_stack(uint64_t stack_top, uint64_t (*fn)(void *), void *arg);

/* the VMM's own memory as one span [base, base+size): image + handoff + pool */
struct vmm_span {
    uint64_t base, size;
};
extern struct vmm_span vmm_span;
extern const struct ptv_config *vmm_cfg;

__attribute__((noreturn)) void machine_crash_action(unsigned action);

/* host CR3, shared by every CPU */
extern uint64_t vmm_host_cr3;

/* the canary page inside VMM memory (vmm_state.c): filled with PTV_CANARY_PATTERN at start-up,
 * checked by the self-check and the CANARY VMCALL; what no guest may ever change */
extern uint64_t vmm_canary_pa;
void vmm_canary_fill(void);
bool vmm_canary_intact(void);

#endif
