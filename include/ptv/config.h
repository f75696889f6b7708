/* SPDX-License-Identifier: MIT */
/*
 * Parsed ptvisor configuration (\ptvisor\ptvisor.cfg).
 *
 * Shared by the loader (which parses the file, boot/config.c), the VMM (which
 * receives it inside struct ptv_handoff) and host tests.  Plain C, fixed-size,
 * no pointers: it is copied across the loader/VMM boundary as bytes.
 */
#ifndef PTV_CONFIG_H
#define PTV_CONFIG_H

#include <stdint.h>

#define PTV_CFG_PATH_MAX    128
#define PTV_CFG_CMDLINE_MAX 512

enum ptv_pt_mode {
    PTV_PT_AUTO = 0,   /* best mode the CPU allows */
    PTV_PT_OFF,        /* nobody traces; guest sees no PT */
    PTV_PT_SYSTEM,     /* the VMM traces the guest */
    PTV_PT_HOST_GUEST, /* the guest owns PT (hardware-GPA or shadow ToPA) */
};

enum ptv_on_no_vmx {
    PTV_NO_VMX_BOOT = 0, /* boot the guest natively */
    PTV_NO_VMX_HALT,     /* stop with a message */
};

enum ptv_crash_action {
    PTV_CRASH_HALT = 0, /* dump, then halt the CPU */
    PTV_CRASH_REBOOT,   /* dump, then reset the machine */
    PTV_CRASH_POWEROFF, /* dump, then power off (emulators: leave) */
};

enum ptv_log_level {
    PTV_LOG_ERROR = 0,
    PTV_LOG_WARN,
    PTV_LOG_INFO,
    PTV_LOG_DEBUG,
};

/* trace filters (pt_filter): which CPLs the VMM's own trace records */
#define PTV_TRACE_OS   (1u << 0)
#define PTV_TRACE_USER (1u << 1)

/* dump triggers (dump_on): when the VMM dumps its trace window */
#define PTV_DUMP_CRASH  (1u << 0) /* guest triple fault / crash */
#define PTV_DUMP_VMCALL (1u << 1) /* guest asks with VMCALL */
#define PTV_DUMP_BOOT   (1u << 2) /* the trace_boot window closed (software tracer: its budget) */

/*
 * Value limits, shared by the parser (boot/config.c) and the VMM's check of
 * the handoff (vmm/base/handoff.c), so both agree on what a valid config is.
 */
#define PTV_CFG_SERIAL_PORT_MAX 0xfff8u      /* a UART spans 8 ports */
#define PTV_CFG_UART_CLOCK      115200u      /* baud = 115200 / divisor */
#define PTV_CFG_TRACE_BUF_MIN   (4ull << 10) /* one ToPA region, 4 KiB */
#define PTV_CFG_TRACE_BUF_MAX   (1ull << 30)
#define PTV_CFG_POOL_MIN        (1ull << 20)
#define PTV_CFG_POOL_MAX        (1ull << 30)
#define PTV_CFG_CR3_RSVD_MASK   0xfff000000000001full /* CR3_MATCH[4:0] reserved; < 2^52 */
#define PTV_CFG_TRACE_ALL       (PTV_TRACE_OS | PTV_TRACE_USER)
#define PTV_CFG_DUMP_ALL        (PTV_DUMP_CRASH | PTV_DUMP_VMCALL | PTV_DUMP_BOOT)
#define PTV_CFG_DUMP_STALL_MAX  1000000u /* dump_stall: at most 1 s (microseconds) */

/* sw_trace: the software PT tracer (MTF stepping; vmm/trace/) */
#define PTV_SW_TRACE_AUTO 0 /* where no hardware trace source is in use */
#define PTV_SW_TRACE_OFF  1
#define PTV_SW_TRACE_ON   2 /* even where hardware system mode could trace */
/* step with the guest's trap flag and #DB exits instead of MTF: for CPUs that offer MTF
 * without delivering it (Bochs 2.7: cpu/todo "MTF is not implemented yet").  Guest-visible:
 * RFLAGS.TF = 1 in what the window pushes (PUSHF, interrupt frames, SYSCALL's R11), and
 * handlers of events delivered without a VM exit run unstepped (a gap in the trace), an exec()
 * starts its program with TF = 0 (unstepped until the next VM exit), and DEBUGCTL.BTF is held
 * off inside a window (BTF would make TF step branches only). */
