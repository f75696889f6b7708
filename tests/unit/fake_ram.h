/* SPDX-License-Identifier: MIT */
/*
 * Flat fake guest RAM for the software tracer's tests (test_swtrace.c, test_bcache.c): define
 * RAM_SIZE, include this once; `mem` reads [0, RAM_SIZE) for vmm/trace/gwalk.c.
 */
#ifndef PTV_TEST_FAKE_RAM_H
#define PTV_TEST_FAKE_RAM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "trace/gwalk.h"

static uint8_t ram[RAM_SIZE];

static bool ram_read(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    (void)ctx;
    if (gpa >= RAM_SIZE || len > RAM_SIZE - gpa)
        return false;
    memcpy(buf, ram + gpa, len);
    return true;
}
static const struct gw_mem mem = {.read = ram_read};

static void put64(uint64_t a, uint64_t v)
{
    memcpy(ram + a, &v, 8);
}

#endif
