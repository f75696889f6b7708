/* SPDX-License-Identifier: MIT */
/*
 * Flat fake guest RAM for the software tracer's tests (test_swtrace.c, test_bcache.c): define
 * RAM_SIZE, include this once; `mem` reads [0, RAM_SIZE) for vmm/trace/gwalk.c, `mem_map` also
 * maps its pages in place (gw_mem.map).
 */
#ifndef PTV_TEST_FAKE_RAM_H
#define PTV_TEST_FAKE_RAM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "trace/gwalk.h"

static uint8_t ram[RAM_SIZE];
/* one page that is not guest RAM, as after an EPT narrowing (~0: none); a test that moves it
 * bumps mem_map.gen, as the VMM's shootdown count moves */
static uint64_t ram_hole = ~0ull;

static bool ram_read(void *ctx, uint64_t gpa, void *buf, unsigned len)
{
    (void)ctx;
    if (gpa >= RAM_SIZE || len > RAM_SIZE - gpa || (gpa & ~0xfffull) == ram_hole)
        return false;
    memcpy(buf, ram + gpa, len);
    return true;
}
static const struct gw_mem mem = {.read = ram_read};

/* the same RAM with pages readable in place (gw_mem.map, as the VMM's identity map) */
static const uint8_t *ram_map(void *ctx, uint64_t gpa)
{
    (void)ctx;
    if (gpa >= RAM_SIZE || (gpa & 0xfff) || gpa == ram_hole)
        return NULL;
    return ram + gpa;
}
__attribute__((unused)) static struct gw_mem mem_map = {.read = ram_read, .map = ram_map};

static void put64(uint64_t a, uint64_t v)
{
    memcpy(ram + a, &v, 8);
}

#endif
