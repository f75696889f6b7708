/* SPDX-License-Identifier: MIT */
/*
 * Load \ptvisor\vmm.elf, fill struct ptv_handoff and call the VMM's entry.
 *
 * One AllocatePages(EfiReservedMemoryType) holds the VMM's whole memory, so it
 * is one contiguous span the OS never reuses:
 *     [ vmm image (ELF span) ][ struct ptv_handoff ][ pool (cfg->pool_size) ]
 * Every failure prints one line and returns false: the guest then boots natively.
 * The file is hashed before anything parses it: only the vmm.elf this loader was
 * built with is loaded (vmm_pin.h).
 */
#include "loader.h"
#include "elf.h"
#include "fmt.h"
#include "base/handoff.h"
#include "memmap.h"
#include "mp_services.h"
#include "vmm_pin.h"
#include "acpi_madt.h"
#include <ptv/vmcall.h>
#include "lib/ptv_string.h"

#define PAGE_SIZE     4096ull
#define PAGES(bytes)  (((bytes) + PAGE_SIZE - 1) / PAGE_SIZE)
#define VMM_FILE_MAX  (PTV_ELF_MAX_SPAN + (1 << 20))
#define HANDOFF_PAGES PAGES(sizeof(struct ptv_handoff))

static const char *const entry_names[] = {
    [PTV_ENTRY_OK] = "PTV_ENTRY_OK",
    [PTV_ENTRY_BAD_HANDOFF] = "PTV_ENTRY_BAD_HANDOFF",
    [PTV_ENTRY_NO_VMX] = "PTV_ENTRY_NO_VMX",
    [PTV_ENTRY_VMX_LOCKED_OFF] = "PTV_ENTRY_VMX_LOCKED_OFF",
    [PTV_ENTRY_MISSING_CONTROL] = "PTV_ENTRY_MISSING_CONTROL",
    [PTV_ENTRY_NO_MEMORY] = "PTV_ENTRY_NO_MEMORY",
    [PTV_ENTRY_VMX_FAILED] = "PTV_ENTRY_VMX_FAILED",
};

/* the span every allocation of the VMM needs */
struct vmm_mem {
    EFI_PHYSICAL_ADDRESS base;
    UINTN pages;
};

/* "<what>: <detail> -- booting natively" */
static void give_up(const char *what, const char *detail)
{
    char msg[220];
    struct ptv_fmt f;
    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, what);
    ptv_fmt_str(&f, ": ");
    ptv_fmt_str(&f, detail);
    ptv_fmt_str(&f, " -- booting natively");
    say(msg);
}

static void give_up_status(const char *what, EFI_STATUS st)
{
    CHAR16 wbuf[64];
    char buf[64];
    StatusToString(wbuf, st);
    for (int i = 0; i < 63; i++)
        buf[i] = (char)wbuf[i];
    buf[63] = 0;
    give_up(what, buf);
}

/* one contiguous, align-aligned span of pages: over-allocate, free head and tail */
static EFI_STATUS alloc_span(UINTN pages, uint64_t align, struct vmm_mem *m)
{
    UINTN extra = (UINTN)(align / PAGE_SIZE) - 1;
    EFI_PHYSICAL_ADDRESS raw, base;
    EFI_STATUS st;

    st = BS->AllocatePages(AllocateAnyPages, EfiReservedMemoryType, pages + extra, &raw);
    if (EFI_ERROR(st))
        return st;
    base = (raw + align - 1) & ~(align - 1);
    if (base > raw)
        BS->FreePages(raw, (UINTN)((base - raw) / PAGE_SIZE));
    if (raw + (pages + extra) * PAGE_SIZE > base + pages * PAGE_SIZE)
        BS->FreePages(base + pages * PAGE_SIZE,
                      (UINTN)((raw + (pages + extra) * PAGE_SIZE - base) / PAGE_SIZE - pages));
    m->base = base;
    m->pages = pages;
    return EFI_SUCCESS;
}

/* the ACPI 2.0 RSDP first, the 1.0 one if that is all there is */
static uint64_t find_rsdp(void)
{
    static EFI_GUID acpi20 = ACPI_20_TABLE_GUID;
    void *t = NULL;
    if (!EFI_ERROR(LibGetSystemConfigurationTable(&acpi20, &t)) && t)
        return (uint64_t)(UINTN)t;
    if (!EFI_ERROR(LibGetSystemConfigurationTable(&AcpiTableGuid, &t)) && t)
        return (uint64_t)(UINTN)t;
    return 0;
}

