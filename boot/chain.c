/* SPDX-License-Identifier: MIT */
/*
 * Chain-load the guest: LoadImage of cfg->guest_path on the loader's own
 * volume, LoadOptions = cfg->cmdline in UTF-16, StartImage.  A Linux kernel
 * (EFI stub) and an EFI test program take the same path.
 */
#include "loader.h"
#include "fmt.h"

static void guest_failed(const struct ptv_config *cfg, const char *what, EFI_STATUS st)
{
    sayf(L"guest %a: %a%r", cfg->guest_path, what, st);
}

EFI_STATUS boot_guest(EFI_HANDLE image, EFI_LOADED_IMAGE *li, const struct ptv_config *cfg)
{
    EFI_DEVICE_PATH *dp;
    EFI_LOADED_IMAGE *gli;
    EFI_HANDLE child;
    CHAR16 *path, *cmdline;
    EFI_STATUS st;
    UINTN n;

    path = to_ucs2(cfg->guest_path);
    cmdline = to_ucs2(cfg->cmdline);
    if (!path || !cmdline) {
        guest_failed(cfg, "", EFI_OUT_OF_RESOURCES);
        return EFI_OUT_OF_RESOURCES;
    }
    dp = FileDevicePath(li->DeviceHandle, path);
    if (!dp) {
        guest_failed(cfg, "", EFI_OUT_OF_RESOURCES);
        return EFI_OUT_OF_RESOURCES;
    }
    st = BS->LoadImage(FALSE, image, dp, NULL, 0, &child);
    FreePool(dp);
    if (EFI_ERROR(st)) {
        guest_failed(cfg, "", st);
        return st;
    }
    st = BS->HandleProtocol(child, &LoadedImageProtocol, (void **)&gli);
    if (EFI_ERROR(st)) {
        guest_failed(cfg, "no loaded-image protocol: ", st);
        BS->UnloadImage(child);
        return st;
    }
    for (n = 0; cmdline[n]; n++)
        ;
    gli->LoadOptions = cmdline;
    gli->LoadOptionsSize = (UINT32)((n + 1) * sizeof(CHAR16));
    sayf(L"starting guest %a: %a", cfg->guest_path, cfg->cmdline);
    st = BS->StartImage(child, NULL, NULL);
    sayf(L"guest %a returned: %r", cfg->guest_path, st);
    return st;
}
