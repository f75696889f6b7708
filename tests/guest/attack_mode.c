// SPDX-License-Identifier: MIT
/*
 * attack.efi group "mode": the address space's top and IA-32e mode
 * activation, where the VMM's emulation once hung or stopped the guest.
 *
 * 1. A traced call into the last page of the 64-bit linear space.  The software tracer notes
 *    the pages an instruction may cover; its walk `va <= lin + 15; va = (va | 0xfff) + 1`
 *    wrapped to 0 there and went round the whole space: the CPU stayed in VMX root for good
 *    (the boot ended in a timeout, no crash dump).  A private PML4 (the firmware's, plus slot
 *    511) maps linear 0xfffffffffffff000 onto a page of NOPs and RETs; TRACE_START, two calls
 *    there (one at the page's start, one whose RET is the space's last byte), TRACE_STOP.
 * 2. MOV CR0 setting PG with EFER.LME = 1 from a 16-bit TSS in TR, or from a CS with L = 1
 *    (D = 1, D = 0): the CPU raises #GP(0) (SDM Vol. 3A 10.8.5); emulated (CR0.NE flipped,
 *    which the VMM owns) the VMM set IA-32e mode anyway: VM entry failed (the guest stopped) or
 *    the guest ran 64-bit code.  attack_mode.S tries each twice, the CPU's verdict first.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "attack.h"
#include "attack_mode.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define PAGE   4096ull
#define PTE_P  (1ull << 0)
#define PTE_W  (1ull << 1)
#define VEC_GP 13

/* ---- 1. a traced call into the last page of the address space ---- */

#define TOP_PAGE  0xfffffffffffff000ull
#define TOP_A     TOP_PAGE              /* 16 NOPs, RET */
#define TOP_B     0xffffffffffffffe0ull /* 31 NOPs, RET at the last byte */
#define TOP_STEPS (17u + 32u)           /* the instructions of both calls */

static uint8_t top_raw[5 * PAGE + PAGE];
static uint64_t *top_pml4;
static uint64_t top_saved_cr3;

/* the page tables once: slot 511 of a PML4 copy -> PDPT[511] -> PD[511] -> PT[511] -> code */
static const char *top_setup(void)
{
    if (top_pml4)
        return NULL;
    uint8_t *p = (uint8_t *)(((uint64_t)top_raw + PAGE - 1) & ~(PAGE - 1));
    uint64_t *fw = (uint64_t *)(cr3_read() & 0x000ffffffffff000ull);
    if (fw[511])
        return "the firmware uses PML4 slot 511";
    uint64_t *pml4 = (uint64_t *)p, *pdpt = (uint64_t *)(p + PAGE),
             *pd = (uint64_t *)(p + 2 * PAGE), *pt = (uint64_t *)(p + 3 * PAGE);
    uint8_t *code = p + 4 * PAGE;
    for (unsigned i = 0; i < 512; i++) {
        pml4[i] = fw[i];
        pdpt[i] = pd[i] = pt[i] = 0;
    }
    for (unsigned i = 0; i < PAGE; i++)
        code[i] = 0xcc; /* INT3 wherever the calls do not go */
    for (unsigned i = 0; i < 16; i++)
        code[i] = 0x90;
    code[16] = 0xc3;
    for (unsigned i = 0; i < 31; i++)
        code[(TOP_B & 0xfff) + i] = 0x90;
    code[PAGE - 1] = 0xc3;
    /* UEFI runs identity mapped: the pages' addresses are physical; no XD bit anywhere */
    pml4[511] = (uint64_t)pdpt | PTE_P | PTE_W;
    pdpt[511] = (uint64_t)pd | PTE_P | PTE_W;
    pd[511] = (uint64_t)pt | PTE_P | PTE_W;
    pt[511] = (uint64_t)code | PTE_P;
    top_pml4 = pml4;
    return NULL;
}

struct top_run {
    int64_t start, stop;
    struct vmcall6 st;
};

