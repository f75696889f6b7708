/* SPDX-License-Identifier: MIT */
/*
 * RDMSR/WRMSR exits and the MSR bitmap (pt-facts G.7).  Who owns an MSR is decided by one
 * table, emul/msr_owner.c: the bitmap is built from it and an exit calls its owner's hook here.
 * The owners: the RTIT MSRs (virtualized by the PT engine; #GP when the guest has no PT),
 * IA32_XSS (never the PT state component: guest_policy.h), the VMX capability MSRs and the
 * overclocking mailbox (#GP), IA32_APIC_BASE (virtual base), the MTRRs (a guest copy),
 * IA32_BIOS_UPDT_TRIG (ignored), IA32_PERF_GLOBAL_CTRL (VMCS-switched) and the LBR shim
 * (IA32_PERF_CAPABILITIES, the LBR MSRs it hides: lbr/shim/lbr_vmx.c).  Everything else passes
 * through; MSRs outside the bitmap ranges always exit: they are tried on the real CPU and a
 * fault becomes the guest's #GP.
 */
#include "vmx/vcpu.h"
#include "vcpu/exit/exits.h"
#include "vmx/vmx_cpu.h"
#include "hw/cpu.h"
#include "host/desc.h"
#include "base/log.h"
#include "base/palloc.h"
#include "hw/percpu.h"
#include "pt/pt_msr.h"
#include "pt/rtit.h"
#include "pt/shim/pt_vmx.h"
#include "emul/guest_policy.h"
#include "vmx/vmcs.h"
#include "emul/emul_policy.h"
#include "lbr/shim/lbr_vmx.h"
#include "pmu/shim/pmu_vmx.h"
#include "emul/msr_owner.h"

static uint64_t host_xss; /* CPUID.(0xD,1):EDX:ECX: the IA32_XSS bits this CPU supports */
static bool host_x2apic;  /* CPUID.1:ECX[21] */

/*
 * The guest gets its own MTRRs, starting as the firmware left the real ones.
 * With EPT the CPU ignores the MTRRs for guest accesses (EPT memory types rule,
 * SDM Vol. 3C 29.3.7.2); the real MTRRs only type the VMM's own accesses in root,
 * so a guest write must never reach them.
 */
static void mtrr_setup(struct vcpu *v)
{
    unsigned slot;
    if (!(cpuid_count(1, 0).edx & (1u << 12)) || rdmsr_safe(MSR_MTRR_CAP, &v->mtrr_cap))
        return;
    for (uint32_t m = 0x200; m <= 0x2ff; m++)
        if (mtrr_exists(m, v->mtrr_cap, &slot) && rdmsr_safe(m, &v->mtrr[slot]))
            v->mtrr[slot] = 0;
}

void vmx_msr_state_setup(struct vcpu *v)
{
    host_x2apic = cpuid_count(1, 0).ecx & (1u << 21);
    if (rdmsr_safe(MSR_IA32_APIC_BASE, &v->apic_base_real))
        v->apic_base_real = 0;
    v->apic_base = v->apic_base_real;
    mtrr_setup(v);
}

/* the owners whose table rows are MSR_CLAIMED: which MSRs their boot-time decision takes */
static bool owner_claims(enum msr_owner owner, uint32_t msr, const void *ctx)
{
    (void)ctx;
    return owner == MSR_OWNER_LBR && lbr_vmx_intercepts(msr);
}

int vmx_msr_bitmap_setup(struct vcpu *v)
{
    struct cpuid_regs r = cpuid_count(0xd, 1);
    host_xss = lbr_vmx_xss((uint64_t)r.edx << 32 | r.ecx); /* arch LBR state only if shown */
    v->msr_bitmap = palloc_page(&v->msr_bitmap_pa);
    if (!v->msr_bitmap)
        return -1;
    msr_bitmap_build(v->msr_bitmap, owner_claims, NULL);
    return 0;
}

/* IA32_APIC_BASE as the guest sees it now: the CPU's value with the guest's window (a guest
 * RDMSR; the state a WRMSR starts from) */
static uint64_t apic_base_now(struct vcpu *v)
{
    uint64_t cpu;
    if (!rdmsr_safe(MSR_IA32_APIC_BASE, &cpu))
        v->apic_base_real = cpu;
    return v->apic_base = apic_base_guest_view(v->apic_base_real, v->apic_base);
}

