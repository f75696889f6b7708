/* SPDX-License-Identifier: MIT */
/* Bump allocator over the VMM pool: the VMM never frees (all its structures live
 * as long as the machine). */
#include "base/palloc.h"
#include "lib/ptv_string.h"
#include "hw/spinlock.h"

/* Single pages come back through a free list (the PT engine rebuilds shadow
 * tables); everything else lives as long as the machine. */
static uint64_t pool_next, pool_end, free_list;
static uint64_t nr_free;
static struct spinlock lock; /* every CPU allocates; critical sections never wait */

void palloc_init(uint64_t base, uint64_t size)
{
    pool_next = (base + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
    pool_end = base + size;
}

void *palloc_pages(size_t n, uint64_t *pa)
{
    spin_lock(&lock);
    if (!n || n > (pool_end - pool_next) / PAGE_SIZE) {
        spin_unlock(&lock);
        return NULL;
    }
    uint64_t p = pool_next;
    pool_next += n * PAGE_SIZE;
    spin_unlock(&lock);
    memset((void *)(uintptr_t)p, 0, n * PAGE_SIZE);
    if (pa)
        *pa = p;
    return (void *)(uintptr_t)p;
}

void *palloc_page(uint64_t *pa)
{
    spin_lock(&lock);
    if (free_list) {
        uint64_t p = free_list;
        free_list = *(uint64_t *)(uintptr_t)p;
        nr_free--;
        spin_unlock(&lock);
        memset((void *)(uintptr_t)p, 0, PAGE_SIZE);
        if (pa)
            *pa = p;
        return (void *)(uintptr_t)p;
    }
    spin_unlock(&lock);
    return palloc_pages(1, pa);
}

void palloc_free_page(uint64_t pa)
{
    spin_lock(&lock);
    *(uint64_t *)(uintptr_t)pa = free_list;
    free_list = pa;
    nr_free++;
    spin_unlock(&lock);
}

uint64_t palloc_free_bytes(void)
{
    return pool_end - pool_next + nr_free * PAGE_SIZE;
}
