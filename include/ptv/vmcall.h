/* SPDX-License-Identifier: MIT */
/*
 * The VMCALL ABI ptvisor offers its guest.
 *
 *   in:  RAX = PTV_VMCALL_* function, RBX, RCX, RDX = arguments
 *   out: RAX = PTV_VMCALL_OK or a negative PTV_VMCALL_E*, RBX/RCX/RDX = results
 *
 * VMCALL from CPL > 0 is refused with PTV_VMCALL_EPERM (as KVM answers), except
 * VERSION, which tells nothing about the VMM's state.  (EXIT_STATS is open to
 * CPL 3 only where the operator's config says `vmcall_user = stats`; TRACE_START,
 * STOP, STATUS and DUMP with `vmcall_user = trace`, under the CPL 3 trace rule
 * below.)  Unknown functions return PTV_VMCALL_ENOSYS.  The guest RIP always
 * advances past VMCALL.  No function prints on the guest's behalf: results come
 * back in registers; a refused call (EPERM, EACCES) changes no register but RAX.
 */
#ifndef PTV_VMCALL_H
#define PTV_VMCALL_H

#define PTV_VMCALL_OK     0
#define PTV_VMCALL_ENOSYS (-1)
#define PTV_VMCALL_EPERM  (-2)
#define PTV_VMCALL_EINVAL (-3)
#define PTV_VMCALL_EBUSY  (-4) /* ABI 4: already in that state (a trace window is open) */
#define PTV_VMCALL_ENODEV (-5) /* ABI 4: no trace source on this machine / config */
#define PTV_VMCALL_ENOMEM (-6) /* ABI 4: the VMM pool cannot hold the trace ring */
#define PTV_VMCALL_EACCES (-7) /* ABI 7: CPL 3 asked beyond its own window (the CPL 3 rule) */

/* RBX = ABI version (PTV_VMCALL_ABI_VERSION), RCX = "ptvisor" as 8 bytes, RDX = 0 */
#define PTV_VMCALL_VERSION     0
#define PTV_VMCALL_ABI_VERSION 9

/*
 * RBX = physical base, RCX = size of the VMM's own memory (image + pool, one
 * contiguous span as the guest must never reach it), RDX = physical address of a
 * 4 KiB canary page inside it, filled with PTV_CANARY_PATTERN repeated.
 * For conformance tests: the guest must never read the pattern there.
 */
#define PTV_VMCALL_VMM_RANGE 1
#define PTV_CANARY_PATTERN   "ptvisor-canary!" /* 16 bytes with the NUL */

/* RBX = 1 if the VMM's canary pages are intact, 0 otherwise */
#define PTV_VMCALL_CHECK_CANARY 2

/* RBX = number of EPT violations the VMM blocked so far */
#define PTV_VMCALL_EPT_BLOCKED 3

/*
 * Exit statistics, in registers (nothing is printed): in RBX = a basic exit
 * reason; out RBX = total exits of this vCPU, RCX = exits with that reason (0
 * for a reason out of range), RDX = 0.
 */
#define PTV_VMCALL_EXIT_STATS 4

/*
 * TRACE_DUMP (ABI 5): dump this vCPU's trace window (the newest dump_window bytes, cut at a
 * PSB, with the code pages it ran) on the serial console as frame lines of
 * docs/serial-protocol.md.  It goes out after the call, in slices between guest runs (each
 * holds the guest at most dump_stall); TRACE_STATUS shows PTV_TRACE_ST_DUMPING until the
 * last line is out.  Out: RBX = the dump's number.  EPERM: dump_on lacks vmcall; EINVAL:
 * this vCPU never traced; EBUSY: a dump is going out.
 */
#define PTV_VMCALL_TRACE_DUMP 5

/*
 * VMM resource figures: RBX = free pages in the VMM pool, RCX = EPT table and
 * on-demand pages in use, RDX = log lines the VMM has written so far (for the
 * rate-limit checks of tests/guest/attack*.c).
 */
#define PTV_VMCALL_VMM_STATS 6

/*
 * The VMM checks its own invariants in VMX root and answers RBX = the
 * PTV_SELFCHECK_* bits that do NOT hold (0 = all good), RCX = the bits it could
 * check on this CPU (a bit absent from RCX was not checked: no such hardware).
 */
#define PTV_VMCALL_SELFCHECK      7
#define PTV_SELFCHECK_CANARY      (1u << 0) /* canary pages intact */
#define PTV_SELFCHECK_PERF_GLOBAL (1u << 1) /* root runs with IA32_PERF_GLOBAL_CTRL = 0 */
#define PTV_SELFCHECK_DEBUGCTL                                                                     \
    (1u << 2) /* root: IA32_DEBUGCTL = 0, IA32_LBR_CTL = 0 (no LBR/BTS) */
