/* SPDX-License-Identifier: MIT */
/*
 * What the whole VMM shares once start-up (core/main.c) has set it: the boot configuration, the
 * VMM's memory span, the host page tables, the per-CPU areas, the canary page; and what the
 * machine does when the guest is dead (the crash action).  Defined here, below every user, so
 * that no exit handler or shim reaches up into start-up for them.
 */
#include "base/vmm_state.h"
#include "base/log.h"
#include "base/palloc.h"
#include "hw/cpu.h"
#include "hw/percpu.h"
#include "lib/ptv_string.h"
#include <ptv/vmcall.h>

struct percpu percpu_area[PTV_MAX_CPUS];
struct vmm_span vmm_span;
const struct ptv_config *vmm_cfg;
uint64_t vmm_host_cr3;
uint64_t vmm_canary_pa;

void vmm_canary_fill(void)
{
    uint8_t *page = (uint8_t *)(uintptr_t)vmm_canary_pa;
    static const char pat[16] = PTV_CANARY_PATTERN;
    for (unsigned i = 0; i < PAGE_SIZE; i += sizeof(pat))
        memcpy(page + i, pat, sizeof(pat));
}

bool vmm_canary_intact(void)
{
    static const char pat[16] = PTV_CANARY_PATTERN;
    const uint8_t *page = (const uint8_t *)(uintptr_t)vmm_canary_pa;
    for (unsigned i = 0; i < PAGE_SIZE; i += sizeof(pat))
        if (memcmp(page + i, pat, sizeof(pat)))
            return false;
    return true;
}

void machine_crash_action(unsigned action)
{
    if (action == PTV_CRASH_REBOOT) {
        pr_err("vmm", "rebooting");
        outb(0xcf9, 0x06); /* PCI reset control: hard reset */
        outb(0x64, 0xfe);  /* keyboard controller pulse */
    } else if (action == PTV_CRASH_POWEROFF) {
        pr_err("vmm", "powering off");
        static const char bochs_shutdown[] = "Shutdown";
        for (const char *p = bochs_shutdown; *p; p++)
            outb(0x8900, (uint8_t)*p); /* Bochs/QEMU-isa shutdown port */
        outw(0x604, 0x2000);           /* QEMU q35/PIIX ACPI PM1a S5 */
        outb(0xf4, 0);                 /* QEMU isa-debug-exit */
    }
    pr_err("vmm", "halted");
    halt_forever();
}
