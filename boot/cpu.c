/* SPDX-License-Identifier: MIT */
/*
 * CPU checks and fix-ups the loader does before it calls the VMM: can this
 * CPU run VMX at all, give the firmware a usable TR, and afterwards see the
 * VMM's CPUID signature.
 */
#include "loader.h"
#include "fmt.h"
#include "vmx_verdict.h"
#include "lib/ptv_string.h"

#define PTV_CPUID_SIGNATURE 0x40000000u
#define TSS_SIZE            104 /* 64-bit TSS, SDM Vol. 3A 8.7 */
#define TSS_IOMAP_BASE_OFF  102
#define TSS_PAGE_OFF        2048 /* GDT copy below, TSS above */
#define DESC_TSS_AVAIL_64   0x89 /* P=1, DPL=0, type 9: available 64-bit TSS */

struct __attribute__((packed)) desc_ptr {
    uint16_t limit;
    uint64_t base;
};

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
    __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}

static uint64_t rdmsr(uint32_t msr)
{
    uint32_t lo, hi;
    __asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
    return (uint64_t)hi << 32 | lo;
}

uint64_t read_tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

void halt_forever(void)
{
    for (;;)
        __asm__ volatile("hlt");
}

/* read what the verdict needs; MSRs only where CPUID says they exist */
bool vmx_usable(const struct ptv_config *cfg)
{
    struct ptv_vmx_caps c = {0};
    uint32_t a, b, d;
    char msg[200];
    bool ok;

    cpuid(1, &a, &b, &c.cpuid1_ecx, &d);
    if (c.cpuid1_ecx & X86_FEATURE_VMX_ECX) {
        /* IA32_FEATURE_CONTROL and the VMX capability MSRs exist with VMX (SDM Vol. 4, 2-2) */
        c.feature_control = rdmsr(MSR_IA32_FEATURE_CONTROL);
        c.procbased_allowed1 = (uint32_t)(rdmsr(MSR_IA32_VMX_PROCBASED_CTLS) >> 32);
        if (c.procbased_allowed1 & CPU_BASED_ACTIVATE_SECONDARY_CONTROLS)
            c.procbased2_allowed1 = (uint32_t)(rdmsr(MSR_IA32_VMX_PROCBASED_CTLS2) >> 32);
    }
    ok = ptv_vmx_verdict(&c, cfg->on_no_vmx, msg, sizeof(msg));
    say(msg);
    return ok;
}

static uint16_t read_tr(void)
{
    uint16_t tr;
    __asm__ volatile("str %0" : "=r"(tr));
    return tr;
}

/*
 * VM entry refuses a guest TR that is unusable (SDM Vol. 3C 27.3.1.2), and
 * OVMF runs with TR = 0 (docs/TEST-VEHICLES.md).  The blue pill makes the
 * caller's state the guest state, so the caller needs a real TSS first.
 * tss_prepare() allocates the page (before the memory map is taken);
 * tss_install() loads it just before the VMM is called.
 */
void *tss_prepare(void)
{
    struct desc_ptr gdt;
    EFI_PHYSICAL_ADDRESS page;
    EFI_STATUS st;

    if (read_tr() != 0)
        return NULL;
    __asm__ volatile("sgdt %0" : "=m"(gdt));
    if ((uint32_t)gdt.limit + 1 + 16 > TSS_PAGE_OFF) {
        say("TR is 0 and the firmware GDT is too large to extend: the VMM will refuse");
        return NULL;
    }
    /* runtime data: the OS keeps it, so the descriptor stays valid as long as anyone looks */
    st = BS->AllocatePages(AllocateAnyPages, EfiRuntimeServicesData, 1, &page);
    if (EFI_ERROR(st)) {
        say("TR is 0 and no page for a TSS: the VMM will refuse");
        return NULL;
    }
    return (void *)(UINTN)page;
}

void tss_install(void *page)
{
    struct desc_ptr gdt, ngdt;
    uint8_t *p = page, *tss = p + TSS_PAGE_OFF, *desc;
    uint64_t tss_addr = (uint64_t)(UINTN)tss;
    uint16_t sel;
    char msg[120];
    struct ptv_fmt f;

    __asm__ volatile("sgdt %0" : "=m"(gdt));
    sel = (uint16_t)(((uint32_t)gdt.limit + 1 + 7) & ~7u);
    memset(p, 0, 4096);
    memcpy(p, (const void *)(UINTN)gdt.base, (size_t)gdt.limit + 1);
    /* 16-byte system descriptor, SDM Vol. 3A 8.2.3 (figure 8-4) */
    desc = p + sel;
    desc[0] = (TSS_SIZE - 1) & 0xff;
    desc[1] = (TSS_SIZE - 1) >> 8;
    desc[2] = tss_addr & 0xff;
    desc[3] = (tss_addr >> 8) & 0xff;
    desc[4] = (tss_addr >> 16) & 0xff;
    desc[5] = DESC_TSS_AVAIL_64;
    desc[6] = 0; /* limit[19:16] = 0, G = 0 */
    desc[7] = (tss_addr >> 24) & 0xff;
    for (int i = 0; i < 4; i++)
        desc[8 + i] = (tss_addr >> (32 + 8 * i)) & 0xff;
    /* I/O map base = TSS size: no I/O permission bitmap */
    tss[TSS_IOMAP_BASE_OFF] = TSS_SIZE & 0xff;
    tss[TSS_IOMAP_BASE_OFF + 1] = TSS_SIZE >> 8;

    ngdt.base = (uint64_t)(UINTN)p;
    ngdt.limit = (uint16_t)(sel + 16 - 1);
    __asm__ volatile("lgdt %0" : : "m"(ngdt) : "memory");
    __asm__ volatile("ltr %0" : : "r"(sel) : "memory");

    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, "TR was 0: firmware GDT copied to ");
    ptv_fmt_hex(&f, ngdt.base);
    ptv_fmt_str(&f, ", TSS selector ");
    ptv_fmt_hex(&f, sel);
    say(msg);
}

bool vmm_signature_present(void)
{
    uint32_t a, sig[3];
    cpuid(PTV_CPUID_SIGNATURE, &a, &sig[0], &sig[1], &sig[2]);
    return memcmp(sig, "ptvisor\0\0\0\0\0", 12) == 0;
}