static uint32_t classify(UINT32 efi_type)
{
    switch (efi_type) {
    case EfiConventionalMemory:
    case EfiLoaderCode:
    case EfiLoaderData:
    case EfiBootServicesCode:
    case EfiBootServicesData:
        return PTV_MEM_RAM;
    case EfiACPIReclaimMemory:
    case EfiACPIMemoryNVS:
        return PTV_MEM_ACPI;
    case EfiMemoryMappedIO:
    case EfiMemoryMappedIOPortSpace:
        return PTV_MEM_MMIO;
    default:
        return PTV_MEM_RESERVED;
    }
}

/* the firmware memory map, taken after the VMM's allocation, into h->mem */
static bool fill_memmap(struct ptv_handoff *h, const struct vmm_mem *m)
{
    UINTN nr, key, dsize;
    UINT32 dver;
    EFI_MEMORY_DESCRIPTOR *map = LibMemoryMap(&nr, &key, &dsize, &dver);
    struct ptv_mem_range *in;
    char err[PTV_MEMMAP_ERR_MAX];
    unsigned n;
    int rc;

    if (!map) {
        give_up("memory map", "GetMemoryMap failed");
        return false;
    }
    in = AllocatePool(nr * sizeof(*in));
    if (!in) {
        FreePool(map);
        give_up("memory map", "out of memory");
        return false;
    }
    for (UINTN i = 0; i < nr; i++) {
        EFI_MEMORY_DESCRIPTOR *d = (void *)((UINT8 *)map + i * dsize);
        in[i] = (struct ptv_mem_range){.base = d->PhysicalStart,
                                       .size = d->NumberOfPages * PAGE_SIZE,
                                       .type = classify(d->Type)};
    }
    rc = ptv_memmap_build(in, (unsigned)nr, m->base, m->pages * PAGE_SIZE, h->mem,
                          PTV_HANDOFF_MAX_MEM, &n, err, sizeof(err));
    FreePool(in);
    FreePool(map);
    if (rc) {
        give_up("memory map", err);
        return false;
    }
    h->nr_mem = n;
    return true;
}

/* *tss_page: a page for tss_install(), NULL once installed (it is then in use for good) */
static bool call_vmm(struct ptv_handoff *h, ptv_entry_fn entry, void **tss_page)
{
    const char *why;
    char msg[160];
    struct ptv_fmt f;
    int rc;

    if (ptv_handoff_check(h, &why)) {
        give_up("handoff self-check", why);
        return false;
    }
    if (*tss_page) {
        tss_install(*tss_page);
        *tss_page = NULL;
    }
    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, "handoff: image ");
    ptv_fmt_hex(&f, h->vmm_base);
    ptv_fmt_str(&f, "+");
    ptv_fmt_hex(&f, h->vmm_size);
    ptv_fmt_str(&f, ", pool ");
    ptv_fmt_hex(&f, h->pool_base);
    ptv_fmt_str(&f, "+");
    ptv_fmt_hex(&f, h->pool_size);
    ptv_fmt_str(&f, ", ");
    ptv_fmt_dec(&f, h->nr_mem);
    ptv_fmt_str(&f, " memory ranges, RSDP ");
    ptv_fmt_hex(&f, h->acpi_rsdp);
    say(msg);
    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, "calling the VMM entry at ");
    ptv_fmt_hex(&f, (uint64_t)(UINTN)entry);
    say(msg);

    h->tsc_at_handoff = read_tsc();
    rc = entry(h, 0); /* interrupts stay as the firmware has them */

    if (rc == PTV_ENTRY_OK) {
        if (!vmm_signature_present())
            say("VMM returned PTV_ENTRY_OK but CPUID 0x40000000 does not say \"ptvisor\"");
        say("VMM active on the BSP");
        return true;
    }
    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, "VMM entry returned ");
    if (rc > 0 && rc < (int)(sizeof(entry_names) / sizeof(entry_names[0])))
        ptv_fmt_str(&f, entry_names[rc]);
    else
        ptv_fmt_str(&f, "an unknown status");
    ptv_fmt_str(&f, " (");
    ptv_fmt_dec(&f, (uint64_t)(uint32_t)rc);
    ptv_fmt_str(&f, "), details on the VMM's serial log -- booting natively");
    say(msg);
    return false;
}

/*
 * The APs.  Every enabled AP runs the VMM entry through EFI MP services (one at
 * a time) and comes back as a guest into the firmware's AP loop, before the
 * guest OS can run anything: a CPU outside VMX would be outside EPT.  The BSP
 * already runs as the guest here; the APs, still bare, reach the VMM's memory.
 */
