/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the DMAR parser (vmm/iommu/dmar.c).  Input: byte 0 flags (bit 0: seal,
 * i.e. write the length and checksum so the fuzzer reaches past them), the rest the table.
 *
 * Invariants: no crash or UB (ASan/UBSan); the message bounded and NUL-terminated, empty exactly
 * when the table is accepted; an accepted table names 1..DMAR_MAX_UNITS units with page-aligned,
 * non-overlapping register sets below 2^HAW, listed_only exactly when a segment lacks an
 * INCLUDE_PCI_ALL unit, RMRRs aligned and non-empty; and its units' registers, as holes in a memory
 * map, give remapping tables (vtd_tables.c) that are counted without a refusal.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iommu/dmar.h"
#include "iommu/vtd_tables.h"

static uint8_t buf[DMAR_MAX_LEN + 64];

static void check(bool c)
{
    if (!c)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct dmar_info d;
    char err[DMAR_ERR_MAX];
    size_t len;

    if (size < 1 || size - 1 > sizeof(buf))
        return 0;
    len = size - 1;
    memcpy(buf, data + 1, len);
    if ((data[0] & 1) && len >= 10) {
        uint8_t s = 0;
        buf[4] = (uint8_t)len;
        buf[5] = (uint8_t)(len >> 8);
        buf[6] = (uint8_t)(len >> 16);
        buf[7] = 0;
        buf[9] = 0;
        for (size_t i = 0; i < len; i++)
            s = (uint8_t)(s + buf[i]);
        buf[9] = (uint8_t)(0x100 - s);
    }
    memset(err, 'x', sizeof(err));
    bool ok = dmar_parse(buf, len, &d, err, sizeof(err));
    check(memchr(err, 0, sizeof(err)) != NULL);
    check(ok == (err[0] == 0));
    if (!ok)
        return 0;
    check(d.n_units >= 1 && d.n_units <= DMAR_MAX_UNITS && d.n_rmrr <= DMAR_MAX_RMRR);
    check(d.haw >= 32 && d.haw <= 64);
    static struct vtd_range holes[DMAR_MAX_UNITS];
    bool some_listed = false;
    for (unsigned i = 0; i < d.n_units; i++) {
        const struct dmar_unit *u = &d.units[i];
        bool all = false;
        check(u->reg_base && !(u->reg_base & 0xfff) && u->reg_size >= 4096);
        check(d.haw == 64 || u->reg_base + u->reg_size <= (1ull << d.haw));
        for (unsigned j = 0; j < d.n_units; j++) {
            const struct dmar_unit *o = &d.units[j];
            check(i == j || u->reg_base >= o->reg_base + o->reg_size ||
                  o->reg_base >= u->reg_base + u->reg_size);
            all |= o->segment == u->segment && o->include_all;
        }
        some_listed |= !all;
        holes[i] = (struct vtd_range){u->reg_base, u->reg_size};
    }
    check(some_listed == d.listed_only);
    for (unsigned i = 0; i < d.n_rmrr; i++)
        check(!(d.rmrr[i].base & 0xfff) && d.rmrr[i].end > d.rmrr[i].base &&
              (!(d.rmrr[i].end & 0xfff) || d.rmrr[i].end == UINT64_MAX));
    static const struct ptv_mem_range mem[] = {{0, 512ull << 20, PTV_MEM_RAM, 0},
                                               {256ull << 20, 8ull << 20, PTV_MEM_VMM, 0}};
    /* the VMM range overlaps RAM on purpose: exclusion wins */
    struct vtd_map_in in = {mem, 2, holes, d.n_units, 5, true, true};
    uint64_t top;
    check(vtd_tables_pages(&in, &top, err, sizeof(err)) >= 4);
    return 0;
}
