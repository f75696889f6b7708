// SPDX-License-Identifier: MIT
/*
 * attack.efi group "dma": a device the guest drives writes the VMM.
 *
 * The guest finds QEMU's edu device (PCI 1234:11e8, configuration space through 0xCF8/0xCFC,
 * bus 0), turns on its memory decoding and bus mastering, and has it DMA (QEMU
 * docs/specs/edu.rst: BAR0 0x80 source, 0x88 destination, 0x90 count, 0x98 command, bit 0
 * start, bit 1 edu -> RAM; its buffer at device address 0x40000):
 *
 *   allowed   a guest page -> edu -> another guest page as high as the canary allows (the
 *             highest free page below it): the bytes land, so edu reaches that far (its DMA
 *             mask, dma_mask=, does not clamp the addresses below) and nothing faults
 *   read      the VMM canary page (PTV_VMCALL_VMM_RANGE) -> edu -> a guest page: the canary's
 *             bytes never arrive, a read fault at that page recorded (first: a write that got
 *             through would have overwritten the pattern this looks for)
 *   write     edu -> the VMM canary page: the VMM's canary stays intact
 *             (PTV_VMCALL_CHECK_CANARY) and the VMM recorded a write fault by edu at that page
 *
 * The VMM's fault figures come from PTV_VMCALL_DMA_STATS (ABI 8), which reads the units' fault
 * records at the call on the BSP: the count and the newest fault's page, requester and
 * direction, i.e. what the remapping hardware itself recorded, not what the guest inferred.
 *
 * SKIP, never PASS, where it cannot be attacked: a VMM that answers no DMA_STATS, no unit
 * translating (Bochs has no VT-d: the VMM said "DMA not isolated" at boot), no edu device,
 * a canary above 4 GiB (edu masks its DMA addresses with its dma_mask property, 28 bits by
 * default: nested:kvm's QEMU gives it dma_mask=0xffffffff, and the allowed copy just below the
 * canary shows nothing is clamped).  The nested:kvm step requires this attack's PASS lines
 * (tests/system/nested-kvm.sh).
 */
#include <efi.h>
#include <efilib.h>

#include "ptv/vmcall.h"

#include "attack.h"

#define EDU_VENDOR     0x1234
#define EDU_DEVICE     0x11e8
#define EDU_DMA_SRC    0x80
#define EDU_DMA_DST    0x88
#define EDU_DMA_CNT    0x90
#define EDU_DMA_CMD    0x98
#define EDU_DMA_RUN    1u
#define EDU_DMA_TO_RAM 2u
#define EDU_BUF        0x40000u
#define LEN            64u
#define PAGE           4096ull

#define PCI_CMD_MEM    (1u << 1)
#define PCI_CMD_MASTER (1u << 2)

static inline void outl(uint16_t port, uint32_t v)
{
    __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port));
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t v;
    __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static uint32_t pci_read(unsigned dev, unsigned off)
{
    outl(0xcf8, 0x80000000u | dev << 11 | (off & 0xfc));
    return inl(0xcfc);
}

static void pci_write(unsigned dev, unsigned off, uint32_t v)
{
    outl(0xcf8, 0x80000000u | dev << 11 | (off & 0xfc));
    outl(0xcfc, v);
}

static volatile uint8_t *edu_bar;

static void edu_w(unsigned off, uint64_t v)
{
    *(volatile uint64_t *)(edu_bar + off) = v;
}

static uint64_t edu_r(unsigned off)
{
    return *(volatile uint64_t *)(edu_bar + off);
}

/* one DMA of LEN bytes; false if the device never finished it (edu takes ~100 ms; 10 s) */
static bool edu_dma(uint64_t src, uint64_t dst, bool to_ram)
{
    edu_w(EDU_DMA_SRC, src);
    edu_w(EDU_DMA_DST, dst);
    edu_w(EDU_DMA_CNT, LEN);
    edu_w(EDU_DMA_CMD, EDU_DMA_RUN | (to_ram ? EDU_DMA_TO_RAM : 0));
    for (unsigned i = 0; i < 1000; i++) {
        if (!(edu_r(EDU_DMA_CMD) & EDU_DMA_RUN))
            return true;
        test_stall_us(10000);
    }
    return false;
}

/* edu on bus 0 with a memory BAR; decoding and bus mastering turned on.  Its device number,
 * or -1 */
static int edu_find(void)
{
    for (unsigned dev = 0; dev < 32; dev++) {
        uint32_t id = pci_read(dev, 0);
        if ((id & 0xffff) != EDU_VENDOR || id >> 16 != EDU_DEVICE)
            continue;
        uint32_t bar = pci_read(dev, 0x10);
        if (bar & 1 || !(bar & ~0xfu))
            return -1;
        pci_write(dev, 0x04, (pci_read(dev, 0x04) & 0xffff) | PCI_CMD_MEM | PCI_CMD_MASTER);
        edu_bar = (volatile uint8_t *)(uintptr_t)(bar & ~0xfu);
        return (int)dev;
    }
    return -1;
}

struct dma_stats {
    uint64_t rax, units, faults, addr, who;
};

static struct dma_stats dma_stats(void)
{
    struct vmcall6 r = {.rax = PTV_VMCALL_DMA_STATS};
    vmcall6(&r);
    return (struct dma_stats){r.rax, r.rbx, r.rcx, r.rdx, r.rsi};
}