static void top_fn(void *arg)
{
    struct top_run *r = arg;
    cr3_write((uint64_t)top_pml4);
    struct vmcall6 c = {.rax = PTV_VMCALL_TRACE_START, .rbx = PTV_TRACE_F_KERNEL, .r8 = 100000};
    vmcall6(&c);
    r->start = (int64_t)c.rax;
    if (r->start == PTV_VMCALL_OK) {
        ((void (*)(void))TOP_A)();
        ((void (*)(void))TOP_B)();
        r->st = (struct vmcall6){.rax = PTV_VMCALL_TRACE_STOP};
        vmcall6(&r->st);
        r->stop = (int64_t)r->st.rax;
    }
    cr3_write(top_saved_cr3);
}

static void atk_top_page_trace(void)
{
    const char *why = top_setup();
    if (why) {
        report_skip("traced code in the last page of the address space: %s", why);
        return;
    }
    struct top_run r = {.start = -1, .stop = -1};
    top_saved_cr3 = cr3_read();
    int v = atk_try(top_fn, &r);
    if (cr3_read() != top_saved_cr3)
        cr3_write(top_saved_cr3);
    if (r.start == PTV_VMCALL_ENODEV || r.start == PTV_VMCALL_ENOMEM) {
        report_skip("traced code in the last page of the address space: TRACE_START %ld",
                    (long)r.start);
        return;
    }
    report(v == ATK_NONE && r.start == PTV_VMCALL_OK && r.stop == PTV_VMCALL_OK &&
               r.st.rcx >= TOP_STEPS,
           "traced calls at 0x%lx and 0x%lx (RET at the top byte): %lu steps, vector %d",
           (unsigned long)TOP_A, (unsigned long)TOP_B, r.st.rcx, v);
}

/* ---- 2. IA-32e activation with a 16-bit TSS in TR, from a CS with L = 1 ---- */

extern HIDDEN const uint8_t atk_mode_code[], atk_mode_end[], atk_mode_mov0[], atk_mode_mov1[],
    atk_mode_mov2[], atk_mode_mov3[], atk_mode_mov4[], atk_mode_mov5[], atk_mode_gp[];

static uint8_t *mblk;

static uint32_t mcopy(const uint8_t *sym) /* block-relative offset of sym's copy */
{
    return (uint32_t)(MB_CODE + (sym - atk_mode_code));
}

static void mput16(unsigned off, uint16_t v)
{
    mblk[off] = (uint8_t)v;
    mblk[off + 1] = (uint8_t)(v >> 8);
}

static void mput32(unsigned off, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        mblk[off + i] = (uint8_t)(v >> (8 * i));
}

static void mput64(unsigned off, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        mblk[off + i] = (uint8_t)(v >> (8 * i));
}

static uint32_t mget32(unsigned off)
{
    return mblk[off] | (uint32_t)mblk[off + 1] << 8 | (uint32_t)mblk[off + 2] << 16 |
           (uint32_t)mblk[off + 3] << 24;
}

/* a segment descriptor: base, limit (20 bits), access byte, flags nibble (G D/B L AVL) */
static uint64_t desc(uint32_t base, uint32_t limit, unsigned access, unsigned flags)
{
    return (limit & 0xffff) | ((uint64_t)(base & 0xffffff) << 16) | ((uint64_t)access << 40) |
           ((uint64_t)((limit >> 16) & 0xf) << 48) | ((uint64_t)flags << 52) |
           ((uint64_t)(base >> 24) << 56);
}

static uint64_t cr_exits(void)
{
    struct vmcall_regs r;
    return atk_vmcall(PTV_VMCALL_EXIT_STATS, 28 /* EXIT_REASON_CR_ACCESS */, 0, 0, &r) ==
                   PTV_VMCALL_OK
               ? r.rcx
               : 0;
}

/* attempt i: #GP(0) at its MOV (saved EIP expected: eip), CR0.PG and EFER.LMA still 0 */
static bool refused(unsigned i, uint32_t eip)
{
    unsigned o = MB_RES(i);
    return mget32(o + MB_RES_ERR) == 0 && mget32(o + MB_RES_EIP) == eip &&
           !(mget32(o + MB_RES_CR0) & 0x80000000u) && !(mget32(o + MB_RES_EFL) & (1u << 10));
}

