/* SPDX-License-Identifier: MIT */
/*
 * The ptvisor loader (\EFI\BOOT\BOOTX64.EFI): read the config, check the CPU,
 * load and start the VMM, chain-load the guest.  One console line per
 * decision, "ptvisor: ...".  Whatever fails, it says why and either boots the
 * guest natively or returns to the firmware: it never hangs silently.
 */
#include "loader.h"
#include "config.h"
#include "acpi_madt.h"

#define CFG_FILE_MAX  (64 * 1024)
#define FAIL_STALL_US (5 * 1000 * 1000)

static void say_cfg(void *ctx, const char *msg)
{
    say(msg);
}

static void read_config(EFI_LOADED_IMAGE *li, struct ptv_config *cfg)
{
    char summary[256];
    void *text;
    UINTN len;
    EFI_STATUS st;

    ptv_config_defaults(cfg);
    st = read_file(li->DeviceHandle, PTV_CFG_FILE, CFG_FILE_MAX, &text, &len);
    if (EFI_ERROR(st)) {
        sayf(L"%s: %r -- using the built-in defaults", PTV_CFG_FILE, st);
    } else {
        unsigned bad = ptv_config_parse(cfg, text, len, "ptvisor.cfg", say_cfg, NULL);
        FreePool(text);
        if (bad)
            sayf(L"ptvisor.cfg: %d bad line(s) skipped, their keys keep the defaults", bad);
    }
    ptv_config_summary(cfg, summary, sizeof(summary));
    sayf(L"config: %a", summary);
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    EFI_LOADED_IMAGE *li;
    struct ptv_config cfg;
    EFI_STATUS st;

    InitializeLib(image, systab);
    say("loader started (handoff ABI v2)");
    st = BS->HandleProtocol(image, &LoadedImageProtocol, (void **)&li);
    if (EFI_ERROR(st)) {
        sayf(L"no loaded-image protocol: %r", st);
        return st;
    }
    read_config(li, &cfg);
    console_configure(&cfg);
    /* before the VMM and the guest look at ACPI: a test-vehicle aid, no-op with a firmware MADT */
    acpi_add_madt_if_missing();

    if (!cfg.start_vmm) {
        say("vmm = off in ptvisor.cfg -- booting natively");
    } else if (!vmx_usable(&cfg)) {
        if (cfg.on_no_vmx == PTV_NO_VMX_HALT) {
            say("halted (on_no_vmx = halt); power off or reset the machine");
            halt_forever();
        }
    } else {
        start_vmm(li, &cfg);
    }

    st = boot_guest(image, li, &cfg);
    if (EFI_ERROR(st)) {
        say("returning to the firmware in 5 seconds");
        BS->Stall(FAIL_STALL_US);
    }
    return st;
}
