/* SPDX-License-Identifier: MIT */
/*
 * smp.efi: the second CPU seen from inside a guest.  First, while
 * the AP still idles in the firmware's HLT loop as the VMM's guest, the BSP
 * makes the VMM shoot an EPT change down (smp_shoot.c: the AP must answer).
 * Then it starts the AP twice: through the firmware's EFI MP services
 * (smp_mp.c) and with its own INIT-SIPI-SIPI to the real-mode trampoline of
 * smp_tramp.S (smp.c), and makes the VMM narrow EPT while the AP keeps
 * touching an on-demand page (smp_shoot.c).
 *
 * Both starts INIT the AP.  A CPU that re-delivers INIT to a VMX guest at
 * every VM entry (Bochs 2.7) loses it there for good: the VMM keeps it in
 * wait-for-SIPI and says so in SMP_STATS R9 (PTV_SMP_INIT_REDELIVERED).  From
 * then on the checks that need the AP to run print SKIP with SMP_INIT_BUG
 * (smp_ap_gone); without that flag a lost AP is a FAIL.
 *
 * The trampoline's memory: one block below 1 MiB (the SIPI vector is its page
 * number), laid out as below.  The trampoline finds everything from its own
 * CS, so it runs at any page the BSP gets.  The mailbox fields are 8 bytes
 * each; the 16/32/64-bit code of smp_tramp.S writes them by these offsets.
 */
#ifndef PTV_GUEST_SMP_H
#define PTV_GUEST_SMP_H

#define SMP_PAGE 0x1000

/* block layout (offsets from the trampoline's base) */
#define SMP_OFF_CODE    0x0000 /* smp_tramp.S: code, GDT, far pointers (< 4 KiB) */
#define SMP_OFF_MBOX    0x1000 /* struct smp_mbox */
#define SMP_OFF_PML4    0x2000 /* long-mode tables the BSP builds (smp_shoot.c) */
#define SMP_OFF_PDPT_LO 0x3000 /* PML4[0]: [0, 512 GiB) */
#define SMP_OFF_PD_LO   0x4000 /* PDPT_LO[0]: [0, 1 GiB) identity, 2 MiB pages */
#define SMP_OFF_PDPT_HI 0x5000 /* PML4[1]: [512 GiB, 1 TiB) */
#define SMP_OFF_PD_HI   0x6000 /* PDPT_HI[0]: one 2 MiB page at SMP_TOUCH_PA */
#define SMP_PAGES       7

/* the page the AP touches in the shootdown test: above RAM, mapped on demand */
#define SMP_TOUCH_PA 0x8000000000ull /* 512 GiB: PML4 slot 1 */

/* mailbox field offsets */
#define MB_BOOTS      0x00 /* out: +1 at every entry (real mode) */
#define MB_STAGE      0x08 /* out: SMP_STAGE_* reached */
#define MB_CPUID1_ECX 0x10 /* out: CPUID.1:ECX, read in 32-bit protected mode */
#define MB_HV_EAX     0x18 /* out: CPUID 0x40000000 EAX, EBX, ECX, EDX */
#define MB_HV_EBX     0x20
#define MB_HV_ECX     0x28
#define MB_HV_EDX     0x30
#define MB_CANARY_PA  0x38 /* in: the VMM canary page (below 4 GiB) */
#define MB_CANARY_VAL 0x40 /* out: its first 8 bytes as the AP read them (32-bit mode) */
#define MB_HV_OK      0x48 /* out: 1 = hypervisor bit and "ptvisor": the AP may VMCALL */
#define MB_COUNTER    0x50 /* out: loop iterations (long mode) */
#define MB_MODE       0x58 /* in: SMP_MODE_* */
#define MB_TOUCH_VAL  0x60 /* out: last 8 bytes read at SMP_TOUCH_PA */
#define MB_TOUCHES    0x68 /* out: reads at SMP_TOUCH_PA so far */
#define MB_REQ        0x70 /* in: the BSP bumps it to ask for one VMCALL round */
#define MB_ACK        0x78 /* out: = MB_REQ once the round's results are in */
#define MB_SMP_RAX    0x80 /* out: VMCALL SMP_STATS: RAX RBX RCX RDX RSI RDI */
#define MB_SMP_RBX    0x88
#define MB_SMP_RCX    0x90
#define MB_SMP_RDX    0x98
#define MB_SMP_RSI    0xa0
#define MB_SMP_RDI    0xa8
#define MB_EXIT_RAX   0xb0 /* out: VMCALL EXIT_STATS(EPT violation): RAX RBX RCX */
#define MB_EXIT_RBX   0xb8
#define MB_EXIT_RCX   0xc0
#define MB_SC_RAX     0xc8 /* out: VMCALL SELFCHECK: RAX RBX RCX */
#define MB_SC_RBX     0xd0
#define MB_SC_RCX     0xd8
#define MB_VER_RAX    0xe0 /* out: VMCALL VERSION: RAX RBX */
#define MB_VER_RBX    0xe8
#define MB_SIZE       0xf0

