/* SPDX-License-Identifier: MIT */
/* Bump allocator over the VMM pool: the VMM never frees (all its structures live
 * as long as the machine). */
#include "palloc.h"
#include "lib/ptv_string.h"

static uint64_t pool_next, pool_end;

void palloc_init(uint64_t base, uint64_t size)
{
    pool_next = (base + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
    pool_end = base + size;
}

void *palloc_pages(size_t n, uint64_t *pa)
{
    if (!n || n > (pool_end - pool_next) / PAGE_SIZE)
        return NULL;
    uint64_t p = pool_next;
    pool_next += n * PAGE_SIZE;
    memset((void *)(uintptr_t)p, 0, n * PAGE_SIZE);
    if (pa)
        *pa = p;
    return (void *)(uintptr_t)p;
}

void *palloc_page(uint64_t *pa)
{
    return palloc_pages(1, pa);
}

uint64_t palloc_free_bytes(void)
{
    return pool_end - pool_next;
}
