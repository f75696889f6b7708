// SPDX-License-Identifier: MIT
/*
 * attack.efi: the adversarial in-guest suite (see attack.h).  Started by the
 * loader in place of Linux (tests/guest/attack.cfg); one Bochs boot runs every
 * group.  Before each attack an INFO line names it, so an attack that ends the
 * boot is named in the serial log next to the VMM's last lines
 * (tests/guest/check-attack-log.sh).
 */
#include <efi.h>

#include "ptv/vmcall.h"

#include "attack.h"

struct atk_fault atk_fault;
uint64_t atk_vmm_base, atk_vmm_size, atk_canary_pa;

extern __attribute__((visibility("hidden"))) uint64_t atk_stubs[32];
__attribute__((visibility("hidden"))) int atk_try_asm(void (*fn)(void *), void *arg);

struct __attribute__((packed)) dtr {
    uint16_t limit;
    uint64_t base;
};

struct idt_gate {
    uint64_t lo, hi;
};

static struct idt_gate idt[256] __attribute__((aligned(16)));

static void build_idt(void)
{
    uint16_t cs;
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    for (unsigned v = 0; v < 32; v++) {
        uint64_t h = atk_stubs[v];
        /* 64-bit interrupt gate, DPL 3 so INT n from ring 3 tests reach it too */
        idt[v].lo = (h & 0xffff) | ((uint64_t)cs << 16) | (0xeull << 40) | (3ull << 45) |
                    (1ull << 47) | (((h >> 16) & 0xffff) << 48);
        idt[v].hi = h >> 32;
    }
}

int atk_try(void (*fn)(void *), void *arg)
{
    struct dtr old, mine = {sizeof(idt) - 1, (uint64_t)idt};
    uint64_t flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags)::"memory");
    __asm__ volatile("sidt %0" : "=m"(old));
    if (!idt[0].lo)
        build_idt();
    atk_fault = (struct atk_fault){.vector = ATK_NONE};
    __asm__ volatile("lidt %0" ::"m"(mine) : "memory");
    int v = atk_try_asm(fn, arg);
    __asm__ volatile("lidt %0" ::"m"(old) : "memory");
    if (flags & X86_RFLAGS_IF)
        __asm__ volatile("sti" ::: "memory");
    if (v != ATK_NONE)
        v = atk_fault.vector;
    return v;
}

uint64_t atk_vmcall(uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3, struct vmcall_regs *r)
{
    struct vmcall_regs tmp;
    if (!r)
        r = &tmp;
    *r = (struct vmcall_regs){.rax = fn, .rbx = a1, .rcx = a2, .rdx = a3};
    if (vmcall_trap(r) != TRAP_NONE)
        r->rax = (uint64_t)-100; /* no VMM: VMCALL raised #UD */
    return r->rax;
}

uint64_t atk_vmm_log_lines(void)
{
    struct vmcall_regs r;
    return atk_vmcall(PTV_VMCALL_VMM_STATS, 0, 0, 0, &r) == PTV_VMCALL_OK ? r.rdx : 0;
}

/* after an attack: the VMM answers, its canary is intact, its invariants hold */
static void aftermath(const char *name)
{
    struct vmcall_regs ver, sc;
    bool alive = atk_vmcall(PTV_VMCALL_VERSION, 0, 0, 0, &ver) == PTV_VMCALL_OK &&
                 ver.rbx == PTV_VMCALL_ABI_VERSION;
    bool checked = alive && atk_vmcall(PTV_VMCALL_SELFCHECK, 0, 0, 0, &sc) == PTV_VMCALL_OK;
    char shortname[35];
    unsigned i;
    for (i = 0; name[i] && i < sizeof(shortname) - 1; i++)
        shortname[i] = name[i];
    shortname[i] = 0;
    report(alive && checked && (sc.rcx & PTV_SELFCHECK_CANARY) && !sc.rbx,
           "after %s: VMM ok (failed 0x%lx of 0x%lx)", shortname, checked ? sc.rbx : ~0ul,
           checked ? sc.rcx : 0ul);
}

extern const struct attack attacks_task[];        /* attack_task.c */
extern const struct attack attacks_mode[];        /* attack_mode.c */
extern const struct attack attacks_ia32e[];       /* attack_mode.c */
extern const struct attack attacks_nmi[];         /* attack_nmi.c */
extern const struct attack attacks_cpu_late[];    /* attack_cpu.c */
extern const struct attack attacks_dma[];         /* attack_dma.c */
extern const struct attack attacks_trace_storm[]; /* attack_vmcall.c */

/* a group is left out when the load options (the config's cmdline) hold "atk.no-<name>" */
static const struct group {
    const char *name, *option;
    const struct attack *attacks;
} groups[] = {
    {"cpu", "atk.no-cpu", attacks_cpu},
    {"msr", "atk.no-msr", attacks_msr},
    {"vmcall", "atk.no-vmcall", attacks_vmcall},
    {"trace-storm", "atk.no-trace-storm", attacks_trace_storm},
    {"mem", "atk.no-mem", attacks_mem},
    {"uart", "atk.no-uart", attacks_uart},
    {"task", "atk.no-task", attacks_task},
    {"mode", "atk.no-mode", attacks_mode},
    {"ia32e", "atk.no-ia32e", attacks_ia32e},
    {"nmi", "atk.no-nmi", attacks_nmi},
    {"cpu-late", "atk.no-cpu-late", attacks_cpu_late},
    {"dma", "atk.no-dma", attacks_dma}, /* last: the groups before run as they always did */
};

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    test_printf("attack: ptvisor adversarial in-guest suite\n");
    struct vmcall_regs r;
    if (atk_vmcall(PTV_VMCALL_VMM_RANGE, 0, 0, 0, &r) != PTV_VMCALL_OK) {
        report(false, "VMCALL VMM_RANGE answered (no ptvisor below?)");
        report_summary();
        return EFI_ABORTED;
    }
    atk_vmm_base = r.rbx, atk_vmm_size = r.rcx, atk_canary_pa = r.rdx;
    report_info("VMM at 0x%lx size 0x%lx canary 0x%lx", atk_vmm_base, atk_vmm_size, atk_canary_pa);
    aftermath("boot");
    unsigned n = 0;
    for (unsigned g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        if (test_option(groups[g].option)) {
            unsigned k = 0;
            while (groups[g].attacks[k].name)
                k++;
            report_skip("group %s left out (%s, %u attacks)", groups[g].name, groups[g].option, k);
            continue;
        }
        for (const struct attack *a = groups[g].attacks; a->name; a++) {
            report_info("attack %u: %s", ++n, a->name);
            a->run();
            aftermath(a->name);
        }
    }
    report_info("%u attacks run", n);
    unsigned failed = report_summary();
    return failed ? EFI_ABORTED : EFI_SUCCESS;
}
