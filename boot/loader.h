/* SPDX-License-Identifier: MIT */
/*
 * The loader's UEFI side (GNU-EFI).  UEFI types stay inside boot/; the pure
 * parts (config.c, elf.c, memmap.c) never see them.
 */
#ifndef PTV_BOOT_LOADER_H
#define PTV_BOOT_LOADER_H

#include <efi.h>
#include <efilib.h>
#include <stdbool.h>
#include <stdint.h>
#include "ptv/config.h"
#include "ptv/handoff.h"

#define PTV_DIR      L"\\ptvisor"
#define PTV_CFG_FILE PTV_DIR L"\\ptvisor.cfg"
#define PTV_VMM_FILE PTV_DIR L"\\vmm.elf"

/* the VMM's entry point: System V ABI, whatever the caller's default is; cpu 0 on
 * the BSP, the AP's number on an AP (handoff.h) */
typedef int(__attribute__((sysv_abi)) * ptv_entry_fn)(struct ptv_handoff *h, uint64_t cpu);

/* console.c: one console line "ptvisor: <msg>" on ConOut, mirrored to the
 * configured UART when ConOut has no serial port (console_configure) */
void say(const char *msg);
void sayf(const CHAR16 *fmt, ...);
void console_configure(const struct ptv_config *cfg);

/* fs.c: files on the loader's own volume */
EFI_STATUS read_file(EFI_HANDLE device, const CHAR16 *path, UINTN max, void **buf, UINTN *len);
CHAR16 *to_ucs2(const char *ascii); /* AllocatePool'ed, NULL on failure */

/* cpu.c */
bool vmx_usable(const struct ptv_config *cfg); /* prints its one-line verdict */
void *tss_prepare(void);                       /* NULL if TR is usable already */
void tss_install(void *page);
bool vmm_signature_present(void); /* CPUID 0x40000000 says "ptvisor" */
uint64_t read_tsc(void);
void __attribute__((noreturn)) halt_forever(void);

/* vmm_load.c: load vmm.elf, hand over, call; true if the VMM now runs */
bool start_vmm(EFI_LOADED_IMAGE *li, const struct ptv_config *cfg);

/* chain.c: LoadImage + StartImage of cfg->guest_path with cfg->cmdline */
EFI_STATUS boot_guest(EFI_HANDLE image, EFI_LOADED_IMAGE *li, const struct ptv_config *cfg);

#endif
