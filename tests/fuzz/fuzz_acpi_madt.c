/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the MADT aid (boot/acpi_madt.c).  Input:
 *
 *   byte 0      flags: bit 0 seal (recompute the checksums the input names,
 *               so the fuzzer reaches past them), bit 1 an I/O APIC,
 *               bit 2 rev-2 RSDP from scratch (RSDP address 0)
 *   byte 1      CPU count (0..255)
 *   bytes 2..3  the RSDP's offset into the memory image
 *   the rest    the firmware's physical memory at MEM_BASE, exactly that long
 *
 * Invariants: no crash or UB (ASan/UBSan), messages bounded and NUL-terminated;
 * whatever the scan accepts and lacks an MADT, a build with distinct APIC IDs
 * succeeds, writes only acpi_madt_size bytes, and the result scans back clean
 * with an MADT last in each root table and every checksum right.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../boot/acpi_madt.h"

#define MEM_BASE 0x10000ull
#define OUT_BASE 0x80000000ull
#define OUT_LEN  0x4000

struct mem {
    const uint8_t *fw;
    size_t fw_len;
    const uint8_t *out;
    size_t out_len;
};

static bool in_region(uint64_t base, size_t len, uint64_t phys, size_t n)
{
    return phys >= base && n <= len && phys - base <= len - n;
}

static bool mem_read(void *ctx, uint64_t phys, void *buf, size_t n)
{
    const struct mem *m = ctx;
    const uint8_t *src;
    if (in_region(MEM_BASE, m->fw_len, phys, n))
        src = m->fw + (phys - MEM_BASE);
    else if (m->out && in_region(OUT_BASE, m->out_len, phys, n))
        src = m->out + (phys - OUT_BASE);
    else
        return false;
    if (buf)
        memcpy(buf, src, n);
    return true;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* recompute the checksum at csum of the table of len bytes at phys, if it is in memory */
static void seal_at(uint8_t *mem, size_t mlen, uint64_t phys, uint64_t len, size_t csum)
{
    if (!in_region(MEM_BASE, mlen, phys, len) || len <= csum || len > (1u << 20))
        return;
    uint8_t *t = mem + (phys - MEM_BASE);
    t[csum] = 0;
    t[csum] = (uint8_t)(0x100 - acpi_sum(t, len));
}

static void seal_root(uint8_t *mem, size_t mlen, uint64_t phys, unsigned esz)
{
    if (!in_region(MEM_BASE, mlen, phys, 36))
        return;
    const uint8_t *t = mem + (phys - MEM_BASE);
    uint32_t len = get32(t + 4);
    if (len >= 36 && in_region(MEM_BASE, mlen, phys, len))
        for (uint32_t off = 36; off + esz <= len && off < 36 + 64 * esz; off += esz) {
            uint64_t e = esz == 8 ? get64(t + off) : get32(t + off);
            if (in_region(MEM_BASE, mlen, e, 36) && e != phys)
                seal_at(mem, mlen, e, get32(mem + (e - MEM_BASE) + 4), 9);
        }
    seal_at(mem, mlen, phys, len, 9); /* last: the entries may lie inside it */
}

static void seal_all(uint8_t *mem, size_t mlen, uint64_t rsdp)
{
    if (!in_region(MEM_BASE, mlen, rsdp, 36))
        return;
    const uint8_t *r = mem + (rsdp - MEM_BASE);
    seal_root(mem, mlen, get32(r + 16), 4);
    seal_root(mem, mlen, get64(r + 24), 8);
    seal_at(mem, mlen, rsdp, 20, 8);
    seal_at(mem, mlen, rsdp, 36, 32);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct acpi_scan scan, back;
    static uint8_t out[OUT_LEN];
    uint32_t ids[ACPI_MADT_MAX_CPUS];
    char err[ACPI_ERR_MAX];
    struct acpi_built b;

    if (size < 4)
        return 0;
    uint8_t flags = data[0];
    unsigned n_cpus = data[1];
    uint64_t rsdp = flags & 4 ? 0 : MEM_BASE + (data[2] | data[3] << 8);
    size_t mlen = size - 4;
    /* a copy of exactly mlen bytes, so ASan catches any read past the end */
    uint8_t *fw = malloc(mlen ? mlen : 1);
    memcpy(fw, data + 4, mlen);
    if (flags & 1)
        seal_all(fw, mlen, rsdp);

    struct mem m = {fw, mlen, NULL, 0};
    struct acpi_view view = {mem_read, &m};
    memset(err, 'x', sizeof(err));
    bool ok = acpi_scan(&view, rsdp, &scan, err, sizeof(err));
    if (strnlen(err, sizeof(err)) >= sizeof(err) || (!ok && err[0] == 0))
        abort();
    if (!ok || scan.has_madt)
        goto done;
    if (scan.rsdp && scan.xsdt_n > ACPI_ROOT_MAX_ENTRIES)
        abort();

    for (unsigned i = 0; i < ACPI_MADT_MAX_CPUS; i++)
        ids[i] = (i * 7 + flags) % ACPI_MADT_MAX_CPUS; /* distinct, 0..254 */
    struct acpi_madt_in in = {.apic_ids = ids, .n_cpus = n_cpus};
    in.ioapic = (struct acpi_ioapic){.present = flags & 2, .id = 9, .addr = 0xfec00000u};
    size_t need = acpi_madt_size(&scan, &in);
    memset(out, 0xa5, sizeof(out));
    ok = acpi_madt_build(&scan, &in, out, sizeof(out), OUT_BASE, &b, err, sizeof(err));
    if (strnlen(err, sizeof(err)) >= sizeof(err))
        abort();
    bool full = scan.xsdt_n >= ACPI_ROOT_MAX_ENTRIES || scan.rsdt_n >= ACPI_ROOT_MAX_ENTRIES;
    if (ok != (n_cpus > 0 && !full) || ok != (need != 0))
        abort();
    if (!ok)
        goto done;
    if (b.size != need || need > sizeof(out))
        abort();
    for (size_t i = need; i < sizeof(out); i++)
        if (out[i] != 0xa5)
            abort();

    /* the new tables, as the guest will read them */
    m.out = out;
    m.out_len = sizeof(out);
    if (!acpi_scan(&view, OUT_BASE + b.rsdp_off, &back, err, sizeof(err)) || !back.has_madt)
        abort();
    if (acpi_sum(out + b.madt_off, b.madt_len) != 0 || acpi_sum(out, 20) != 0)
        abort();
    if (back.xsdt && back.xsdt_entries[back.xsdt_n - 1] != OUT_BASE + b.madt_off)
        abort();
    if (back.rsdt && back.rsdt_entries[back.rsdt_n - 1] != OUT_BASE + b.madt_off)
        abort();
    if (back.xsdt_n != (scan.rsdp ? (scan.xsdt ? scan.xsdt_n + 1 : 0) : 1))
        abort();
done:
    free(fw);
    return 0;
}
