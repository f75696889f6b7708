/* SPDX-License-Identifier: MIT */
/* Crash dumps: the VMCS by field name, the ring of recent exits, exit statistics. */
#include "vmx/vmx_cpu.h"
#include "vmx/vmcs.h"
#include "vmm.h"
#include "cpu.h"
#include "log.h"

void vmcs_dump(void)
{
    log_raw("---- VMCS ----\n");
    for (unsigned i = 0; i < vmcs_field_count; i++) {
        const struct vmcs_field_info *f = &vmcs_field_table[i];
        uint64_t val;
        if (__vmread(f->encoding, &val))
            log_raw("  %-30s        n/a\n", f->name);
        else
            log_raw("  %-30s %016lx\n", f->name, val);
    }
}

void exit_ring_dump(const struct vcpu *v)
{
    log_raw("---- last exits (oldest first) ----\n");
    unsigned n = v->ring_next < EXIT_RING_SIZE ? v->ring_next : EXIT_RING_SIZE;
    for (unsigned i = 0; i < n; i++) {
        const struct exit_record *r = &v->ring[(v->ring_next - n + i) % EXIT_RING_SIZE];
        log_raw("  #%-6lu %-20s qual %016lx rip %016lx tsc %lu\n",
                (unsigned long)(v->ring_next - n + i), vmx_exit_reason_name(r->reason), r->qual,
                r->rip, r->tsc);
    }
}

void exit_stats_print(const struct vcpu *v)
{
    pr_info("stats", "%lu VM exits in total", v->exits_total);
    for (unsigned r = 0; r <= EXIT_REASON_MAX; r++)
        if (v->exits_by_reason[r])
            pr_info("stats", "exits %-20s %lu",
                    r < EXIT_REASON_MAX ? vmx_exit_reason_name(r) : "OTHER", v->exits_by_reason[r]);
}

void vcpu_dump(struct vcpu *v)
{
    static const char *const names[NR_GPRS] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                               "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                               "r12", "r13", "r14", "r15"};
    log_raw("---- guest registers ----\n");
    for (unsigned i = 0; i < NR_GPRS; i++)
        if (i != GPR_RSP)
            log_raw("  %-3s %016lx\n", names[i], v->regs.gpr[i]);
    vmcs_dump();
    exit_ring_dump(v);
    exit_stats_print(v);
}

void vcpu_stop_guest(struct vcpu *v, const char *why)
{
    pr_err("vmx", "guest stopped: %s", why);
    vcpu_dump(v);
    pr_err("vmx", "crash dump complete; on_crash action follows");
    machine_crash_action(vmm_cfg->crash_action);
}
