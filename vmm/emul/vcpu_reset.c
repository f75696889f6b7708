/* SPDX-License-Identifier: MIT */
/* The INIT / SIPI state of a vCPU (SDM Vol. 3A 9.1.1 Table 9-1) and the INIT /
 * SIPI exit decisions; the sources are in vcpu_reset.h. */
#include "emul/vcpu_reset.h"
#include "hw/gpr.h"

_Static_assert(sizeof(((struct vreset_state *)0)->gpr) / sizeof(uint64_t) == NR_GPRS,
               "vreset_state.gpr follows enum GPR_*");

/* VMCS access rights (Vol. 3C "Guest Register State", access-rights format) of
 * the Table 9-1 segments:
 * P=1, DPL 0, byte granularity, 16-bit */
#define AR_DATA_RW 0x93u /* S=1, type 3: "Present, R/W, Accessed" */
#define AR_LDT     0x82u /* S=0, type 2: the only usable LDTR type at VM entry */
#define AR_TSS     0x8bu /* S=0, type 11: VM entry needs a busy TSS (27.3.1.2) */

#define RFLAGS_FIXED1 0x2ull        /* Table 9-1: EFLAGS 00000002H */
#define DR6_INIT      0xffff0ff0ull /* Table 9-1: DR6 FFFF0FF0H */
#define DR7_INIT      0x400ull      /* Table 9-1: DR7 00000400H */

static struct vmx_seg real_seg(uint16_t sel, uint64_t base, uint32_t ar)
{
    return (struct vmx_seg){.sel = sel, .base = base, .limit = 0xffff, .ar = ar};
}

void vreset_state(struct vreset_state *s, enum vreset_kind kind, uint8_t sipi_vector,
                  uint32_t cpuid1_eax, uint64_t old_cr0)
{
    /* Table 9-1 (INIT): EAX 0 (no BIST on INIT), EDX the signature, all other
     * GPRs (R8-R15 included) 0 */
    *s = (struct vreset_state){0};
    s->gpr[GPR_RDX] = cpuid1_eax;

    /* Table 9-1: EIP 0000FFF0H, EFLAGS 2, CR0 60000010H with CD/NW kept (note 2),
     * CR2/CR3/CR4 0, DR0-DR3 0, DR6 FFFF0FF0H, DR7 400H */
    s->rip = 0xfff0;
    s->rflags = RFLAGS_FIXED1;
    s->cr0 = VRESET_CR0_ET | (old_cr0 & (VRESET_CR0_CD | VRESET_CR0_NW));
    s->dr6 = DR6_INIT;
    s->dr7 = DR7_INIT;
    /* not in Table 9-1: EFER 0 as KVM kvm_vcpu_reset() and Xen do (vcpu_reset.h) */
    s->efer = 0;

    /* Table 9-1: CS selector F000H base FFFF0000H limit FFFFH, "Present, R/W,
     * Accessed" (type 3, which VM entry accepts for CS with unrestricted guest
     * and DPL 0, Vol. 3C 27.3.1.2); SS/DS/ES/FS/GS selector 0 base 0 limit FFFFH,
     * same rights */
    s->cs = real_seg(0xf000, 0xffff0000ull, AR_DATA_RW);
    s->ss = s->ds = s->es = s->fs = s->gs = real_seg(0, 0, AR_DATA_RW);
    /* Table 9-1: LDTR/TR selector 0 base 0 limit FFFFH "Present, R/W"; in VMCS
     * terms the nearest types VM entry accepts (as KVM and Xen write them) */
    s->ldtr = real_seg(0, 0, AR_LDT);
    s->tr = real_seg(0, 0, AR_TSS);
    /* Table 9-1: GDTR, IDTR base 0 limit FFFFH */
    s->gdtr_limit = s->idtr_limit = 0xffff;

    s->activity = GUEST_ACTIVITY_ACTIVE;
    if (kind == VRESET_INIT_AP) {
        s->activity = GUEST_ACTIVITY_WAIT_SIPI;
    } else if (kind == VRESET_SIPI) {
        /* MP Spec 1.4 B.4.2: a STARTUP IPI sets CS:IP to VV00:0000h, base 000VV000h */
        s->cs.sel = (uint16_t)(sipi_vector << 8);
        s->cs.base = (uint64_t)sipi_vector << 12;
        s->rip = 0;
    }
}

enum vreset_action vreset_on_init(bool is_bsp, uint32_t activity)
{
    /* Vol. 3C 26.2: INIT is blocked in wait-for-SIPI, so the vCPU already holds
     * the post-INIT state and keeps waiting */
    if (activity == GUEST_ACTIVITY_WAIT_SIPI)
        return VRESET_DO_NOTHING;
    return is_bsp ? VRESET_RESET_VECTOR : VRESET_WAIT_SIPI;
}

enum vreset_action vreset_on_sipi(uint32_t activity, uint8_t vector)
{
    (void)vector; /* every vector starts the vCPU, reserved A0h-BFh too (vcpu_reset.h) */
    /* Vol. 3C 26.2: outside wait-for-SIPI a SIPI is discarded */
    return activity == GUEST_ACTIVITY_WAIT_SIPI ? VRESET_START : VRESET_DO_NOTHING;
}

enum vreset_redelivery vreset_init_redelivery(struct vreset_sipi_start *st, uint64_t rip,
                                              uint64_t cs_base)
{
    if (!st->fresh || rip != 0 || cs_base != st->cs_base) {
        st->redelivered = 0;
        return VRESET_INIT_REAL;
    }
    if (++st->redelivered < VRESET_REDELIVERY_MAX)
        return VRESET_INIT_IGNORE;
    return VRESET_INIT_GIVE_UP;
}
