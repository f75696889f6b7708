// SPDX-License-Identifier: MIT
/*
 * Hook #UD/#GP/#PF in the firmware's IDT for the length of one check.
 *
 * The guest is UEFI firmware in 64-bit long mode: 16-byte interrupt gates
 * (SDM Vol. 3A 6.14.1, Figure 6-8).  The previous gates are saved and put
 * back on disarm; interrupts stay off in between so no firmware handler runs
 * while our stubs are installed.
 */
#include "trap.h"

#include <stdbool.h>
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

extern HIDDEN volatile uint64_t ptv_trap_skip;
extern HIDDEN volatile uint64_t ptv_trap_resume;
extern HIDDEN volatile uint64_t ptv_trap_error;
extern HIDDEN volatile int32_t ptv_trap_vector;
extern HIDDEN volatile uint32_t ptv_trap_count;
extern HIDDEN char ptv_trap_ud[], ptv_trap_gp[], ptv_trap_pf[];

#define X86_EFLAGS_IF      (1ull << 9)
#define GATE_TYPE_INTR64   0xeull       /* 64-bit interrupt gate */
#define GATE_PRESENT       (1ull << 47) /* P, DPL = 0 */
#define GATE_TYPE_SHIFT    40
#define GATE_SEL_SHIFT     16
#define GATE_OFF_MID_SHIFT 48

struct idt_gate {
    uint64_t lo, hi;
};
_Static_assert(sizeof(struct idt_gate) == 16, "64-bit IDT gate is 16 bytes");

struct __attribute__((packed)) dtr {
    uint16_t limit;
    uint64_t base;
};

static const struct {
    int vector;
    char *stub;
} hooks[] = {
    {TRAP_UD, ptv_trap_ud},
    {TRAP_GP, ptv_trap_gp},
    {TRAP_PF, ptv_trap_pf},
};
#define NHOOKS (sizeof(hooks) / sizeof(hooks[0]))

static struct idt_gate saved[NHOOKS];
static struct idt_gate *idt;
static uint64_t saved_rflags;
static bool armed;

static struct idt_gate make_gate(uint64_t handler, uint16_t cs)
{
    struct idt_gate g;
    g.lo = (handler & 0xffff) | ((uint64_t)cs << GATE_SEL_SHIFT) |
           (GATE_TYPE_INTR64 << GATE_TYPE_SHIFT) | GATE_PRESENT |
           (((handler >> 16) & 0xffff) << GATE_OFF_MID_SHIFT);
    g.hi = handler >> 32;
    return g;
}

static void arm(char *const *stubs)
{
    struct dtr d;
    uint16_t cs;

    __asm__ volatile("pushfq; popq %0; cli" : "=r"(saved_rflags)::"memory");
    __asm__ volatile("sidt %0" : "=m"(d));
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    /* The firmware IDT always covers the architectural exceptions (0..31). */
    idt = (struct idt_gate *)d.base;
    for (unsigned i = 0; i < NHOOKS; i++) {
        saved[i] = idt[hooks[i].vector];
        idt[hooks[i].vector] = make_gate((uint64_t)(stubs ? stubs[i] : hooks[i].stub), cs);
    }
    ptv_trap_vector = TRAP_NONE;
    ptv_trap_error = 0;
    ptv_trap_skip = 0;
    ptv_trap_resume = 0;
    armed = true;
    __asm__ volatile("" ::: "memory");
}

void trap_gate_swap(int vector, void *handler, uint64_t old[2])
{
    struct dtr d;
    uint16_t cs;
    __asm__ volatile("sidt %0" : "=m"(d));
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    struct idt_gate *g = (struct idt_gate *)d.base + vector;
    old[0] = g->lo;
    old[1] = g->hi;
    *g = make_gate((uint64_t)handler, cs);
}

void trap_gate_restore(int vector, const uint64_t old[2])
{
    struct dtr d;
    __asm__ volatile("sidt %0" : "=m"(d));
    struct idt_gate *g = (struct idt_gate *)d.base + vector;
    g->lo = old[0];
    g->hi = old[1];
}

void trap_arm(void)
{
    arm(NULL);
}

void trap_arm_handlers(char *ud, char *gp, char *pf)
{
    char *const stubs[NHOOKS] = {ud, gp, pf}; /* the order of hooks[] */
    arm(stubs);
}

int trap_disarm(void)
{
    int vector = ptv_trap_vector;

    if (!armed)
        return TRAP_NONE;
    for (unsigned i = 0; i < NHOOKS; i++)
        idt[hooks[i].vector] = saved[i];
    armed = false;
    __asm__ volatile("" ::: "memory");
    if (saved_rflags & X86_EFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    return vector;
}

uint64_t trap_error_code(void)
{
    return ptv_trap_error;
}