static void atk_ia32e_activation(void)
{
    size_t code = (size_t)(atk_mode_end - atk_mode_code);
    EFI_PHYSICAL_ADDRESS a = 0xfffff000;
    if (code > MB_CODE_MAX || EFI_ERROR(uefi_call_wrapper(BS->AllocatePages, 4, AllocateMaxAddress,
                                                          EfiLoaderData, MB_SIZE / 4096, &a))) {
        report(false, "IA-32e activation: no block below 4 GiB (or the code is too large)");
        return;
    }
    mblk = (uint8_t *)(uintptr_t)a;
    uint32_t base = (uint32_t)a;
    for (unsigned i = 0; i < MB_SIZE; i++)
        mblk[i] = 0;
    for (size_t i = 0; i < code; i++)
        mblk[MB_CODE + i] = atk_mode_code[i];
    mput64(MB_GDT + MS_SEL_CODE32, desc(0, 0xfffff, 0x9b, 0xc));
    mput64(MB_GDT + MS_SEL_DATA, desc(0, 0xfffff, 0x93, 0xc));
    mput64(MB_GDT + MS_SEL_CODE64, desc(0, 0xfffff, 0x9b, 0xa));
    mput64(MB_GDT + MS_SEL_CODE32L, desc(0, 0xfffff, 0x9b, 0xe));    /* G, D, L */
    mput64(MB_GDT + MS_SEL_CODE16L, desc(base, 0xfffff, 0x9b, 0xa)); /* G, L */
    mput64(MB_GDT + MS_SEL_TSS16, desc(base + MB_TSS16, 0x2b, 0x81, 0));
    mput64(MB_GDT + MS_SEL_TSS32, desc(base + MB_TSS32, 0x67, 0x89, 0));
    mput16(MB_GDTR, 0x3f);
    mput32(MB_GDTR + 2, base + MB_GDT);
    uint32_t gp = base + mcopy(atk_mode_gp); /* #GP: a 32-bit interrupt gate; the rest absent */
    mput64(MB_IDT + 8 * VEC_GP, (gp & 0xffff) | ((uint64_t)MS_SEL_CODE32 << 16) | (0x8eull << 40) |
                                    ((uint64_t)(gp >> 16) << 48));
    mput16(MB_IDTR, 14 * 8 - 1);
    mput32(MB_IDTR + 2, base + MB_IDT);
    mput16(MB_TSS32 + 0x66, 0x68); /* no I/O bitmap */

    uint64_t exits0 = cr_exits(), flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    ((void (*)(void *))(uintptr_t)(base + MB_CODE))(mblk);
    if (flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    uint64_t exits = cr_exits() - exits0;

    for (unsigned i = 0; i < MB_ATTEMPTS; i++)
        report_info("attempt %u: #GP error %x at %x, then CR0 %x EFER %x", i,
                    mget32(MB_RES(i) + MB_RES_ERR), mget32(MB_RES(i) + MB_RES_EIP),
                    mget32(MB_RES(i) + MB_RES_CR0), mget32(MB_RES(i) + MB_RES_EFL));
    /* flat code: the saved EIP is the MOV's linear address; the L = 1, D = 0 segment's base is
     * the block, so there it is the MOV's offset in the block */
    report(refused(0, base + mcopy(atk_mode_mov0)) && refused(1, base + mcopy(atk_mode_mov1)),
           "IA-32e activation with a 16-bit TSS in TR: #GP(0) from the CPU and the VMM");
    report(refused(2, base + mcopy(atk_mode_mov2)) && refused(3, base + mcopy(atk_mode_mov3)),
           "IA-32e activation from a CS with L = 1, D = 1: #GP(0) from the CPU and the VMM");
    report(refused(4, mcopy(atk_mode_mov4)) && refused(5, mcopy(atk_mode_mov5)),
           "IA-32e activation from a CS with L = 1, D = 0: #GP(0) from the CPU and the VMM");
    report(exits >= 3, "... the NE-flipped MOVs exited to the VMM (%lu CR-access exits)", exits);
    uefi_call_wrapper(BS->FreePages, 2, a, MB_SIZE / 4096);
}

const struct attack attacks_mode[] = {
    {"traced code in the last page of the address space", atk_top_page_trace},
    {0},
};

/* a group of its own ("ia32e"), so a run can leave it out (attack.efi's atk.no-ia32e): under
 * nested KVM the CPU's verdict is KVM's emulation of MOV CR0, which lacks the 16-bit TSS rule */
const struct attack attacks_ia32e[] = {
    {"IA-32e activation: 16-bit TSS, CS.L = 1 (MOV CR0 exiting)", atk_ia32e_activation},
    {0},
};
