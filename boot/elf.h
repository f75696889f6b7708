/* SPDX-License-Identifier: MIT */
/*
 * Loading vmm.elf: a static x86-64 PIE (ET_DYN) whose only relocations are
 * R_X86_64_RELATIVE.  Pure code on plain bytes, compiled unchanged into the
 * loader, the host test and the fuzzer.
 *
 *   ptv_elf_check()  validates everything (headers, segments, W^X, dynamic
 *                    section, every relocation) and describes the image;
 *   ptv_elf_load()   copies it to its load address and relocates it.  It
 *                    cannot fail: all it touches was checked before.
 */
#ifndef PTV_BOOT_ELF_H
#define PTV_BOOT_ELF_H

#include <stddef.h>
#include <stdint.h>

#define PTV_ELF_MAX_SPAN  (64ull << 20) /* bytes from the lowest to the highest byte loaded */
#define PTV_ELF_MAX_PHDRS 32
#define PTV_ELF_MAX_ALIGN (2ull << 20)
#define PTV_ELF_ERR_MAX   128

struct ptv_elf_image {
    uint64_t vaddr_lo;   /* lowest PT_LOAD address, rounded down to 4 KiB */
    uint64_t span;       /* bytes to allocate from vaddr_lo, a multiple of 4 KiB */
    uint64_t align;      /* required alignment of the load address (>= 4 KiB) */
    uint64_t entry;      /* e_entry as an offset from vaddr_lo */
    uint64_t rela_off;   /* file offset of the RELA table */
    uint64_t rela_count; /* entries in it (0: nothing to relocate) */
};

/* 0 if file[0..len) is a loadable VMM image (fills *img), else -1 and err */
int ptv_elf_check(const void *file, size_t len, struct ptv_elf_image *img, char *err, size_t errcap)
    __attribute__((warn_unused_result));

/*
 * Copy a checked image to dst (img->span bytes, gaps and .bss zeroed) and
 * relocate it for execution at address load_addr (dst and load_addr are the
 * same memory, seen by the loader and by the CPU; they differ in host tests).
 */
void ptv_elf_load(const void *file, const struct ptv_elf_image *img, void *dst, uint64_t load_addr);

#endif