/*
 * IA32_APIC_BASE: the guest may enable/disable its APIC and switch x2APIC mode
 * (the real MSR follows) and move its xAPIC window (emulated: EPT maps the new
 * 4 KiB window onto the real APIC page).  The real base never moves, so no
 * guest value can put APIC registers over VMM memory ("Memory Sinkhole").
 * Returns true for #GP.
 */
static bool apic_base_write(struct vcpu *v, uint64_t val)
{
    const char *why = apic_base_check(apic_base_now(v), val, vmx_caps.maxphyaddr, host_x2apic);
    if (why) {
        pr_debug("vmx", "guest WRMSR IA32_APIC_BASE = %#lx: #GP (%s)", val, why);
        return true;
    }
    const uint64_t keep = ~(APIC_BASE_EN | APIC_BASE_EXTD);
    uint64_t real = (v->apic_base_real & keep) | (val & ~keep);
    if (real != v->apic_base_real) {
        if (wrmsr_safe(MSR_IA32_APIC_BASE, real))
            return true;
        /* what the CPU took of it: it may ignore part of a write (re-enabling its APIC) */
        if (rdmsr_safe(MSR_IA32_APIC_BASE, &v->apic_base_real))
            v->apic_base_real = real;
    }
    uint64_t from = apic_base_addr(v->apic_base), to = apic_base_addr(val);
    uint64_t home = apic_base_addr(v->apic_base_real);
    v->apic_base = apic_base_guest_view(v->apic_base_real, val);
    if (from == to)
        return false;
    /* give the old window back what it mapped, then map the new one onto the APIC
     * (one EPT for all vCPUs: the window shows each CPU its own APIC, documented); the
     * tables a window splits come back when it moves on (ept/ept_window.h: the bound) */
    bool restored = false, moved = false;
    static struct ept_window *windows[PTV_MAX_CPUS]; /* every vCPU's, under the EPT lock */
    vm_ept_lock();
    for (unsigned i = 0; i < PTV_MAX_CPUS; i++)
        windows[i] = percpu_area[i].vcpu ? &percpu_area[i].vcpu->apic_window : NULL;
    if (from != home && v->apic_window.placed) {
        int r = ept_window_remove(&v->apic_window, windows, PTV_MAX_CPUS, v->ept, v->ept_od);
        if (r)
            pr_warn_rl("vmx", "APIC window at %#lx: cannot restore its old mapping (%d)", from, r);
        restored = true;
    }
    if (to != home) {
        int r =
            ept_window_place(&v->apic_window, windows, PTV_MAX_CPUS, v->ept, v->ept_od, to, home);
        if (r)
            pr_warn_rl("vmx", "APIC window moved to %#lx: EPT map failed (%d)", to, r);
        moved = true;
    }
    vmx_ept_sync(v->ept);
    vm_ept_unlock();
    /* the PT engine re-reads what changed (it takes the EPT lock itself) */
    if (restored)
        pt_ctrl_mem_changed(&v->pt, from, 4096);
    if (moved) {
        pt_ctrl_mem_changed(&v->pt, to, 4096);
        pr_info_rl("vmx", "guest moved its xAPIC window to %#lx (the real APIC stays at %#lx)", to,
                   home);
    }
    return false;
}

/*
 * The owners' hooks (the LBR shim's is lbr_vmx_msr): false = done, a read's result in *val;
 * true = the guest gets #GP.
 */
static bool real_msr(uint32_t msr, bool write, uint64_t *val)
{
    return write ? wrmsr_safe(msr, *val) : rdmsr_safe(msr, val);
}

static bool rtit_msr(struct vcpu *v, uint32_t msr, bool write, uint64_t *val)
{
    struct pt_msr_result res;
    enum pt_msr_status st =
        write ? pt_ctrl_wrmsr(&v->pt, msr, *val, &res) : pt_ctrl_rdmsr(&v->pt, msr, val, &res);
    pt_vmx_log(v);
    if (st == PT_MSR_OK)
        return false;
    pr_debug("pt", "guest %s MSR %#x: #GP (%s)", write ? "WRMSR" : "RDMSR", msr, res.reason);
    return true;
}

static bool apic_base_msr(struct vcpu *v, bool write, uint64_t *val)
{
    if (write)
        return apic_base_write(v, *val);
    *val = apic_base_now(v);
    return false;
}

