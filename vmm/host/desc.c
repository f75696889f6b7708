/* SPDX-License-Identifier: MIT */
/* Host GDT/TSS/IDT and exception handling in VMX root operation. */
#include "host/desc.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "base/palloc.h"
#include "base/panic.h"
#include "hw/percpu.h"
#include "smp/smp.h"
#include "lib/ptv_string.h"

#define GDT_CODE64            0x00af9b000000ffffull /* P, DPL0, code exec/read accessed, L=1, G=1 */
#define GDT_DATA              0x00cf93000000ffffull /* P, DPL0, data read/write accessed, D/B=1, G=1 */
#define EMERGENCY_STACK_PAGES 2

struct idt_gate {
    uint16_t off_lo, sel;
    uint8_t ist, type_attr;
    uint16_t off_mid;
    uint32_t off_hi, zero;
} __attribute__((packed));
_Static_assert(sizeof(struct idt_gate) == 16, "IDT gate layout");

struct __attribute__((packed)) tss64 {
    uint32_t rsvd0;
    uint64_t rsp[3];
    uint64_t rsvd1;
    uint64_t ist[7];
    uint64_t rsvd2;
    uint16_t rsvd3, iomap_base;
};
_Static_assert(sizeof(struct tss64) == 104, "64-bit TSS layout");

struct extable_entry {
    int32_t insn, fixup;
};
extern const struct extable_entry __extable_start[], __extable_end[];
extern const int32_t exc_stub_table[32];

/* one set per CPU: the TSS holds that CPU's IST stacks, and the gates use the
 * firmware's CS selector until that CPU's own first VM exit */
struct host_desc {
    uint64_t *gdt;
    struct tss64 *tss;
    struct idt_gate *idt;
};

static void set_gate(struct idt_gate *idt, unsigned vec, uint16_t sel, uint8_t ist)
{
    uint64_t off = (uint64_t)(uintptr_t)exc_stub_table + (int64_t)exc_stub_table[vec];
    idt[vec] = (struct idt_gate){
        .off_lo = (uint16_t)off,
        .sel = sel,
        .ist = ist,
        .type_attr = 0x8e, /* present, DPL0, 64-bit interrupt gate */
        .off_mid = (uint16_t)(off >> 16),
        .off_hi = (uint32_t)(off >> 32),
    };
}

int host_desc_init(void)
{
    uint64_t pa;
    struct host_desc *d = palloc_page(NULL);
    uint8_t *page = palloc_page(&pa);
    uint8_t *estack = palloc_pages(3 * EMERGENCY_STACK_PAGES, NULL);
    struct idt_gate *idt = palloc_page(NULL);
    if (!d || !page || !estack || !idt)
        return -1;
    uint64_t *gdt = (uint64_t *)page;
    struct tss64 *tss = (struct tss64 *)(page + 256);
    *d = (struct host_desc){.gdt = gdt, .tss = tss, .idt = idt};
    this_cpu()->desc = d;
    gdt[0] = 0;
    gdt[HOST_CS_SEL >> 3] = GDT_CODE64;
    gdt[HOST_DS_SEL >> 3] = GDT_DATA;
    uint64_t t = (uint64_t)(uintptr_t)tss;
    /* 64-bit available TSS descriptor (16 bytes), SDM Vol. 3A 8.2.3 */
    gdt[HOST_TR_SEL >> 3] =
        (sizeof(*tss) - 1) | ((t & 0xffffff) << 16) | (0x89ull << 40) | (((t >> 24) & 0xff) << 56);
    gdt[(HOST_TR_SEL >> 3) + 1] = t >> 32;
    /* NMI, #DF and #MC each on their own stack: a nested #MC must not overwrite an NMI frame */
    for (unsigned i = 0; i < 3; i++)
        tss->ist[i] = (uint64_t)(uintptr_t)(estack + (i + 1) * EMERGENCY_STACK_PAGES * PAGE_SIZE);
    tss->iomap_base = sizeof(*tss);
    /*
     * Until the first VM exit the VMM runs on the firmware's GDT, so the gates use
     * the firmware's CS selector.  The host GDT gets a 64-bit code descriptor at
     * that index too, so the same gates stay valid right after the first exit
     * (before host_idt_activate() switches them to HOST_CS_SEL).
     */
    uint16_t cs = read_cs();
    unsigned idx = cs >> 3;
    if (idx > (HOST_TR_SEL >> 3) + 1 && idx < 256 / 8)
        gdt[idx] = GDT_CODE64;
    else if (cs != HOST_CS_SEL)
        return -1; /* firmware CS collides with the host GDT layout */
    for (unsigned v = 0; v < 32; v++)
        set_gate(idt, v, cs, 0);
    return 0;
}

