// SPDX-License-Identifier: MIT
/*
 * smp.efi check 6 (smp.h): a function on the AP through the firmware's EFI MP
 * services.  OVMF wakes an AP from its HLT loop with INIT-SIPI-SIPI, so under
 * the VMM this is also the firmware's own use of guest INIT/SIPI -- and it
 * takes the AP out of smp.efi's trampoline, which is why this check comes
 * after the trampoline's (a firmware whose APs wait in an MWAIT or run loop
 * would not INIT them: StartupThisAP would wait for good, tests/guest/README).
 *
 * It runs only while the AP is not lost (smp_ap_gone): OVMF's WakeUpAP waits
 * without bound for the AP to take the wake-up signal (MpLib WaitApWakeup,
 * measured in Bochs 2.7: the BSP spins there with RAX = 'STAP'), and on its
 * own timeout StartupThisAP resets the AP and waits without bound again
 * (ResetProcessorToIdleState).  So StartupThisAP is called non-blocking with no
 * firmware timeout, and smp.efi bounds the wait for its end (MP_WAIT_MS).  On the AP the
 * function records CPUID leaf 1 and 0x40000000, reads the VMM canary page, writes 8 bytes over it,
 * and asks VMCALL SMP_STATS (a #UD, caught, says the AP runs outside VMX).  The BSP then asks
 * CHECK_CANARY.  Where the AP's write reached real VMM memory (it read the canary pattern first), a
 * second call writes the 8 bytes back, so the later checks see an intact canary and fail only for
 * what they test.
 *
 * gnu-efi has no MP services protocol: the PI spec's (Vol. 2, 13.4) is here.
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "smp.h"

#define MP_GUID                                                                                    \
    {                                                                                              \
        0x3fdda605, 0xa76e, 0x4f46,                                                                \
        {                                                                                          \
            0xad, 0x29, 0x12, 0xf4, 0x53, 0x1b, 0x3d, 0x08                                         \
        }                                                                                          \
    }
#define PROCESSOR_AS_BSP_BIT  0x1
#define PROCESSOR_ENABLED_BIT 0x2
#define MP_WAIT_MS            5000 /* our own bound on StartupThisAP */
#define CANARY_SCRIBBLE       0x5a5a5a5a5a5a5a5aull

typedef VOID(EFIAPI *ap_procedure)(VOID *arg);

typedef struct {
    UINT64 ProcessorId; /* the APIC ID */
    UINT32 StatusFlag;
    UINT32 Package, Core, Thread;
    UINT8 extended[64]; /* PI 1.7 ExtendedInformation, and room to spare */
} processor_info;

typedef struct mp_services mp_services;
struct mp_services {
    EFI_STATUS(EFIAPI *GetNumberOfProcessors)(mp_services *, UINTN *all, UINTN *enabled);
    EFI_STATUS(EFIAPI *GetProcessorInfo)(mp_services *, UINTN cpu, processor_info *);
    EFI_STATUS(EFIAPI *StartupAllAPs)
    (mp_services *, ap_procedure, BOOLEAN single, EFI_EVENT, UINTN timeout_us, VOID *arg,
     UINTN **failed);
    EFI_STATUS(EFIAPI *StartupThisAP)
    (mp_services *, ap_procedure, UINTN cpu, EFI_EVENT, UINTN timeout_us, VOID *arg,
     BOOLEAN *finished);
    EFI_STATUS(EFIAPI *SwitchBSP)(mp_services *, UINTN cpu, BOOLEAN enable_old);
    EFI_STATUS(EFIAPI *EnableDisableAP)(mp_services *, UINTN cpu, BOOLEAN enable, UINT32 *health);
    EFI_STATUS(EFIAPI *WhoAmI)(mp_services *, UINTN *cpu);
};

struct probe {
    bool ran;
    struct cpuid_regs c1, hv;
    int read_vec, write_vec, vmcall_vec;
    uint64_t canary[2]; /* the canary page's first 16 bytes, as read */
    struct smp_regs smp;
};

static struct probe probe;

static VOID EFIAPI probe_ap(VOID *arg)
{
    struct probe *p = arg;
    p->c1 = cpuid(1, 0);
    p->hv = cpuid(0x40000000, 0);
    p->read_vec = load64_trap(smp_canary_pa, &p->canary[0]);
    if (p->read_vec == TRAP_NONE)
        p->read_vec = load64_trap(smp_canary_pa + 8, &p->canary[1]);
    p->write_vec = store64_trap(smp_canary_pa, CANARY_SCRIBBLE);
    p->vmcall_vec = smp_vmcall(PTV_VMCALL_SMP_STATS, 0, &p->smp);
    p->ran = true;
}

static VOID EFIAPI restore_ap(VOID *arg)
{
    store64_trap(smp_canary_pa, *(uint64_t *)arg);
}

static EFI_EVENT done_ev;

static bool done(void)
{
    return uefi_call_wrapper(BS->CheckEvent, 1, done_ev) == EFI_SUCCESS;
}

/* fn(arg) on the AP; EFI_TIMEOUT if it did not finish in MP_WAIT_MS */
static EFI_STATUS run_on(mp_services *mp, UINTN cpu, ap_procedure fn, void *arg)
{
    EFI_STATUS s = uefi_call_wrapper(BS->CreateEvent, 5, 0, 0, NULL, NULL, &done_ev);
    if (EFI_ERROR(s))
        return s;
    s = uefi_call_wrapper(mp->StartupThisAP, 7, mp, fn, cpu, done_ev, (UINTN)0, arg, NULL);
    if (EFI_ERROR(s) || !smp_wait(done, MP_WAIT_MS))
        return EFI_ERROR(s) ? s : EFI_TIMEOUT; /* the event stays: MP services may signal it */
    uefi_call_wrapper(BS->CloseEvent, 1, done_ev);
    return EFI_SUCCESS;
}

