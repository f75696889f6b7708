/* SPDX-License-Identifier: MIT */
/* The CPU twin: the VMX side of Intel PT (see twin.h). */
#include "model/twin.h"

#include <string.h>

#include "pt/rtit.h"

static void fail(struct twin *t, unsigned *counter, const char *why)
{
    (*counter)++;
    if (!t->why)
        t->why = why;
}

static uint64_t op_rdmsr(void *ctx, uint32_t msr)
{
    struct twin *t = ctx;
    uint64_t v = 0;

    t->vmm_rdmsrs++;
    if (ptm_cpu_rdmsr(&t->cpu, msr, &v))
        return 0; /* the VMM reads only MSRs the host has */
    return v;
}

static int op_wrmsr(void *ctx, uint32_t msr, uint64_t val)
{
    struct twin *t = ctx;
    int r = msr && msr == t->inject_fault_msr ? -1 : ptm_cpu_wrmsr(&t->cpu, msr, val);

    t->vmm_wrmsrs++;
    t->vmm_wrmsr_faults += r != 0;
    if (!t->in_guest && (t->pt.ctl & RTIT_CTL_TRACEEN))
        fail(t, &t->root_tracing, "WRMSR turned tracing on in VMX root");
    return r;
}

static void op_vmwrite(void *ctx, uint64_t val)
{
    ((struct twin *)ctx)->vmcs_rtit_ctl = val;
}

static void op_lists(void *ctx, const struct vmx_msr_entry *entry, unsigned n_entry,
                     const struct vmx_msr_entry *exit, unsigned n_exit)
{
    struct twin *t = ctx;

    if (n_entry > TWIN_MAX_LIST || n_exit > TWIN_MAX_LIST) {
        fail(t, &t->list_overflows, "MSR-load list too long");
        return;
    }
    memcpy(t->entry_list, entry, n_entry * sizeof(*entry));
    memcpy(t->exit_list, exit, n_exit * sizeof(*exit));
    t->n_entry = n_entry;
    t->n_exit = n_exit;
}

static bool gpa_xlate(void *ctx, uint64_t gpa, uint64_t *pa)
{
    struct twin *t = ctx;

    if (gpa >= FW_GRAM_SIZE)
        return false; /* no EPT mapping for the guest: EPT violation */
    *pa = fw_gpa_to_hpa(t->fw, gpa);
    return true;
}

void twin_init(struct twin *t, struct fake_world *fw, const struct ptm_cpu_caps *host,
               bool load_clear, bool use_gpa)
{
    memset(t, 0, sizeof(*t));
    t->fw = fw;
    ptm_init(&t->pt, fw->hmem, FW_HMEM_SIZE, host->maxphyaddr,
             host->leaf14[0][2] & PT_CAP_ECX_TOPA_MULTI);
    t->cpu.pt = &t->pt;
    t->cpu.caps = *host;
    t->load_clear = load_clear;
    t->use_gpa = use_gpa;
    if (use_gpa) {
        t->pt.xlate = gpa_xlate;
        t->pt.xlate_ctx = t;
    }
    t->ops = (struct pt_cpu_ops){.ctx = t,
                                 .rdmsr = op_rdmsr,
                                 .wrmsr = op_wrmsr,
                                 .vmwrite_rtit_ctl = op_vmwrite,
                                 .set_msr_lists = op_lists};
}

void twin_entry(struct twin *t)
{
    t->entries++;
    t->pt.eptv = false;
    /* SDM 26.3.2.1: load IA32_RTIT_CTL from the guest field.  pt-facts A.5: not while the
     * host's TraceEn is 1; a value WRMSR would refuse is invalid guest state. */
    if (t->load_clear) {
        if (t->pt.ctl & RTIT_CTL_TRACEEN) {
            fail(t, &t->entry_failures, "entry loads RTIT_CTL with host TraceEn = 1");
            return;
        }
        t->in_guest = true;
        if (ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_CTL, t->vmcs_rtit_ctl)) {
            t->in_guest = false;
            fail(t, &t->entry_failures, "entry: GUEST_IA32_RTIT_CTL refused");
            return;
        }
    }
    /* SDM 26.4: the VM-entry MSR-load list, in order; a refused load fails the entry */
    t->in_guest = true;
    for (unsigned i = 0; i < t->n_entry; i++) {
        const struct vmx_msr_entry *e = &t->entry_list[i];
        if (e->index == MSR_IA32_RTIT_CTL && (t->pt.ctl & RTIT_CTL_TRACEEN) && !t->load_clear) {
            fail(t, &t->entry_failures, "entry list loads RTIT_CTL with host TraceEn = 1");
            return;
        }
        if (e->reserved || ptm_cpu_wrmsr(&t->cpu, e->index, e->value)) {
            t->in_guest = false;
            fail(t, &t->entry_failures, "VM-entry failure due to MSR loading");
            return;
        }
    }
}

void twin_exit(struct twin *t)
{
    if (!t->in_guest)
        return;
    /* SDM 27.3.1: "clear IA32_RTIT_CTL" saves the guest value into the VMCS and writes 0 */
    if (t->load_clear) {
        t->vmcs_rtit_ctl = t->pt.ctl;
        if (t->pt.ctl & RTIT_CTL_TRACEEN)
            ptm_disable(&t->pt);
        t->pt.ctl = 0;
    }
    /* SDM 27.6: the VM-exit MSR-load list; a refused load is a VMX abort */
    for (unsigned i = 0; i < t->n_exit; i++) {
        const struct vmx_msr_entry *e = &t->exit_list[i];
        if (e->reserved || ptm_cpu_wrmsr(&t->cpu, e->index, e->value))
            fail(t, &t->vmx_aborts, "VMX abort: VM-exit MSR load refused");
    }
    t->in_guest = false;
    if (t->pt.ctl & RTIT_CTL_TRACEEN)
        fail(t, &t->root_tracing, "the VMM runs with TraceEn = 1 after the exit");
}

int twin_xrstors_pt(struct twin *t, const uint64_t area[5])
{
    /* SDM Vol. 1 13.12 (XRSTORS): a component outside IA32_XSS (and XCR0) #GPs */
    if (!(t->xss & XSS_PT))
        return -1;
    /* 13.5.6: PT state = RTIT_CTL, OUTPUT_BASE, OUTPUT_MASK_PTRS, STATUS, CR3_MATCH; RTIT_CTL
     * is restored last.  The CPU loads them as WRMSR would, with nobody in between. */
    if (ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_CTL, 0) ||
        ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_OUTPUT_BASE, area[1]) ||
        ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, area[2]) ||
        ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_STATUS, area[3]) ||
        ptm_cpu_wrmsr(&t->cpu, MSR_IA32_RTIT_CTL, area[0]))
        return -1;
    return 0;
}