void host_idt_load(void)
{
    struct desc_ptr p = {.limit = 32 * sizeof(struct idt_gate) - 1, .base = host_idt_base()};
    lidt(&p);
}

void host_idt_activate(void)
{
    for (unsigned v = 0; v < 32; v++)
        set_gate(this_cpu()->desc->idt, v, HOST_CS_SEL,
                 v == 2    ? 1
                 : v == 8  ? 2
                 : v == 18 ? 3
                           : 0); /* IST1..3 */
}

/*
 * Move this CPU onto the VMM's own structures without a VM exit: host GDT (CS
 * reloaded by a far return), data segments, TR, and the IDT gates of
 * host_idt_activate().  For a CPU that parks in root before its first exit:
 * the firmware's GDT and IDT live in guest memory.
 */
void host_desc_switch(void)
{
    struct host_desc *d = this_cpu()->desc;
    struct desc_ptr g = {.limit = 256 - 1, .base = (uint64_t)(uintptr_t)d->gdt};
    load_gdt_segments(&g, HOST_CS_SEL, HOST_DS_SEL, HOST_TR_SEL);
    host_idt_activate();
    host_idt_load();
}

uint64_t host_gdt_base(void)
{
    return (uint64_t)(uintptr_t)this_cpu()->desc->gdt;
}

uint64_t host_idt_base(void)
{
    return (uint64_t)(uintptr_t)this_cpu()->desc->idt;
}

uint64_t host_tss_base(void)
{
    return (uint64_t)(uintptr_t)this_cpu()->desc->tss;
}

void host_exception(struct exc_frame *f)
{
    if (f->vector == 2) { /* NMI in root operation */
        struct percpu *pc = this_cpu();
        pc->root_nmis++;
        /* not an EPT shootdown request (vmm/smp/smp.c): the guest's, delivered at the next
         * entry; either way the PMU rule looks at it before that entry (vcpu_loop.c: a guest PMI
         * may have merged into a VMM NMI), where the VMCS is current and the controls fixed */
        bool ours = smp_nmi(pc);
        if (!ours)
            pc->nmi_owed = 1;
        __atomic_or_fetch(&pc->root_nmi_pmu, ours ? ROOT_NMI_VMM : ROOT_NMI_GUEST,
                          __ATOMIC_RELAXED);
        return;
    }
    /* only #GP and #UD of an instruction with a fix-up are expected (a probed MSR or XSETBV
     * value); any other vector there is a real fault and must not be swallowed */
    for (const struct extable_entry *e = __extable_start;
         (f->vector == 13 || f->vector == 6) && e < __extable_end; e++) {
        uint64_t insn = (uint64_t)(uintptr_t)&e->insn + (int64_t)e->insn;
        if (insn == f->rip) {
            f->rip = (uint64_t)(uintptr_t)&e->fixup + (int64_t)e->fixup;
            this_cpu()->exc_fixup_hit = 1;
            return;
        }
    }
    panic("host exception %lu (error %lx) at RIP %lx, RSP %lx, CR2 %lx", f->vector, f->error,
          f->rip, f->rsp, read_cr2());
}
