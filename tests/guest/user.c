// SPDX-License-Identifier: MIT
/*
 * A short trip to CPL 3 inside the firmware's 64-bit environment, to see what
 * a user-mode VMCALL gets (include/ptv/vmcall.h: PTV_VMCALL_EPERM).
 *
 * For the trip, with interrupts off: a copy of the GDT with a 64-bit user code
 * and a user data descriptor appended; TSS.RSP0 pointing at a private stack
 * (the way back, SDM Vol. 3A 6.14.2); the U/S bit set on every paging level of
 * the code page and the user stack page (SDM Vol. 3A 4.6), written with
 * CR0.WP clear in case the firmware maps its page tables read-only; #UD/#GP/#PF
 * routed to user.S's return path.  Everything is put back afterwards.
 */
#include "user.h"

#include <stdbool.h>
#include <stddef.h>

#include "trap.h"

#define HIDDEN __attribute__((visibility("hidden")))
extern HIDDEN char ptv_user_code[], ptv_user_ud2[], ptv_user_ud[], ptv_user_gp[], ptv_user_pf[];
extern HIDDEN uint64_t ptv_user_rip, ptv_user_cs, ptv_user_rbx;
extern HIDDEN int32_t ptv_user_vector;
/* returns RAX of ring 3 when it faulted */
HIDDEN uint64_t ptv_user_vmcall(uint64_t fn, uint64_t user_rsp, uint64_t code_sel);

#define GDT_MAX_ENTRIES  64
#define DESC_USER_CODE64 0x0020fa0000000000ull /* P, DPL 3, S, code exec/read, L */
#define DESC_USER_DATA   0x0000f20000000000ull /* P, DPL 3, S, data read/write */
#define TSS_RSP0_OFFSET  4
#define PTE_P            (1ull << 0)
#define PTE_US           (1ull << 2)
#define PTE_PS           (1ull << 7)
#define PTE_ADDR         0x000ffffffffff000ull
#define X86_CR0_WP       (1ull << 16)
#define X86_CR4_SMEP     (1ull << 20)
#define X86_CR4_SMAP     (1ull << 21)
#define MAX_TOUCHED      8

struct __attribute__((packed)) dtr {
    uint16_t limit;
    uint64_t base;
};

static uint64_t gdt[GDT_MAX_ENTRIES] __attribute__((aligned(16)));
static uint8_t user_stack[4096] __attribute__((aligned(4096)));
static uint8_t kernel_stack[8192] __attribute__((aligned(16)));

static struct {
    uint64_t *entry, old;
} touched[MAX_TOUCHED];
static unsigned ntouched;

static uint64_t read_cr(int n)
{
    uint64_t v = 0;
    if (n == 0)
        __asm__ volatile("mov %%cr0, %0" : "=r"(v));
    else if (n == 3)
        __asm__ volatile("mov %%cr3, %0" : "=r"(v));
    else
        __asm__ volatile("mov %%cr4, %0" : "=r"(v));
    return v;
}

static void write_cr0(uint64_t v)
{
    __asm__ volatile("mov %0, %%cr0" ::"r"(v) : "memory");
}

static void flush_tlb(void)
{
    __asm__ volatile("mov %%cr3, %%rax; mov %%rax, %%cr3" ::: "rax", "memory");
}

/* Set U/S on every level that maps va (identity-mapped tables); false if unmapped. */
static bool make_user(uint64_t va)
{
    uint64_t *table = (uint64_t *)(read_cr(3) & PTE_ADDR);

    for (int shift = 39; shift >= 12; shift -= 9) {
        uint64_t *e = &table[(va >> shift) & 511];
        if (!(*e & PTE_P) || ntouched == MAX_TOUCHED)
            return false;
        touched[ntouched].entry = e;
        touched[ntouched++].old = *e;
        *e |= PTE_US;
        if (shift == 12 || (*e & PTE_PS))
            return true;
        table = (uint64_t *)(*e & PTE_ADDR);
    }
    return true;
}

static void undo_user(void)
{
    while (ntouched) {
        ntouched--;
        *touched[ntouched].entry = touched[ntouched].old;
    }
}

static uint64_t tss_base(const uint64_t *desc)
{
    return ((desc[0] >> 16) & 0xffffff) | (((desc[0] >> 56) & 0xff) << 24) |
           ((desc[1] & 0xffffffff) << 32);
}

const char *user_vmcall(uint64_t fn, struct user_result *res)
{
    struct dtr old, new;
    uint16_t tr;
    const char *why = NULL;

    if (read_cr(4) & (X86_CR4_SMEP | X86_CR4_SMAP))
        return "SMEP/SMAP on";
    __asm__ volatile("sgdt %0" : "=m"(old));
    __asm__ volatile("str %0" : "=r"(tr));
    unsigned n = (old.limit + 1u) / 8;
    if (!tr || (tr >> 3) + 1u >= n)
        return "no usable TSS (TR)";
    if (n + 2 > GDT_MAX_ENTRIES)
        return "firmware GDT too large";

    trap_arm_handlers(ptv_user_ud, ptv_user_gp, ptv_user_pf); /* interrupts off from here */
    const uint64_t *old_gdt = (const uint64_t *)old.base;
    for (unsigned i = 0; i < n; i++)
        gdt[i] = old_gdt[i];
    gdt[n] = DESC_USER_CODE64;
    gdt[n + 1] = DESC_USER_DATA;
    new = (struct dtr){.limit = (uint16_t)((n + 2) * 8 - 1), .base = (uint64_t)gdt};

    uint8_t *tss = (uint8_t *)tss_base(&old_gdt[tr >> 3]);
    uint64_t rsp0_old, rsp0 = (uint64_t)(kernel_stack + sizeof(kernel_stack));
    __builtin_memcpy(&rsp0_old, tss + TSS_RSP0_OFFSET, 8);

    uint64_t cr0 = read_cr(0);
    write_cr0(cr0 & ~X86_CR0_WP);
    bool mapped = make_user((uint64_t)ptv_user_code) &&
                  make_user((uint64_t)(user_stack + sizeof(user_stack) - 16));
    write_cr0(cr0);
    flush_tlb();
    if (mapped) {
        __builtin_memcpy(tss + TSS_RSP0_OFFSET, &rsp0, 8);
        __asm__ volatile("lgdt %0" ::"m"(new) : "memory");
        res->rax = ptv_user_vmcall(fn, (uint64_t)(user_stack + sizeof(user_stack) - 16),
                                   (uint64_t)(n * 8) | 3);
        __asm__ volatile("lgdt %0" ::"m"(old) : "memory");
        __builtin_memcpy(tss + TSS_RSP0_OFFSET, &rsp0_old, 8);
        res->vector = ptv_user_vector;
        res->rip = ptv_user_rip;
        res->cs = ptv_user_cs;
        res->rbx = ptv_user_rbx;
        res->ud2_rip = (uint64_t)ptv_user_ud2;
    } else {
        why = "code or stack page not mapped";
    }
    write_cr0(cr0 & ~X86_CR0_WP);
    undo_user();
    write_cr0(cr0);
    flush_tlb();
    trap_disarm();
    return why;
}
