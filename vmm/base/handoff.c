/* SPDX-License-Identifier: MIT */
/*
 * ptv_handoff_check(): everything the loader handed over, checked before the
 * VMM uses any of it.  Freestanding (no libc), pure.
 */
#include <stdbool.h>
#include <stdint.h>
#include "base/handoff.h"

#define PAGE_MASK 0xfffull

static int reject(const char **why, const char *what)
{
    *why = what;
    return -1;
}

static bool has_nul(const char *s, unsigned cap)
{
    for (unsigned i = 0; i < cap; i++)
        if (s[i] == '\0')
            return true;
    return false;
}

static bool pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

int ptv_config_check(const struct ptv_config *c, const char **why)
{
    if (c->serial_port > PTV_CFG_SERIAL_PORT_MAX)
        return reject(why, "config: serial_port out of range");
    if (c->serial_baud == 0 || c->serial_baud > PTV_CFG_UART_CLOCK ||
        PTV_CFG_UART_CLOCK % c->serial_baud)
        return reject(why, "config: serial_baud does not divide 115200");
    if (c->pt_mode > PTV_PT_HOST_GUEST)
        return reject(why, "config: pt_mode out of range");
    if (c->trace_filter == 0 || (c->trace_filter & ~PTV_CFG_TRACE_ALL))
        return reject(why, "config: pt_filter empty or unknown bits");
    if (!pow2(c->trace_buf_size) || c->trace_buf_size < PTV_CFG_TRACE_BUF_MIN ||
        c->trace_buf_size > PTV_CFG_TRACE_BUF_MAX)
        return reject(why, "config: pt_buffer not a power of two in 4K..1G");
    if (c->trace_cr3 & PTV_CFG_CR3_RSVD_MASK)
        return reject(why, "config: pt_cr3 has reserved bits");
    if (c->dump_on & ~PTV_CFG_DUMP_ALL)
        return reject(why, "config: dump_on has unknown bits");
    if (c->log_level > PTV_LOG_DEBUG)
        return reject(why, "config: log_level out of range");
    if ((c->pool_size & PAGE_MASK) || c->pool_size < PTV_CFG_POOL_MIN ||
        c->pool_size > PTV_CFG_POOL_MAX)
        return reject(why, "config: vmm_pool not a multiple of 4K in 1M..1G");
    if (c->on_no_vmx > PTV_NO_VMX_HALT)
        return reject(why, "config: on_no_vmx out of range");
    if (c->crash_action > PTV_CRASH_POWEROFF)
        return reject(why, "config: on_crash out of range");
    if (c->start_vmm > 1)
        return reject(why, "config: vmm out of range");
    if (c->vmcall_user > PTV_VMCALL_USER_TRACE)
        return reject(why, "config: vmcall_user out of range");
    if (c->trace_sw > PTV_SW_TRACE_TF)
        return reject(why, "config: sw_trace out of range");
    if (c->trace_wrap > 1)
        return reject(why, "config: trace_wrap out of range");
    if (c->trace_free > PTV_TRACE_FREE_CR3)
        return reject(why, "config: trace_free out of range");
    if (!pow2(c->psb_period) || c->psb_period < PTV_CFG_PSB_MIN || c->psb_period > PTV_CFG_PSB_MAX)
        return reject(why, "config: psb_period not a power of two in 256..1M");
    if (c->trace_nranges > PTV_CFG_TRACE_RANGES)
        return reject(why, "config: more than 4 pt_range ranges");
    for (unsigned k = 0; k < c->trace_nranges; k++)
        if (c->trace_range[k].lo > c->trace_range[k].hi)
            return reject(why, "config: pt_range with lo > hi");
    if (c->trace_boot > PTV_CFG_TRACE_BOOT_MAX)
        return reject(why, "config: trace_boot out of range");
    if (c->dump_window &&
        (c->dump_window < PTV_CFG_TRACE_BUF_MIN || c->dump_window > PTV_CFG_TRACE_BUF_MAX))
        return reject(why, "config: dump_window out of range");
    if (!c->dump_stall_us || c->dump_stall_us > PTV_CFG_DUMP_STALL_MAX)
        return reject(why, "config: dump_stall out of range");
    if (!has_nul(c->guest_path, PTV_CFG_PATH_MAX))
        return reject(why, "config: guest path not NUL-terminated");
    if (!has_nul(c->cmdline, PTV_CFG_CMDLINE_MAX))
        return reject(why, "config: cmdline not NUL-terminated");
    return 0;
}