static mp_services *mp;
static UINTN ap;

/* the VMM's own count of CPUs under it, against the firmware's */
static void report_cpu_count(UINTN enabled)
{
    struct smp_regs r;
    int v = smp_vmcall(PTV_VMCALL_SMP_STATS, 0, &r);
    smp_report(v == TRAP_NONE && r.rax == PTV_VMCALL_OK && r.rbx == 0 && r.rcx == enabled,
               "mp-ap: SMP_STATS on the BSP: RAX %ld, vCPU %lu, %lu CPUs (want 0, %lu)",
               (int64_t)r.rax, r.rbx, r.rcx, (unsigned long)enabled);
}

bool smp_find_ap(uint32_t *ap_apic_id, unsigned long *enabled_out)
{
    EFI_GUID guid = MP_GUID;
    UINTN all = 0, enabled = 0;
    processor_info info;
    if (EFI_ERROR(uefi_call_wrapper(BS->LocateProtocol, 3, &guid, NULL, (void **)&mp)) || !mp) {
        smp_report(false, "the firmware offers no EFI MP services");
        return false;
    }
    EFI_STATUS s = uefi_call_wrapper(mp->GetNumberOfProcessors, 3, mp, &all, &enabled);
    report_info("MP services: %lu processors, %lu enabled (status 0x%lx)", (unsigned long)all,
                (unsigned long)enabled, (unsigned long)s);
    *enabled_out = enabled;
    for (UINTN i = 0; i < all; i++) {
        info = (processor_info){0};
        if (EFI_ERROR(uefi_call_wrapper(mp->GetProcessorInfo, 3, mp, i, &info)))
            continue;
        if (!(info.StatusFlag & PROCESSOR_AS_BSP_BIT) &&
            (info.StatusFlag & PROCESSOR_ENABLED_BIT)) {
            ap = i;
            *ap_apic_id = (uint32_t)info.ProcessorId;
            report_info("AP: processor %lu, APIC ID %u", (unsigned long)ap, *ap_apic_id);
            return true;
        }
    }
    return false;
}

void smp_check_mp(void)
{
    EFI_STATUS s;
    UINTN all = 0, enabled = 0;
    uefi_call_wrapper(mp->GetNumberOfProcessors, 3, mp, &all, &enabled);
    report_cpu_count(enabled);
    if (smp_ap_gone("mp-ap")) { /* StartupThisAP would wait for it for good */
        smp_report(smp_canary_intact(), "mp-ap: VMM canary intact (CHECK_CANARY)");
        return;
    }
    probe = (struct probe){0};
    /* OVMF INITs the AP out of the trampoline's loop to run the function, and keeps it in its
     * own loop afterwards: the mailbox's "loop runs" is stale from here on (check 7 restarts
     * the trampoline only where the loop does not run) */
    if (smp_mb)
        smp_mb->stage = 0;
    s = run_on(mp, ap, probe_ap, &probe);
    report_info("mp-ap: StartupThisAP: status 0x%lx, function ran: %d", (unsigned long)s,
                probe.ran);
    if (!smp_ap_back(!EFI_ERROR(s) && probe.ran, "mp-ap")) {
        smp_report(smp_canary_intact(), "mp-ap: VMM canary intact (CHECK_CANARY)");
        return;
    }
    smp_report(true, "mp-ap: StartupThisAP ran the function on the AP");
    if (probe.c1.ecx & (1u << 31))
        smp_report(true, "mp-ap: AP sees the hypervisor bit");
    else
        smp_report(false, "mp-ap: AP sees no hypervisor bit (CPUID.1:ECX 0x%x)", probe.c1.ecx);
    smp_report(probe.hv.ebx == 0x69767470 && probe.hv.ecx == 0x00726f73 && probe.hv.edx == 0,
               "mp-ap: CPUID 0x40000000 on the AP says ptvisor (0x%x 0x%x 0x%x)", probe.hv.ebx,
               probe.hv.ecx, probe.hv.edx);
    bool saw = !__builtin_memcmp(probe.canary, PTV_CANARY_PATTERN, sizeof(probe.canary));
    if (saw)
        smp_report(false, "mp-ap: AP read the VMM canary (\"%s\" at 0x%lx)", PTV_CANARY_PATTERN,
                   smp_canary_pa);
    else
        smp_report(probe.read_vec == TRAP_NONE,
                   "mp-ap: AP's read of the VMM canary saw no VMM data (vector %d)",
                   probe.read_vec);
    bool intact = smp_canary_intact();
    if (intact)
        smp_report(true, "mp-ap: AP's write into the VMM canary page dropped (vector %d)",
                   probe.write_vec);
    else
        smp_report(false, "mp-ap: AP's write damaged the VMM canary (CHECK_CANARY 0)");
    if (saw && !intact) {
        uint64_t orig = probe.canary[0];
        s = run_on(mp, ap, restore_ap, &orig);
        report_info("mp-ap: canary restored from the AP (status 0x%lx, intact now: %d)",
                    (unsigned long)s, smp_canary_intact());
    }
    if (probe.vmcall_vec != TRAP_NONE)
        smp_report(false, "mp-ap: VMCALL SMP_STATS on the AP raised vector %d (outside VMX)",
                   probe.vmcall_vec);
    else
        smp_report(probe.smp.rax == PTV_VMCALL_OK && probe.smp.rbx == 1,
                   "mp-ap: SMP_STATS on the AP: RAX %ld, vCPU index %lu (want 1)",
                   (int64_t)probe.smp.rax, probe.smp.rbx);
}
