// SPDX-License-Identifier: MIT
/*
 * Hardware task switches: a 32-bit protected-mode guest JMPs to a task,
 * which JMPs back; CALLs a task, which IRETs back.  Each switch exits to the VMM, which
 * emulates it (vmm/emul/task_switch.c).  The guest checks what the CPU architecture promises
 * (SDM Vol. 3A 7.3): the registers the new task's TSS held, TR, busy bits (JMP clears the
 * old one, CALL keeps it), NT and the back link of a CALL, CR0.TS set, the state the old task
 * saved coming back; a #GP through an IDT task gate (as 32-bit Linux's double-fault task)
 * with its error code on the new task's stack and the faulting EIP saved; and that the VMM
 * saw six task-switch exits and is still whole.  Before
 * the emulator, the first JMP got #UD with no 32-bit IDT: a triple fault ended the boot.
 * The mode switch and the tasks are in attack_task.S.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "attack.h"
#include "attack_task.h"

#define EXIT_REASON_TASK_SWITCH 9
#define CR0_TS                  (1u << 3)
#define EFLAGS_NT               (1u << 14)

extern __attribute__((visibility("hidden"))) const uint8_t atk_task_code[], atk_task_end[],
    atk_task_b[], atk_task_c[], atk_task_after_jmp[], atk_task_after_call[], atk_task_pm32[],
    atk_task_lm64[], atk_task_d[], atk_task_fault[], atk_task_after_fault[];

static uint8_t *blk;

static uint32_t at_copy(const uint8_t *sym)
{
    return (uint32_t)(uintptr_t)(blk + TB_CODE + (sym - atk_task_code));
}

static void put16(unsigned off, uint16_t v)
{
    blk[off] = (uint8_t)v;
    blk[off + 1] = (uint8_t)(v >> 8);
}

static void put32(unsigned off, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        blk[off + i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(unsigned off)
{
    return blk[off] | (uint32_t)blk[off + 1] << 8 | (uint32_t)blk[off + 2] << 16 |
           (uint32_t)blk[off + 3] << 24;
}

static uint16_t get16(unsigned off)
{
    return (uint16_t)(blk[off] | blk[off + 1] << 8);
}

static void gdt_entry(unsigned sel, uint64_t d)
{
    for (unsigned i = 0; i < 8; i++)
        blk[TB_GDT + sel + i] = (uint8_t)(d >> (8 * i));
}

static uint64_t tss_desc(uint32_t base)
{
    return 0x67 | ((uint64_t)(base & 0xffffff) << 16) | (0x89ull << 40) |
           ((uint64_t)(base >> 24) << 56);
}

/* a flat ring-0 32-bit task at eip with its own stack; EBX = the block, EAX / ECX markers */
static void tss(unsigned off, const uint8_t *eip, unsigned stack, uint32_t eax, uint32_t ecx)
{
    for (unsigned i = 0; i < 0x68; i++)
        blk[off + i] = 0;
    put32(off + 0x20, at_copy(eip));
    put32(off + 0x24, 0x2); /* EFLAGS: IF = 0 */
    put32(off + 0x28, eax);
    put32(off + 0x2c, ecx);
    put32(off + 0x34, (uint32_t)(uintptr_t)blk); /* EBX */
    put32(off + 0x38, (uint32_t)(uintptr_t)blk + stack);
    static const uint16_t segs[6] = {TS_SEL_DATA, TS_SEL_CODE32, TS_SEL_DATA,
                                     TS_SEL_DATA, TS_SEL_DATA,   TS_SEL_DATA};
    for (unsigned i = 0; i < 6; i++)
        put16(off + 0x48 + 4 * i, segs[i]);
    put16(off + 0x66, 0x68); /* no I/O bitmap */
}

static uint64_t task_exits(void)
{
    struct vmcall_regs r;
    return atk_vmcall(PTV_VMCALL_EXIT_STATS, EXIT_REASON_TASK_SWITCH, 0, 0, &r) == PTV_VMCALL_OK
               ? r.rcx
               : 0;
}

