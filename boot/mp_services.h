/* SPDX-License-Identifier: MIT */
/* UEFI PI spec vol. 2, 13.4: EFI_MP_SERVICES_PROTOCOL (not in GNU-EFI's headers). */
#ifndef PTV_BOOT_MP_SERVICES_H
#define PTV_BOOT_MP_SERVICES_H

#include <efi.h>

#define PTV_MP_SERVICES_GUID                                                                       \
    {                                                                                              \
        0x3fdda605, 0xa76e, 0x4f46,                                                                \
        {                                                                                          \
            0xad, 0x29, 0x12, 0xf4, 0x53, 0x1b, 0x3d, 0x08                                         \
        }                                                                                          \
    }
#define PTV_PROCESSOR_AS_BSP  0x1
#define PTV_PROCESSOR_ENABLED 0x2

struct ptv_efi_cpu_info {
    UINT64 ProcessorId; /* the APIC ID */
    UINT32 StatusFlag;
    UINT32 Package, Core, Thread;
    UINT8 ExtendedInformation[64]; /* PI 1.7+: room, never read */
};

struct ptv_efi_mp;
typedef VOID(EFIAPI *ptv_ap_procedure)(VOID *arg);
typedef EFI_STATUS(EFIAPI *ptv_mp_count_fn)(struct ptv_efi_mp *self, UINTN *total, UINTN *enabled);
typedef EFI_STATUS(EFIAPI *ptv_mp_info_fn)(struct ptv_efi_mp *self, UINTN n,
                                           struct ptv_efi_cpu_info *info);
typedef EFI_STATUS(EFIAPI *ptv_mp_all_fn)(struct ptv_efi_mp *self, ptv_ap_procedure proc,
                                          BOOLEAN single_thread, EFI_EVENT wait, UINTN timeout_us,
                                          VOID *arg, UINTN **failed);
typedef EFI_STATUS(EFIAPI *ptv_mp_this_fn)(struct ptv_efi_mp *self, ptv_ap_procedure proc, UINTN n,
                                           EFI_EVENT wait, UINTN timeout_us, VOID *arg,
                                           BOOLEAN *finished);
typedef EFI_STATUS(EFIAPI *ptv_mp_whoami_fn)(struct ptv_efi_mp *self, UINTN *n);

struct ptv_efi_mp {
    ptv_mp_count_fn GetNumberOfProcessors;
    ptv_mp_info_fn GetProcessorInfo;
    ptv_mp_all_fn StartupAllAPs;
    ptv_mp_this_fn StartupThisAP;
    void *SwitchBSP;
    void *EnableDisableAP;
    ptv_mp_whoami_fn WhoAmI;
};

#endif
