/* SPDX-License-Identifier: MIT */
/*
 * Chain-load the guest: LoadImage of cfg->guest_path on the loader's own
 * volume, LoadOptions = cfg->cmdline in UTF-16, StartImage.  A Linux kernel
 * (EFI stub) and an EFI test program take the same path.
 */
#include "loader.h"
#include "fmt.h"
#include <ptv/vmcall.h>

/* tell ptvisor, when it runs below, that the guest OS starts now (PTV_VMCALL_BOOT_HANDOFF):
 * only where CPUID says ptvisor is there, so a machine without it never sees a VMCALL */
static void handoff_vmcall(void)
{
    uint32_t a = 1, b, c = 0, d;
    char sig[13] = {0};
    asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    if (!(c >> 31 & 1))
        return;
    a = 0x40000000;
    c = 0;
    asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    CopyMem(sig, &b, 4);
    CopyMem(sig + 4, &c, 4);
    CopyMem(sig + 8, &d, 4);
    if (CompareMem(sig, "ptvisor", 8))
        return;
    uint64_t rax = PTV_VMCALL_BOOT_HANDOFF;
    asm volatile("vmcall" : "+a"(rax)::"rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "memory");
}

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
    handoff_vmcall(); /* trace_boot = N traces from the next instruction */
    st = BS->StartImage(child, NULL, NULL);
    sayf(L"guest %a returned: %r", cfg->guest_path, st);
    return st;
}
