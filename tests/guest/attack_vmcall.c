// SPDX-License-Identifier: MIT
/*
 * attack.efi group "vmcall": the VMCALL ABI from CPL 3 and
 * as a flood.  Everything but VERSION is CPL 0 only (EPERM, RBX untouched);
 * no VMCALL prints on the guest's behalf, so a flood leaves the VMM's line
 * count as it was.
 */
#include "ptv/vmcall.h"

#include "attack.h"
#include "user.h"

static void atk_cpl3_calls(void)
{
    static const struct {
        uint64_t fn;
        const char *name;
    } calls[] = {
        {PTV_VMCALL_EXIT_STATS, "EXIT_STATS"},     {PTV_VMCALL_VMM_RANGE, "VMM_RANGE"},
        {PTV_VMCALL_CHECK_CANARY, "CHECK_CANARY"}, {PTV_VMCALL_EPT_BLOCKED, "EPT_BLOCKED"},
        {PTV_VMCALL_VMM_STATS, "VMM_STATS"},       {PTV_VMCALL_SELFCHECK, "SELFCHECK"},
        {PTV_VMCALL_TRACE_DUMP, "TRACE_DUMP"},     {PTV_VMCALL_TRACE_START, "TRACE_START"},
        {PTV_VMCALL_TRACE_STOP, "TRACE_STOP"},     {PTV_VMCALL_TRACE_STATUS, "TRACE_STATUS"},
        {PTV_VMCALL_TRACE_READ, "TRACE_READ"},     {0x7fff, "unknown 0x7fff"},
    };
    for (unsigned i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        struct user_result u;
        const char *why = user_vmcall(calls[i].fn, &u);
        if (why) {
            report(false, "VMCALL from CPL 3: cannot reach ring 3 (%s)", why);
            return;
        }
        report(u.vector == TRAP_UD && (u.cs & 3) == 3 &&
                   u.rax == (uint64_t)(int64_t)PTV_VMCALL_EPERM && u.rbx == USER_RBX_MARK,
               "CPL 3 VMCALL %s: EPERM, RBX kept (rax %ld)", calls[i].name, (int64_t)u.rax);
    }
}

/* the figure: a refused CPL 3 call costs about what VERSION costs.  The ring-3 trip
 * (user.c: the switch to CPL 3, its page-table edits, the #UD back) costs more than either call
 * (measured), so the same trip with VERSION, which CPL 3 may call, is measured too: the
 * refusal's own cost is the difference of the two trips */
static void atk_cpl3_cost(void)
{
    struct user_result u, uv;
    struct vmcall_regs r;
    uint64_t best_user = ~0ull, best_ver = ~0ull, best_user_ver = ~0ull;
    for (unsigned i = 0; i < 5; i++) {
        uint64_t t0 = rdtsc();
        const char *why = user_vmcall(PTV_VMCALL_EXIT_STATS, &u);
        uint64_t t1 = rdtsc();
        atk_vmcall(PTV_VMCALL_VERSION, 0, 0, 0, &r);
        uint64_t t2 = rdtsc();
        const char *why_ver = user_vmcall(PTV_VMCALL_VERSION, &uv);
        uint64_t t3 = rdtsc();
        if (why || why_ver) {
            report(false, "CPL 3 trip failed (%s)", why ? why : why_ver);
            return;
        }
        if (t1 - t0 < best_user)
            best_user = t1 - t0;
        if (t2 - t1 < best_ver)
            best_ver = t2 - t1;
        if (t3 - t2 < best_user_ver)
            best_user_ver = t3 - t2;
    }
    report_info("bench cpl3_exit_stats_trip_ticks=%lu version_ticks=%lu", best_user, best_ver);
    report_info("bench cpl3_version_trip_ticks=%lu", best_user_ver);
    report(u.rax == (uint64_t)(int64_t)PTV_VMCALL_EPERM, "CPL 3 EXIT_STATS refused in the loop");
    report(uv.rax == PTV_VMCALL_OK && uv.rbx == PTV_VMCALL_ABI_VERSION,
           "CPL 3 VERSION answered in the loop");
}

static void atk_unknown_flood(void)
{
    uint64_t before = atk_vmm_log_lines();
    unsigned bad = 0;
    for (unsigned i = 0; i < 10000; i++)
        if (atk_vmcall(0x1000 + i, i, ~0ull, i, 0) != (uint64_t)(int64_t)PTV_VMCALL_ENOSYS)
            bad++;
    uint64_t after = atk_vmm_log_lines();
    report(bad == 0 && after == before,
           "10000 unknown VMCALLs: ENOSYS, no VMM line (%u bad, %lu lines)", bad, after - before);
}