#define AP_TIMEOUT_US (5u * 1000 * 1000)
#define AP_POLL_US    100u

struct ap_call {
    ptv_entry_fn entry;
    struct ptv_handoff *h;
    uint64_t vmm_cpu;
    volatile int32_t rc;
    volatile uint32_t done;
    /* what the AP sees right after, as the guest (a check of the VMM by the loader) */
    bool hv_bit, canary_unreadable;
    uint64_t vcpu;
};

static uint64_t vmcall(uint64_t fn, uint64_t *rbx, uint64_t *rcx, uint64_t *rdx)
{
    uint64_t a = fn, b = 0, c = 0, d = 0;
    asm volatile("vmcall"
                 : "+a"(a), "+b"(b), "+c"(c), "+d"(d)::"rsi", "rdi", "r8", "r9", "r10", "memory");
    *rbx = b, *rcx = c, *rdx = d;
    return a;
}

/* from inside, on the AP that just became a guest: the hypervisor bit, the VMM's
 * canary page unreadable, the VMM's own number for this vCPU */
static void ap_look(struct ap_call *c)
{
    uint32_t eax = 1, ebx, ecx = 0, edx;
    uint64_t base, size, canary, n, x;
    asm volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
    c->hv_bit = ecx >> 31;
    if (!c->hv_bit || vmcall(PTV_VMCALL_VMM_RANGE, &base, &size, &canary))
        return;
    c->canary_unreadable = memcmp((const void *)(UINTN)canary, PTV_CANARY_PATTERN, 16) != 0;
    if (!vmcall(PTV_VMCALL_SMP_STATS, &n, &x, &x))
        c->vcpu = n;
}

static VOID EFIAPI ap_procedure(VOID *arg)
{
    struct ap_call *c = arg;
    int rc = c->entry(c->h, c->vmm_cpu);
    if (rc == PTV_ENTRY_OK)
        ap_look(c);
    c->rc = rc;
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    /* the VMM refused before VMXON and left this CPU bare: it stays off, interrupts
     * masked (a guest INIT could still restart it: said on the console) */
    if (rc != PTV_ENTRY_OK)
        for (;;)
            asm volatile("cli; hlt");
}

static void ap_say(UINTN n, uint64_t apic_id, const char *what)
{
    char msg[200];
    struct ptv_fmt f;
    ptv_fmt_init(&f, msg, sizeof(msg));
    ptv_fmt_str(&f, "CPU ");
    ptv_fmt_dec(&f, n);
    ptv_fmt_str(&f, " (APIC ID ");
    ptv_fmt_dec(&f, apic_id);
    ptv_fmt_str(&f, "): ");
    ptv_fmt_str(&f, what);
    say(msg);
}

static void start_aps(struct ptv_handoff *h, ptv_entry_fn entry)
{
    static EFI_GUID guid = PTV_MP_SERVICES_GUID;
    static struct ap_call calls[PTV_MAX_CPUS];
    struct ptv_efi_mp *mp;
    UINTN total = 0, enabled = 0, bsp = 0, under = 1;

    if (EFI_ERROR(BS->LocateProtocol(&guid, NULL, (void **)&mp)) ||
        EFI_ERROR(mp->GetNumberOfProcessors(mp, &total, &enabled)) ||
        EFI_ERROR(mp->WhoAmI(mp, &bsp))) {
        say("no EFI MP services: only the BSP is known (if the machine has more CPUs, they "
            "stay with the firmware)");
        return;
    }
    if (total > PTV_MAX_CPUS) {
        sayf(L"%d CPUs: the VMM takes the first %d", (int)total, PTV_MAX_CPUS);
        total = PTV_MAX_CPUS;
    }
    for (UINTN n = 0; n < total; n++) {
        struct ptv_efi_cpu_info info;
        EFI_EVENT ev;
        if (n == bsp || EFI_ERROR(mp->GetProcessorInfo(mp, n, &info)))
            continue;
        if (!(info.StatusFlag & PTV_PROCESSOR_ENABLED)) {
            ap_say(n, info.ProcessorId, "disabled by the firmware: not started");
            continue;
        }
        struct ap_call *c = &calls[n];
        *c = (struct ap_call){.entry = entry, .h = h, .vmm_cpu = n < bsp ? n + 1 : n};
        if (EFI_ERROR(BS->CreateEvent(0, 0, NULL, NULL, &ev)) ||
            EFI_ERROR(mp->StartupThisAP(mp, ap_procedure, n, ev, 0, c, NULL))) {
            ap_say(n, info.ProcessorId, "MP services cannot start it: left with the firmware");
            continue;
        }
        for (UINTN t = 0; t < AP_TIMEOUT_US && !__atomic_load_n(&c->done, __ATOMIC_SEQ_CST);
             t += AP_POLL_US)
            BS->Stall(AP_POLL_US);
        if (!c->done)
            ap_say(n, info.ProcessorId,
                   "no answer from the VMM: parked in VMX root (details on the VMM's log)");
        else if (c->rc != PTV_ENTRY_OK)
            ap_say(n, info.ProcessorId,
                   "the VMM refused it (details on its log): parked bare, interrupts off");
        else if (!c->hv_bit || !c->canary_unreadable || c->vcpu != c->vmm_cpu)
            ap_say(n, info.ProcessorId,
                   !c->hv_bit ? "FAILED: the VMM said OK but the AP sees no hypervisor bit"
                   : !c->canary_unreadable ? "FAILED: the AP reads the VMM's canary page"
                                           : "FAILED: the VMM numbers this vCPU differently");
        else {
            ap_say(n, info.ProcessorId,
                   "runs under the VMM (sees the hypervisor bit, cannot read the VMM canary)");
            under++;
        }
    }
    sayf(L"%d of %d CPUs under the VMM", (int)under, (int)total);
}

