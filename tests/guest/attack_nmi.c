/* SPDX-License-Identifier: MIT */
/*
 * A nested NMI: an NMI the guest sends itself inside its NMI handler is held
 * until the handler's IRET and taken right there, as on bare metal.  Under the VMM every NMI the
 * CPU receives exits (NMI exiting), and one the guest cannot take yet is owed: NMI-window exiting
 * brings it back when the blocking ends.  Before, the VMM stepped the guest with MTF for it, and
 * where MTF is not delivered the NMI waited for an unrelated later exit (kvm-unit-tests'
 * eventinj deadlocked).  The check: the second NMI is not taken inside the first handler, and it
 * has been taken before the code after the first NMI's return runs a loop that makes no exit.
 * The ICR high dword (the destination) is left as set here: the NMI the handler sends reuses it.
 */
#include "attack.h"

#define MSR_IA32_APIC_BASE 0x1b
#define APIC_BASE_EXTD     (1ull << 10)
#define APIC_BASE_EN       (1ull << 11)

__attribute__((visibility("hidden"))) void atk_nmi_handler(void);
__attribute__((visibility("hidden"))) extern volatile uint64_t atk_nmi_count, atk_nmi_icr,
    atk_nmi_inside;

struct __attribute__((packed)) nmi_dtr {
    uint16_t limit;
    uint64_t base;
};

static void atk_nested_nmi(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(MSR_IA32_APIC_BASE));
    uint64_t base = (uint64_t)hi << 32 | lo;
    if (!(base & APIC_BASE_EN) || (base & APIC_BASE_EXTD)) {
        report_skip("nested NMI: the APIC is not an enabled xAPIC here (APIC_BASE 0x%lx)", base);
        return;
    }
    struct nmi_dtr idtr;
    __asm__ volatile("sidt %0" : "=m"(idtr));
    volatile uint64_t *gate = (volatile uint64_t *)(idtr.base + 2 * 16);
    uint64_t saved[2] = {gate[0], gate[1]};
    uint16_t cs;
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    uint64_t h = (uint64_t)atk_nmi_handler;
    uint64_t flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    gate[0] = (h & 0xffff) | ((uint64_t)cs << 16) | (0xeull << 40) | (1ull << 47) |
              (((h >> 16) & 0xffff) << 48);
    gate[1] = h >> 32;
    atk_nmi_count = atk_nmi_inside = 0;
    /* to this CPU's own APIC ID (no shorthand: "self" is for fixed interrupts only) */
    uint64_t mmio = base & ~0xfffull;
    uint32_t id = *(volatile uint32_t *)(mmio + 0x20) >> 24;
    *(volatile uint32_t *)(mmio + 0x310) = id << 24;
    atk_nmi_icr = mmio + 0x300;
    *(volatile uint32_t *)atk_nmi_icr = 0x4400; /* NMI, assert */
    /* after the first handler's IRET: a loop with no VM exit in it */
    uint64_t spins = 0;
    while (atk_nmi_count < 2 && spins < 20000000) {
        spins++;
        __asm__ volatile("pause");
    }
    uint64_t count = atk_nmi_count, inside = atk_nmi_inside;
    gate[0] = saved[0];
    gate[1] = saved[1];
    if (flags & (1u << 9))
        __asm__ volatile("sti" ::: "memory");
    report(count == 2 && inside == 1, "nested NMI: %lu NMIs, %lu in the handler, %lu spins after",
           count, inside, spins);
}

const struct attack attacks_nmi[] = {
    {"nested NMI: held in the handler, taken at its IRET", atk_nested_nmi},
    {0},
};