#define PTV_SELFCHECK_HOST_WX   (1u << 3) /* no host page both writable and executable */
#define PTV_SELFCHECK_APIC_BASE (1u << 4) /* IA32_APIC_BASE as at boot */
#define PTV_SELFCHECK_MTRR      (1u << 5) /* the host MTRRs as at boot */
#define PTV_SELFCHECK_RTIT      (1u << 6) /* root does not trace (RTIT_CTL.TraceEn = 0) */
#define PTV_SELFCHECK_XSS       (1u << 7) /* IA32_XSS never holds the PT state bit */
#define PTV_SELFCHECK_UART      (1u << 8) /* the real UART is not in loopback */
/* the copies of VMCS fields the VMM keeps instead of a VMREAD or VMWRITE at every exit (HOST_RSP,
 * the guest's IA32_PERF_GLOBAL_CTRL) equal the fields */
#define PTV_SELFCHECK_VMCS_COPY (1u << 9)

/*
 * SMP figures (ABI 3), in registers: RBX = index of the calling vCPU (0 = BSP),
 * RCX = CPUs running under the VMM, RDX = EPT shootdowns completed (all CPUs),
 * RSI = TSC ticks the last shootdown took its initiator (IPI to acknowledgement),
 * RDI = shootdown requests this vCPU answered (INVEPT on behalf of another CPU),
 * R8 = requests answered by all CPUs together, R9 = PTV_SMP_* flags,
 * R10 = VM exits so far of the vCPU whose index is in RBX on input (0 if none:
 * an idle AP's rate of exits, seen from another CPU).
 */
#define PTV_VMCALL_SMP_STATS 8
/*
 * Drop every on-demand EPT map above RAM (they come back on the next access),
 * as the VMM does under pool pressure, and shoot the change down on every CPU
 * before returning: RBX = 0 or the (negative) error.  ABI 3.
 */
#define PTV_VMCALL_EPT_DROP 9

/*
 * Tracing (ABI 4; docs/ARCHITECTURE.md section 5).  One trace ring per vCPU
 * (pt_buffer bytes, circular unless trace_wrap = off); the calls act on the
 * calling vCPU.  The window covers the instructions after TRACE_START's VMCALL
 * up to (not including) TRACE_STOP's.  The software tracer steps the vCPU with
 * the monitor trap flag and writes the Intel PT packets hardware would have
 * written (vmm/trace/).
 *
 * TRACE_START: RBX = PTV_TRACE_F_* filter flags (0: the configured pt_filter),
 * RCX = CR3 to match (with PTV_TRACE_F_CR3), RDX..RSI = an inclusive IP range
 * (with PTV_TRACE_F_RANGE), R8 = stop after this many traced instructions (0 =
 * no limit).  Out: RBX = PTV_TRACE_SRC_*, RCX = ring size in bytes.
 * ABI 6 (one process, `ptvisor-ctl trace`): PTV_TRACE_F_CR3_SELF matches the CR3
 * this VMCALL runs under instead of RCX; with PTV_TRACE_F_CR3_MASK, R9 names CR3
 * bits the match ignores (only bits 12:0: a PCID that changes when the kernel
 * reassigns it, and the user/kernel halves of a page-table-isolation PGD pair);
 * PTV_TRACE_F_START_IP keeps the window silent until the first instruction at RDI
 * that the filter admits, where the trace starts with a PSB+ and TIP.PGE (software
 * tracer only: system-mode PT has no start trigger, EINVAL).
 * EBUSY: a window is open; ENODEV: no source (sw_trace = off, no MTF);
 * EINVAL: bad filter; ENOMEM: no pool memory for the ring.
 *
 * The CPL 3 rule (ABI 7; README, Security).  A window has an owner: the kernel when
 * TRACE_START came from CPL 0 (or trace_boot opened it), else the process it came from,
 * named by the CR3 the call ran under.  From CPL 3 (vmcall_user = trace):
 *  - TRACE_START opens only a window on the caller's own process in user mode:
 *    RBX must hold PTV_TRACE_F_USER and PTV_TRACE_F_CR3_SELF, may add
 *    PTV_TRACE_F_CR3_MASK with R9 within PTV_TRACE_CR3_PCID, PTV_TRACE_F_RANGE and
 *    PTV_TRACE_F_START_IP (they only narrow it), nothing else (no PTV_TRACE_F_KERNEL, no
 *    PTV_TRACE_F_CR3, no flags 0 = the configured filter), and R8 must be 0 (a budget counts
 *    every instruction the vCPU steps, other contexts' too); else EACCES.
 *  - TRACE_STOP, TRACE_STATUS and TRACE_DUMP act only on a window the caller owns (its CR3,
 *    the PCID aside); any other, or none, answers EACCES.
 *  - what TRACE_STOP / TRACE_STATUS report is about that window alone: bytes of its stream,
 *    the instructions it traced, the events and gaps its stream shows, its code that could
 *    not be read; TRACE_STATUS's R10 is 0.
 * CPL 0 keeps full control: any filter, any vCPU window, every figure.
 */