bool start_vmm(EFI_LOADED_IMAGE *li, const struct ptv_config *cfg)
{
    struct ptv_elf_image img;
    char err[PTV_ELF_ERR_MAX];
    char pin_msg[PTV_PIN_MSG_MAX];
    struct vmm_mem m;
    void *file, *tss_page;
    UINTN len, img_pages, pool_pages;
    EFI_STATUS st;
    bool ok;

    st = read_file(li->DeviceHandle, PTV_VMM_FILE, VMM_FILE_MAX, &file, &len);
    if (EFI_ERROR(st)) {
        give_up_status("\\ptvisor\\vmm.elf", st);
        return false;
    }
    /* an ESP file a guest with root could have rewritten: nothing parses it before this */
    if (ptv_vmm_pin_check(&ptv_vmm_pin, file, len, "\\ptvisor\\vmm.elf", pin_msg,
                          sizeof(pin_msg)) == PTV_PIN_MISMATCH) {
        FreePool(file);
        say(pin_msg);
        return false;
    }
    say(pin_msg);
    if (ptv_elf_check(file, len, &img, err, sizeof(err))) {
        FreePool(file);
        give_up("\\ptvisor\\vmm.elf", err);
        return false;
    }
    img_pages = (UINTN)(img.span / PAGE_SIZE);
    pool_pages = (UINTN)(cfg->pool_size / PAGE_SIZE);
    st = alloc_span(img_pages + HANDOFF_PAGES + pool_pages, img.align, &m);
    if (EFI_ERROR(st)) {
        FreePool(file);
        give_up_status("cannot allocate the VMM's memory", st);
        return false;
    }
    ptv_elf_load(file, &img, (void *)(UINTN)m.base, m.base);
    FreePool(file);

    struct ptv_handoff *h = (void *)(UINTN)(m.base + img.span);
    memset(h, 0, HANDOFF_PAGES * PAGE_SIZE);
    h->magic = PTV_HANDOFF_MAGIC;
    h->version = PTV_HANDOFF_VERSION;
    h->size = sizeof(*h);
    h->vmm_base = m.base;
    h->vmm_size = img.span;
    h->pool_base = m.base + img.span + HANDOFF_PAGES * PAGE_SIZE;
    h->pool_size = cfg->pool_size;
    h->acpi_rsdp = find_rsdp();
    h->acpi_dmar = acpi_find_dmar();
    h->cfg = *cfg;

    tss_page = tss_prepare(); /* before the memory map: it allocates */
    ptv_entry_fn entry = (ptv_entry_fn)(UINTN)(m.base + img.entry);
    uint64_t dmar = h->acpi_dmar; /* h is VMM memory once the VMM runs: not readable then */
    ok = fill_memmap(h, &m) && call_vmm(h, entry, &tss_page);
    if (ok) {
        acpi_hide_dmar(dmar);
        start_aps(h, entry);
    }
    if (!ok) /* the VMM is not running (it left VMX off): give the memory back */
        BS->FreePages(m.base, m.pages);
    if (tss_page) /* never loaded into TR */
        BS->FreePages((EFI_PHYSICAL_ADDRESS)(UINTN)tss_page, 1);
    return ok;
}