#define PTV_SW_TRACE_TF 3

#define PTV_TRACE_FREE_OFF     0
#define PTV_TRACE_FREE_ON      1
#define PTV_TRACE_FREE_CR3     2
#define PTV_CFG_TRACE_RANGES   4    /* pt_range: at most 4 IP ranges (ADDR0..3) */
#define PTV_CFG_PSB_MIN        256u /* psb_period: power of two 256 .. 1M bytes */
#define PTV_CFG_PSB_MAX        (1u << 20)
#define PTV_CFG_TRACE_BOOT_MAX 100000000ull /* trace_boot: at most 10^8 instructions */

/* vmcall_user: which VMCALLs beyond VERSION a CPL 3 guest program may make */
#define PTV_VMCALL_USER_NONE  0
#define PTV_VMCALL_USER_STATS 1
/* stats + TRACE_START / STOP / STATUS / DUMP (never TRACE_READ: it writes guest-physical
 * memory), for guest/ptvisor-ctl: any guest process may then start, stop and dump the
 * VMM's trace of this vCPU (the dump goes to the serial console, not to the process) */
#define PTV_VMCALL_USER_TRACE 2

struct ptv_config {
    uint16_t serial_port; /* serial_port = 0x3f8 (0 = no serial output) */
    uint16_t _pad0;
    uint32_t serial_baud;    /* serial_baud = 115200 */
    uint32_t pt_mode;        /* enum ptv_pt_mode, pt_mode = auto */
    uint32_t trace_filter;   /* PTV_TRACE_*, pt_filter = os,user */
    uint64_t trace_buf_size; /* pt_buffer = 4M (bytes, power of two, >= 4 KiB) */
    uint64_t trace_cr3;      /* pt_cr3 = 0 (0 = no CR3 filter) */
    uint32_t dump_on;        /* PTV_DUMP_*, dump_on = crash,vmcall */
    uint32_t log_level;      /* enum ptv_log_level, log_level = info */
    uint64_t pool_size;      /* vmm_pool = 32M */
    uint32_t on_no_vmx;      /* enum ptv_on_no_vmx, on_no_vmx = boot */
    uint32_t crash_action;   /* enum ptv_crash_action, on_crash = halt */
    uint32_t start_vmm;      /* vmm = on|off (off: boot natively, for comparisons) */
    uint32_t vmcall_user;    /* PTV_VMCALL_USER_*, vmcall_user = none | stats | trace */
    /* tracing */
    uint32_t trace_sw;   /* PTV_SW_TRACE_*, sw_trace = auto */
    uint32_t trace_wrap; /* trace_wrap = on (circular ring) | off (stop when full) */
    uint32_t psb_period; /* psb_period = 4K (bytes between PSB+, software tracer) */
    uint32_t trace_nranges;
    struct {
        uint64_t lo, hi;                 /* inclusive */
    } trace_range[PTV_CFG_TRACE_RANGES]; /* pt_range = 0xlo-0xhi[,...] (none: every IP) */
    uint64_t trace_boot; /* trace_boot = N: trace the first N guest instructions (0 = off) */
    /* trace delivery */
    uint64_t dump_window;   /* dump_window = 64K: newest trace bytes a dump sends (0 = the ring) */
    uint32_t dump_stall_us; /* dump_stall = 20ms: longest the guest is held per dump slice */
    /* trace_free = on: a software-tracer window lets the vCPU run unstepped out of it -- outside
     * the window's CR3 (every MOV to CR3 then exits) and, in a user-only window, at CPL 0 (every
     * user-mode fetch exits: EPT's mode-based execute control); cr3: only the first; off: every
     * instruction is stepped (PTV_TRACE_FREE_*) */
    uint32_t trace_free;
    char guest_path[PTV_CFG_PATH_MAX]; /* guest = \ptvisor\vmlinuz.efi */
    char cmdline[PTV_CFG_CMDLINE_MAX]; /* cmdline = initrd=... console=ttyS0,115200 */
};

_Static_assert(sizeof(struct ptv_config) == 64 + 104 + PTV_CFG_PATH_MAX + PTV_CFG_CMDLINE_MAX,
               "struct ptv_config layout is ABI (handoff)");

#endif
