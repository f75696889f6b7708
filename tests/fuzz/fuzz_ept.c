/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: random map / unmap / protect sequences, some with the allocator
 * cut short, against a per-4K reference model of an 8 MiB window around a
 * 1 GiB boundary; ept_translate must agree with the model after every step, and
 * no reachable table is uniform where a larger leaf could replace it (a split
 * that a later call undid is merged back, so a guest's splits cannot pile up tables).  A record
 * with op bit 6 set runs the caller's INVEPT after it (fakemem_flush(): retired
 * tables become spares).  Every store goes through the fake memory's
 * break-before-make checker (tests/fakes/ept_fakemem.h): no entry changes page size
 * in place, and no leaf of one size becomes present over GPAs a leaf of
 * another size left since the last invalidation.
 *
 * Input: byte 0 = CPU caps (bit 0: 1 GiB pages, bit 1: 2 MiB pages, bit 2:
 * a 5-level walk), then
 * up to 32 6-byte records: op, first page (2), page count (2), argument.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ept/ept.h"
#include "ept/ept_entry.h"
#include "fakes/ept_fakemem.h"

#define WIN_PAGES 2048u
#define WIN_BASE  ((1ull << 30) - (4ull << 20))
#define HPA_BASE  (64ull << 30)

struct ref_page {
    uint8_t used, perms, mt;
    uint64_t hpa;
};

static const unsigned perms_tab[] = {EPT_R, EPT_R | EPT_W, EPT_R | EPT_X, EPT_RWX};
static const unsigned mt_tab[] = {EPT_MT_UC, EPT_MT_WC, EPT_MT_WT,
                                  EPT_MT_WP, EPT_MT_WB, EPT_MT_WB | EPT_MT_IPAT};

static void check_page(const struct ept *e, const struct ref_page *ref, unsigned p)
{
    uint64_t hpa;
    unsigned perms, mt;
    int rc = ept_translate(e, WIN_BASE + (uint64_t)p * 4096, &hpa, &perms, &mt, NULL);

    if (!ref[p].used) {
        if (rc != EPT_ENOENT)
            abort();
        return;
    }
    if (rc != 0 || hpa != ref[p].hpa || perms != ref[p].perms || mt != ref[p].mt)
        abort();
}

/* the table c below an entry at `level` (c's entries map level - 1 pages): 512 leaves of one
 * attribute set over one aligned contiguous run, which one leaf at `level` could replace */
static bool uniform(const struct ept *e, const uint64_t *c, unsigned level)
{
    const uint64_t attrs = 0xff | EPT_SW_USED, step = EPT_LEVEL_SIZE(level - 1);
    unsigned j;

    if (!((level == 2 && e->has_2m) || (level == 3 && e->has_1g)))
        return false;
    if (!(c[0] & EPT_SW_USED) || (level - 1 > 1 && !(c[0] & (1ull << 7))) ||
        ((c[0] & EPT_ADDR_MASK) & (EPT_LEVEL_SIZE(level) - 1)))
        return false;
    for (j = 1; j < EPT_ENTRIES; j++)
        if ((c[j] & attrs) != (c[0] & attrs) ||
            (c[j] & EPT_ADDR_MASK) != (c[0] & EPT_ADDR_MASK) + j * step)
            return false;
    return true;
}

