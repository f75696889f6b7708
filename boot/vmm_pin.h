/* SPDX-License-Identifier: MIT */
/*
 * The loader is pinned to the vmm.elf it was built with: mk/10-boot.mk puts
 * that file's SHA-256 into the loader (a generated ptv_vmm_pin), and before
 * the loader parses, loads or relocates the vmm.elf it read from the ESP it
 * hashes it and refuses any other (README: threat model, the boot volume).
 * The verdict and its one line: pure, host-tested (test_sha256).
 */
#ifndef PTV_BOOT_VMM_PIN_H
#define PTV_BOOT_VMM_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sha256.h"

#define PTV_PIN_HEX     16 /* hex digits of a digest a line shows (64 bits) */
#define PTV_PIN_MSG_MAX 220

struct ptv_vmm_pin {
    bool pinned; /* false only in the test loader for other files (mk/10-boot.mk) */
    uint8_t sha256[PTV_SHA256_LEN];
};

/* generated at build time: $(BUILD)/boot/vmm_pin_digest.c or vmm_pin_none.c */
extern const struct ptv_vmm_pin ptv_vmm_pin;

enum ptv_pin_verdict {
    PTV_PIN_MATCH,    /* the built-in digest: load it */
    PTV_PIN_MISMATCH, /* another file: do not load it, boot natively */
    PTV_PIN_UNPINNED, /* a loader without a digest: load it, said so */
};

/*
 * Hash file[0..len) and compare it with pin.  msg gets the one line to print
 * ("ptvisor: " not included) naming path and the digests' first PTV_PIN_HEX
 * hex digits; a mismatch line ends in " -- booting natively".
 */
enum ptv_pin_verdict ptv_vmm_pin_check(const struct ptv_vmm_pin *pin, const void *file, size_t len,
                                       const char *path, char *msg, size_t cap)
    __attribute__((warn_unused_result));

#endif
