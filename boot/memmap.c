/* SPDX-License-Identifier: MIT */
/* Neutral memory map for the handoff (see memmap.h). */
#include <stdbool.h>
#include "memmap.h"
#include "fmt.h"

#define PAGE_MASK 0xfffull

struct emit {
    struct ptv_mem_range *out;
    unsigned max, n; /* n counts what is needed, even past max */
};

static void emit(struct emit *e, uint64_t base, uint64_t size, uint32_t type)
{
    if (size == 0)
        return;
    if (e->n && e->n <= e->max) {
        struct ptv_mem_range *last = &e->out[e->n - 1];
        if (last->type == type && last->base + last->size == base) {
            last->size += size;
            return;
        }
    }
    if (e->n < e->max)
        e->out[e->n] = (struct ptv_mem_range){.base = base, .size = size, .type = type};
    e->n++;
}

static void sort_by_base(struct ptv_mem_range *r, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        struct ptv_mem_range x = r[i];
        unsigned j = i;
        for (; j && r[j - 1].base > x.base; j--)
            r[j] = r[j - 1];
        r[j] = x;
    }
}

static int fail(char *err, size_t errcap, const char *what, uint64_t addr)
{
    struct ptv_fmt f;
    ptv_fmt_init(&f, err, errcap);
    ptv_fmt_str(&f, what);
    ptv_fmt_hex(&f, addr);
    return -1;
}

int ptv_memmap_build(struct ptv_mem_range *in, unsigned n_in, uint64_t vmm_base, uint64_t vmm_size,
                     struct ptv_mem_range *out, unsigned max_out, unsigned *n_out, char *err,
                     size_t errcap)
{
    struct emit e = {.out = out, .max = max_out};
    uint64_t vmm_end = vmm_base + vmm_size;
    bool vmm_done = false;
    unsigned i;

    if ((vmm_base | vmm_size) & PAGE_MASK || vmm_size == 0 || vmm_end < vmm_base)
        return fail(err, errcap, "VMM span not 4 KiB aligned or empty at ", vmm_base);
    for (i = 0; i < n_in; i++) {
        if ((in[i].base | in[i].size) & PAGE_MASK)
            return fail(err, errcap, "memory map entry not 4 KiB aligned at ", in[i].base);
        if (in[i].base + in[i].size < in[i].base)
            return fail(err, errcap, "memory map entry wraps around at ", in[i].base);
    }
    sort_by_base(in, n_in);
    for (i = 1; i < n_in; i++)
        if (in[i].size && in[i - 1].base + in[i - 1].size > in[i].base)
            return fail(err, errcap, "memory map entries overlap at ", in[i].base);

    for (i = 0; i < n_in; i++) {
        uint64_t b = in[i].base, end = b + in[i].size;
        /* the part below the VMM span, then the part above it */
        uint64_t lo_end = end < vmm_base ? end : vmm_base;
        uint64_t hi_base = b > vmm_end ? b : vmm_end;
        if (b < lo_end)
            emit(&e, b, lo_end - b, in[i].type);
        if (hi_base < end) {
            if (!vmm_done)
                emit(&e, vmm_base, vmm_size, PTV_MEM_VMM);
            vmm_done = true;
            emit(&e, hi_base, end - hi_base, in[i].type);
        }
    }
    if (!vmm_done)
        emit(&e, vmm_base, vmm_size, PTV_MEM_VMM);
    if (e.n > max_out) {
        struct ptv_fmt f;
        ptv_fmt_init(&f, err, errcap);
        ptv_fmt_str(&f, "memory map needs ");
        ptv_fmt_dec(&f, e.n);
        ptv_fmt_str(&f, " ranges after merging, the handoff holds ");
        ptv_fmt_dec(&f, max_out);
        return -1;
    }
    *n_out = e.n;
    return 0;
}