/* a page below max the firmware gives us (EfiLoaderData), or 0 */
static uint64_t page_below(uint64_t max)
{
    EFI_PHYSICAL_ADDRESS a = max;
    if (uefi_call_wrapper(BS->AllocatePages, 4, AllocateMaxAddress, EfiLoaderData, 1, &a))
        return 0;
    return a;
}

static bool holds_canary(const volatile uint8_t *p)
{
    static const char pat[] = PTV_CANARY_PATTERN;
    for (unsigned i = 0; i + sizeof(pat) <= LEN; i += sizeof(pat)) {
        unsigned k = 0;
        while (k < sizeof(pat) && p[i + k] == (uint8_t)pat[k])
            k++;
        if (k == sizeof(pat))
            return true;
    }
    return false;
}

static bool canary_intact(void)
{
    struct vmcall_regs r;
    return atk_vmcall(PTV_VMCALL_CHECK_CANARY, 0, 0, 0, &r) == PTV_VMCALL_OK && r.rbx == 1;
}

static void atk_dma_canary(void)
{
    struct vmcall_regs ver;
    if (atk_vmcall(PTV_VMCALL_VERSION, 0, 0, 0, &ver) != PTV_VMCALL_OK || ver.rbx < 8) {
        report_skip("DMA onto the VMM: the VMM answers no DMA_STATS (VMCALL ABI %lu < 8)", ver.rbx);
        return;
    }
    struct dma_stats s0 = dma_stats();
    if (s0.rax != PTV_VMCALL_OK || !s0.units) {
        report_skip("DMA onto the VMM: no VT-d unit translating (the VMM's boot line says why: "
                    "'DMA not isolated: ...')");
        return;
    }
    int dev = edu_find();
    if (dev < 0) {
        report_skip("DMA onto the VMM: no edu device (QEMU -device edu) with a memory BAR on "
                    "bus 0");
        return;
    }
    uint64_t canary = atk_canary_pa, sid = (uint64_t)dev << 3;
    if (canary >= (1ull << 32)) {
        report_skip("DMA onto the VMM: the canary at %#lx is above 4 GiB", canary);
        return;
    }
    uint64_t src = page_below(canary), dst = page_below(canary), back = page_below(canary);
    if (!src || !dst || !back) {
        report_skip("DMA onto the VMM: no free pages below the canary %#lx", canary);
        return;
    }
    report_info("dma: %u unit(s) translating, %lu faults so far; edu at 00:%02x.0 BAR %#lx; "
                "canary %#lx; guest pages %#lx %#lx %#lx",
                (unsigned)s0.units, s0.faults, dev, (uint64_t)(uintptr_t)edu_bar, canary, src, dst,
                back);
    volatile uint8_t *s = (volatile uint8_t *)src, *d = (volatile uint8_t *)dst,
                     *b = (volatile uint8_t *)back;
    for (unsigned i = 0; i < PAGE; i++) {
        s[i] = (uint8_t)(0xc0 + i % 61);
        d[i] = 0;
        b[i] = 0;
    }

    /* allowed: guest page -> edu -> a guest page just below the canary */
    bool done = edu_dma(src, EDU_BUF, false) && edu_dma(EDU_BUF, dst, true);
    bool landed = true;
    for (unsigned i = 0; i < LEN; i++)
        landed &= d[i] == s[i];
    struct dma_stats s1 = dma_stats();
    report(done && landed, "dma: edu's copy between guest pages lands (up to %#lx)", dst);
    report(s1.faults == s0.faults, "dma: ... and no DMA fault recorded (%lu new)",
           s1.faults - s0.faults);

    /* read first, while the canary surely holds its pattern: the VMM canary -> edu -> a guest
     * page; the canary's bytes never arrive */
    done = edu_dma(canary, EDU_BUF, false) && edu_dma(EDU_BUF, back, true);
    struct dma_stats s2 = dma_stats();
    report(done && !holds_canary(b), "dma: edu's read of the VMM canary never returns its bytes");
    report(s2.faults > s1.faults && s2.addr == (canary & ~(PAGE - 1)) && s2.who == sid,
           "dma: ... the VMM recorded edu's read fault there (%lu new; newest %#lx by %#lx)",
           s2.faults - s1.faults, s2.addr, s2.who);

    /* write: edu's buffer (the source's bytes) onto the VMM canary */
    if (!edu_dma(src, EDU_BUF, false))
        report_info("dma: edu did not reload its buffer");
    done = edu_dma(EDU_BUF, canary, true);
    bool intact = canary_intact();
    struct dma_stats s3 = dma_stats();
    report(done && intact, "dma: edu's write onto the VMM canary %#lx leaves it intact (done %d)",
           canary, done);
    report(s3.faults > s2.faults && s3.addr == (canary & ~(PAGE - 1)) &&
               s3.who == (sid | PTV_DMA_FAULT_WRITE),
           "dma: ... the VMM recorded edu's write fault there (%lu new; newest %#lx by %#lx)",
           s3.faults - s2.faults, s3.addr, s3.who);
    pci_write((unsigned)dev, 0x04, pci_read((unsigned)dev, 0x04) & 0xffff & ~PCI_CMD_MASTER);
    uefi_call_wrapper(BS->FreePages, 2, src, 1);
    uefi_call_wrapper(BS->FreePages, 2, dst, 1);
    uefi_call_wrapper(BS->FreePages, 2, back, 1);
}

const struct attack attacks_dma[] = {
    {"DMA by a bus-master device onto the VMM canary", atk_dma_canary},
    {0},
};