#define SMP_STAGE_REAL 1 /* real mode entered */
#define SMP_STAGE_PM32 2 /* 32-bit protected mode: CPUID and the canary read done */
#define SMP_STAGE_LOOP 3 /* long mode: the loop runs */

#define SMP_MODE_COUNT 0 /* the loop counts */
#define SMP_MODE_TOUCH 1 /* ... and reads SMP_TOUCH_PA every iteration */

#define EXIT_REASON_EPT_VIOLATION 48

#ifndef __ASSEMBLER__
#include <stdbool.h>
#include <stdint.h>

#include "libtest.h"
#include "x86.h"

struct smp_mbox {
    uint64_t boots, stage, cpuid1_ecx, hv_eax, hv_ebx, hv_ecx, hv_edx;
    uint64_t canary_pa, canary_val, hv_ok, counter, mode, touch_val, touches, req, ack;
    uint64_t smp_rax, smp_rbx, smp_rcx, smp_rdx, smp_rsi, smp_rdi;
    uint64_t exit_rax, exit_rbx, exit_rcx, sc_rax, sc_rbx, sc_rcx, ver_rax, ver_rbx;
};
_Static_assert(sizeof(struct smp_mbox) == MB_SIZE, "mailbox layout of smp_tramp.S");
_Static_assert(__builtin_offsetof(struct smp_mbox, canary_pa) == MB_CANARY_PA, "mailbox");
_Static_assert(__builtin_offsetof(struct smp_mbox, req) == MB_REQ, "mailbox");
_Static_assert(__builtin_offsetof(struct smp_mbox, smp_rax) == MB_SMP_RAX, "mailbox");
_Static_assert(__builtin_offsetof(struct smp_mbox, exit_rax) == MB_EXIT_RAX, "mailbox");
_Static_assert(__builtin_offsetof(struct smp_mbox, ver_rbx) == MB_VER_RBX, "mailbox");

/* VMCALL with the eight registers SMP_STATS answers in */
struct smp_regs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, r8, r9, r10;
};

/*
 * The report lines of smp.efi: libtest's report()/report_skip() (forms and
 * 72-character cut), counted here, because the SKIP of a lost AP is printed
 * whole (the verdict, check-smp-log.sh, matches its reason exactly) and so
 * the SUMMARY (smp_summary) must count it too.
 */
#define SMP_INIT_BUG                                                                               \
    "this CPU re-delivers INIT to VMX guests (Bochs 2.7 bug, PTV_SMP_INIT_REDELIVERED): the AP "   \
    "cannot be restarted under VMX"
bool smp_report(bool cond, const char *fmt, ...) PRINTF_LIKE(2, 3);
void smp_skip(const char *fmt, ...) PRINTF_LIKE(1, 2);
unsigned smp_summary(void); /* the SUMMARY line; returns the failures */

/*
 * The AP after an action that INITs it (smp.c).  smp_ap_back(up, check): up,
 * or the AP is lost -- SKIP where the VMM flags the INIT re-delivery, FAIL
 * where it does not (a VMM bug) -- and false.  smp_ap_gone(check): the AP was
 * lost before (SKIP printed for check) -- skip what needs it.
 */
bool smp_ap_back(bool up, const char *check);
bool smp_ap_gone(const char *check);
/* the trampoline's mailbox shows no run outside VMX (check's PASS/FAIL) */
void smp_report_never_bare(const char *check);

/* the VMM as the BSP sees it (smp.c) */
extern uint64_t smp_vmm_base, smp_vmm_size, smp_canary_pa;
extern const uint64_t smp_canary_word; /* "ptvisor-": the canary's first 8 bytes */

/* VMCALL from CPL 0, #UD caught: TRAP_NONE or the vector; results in *r */
int smp_vmcall(uint64_t fn, uint64_t rbx, struct smp_regs *r);
bool smp_canary_intact(void); /* CHECK_CANARY from the BSP answered 1 */

/* the trampoline AP (smp.c) */
extern volatile struct smp_mbox *smp_mb;
/* one VMCALL round on the AP (MB_REQ/MB_ACK); false if it did not answer in time */
bool smp_ap_round(void);
/* wait until fn(arg) holds, at most ms milliseconds (1 ms steps) */
bool smp_wait(bool (*fn)(void), unsigned ms);

/* the checks */
/* smp_mp.c: the AP as MP services number it, no AP started; false if none */
bool smp_find_ap(uint32_t *ap_apic_id, unsigned long *enabled);
void smp_check_mp(void);                           /* smp_mp.c: check 6 */
void smp_check_shootdown_idle(unsigned long cpus); /* smp_shoot.c: check 1 */
void smp_check_shootdown(void);                    /* smp_shoot.c: check 5 */
/* the trampoline's long-mode tables (smp_shoot.c), built before the first SIPI */
void smp_build_tables(uint64_t base);

/* smp_tramp.S */
extern const char smp_tramp_start[], smp_tramp_end[];
#endif

#endif
