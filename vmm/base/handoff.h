/* SPDX-License-Identifier: MIT */
/*
 * Validation of struct ptv_handoff (include/ptv/handoff.h).  The VMM calls
 * ptv_handoff_check() on entry, before it trusts any field; the same code
 * runs in the host test tests/unit/boot/test_handoff.c and in the config fuzzer.
 */
#ifndef PTV_VMM_HANDOFF_H
#define PTV_VMM_HANDOFF_H

#include "ptv/handoff.h"

/* 0 if h is well-formed; otherwise -1 and *why names the first problem */
int ptv_handoff_check(const struct ptv_handoff *h, const char **why)
    __attribute__((warn_unused_result));

/* the ptv_config part alone: strings NUL-terminated, enums and sizes in range */
int ptv_config_check(const struct ptv_config *c, const char **why)
    __attribute__((warn_unused_result));

/* the handoff map's type of physical address pa (PTV_MEM_MMIO in holes) and, in *end, where
 * that range ends (the next 4 KiB boundary in a hole) */
uint32_t ptv_mem_type_at(const struct ptv_handoff *h, uint64_t pa, uint64_t *end);

#endif