#define PTV_VMCALL_TRACE_START  10
#define PTV_TRACE_F_KERNEL      (1u << 0) /* CPL 0 */
#define PTV_TRACE_F_USER        (1u << 1) /* CPL > 0 */
#define PTV_TRACE_F_CR3         (1u << 2) /* only where CR3 == RCX */
#define PTV_TRACE_F_RANGE       (1u << 3) /* only IPs in [RDX, RSI] */
#define PTV_TRACE_F_CR3_SELF    (1u << 4) /* ABI 6: only where CR3 == the caller's CR3 */
#define PTV_TRACE_F_CR3_MASK    (1u << 5) /* ABI 6: the CR3 match ignores R9's bits (12:0) */
#define PTV_TRACE_F_START_IP    (1u << 6) /* ABI 6: silent until the first admitted IP == RDI */
#define PTV_TRACE_F_ALL         0x7fu
#define PTV_TRACE_CR3_IGNORABLE 0x1fffull /* PCID (11:0) and the PTI half (12) */
#define PTV_TRACE_CR3_PCID      0xfffull  /* ABI 7: what a CPL 3 caller's mask may hold */
#define PTV_TRACE_SRC_HARDWARE  1
#define PTV_TRACE_SRC_SOFTWARE  2
/* TRACE_STOP: out RBX = ring bytes written in all, RCX = instructions stepped,
 * RDX = PTV_TRACE_ST_* flags, RSI = gaps: the OVF packets in the stream, the same at any CPL
 * (a loss where the window is not is none), RDI = events (FUP+TIP).
 * At CPL 3 (its owner only): RCX = instructions traced, RDI = events the stream shows */
#define PTV_VMCALL_TRACE_STOP 11
/* TRACE_STATUS: out RBX = PTV_TRACE_ST_*, RCX = ring size, RDX = bytes written in all,
 * RSI = instructions stepped, RDI = gaps (TRACE_STOP's RSI), R8 = events, R9 = code reads
 * failed, R10 = serial dumps started since boot (ABI 5; any trigger, any CPU).
 * At CPL 3 (its owner only): RSI, R8 as TRACE_STOP's RCX, RDI, R9 = reads of the window's own
 * code that failed, R10 = 0 */
#define PTV_VMCALL_TRACE_STATUS 12
#define PTV_TRACE_ST_ON         (1u << 0) /* a window is open */
#define PTV_TRACE_ST_WRAPPED    (1u << 1) /* the ring wrapped: the oldest bytes are gone */
#define PTV_TRACE_ST_STOPPED    (1u << 2) /* trace_wrap = off and the ring filled */
#define PTV_TRACE_ST_BUDGET     (1u << 3) /* the window closed at its instruction budget */
#define PTV_TRACE_ST_SOFTWARE   (1u << 4) /* the ring holds the software tracer's packets */
#define PTV_TRACE_ST_DUMPING    (1u << 5) /* ABI 5: a TRACE_DUMP of this vCPU is going out */
#define PTV_TRACE_ST_TF                                                                            \
    (1u << 6) /* ABI 7: the software tracer steps with the trap flag                               \
               * (sw_trace = tf, or auto where MTF is not                                          \
               * delivered); clear with SOFTWARE: MTF steps */
/* ABI 9: the window runs CPL 0 unstepped (a user-only window on a CPU with EPT's mode-based
 * execute control: the return to CPL 3 exits; docs/ARCHITECTURE.md section 5) */
#define PTV_TRACE_ST_FREE_CPL (1u << 7)
/*
 * TRACE_READ: copy ring bytes [RDX, RDX + RCX) of the stream (offsets count every
 * byte ever written) to guest-physical RBX..RBX+RCX-1, which must be guest RAM.
 * Out: RBX = bytes copied (0 at the end), RCX = oldest offset still in the ring,
 * RDX = bytes written in all.  EINVAL: the buffer is not guest RAM, or RDX is
 * older than what the ring still holds (RCX says from where to read).
 */
#define PTV_VMCALL_TRACE_READ 13

/*
 * BOOT_HANDOFF (ABI 5, CPL 0): the loader starts the guest OS right after this call
 * (boot/chain.c, before StartImage).  trace_boot = N opens its window here, on the calling
 * vCPU: the guest OS's first N instructions from its loader's hand-off.  Once per boot;
 * later calls answer EBUSY.
 */
#define PTV_VMCALL_BOOT_HANDOFF 14

/*
 * DMA_STATS (ABI 8, CPL 0): DMA isolation as the VMM sees it (VT-d, docs/ARCHITECTURE.md 2.6).
 * On the BSP the units' fault records are read first (as every IOMMU_POLL_EXITS exits do), so
 * a fault recorded before the call is counted.  Out: RBX = remapping units translating (0: DMA
 * not isolated, the VMM said why at boot), RCX = DMA faults recorded since boot, RDX = the
 * page address of the newest, RSI = its requester (bus << 8 | dev << 3 | fn) | 1 << 16 for a
 * write (RDX = RSI = 0 before any).
 */
#define PTV_VMCALL_DMA_STATS 15
#define PTV_DMA_FAULT_WRITE  (1u << 16)

/* a CPU re-delivered an INIT at every VM entry (Bochs 2.7): an AP that took an
 * INIT cannot run again; tests that restart APs cannot pass on this machine */
#define PTV_SMP_INIT_REDELIVERED (1u << 0)

#endif
