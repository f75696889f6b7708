/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the vmm.elf loader (boot/elf.c).  Invariants: no crash
 * or UB on any input; an accepted image has a sane description, and loading
 * and relocating it stays inside its span (ASan-checked allocation of exactly
 * img.span bytes).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../boot/elf.h"

#define LOAD_LIMIT (4ull << 20) /* keep runs fast: load only images up to 4 MiB */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ptv_elf_image img;
    char err[PTV_ELF_ERR_MAX];
    uint8_t *file = malloc(size ? size : 1);

    memcpy(file, data, size);
    if (ptv_elf_check(file, size, &img, err, sizeof(err)) != 0) {
        if (strnlen(err, sizeof(err)) >= sizeof(err) || err[0] == '\0')
            abort();
        free(file);
        return 0;
    }
    if (img.span == 0 || img.span > PTV_ELF_MAX_SPAN || (img.span & 0xfff) ||
        img.entry >= img.span || img.align < 4096 || img.align > PTV_ELF_MAX_ALIGN ||
        (img.align & (img.align - 1)) || (img.vaddr_lo & 0xfff))
        abort();
    if (img.span <= LOAD_LIMIT) {
        uint8_t *dst = malloc(img.span);
        ptv_elf_load(file, &img, dst, 0xffffffff80000000ull);
        free(dst);
    }
    free(file);
    return 0;
}