/* [base, base + size) lies inside one PTV_MEM_VMM range */
static bool inside_vmm(const struct ptv_handoff *h, uint64_t base, uint64_t size)
{
    for (uint32_t i = 0; i < h->nr_mem; i++) {
        const struct ptv_mem_range *r = &h->mem[i];
        if (r->type == PTV_MEM_VMM && base >= r->base && base - r->base <= r->size &&
            size <= r->size - (base - r->base))
            return true;
    }
    return false;
}

int ptv_handoff_check(const struct ptv_handoff *h, const char **why)
{
    if (h->magic != PTV_HANDOFF_MAGIC)
        return reject(why, "handoff: bad magic");
    if (h->version != PTV_HANDOFF_VERSION)
        return reject(why, "handoff: version mismatch between loader and VMM");
    if (h->size != sizeof(*h))
        return reject(why, "handoff: size mismatch between loader and VMM");
    if (h->nr_mem == 0 || h->nr_mem > PTV_HANDOFF_MAX_MEM)
        return reject(why, "handoff: nr_mem out of range");
    for (uint32_t i = 0; i < h->nr_mem; i++) {
        const struct ptv_mem_range *r = &h->mem[i];
        if ((r->base | r->size) & PAGE_MASK)
            return reject(why, "handoff: memory range not 4 KiB aligned");
        if (r->size == 0 || r->base + r->size < r->base)
            return reject(why, "handoff: memory range empty or wrapping");
        if (r->type < PTV_MEM_RAM || r->type > PTV_MEM_VMM)
            return reject(why, "handoff: memory range of unknown type");
        if (i && h->mem[i - 1].base + h->mem[i - 1].size > r->base)
            return reject(why, "handoff: memory ranges unsorted or overlapping");
    }
    if ((h->vmm_base | h->vmm_size) & PAGE_MASK || h->vmm_size == 0)
        return reject(why, "handoff: VMM image not 4 KiB aligned or empty");
    if (!inside_vmm(h, h->vmm_base, h->vmm_size))
        return reject(why, "handoff: VMM image outside the PTV_MEM_VMM ranges");
    if ((h->pool_base | h->pool_size) & PAGE_MASK)
        return reject(why, "handoff: pool not 4 KiB aligned");
    if (h->pool_size < PTV_CFG_POOL_MIN)
        return reject(why, "handoff: pool smaller than 1 MiB");
    if (!inside_vmm(h, h->pool_base, h->pool_size))
        return reject(why, "handoff: pool outside the PTV_MEM_VMM ranges");
    if (h->pool_base < h->vmm_base + h->vmm_size && h->vmm_base < h->pool_base + h->pool_size)
        return reject(why, "handoff: pool overlaps the VMM image");
    return ptv_config_check(&h->cfg, why);
}

/* mem[] is sorted and non-overlapping (ptv_handoff_check): a binary search for the last range
 * starting at or below pa -- this runs for every guest read of the software tracer */
uint32_t ptv_mem_type_at(const struct ptv_handoff *h, uint64_t pa, uint64_t *end)
{
    unsigned lo = 0, hi = h->nr_mem; /* the answer is in [lo, hi): ranges with base <= pa */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (h->mem[mid].base <= pa)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo) {
        const struct ptv_mem_range *r = &h->mem[lo - 1];
        if (pa - r->base < r->size) {
            *end = r->base + r->size;
            return r->type;
        }
    }
    *end = (pa | 0xfff) + 1;
    return PTV_MEM_MMIO; /* holes and device memory */
}