static void atk_stats_flood(void)
{
    uint64_t before = atk_vmm_log_lines();
    struct vmcall_regs r;
    unsigned bad = 0;
    for (unsigned i = 0; i < 2000; i++)
        if (atk_vmcall(PTV_VMCALL_EXIT_STATS, i * 0x10001ull, 0, 0, &r) != PTV_VMCALL_OK ||
            (i * 0x10001ull >= 65 && r.rcx != 0))
            bad++;
    uint64_t after = atk_vmm_log_lines();
    report(bad == 0 && after == before,
           "2000 EXIT_STATS, odd reasons: in registers, no line (%u bad, %lu lines)", bad,
           after - before);
    atk_vmcall(PTV_VMCALL_EXIT_STATS, 10, 0, 0, &r); /* reason 10 = CPUID */
    uint64_t cpuid_before = r.rcx;
    (void)cpuid(0, 0);
    atk_vmcall(PTV_VMCALL_EXIT_STATS, 10, 0, 0, &r);
    report(r.rcx == cpuid_before + 1, "EXIT_STATS per reason counts one CPUID (%lu -> %lu)",
           cpuid_before, r.rcx);
}

/* trace windows opened and closed again and again, and a TRACE_START that cannot get its ring:
 * the VMM pool loses pages only for the first window (the ring and its parts, once), never per
 * call, whether the calls succeed or meet ENOMEM; a TRACE_DUMP storm in between */
static void atk_trace_windows(void)
{
    struct vmcall_regs r;
    uint64_t before = atk_vmm_log_lines();
    int64_t first = (int64_t)atk_vmcall(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, &r);
    atk_vmcall(PTV_VMCALL_TRACE_STOP, 0, 0, 0, &r);
    atk_vmcall(PTV_VMCALL_VMM_STATS, 0, 0, 0, &r);
    uint64_t free0 = r.rbx;
    unsigned ok = 0, nomem = 0, other = 0, busy = 0;
    for (unsigned i = 0; i < 200; i++) {
        int64_t rc = (int64_t)atk_vmcall(PTV_VMCALL_TRACE_START, PTV_TRACE_F_KERNEL, 0, 0, &r);
        ok += rc == PTV_VMCALL_OK;
        nomem += rc == PTV_VMCALL_ENOMEM;
        other += rc != PTV_VMCALL_OK && rc != PTV_VMCALL_ENOMEM && rc != PTV_VMCALL_ENODEV;
        for (unsigned k = 0; i < 1 && k < 20; k++) /* a storm of dumps (each one seconds long) */
            busy += (int64_t)atk_vmcall(PTV_VMCALL_TRACE_DUMP, 0, 0, 0, &r) == PTV_VMCALL_EBUSY;
        atk_vmcall(PTV_VMCALL_TRACE_STOP, 0, 0, 0, &r);
    }
    atk_vmcall(PTV_VMCALL_VMM_STATS, 0, 0, 0, &r);
    for (unsigned k = 0; k < 100000; k++) { /* let a dump still going out finish */
        struct vmcall_regs s;
        atk_vmcall(PTV_VMCALL_TRACE_STATUS, 0, 0, 0, &s);
        if (!(s.rbx & PTV_TRACE_ST_DUMPING))
            break;
    }
    uint64_t lines = atk_vmm_log_lines() - before;
    report(other == 0 && r.rbx == free0,
           "200 trace windows after the first (%ld): %u OK, %u ENOMEM, pool free pages %lu -> "
           "%lu (no page per window)",
           (long)first, ok, nomem, free0, r.rbx);
    /* the first windows are named (8), then silence; dumps log two lines each */
    report(lines <= 16 + 2u * (20 - busy),
           "%lu VMM lines for 200 windows and 20 TRACE_DUMPs (%u EBUSY)", lines, busy);
}

const struct attack attacks_vmcall[] = {
    {"CPL 3 VMCALLs that reveal VMM state", atk_cpl3_calls},
    {"CPL 3 VMCALL cost", atk_cpl3_cost},
    {"flood of unknown VMCALLs", atk_unknown_flood},
    {"flood of EXIT_STATS", atk_stats_flood},
    {0},
};

/* a group of its own, so a run can leave it out (attack.efi's atk.no-trace-storm) */
const struct attack attacks_trace_storm[] = {
    {"trace windows and dumps, again and again", atk_trace_windows},
    {0},
};