static void atk_task_switch(void)
{
    size_t code = (size_t)(atk_task_end - atk_task_code);
    EFI_PHYSICAL_ADDRESS a = 0xfffff000;
    if (code > TB_CODE_MAX || EFI_ERROR(uefi_call_wrapper(BS->AllocatePages, 4, AllocateMaxAddress,
                                                          EfiLoaderData, TB_SIZE / 4096, &a))) {
        report(false, "task switch: no block below 4 GiB (or the code is too large)");
        return;
    }
    /* never freed: TR may keep pointing at task A's TSS in it (attack_task.S) */
    blk = (uint8_t *)(uintptr_t)a;
    for (unsigned i = 0; i < TB_SIZE; i++)
        blk[i] = 0;
    for (size_t i = 0; i < code; i++)
        blk[TB_CODE + i] = atk_task_code[i];
    uint32_t base = (uint32_t)a;
    gdt_entry(TS_SEL_CODE32, 0x00cf9b000000ffffull);
    gdt_entry(TS_SEL_DATA, 0x00cf93000000ffffull);
    gdt_entry(TS_SEL_CODE64, 0x00af9b000000ffffull);
    gdt_entry(TS_SEL_A, tss_desc(base + TB_TSS_A));
    gdt_entry(TS_SEL_B, tss_desc(base + TB_TSS_B));
    gdt_entry(TS_SEL_C, tss_desc(base + TB_TSS_C));
    gdt_entry(TS_SEL_D, tss_desc(base + TB_TSS_D));
    for (unsigned v = 0; v < 14; v++) /* task gates to D: only #GP is expected */
        for (unsigned i = 0; i < 8; i++)
            blk[TB_IDT + 8 * v + i] =
                (uint8_t)((((uint64_t)TS_SEL_D << 16) | (0x85ull << 40)) >> (8 * i));
    put16(TB_IDTR, 14 * 8 - 1);
    put32(TB_IDTR + 2, base + TB_IDT);
    put32(TB_AFTER_FAULT, at_copy(atk_task_after_fault));
    put16(TB_GDTR, 0x3f);
    put32(TB_GDTR + 2, base + TB_GDT);
    put32(TB_PM32, at_copy(atk_task_pm32));
    put32(TB_FAR_B, 0);
    put16(TB_FAR_B + 4, TS_SEL_B);
    put32(TB_FAR_C, 0);
    put16(TB_FAR_C + 4, TS_SEL_C);
    put32(TB_FAR_A, 0);
    put16(TB_FAR_A + 4, TS_SEL_A);
    put32(TB_FAR_LM64, at_copy(atk_task_lm64));
    put16(TB_FAR_LM64 + 4, TS_SEL_CODE64);
    tss(TB_TSS_A, atk_task_code, TB_STACK_A, 0, 0); /* A's state is saved by the first switch */
    tss(TB_TSS_B, atk_task_b, TB_STACK_B, 0x22222222, 0);
    tss(TB_TSS_C, atk_task_c, TB_STACK_C, 0, 0x33333333);
    tss(TB_TSS_D, atk_task_d, TB_STACK_D, 0, 0);

    uint64_t exits0 = task_exits(), flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    ((void (*)(void *))(uintptr_t)(base + TB_CODE))(blk);
    if (flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    uint64_t exits = task_exits() - exits0;

    report(get32(TB_R_B_EAX) == 0x22222222 && get16(TB_R_B_TR) == TS_SEL_B &&
               get32(TB_R_B_ESP) == base + TB_STACK_B && get16(TB_R_B_SS) == TS_SEL_DATA,
           "JMP to a TSS: the new task runs with its TSS's registers (EAX %x, TR %x, ESP %x)",
           get32(TB_R_B_EAX), get16(TB_R_B_TR), get32(TB_R_B_ESP));
    report(blk[TB_R_B_TYPE_A] == 0x89 && blk[TB_R_B_TYPE_B] == 0x8b &&
               !(get32(TB_R_B_EFLAGS) & EFLAGS_NT) && (get32(TB_R_B_CR0) & CR0_TS),
           "JMP: old TSS not busy (%x), new busy (%x), NT clear, CR0.TS set", blk[TB_R_B_TYPE_A],
           blk[TB_R_B_TYPE_B]);
    report(get32(TB_R_A_EAX) == 0x11111111 && get16(TB_R_A_TR) == TS_SEL_A,
           "JMP back: the old task resumes with the state it saved (EAX %x, TR %x)",
           get32(TB_R_A_EAX), get16(TB_R_A_TR));
    report((get32(TB_R_C_EFLAGS) & EFLAGS_NT) && get16(TB_R_C_LINK) == TS_SEL_A &&
               blk[TB_R_C_TYPE_A] == 0x8b && get32(TB_R_C_ECX) == 0x33333333,
           "CALL to a TSS: NT set (eflags %x), back link %x, the caller stays busy (%x)",
           get32(TB_R_C_EFLAGS), get16(TB_R_C_LINK), blk[TB_R_C_TYPE_A]);
    report(!(get32(TB_R_A_EFLAGS) & EFLAGS_NT) && get16(TB_R_A_TR2) == TS_SEL_A &&
               blk[TB_GDT + TS_SEL_C + 5] == 0x89 && blk[TB_GDT + TS_SEL_A + 5] == 0x8b,
           "IRET with NT: back to the caller (TR %x), the called task no longer busy (%x)",
           get16(TB_R_A_TR2), blk[TB_GDT + TS_SEL_C + 5]);
    report(get32(TB_R_D_ERR) == 0x1238 && get32(TB_R_D_ESP) == base + TB_STACK_D &&
               get32(TB_R_D_SAVED) == at_copy(atk_task_fault) && get16(TB_R_D_TR) == TS_SEL_D &&
               (get32(TB_R_D_EFLAGS) & EFLAGS_NT) && get16(TB_R_D_LINK) == TS_SEL_A,
           "#GP through an IDT task gate: error code %x on the new stack (ESP %x), faulting EIP "
           "saved (%x), NT, back link %x",
           get32(TB_R_D_ERR), get32(TB_R_D_ESP), get32(TB_R_D_SAVED), get16(TB_R_D_LINK));
    report(exits == 6, "the VMM emulated the 6 task switches (%lu task-switch exits)", exits);
}

const struct attack attacks_task[] = {
    {"hardware task switches: JMP, CALL, IRET in 32-bit protected mode", atk_task_switch},
    {0},
};
