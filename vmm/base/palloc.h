/* SPDX-License-Identifier: MIT */
#ifndef PTV_PALLOC_H
#define PTV_PALLOC_H

#include <stdint.h>
#include <stddef.h>

#define PAGE_SIZE 4096ull

/* Page allocator over the VMM pool (identity mapped: VA == PA). */
void palloc_init(uint64_t base, uint64_t size);
/* a zeroed 4 KiB page, or NULL when the pool is exhausted; *pa gets its address */
void *palloc_page(uint64_t *pa) __attribute__((warn_unused_result));
/* n contiguous zeroed pages */
void *palloc_pages(size_t n, uint64_t *pa) __attribute__((warn_unused_result));
/* give back a page from palloc_page() */
void palloc_free_page(uint64_t pa);
uint64_t palloc_free_bytes(void);

#endif