/* every table reachable below table t (whose entries are at `level`): none uniform */
static void check_no_uniform(const struct ept *e, const uint64_t *t, unsigned level)
{
    unsigned i;

    for (i = 0; i < EPT_ENTRIES && level > 1; i++) {
        uint64_t v = t[i];
        const uint64_t *c;

        if (!(v & EPT_SW_USED) || (level < 4 && (v & (1ull << 7))))
            continue; /* a hole or a leaf */
        c = e->ops.pa_to_va(e->ops.ctx, v & EPT_ADDR_MASK);
        if (uniform(e, c, level))
            abort();
        check_no_uniform(e, c, level - 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ref_page ref[WIN_PAGES];
    static struct fakemem fm;
    struct ept_ops ops;
    struct ept e;
    size_t off;
    unsigned p;

    if (size < 1)
        return 0;
    memset(ref, 0, sizeof(ref));
    if (!fm.arena)
        fakemem_init(&fm, 2048); /* kept across inputs */
    fakemem_reset(&fm);
    ops = fakemem_ops(&fm);
    if (ept_init(&e, &ops, data[0] & 1, data[0] & 2))
        abort();
    fakemem_watch(&fm, &e); /* aborts on a page-size change without break-before-make */
    if ((data[0] & 4) && ept_set_levels(&e, 5))
        abort();
    for (off = 1; off + 6 <= size && off < 1 + 6 * 32; off += 6) {
        const uint8_t *r = data + off;
        unsigned first = (r[1] | r[2] << 8) % WIN_PAGES;
        unsigned cnt = 1 + (r[3] | r[4] << 8) % (WIN_PAGES - first);
        uint64_t gpa = WIN_BASE + (uint64_t)first * 4096, len = (uint64_t)cnt * 4096;
        unsigned arg = r[5];
        bool nar = false, starved = (r[0] & 0x80) != 0;
        int rc = 0;

        fm.budget = starved ? (long)(arg >> 6) : -1;
        switch (r[0] % 4) {
        case 0: /* map: hpa congruent to gpa mod 1 GiB or not */
        case 3: {
            uint64_t hpa = (arg & 0x20) ? HPA_BASE + (gpa - WIN_BASE)
                                        : HPA_BASE + (uint64_t)((r[1] * 7 + arg) & 0xff) * 4096;
            unsigned pr = perms_tab[arg & 3], mt = mt_tab[(arg >> 2) % 6];

            if (r[0] % 4 == 3 && (data[0] & 2)) { /* a whole 1 GiB on either side of the boundary
                                                   * (with 4 KiB pages only: too slow to fuzz) */
                gpa = (arg & 0x40) ? 1ull << 30 : 0;
                len = 1ull << 30;
                hpa = HPA_BASE + gpa;
            }
            rc = ept_map(&e, gpa, hpa, len, pr, mt);
            if (rc == 0)
                for (p = 0; p < WIN_PAGES; p++) {
                    uint64_t g = WIN_BASE + (uint64_t)p * 4096;
                    if (g >= gpa && g < gpa + len)
                        ref[p] = (struct ref_page){1, (uint8_t)pr, (uint8_t)mt, hpa + (g - gpa)};
                }
            break;
        }
        case 1: /* unmap; with arg bit 0 prune (and INVEPT with bit 1) */
            rc = (arg & 1) ? ept_unmap_prune(&e, gpa, len) : ept_unmap(&e, gpa, len);
            if (rc == 0 && (arg & 2))
                fakemem_flush(&fm, &e);
            if (rc == 0)
                for (p = first; p < first + cnt; p++)
                    ref[p].used = 0;
            break;
        case 2: {
            unsigned pr = (arg & 0x10) ? 0 : perms_tab[arg & 3];
            bool hole = false, want_nar = false;

            for (p = first; p < first + cnt; p++) {
                hole |= !ref[p].used;
                want_nar |= ref[p].used && (ref[p].perms & ~pr);
            }
            rc = ept_protect(&e, gpa, len, pr, &nar);
            if (rc == EPT_ENOENT && !hole)
                abort();
            if (rc == 0) {
                if (hole || nar != want_nar)
                    abort();
                for (p = first; p < first + cnt; p++)
                    ref[p].perms = (uint8_t)pr;
            }
            break;
        }
        }
        if (rc != 0 && !(rc == EPT_ENOMEM && starved) && rc != EPT_ENOENT)
            abort();
        fm.budget = -1;
        check_no_uniform(&e, e.root, e.levels);
        if (r[0] & 0x40)
            fakemem_flush(&fm,
                          &e); /* the caller's INVEPT: retired tables, merged ones too, reused */
        /* the touched range (clipped to the window) and a stride over the rest */
        for (p = first; p < first + cnt && p < first + 16; p++)
            check_page(&e, ref, p);
        for (p = arg % 251; p < WIN_PAGES; p += 251)
            check_page(&e, ref, p);
    }
    for (p = 0; p < WIN_PAGES; p++)
        check_page(&e, ref, p);
    return 0;
}