static bool mtrr_msr(struct vcpu *v, uint32_t msr, bool write, uint64_t *val)
{
    if (!v->mtrr_cap) /* no MTRRs on this CPU: as hardware, #GP */
        return true;
    if (msr == MSR_MTRR_CAP && !write) {
        *val = v->mtrr_cap;
        return false;
    }
    unsigned slot;
    if (!mtrr_exists(msr, v->mtrr_cap, &slot) ||
        (write && mtrr_write_check(msr, *val, v->mtrr_cap, vmx_caps.maxphyaddr)))
        return true; /* no such MTRR, MTRRCAP is read-only, or a bad value */
    if (write)
        v->mtrr[slot] = *val;
    else
        *val = v->mtrr[slot];
    return false;
}

static bool ucode_msr(uint32_t msr, bool write, uint64_t *val)
{
    if (!write)
        return rdmsr_safe(msr, val);
    /* never run a guest-chosen microcode load in root; the guest keeps its
     * revision (IA32_BIOS_SIGN_ID), as under KVM */
    pr_info_rl("vmx", "guest microcode update (WRMSR 0x79 = %#lx) ignored", *val);
    return false;
}

static bool perf_global_msr(struct vcpu *v, bool write, uint64_t *val)
{
    if (vmx_ctls.exit & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL) {
        if (!write) {
            *val = vmcs_read64(GUEST_IA32_PERF_GLOBAL_CTRL);
            return false;
        }
        /* the SDM's rule from CPUID.0AH (pmu/pmu_policy.c), not a trial WRMSR in root,
         * which would let the guest's counters count the VMM's own instructions */
        if (!pmu_vmx_global_ctrl_ok(*val))
            return true;
        pmu_vmx_set_guest_global(v, *val);
        return false;
    }
    /* no VMCS switch of this MSR: the guest's counters would run in root, where a
     * PEBS record lands at the guest's DS_AREA through the VMM's page tables.  The
     * guest keeps its value, the real MSR stays 0 (its counters do not count). */
    if (write) {
        pr_warn_rl("vmx", "no VM-exit load of PERF_GLOBAL_CTRL: guest counters stay off");
        v->perf_global_virt = *val;
    } else {
        *val = v->perf_global_virt;
    }
    return false;
}

/* one look-up in the owner table, then the owner's hook */
static enum exit_action msr_access(struct vcpu *v, bool write)
{
    uint32_t msr = (uint32_t)v->regs.gpr[GPR_RCX];
    uint64_t val = (v->regs.gpr[GPR_RDX] << 32) | (uint32_t)v->regs.gpr[GPR_RAX];
    bool gp = true;
    switch (msr_owner(msr)) {
    case MSR_OWNER_LBR: {
        int lbr = lbr_vmx_msr(v, msr, write, val);
        if (lbr >= 0)
            return (enum exit_action)lbr;
        gp = real_msr(msr, write, &val); /* one this CPU's LBR decision leaves to the guest */
        break;
    }
    case MSR_OWNER_PT:
        gp = rtit_msr(v, msr, write, &val);
        break;
    case MSR_OWNER_PERF_GLOBAL:
        gp = perf_global_msr(v, write, &val);
        break;
    case MSR_OWNER_XSS: /* an allowed value goes to the real MSR */
        gp = (write && !xss_policy(val, host_xss)) || real_msr(msr, write, &val);
        break;
    case MSR_OWNER_APIC_BASE:
        gp = apic_base_msr(v, write, &val);
        break;
    case MSR_OWNER_MTRR:
        gp = mtrr_msr(v, msr, write, &val);
        break;
    case MSR_OWNER_UCODE:
        gp = ucode_msr(msr, write, &val);
        break;
    case MSR_OWNER_GP:
        gp = true;
        break;
    case MSR_OWNER_NONE:
        gp = real_msr(msr, write, &val);
        break;
    }
    if (gp) {
        vcpu_inject_gp(v);
        return EXIT_INJECT;
    }
    if (!write) {
        v->regs.gpr[GPR_RAX] = (uint32_t)val;
        v->regs.gpr[GPR_RDX] = val >> 32;
    }
    return EXIT_RESUME_SKIP_INSN;
}

enum exit_action handle_msr_read(struct vcpu *v, const struct vmexit *e)
{
    return msr_access(v, false);
}

enum exit_action handle_msr_write(struct vcpu *v, const struct vmexit *e)
{
    return msr_access(v, true);
}
