/* SPDX-License-Identifier: MIT */
/*
 * Benchmark helper for the PT controller (run under callgrind by bench_ctrl.sh): the real
 * vmm/pt/pt_ctrl.c + engine over the fake EPT, with a CPU whose RDMSR/WRMSR are plain array
 * accesses (as cheap as the instructions themselves), so the counts are the VMM's own work.
 *   exits-shadow | exits-gpa N   N exit/entry pairs while the guest traces
 *   enable-perf N                TraceEn 0->1 with 8 MiB as 16 x 512 KiB regions (rebuilt each
 * time) enable-4k N                  the same 8 MiB as 2,048 x 4 KiB regions refused N a 64-table
 * ToPA naming one 8 MiB region 32,704 times: N WRMSRs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fake_world.h"
#include "pt/pt_ctrl.h"
#include "pt/rtit.h"

#define TABLES 0x10000ull
#define DATA   (1ull << 20)

/* indexed by the low 11 bits (the RTIT MSRs 0x560..0x58x and 0x570 do not collide): a load,
 * about what the shim's RDMSR costs in instructions (a division here would be the fake's) */
static uint64_t msrs[0x800];
static uint64_t nop_rdmsr(void *c, uint32_t m)
{
    return msrs[m & 0x7ff];
}
static int nop_wrmsr(void *c, uint32_t m, uint64_t v)
{
    msrs[m & 0x7ff] = v;
    return 0;
}
static void nop_vmwrite(void *c, uint64_t v)
{
    msrs[0] = v;
}
static void nop_lists(void *c, const struct vmx_msr_entry *e, unsigned ne,
                      const struct vmx_msr_entry *x, unsigned nx)
{
}

/* "count": the EPT-view callbacks the engine makes (run natively; the wrappers cost instructions)
 */
static struct pt_mem_ops real;
static unsigned long n_translate, n_read64, n_read_hpa64;
static void c_translate(void *ctx, uint64_t gpa, struct pt_mem_xlate *out)
{
    n_translate++;
    real.translate(ctx, gpa, out);
}
static bool c_read64(void *ctx, uint64_t gpa, uint64_t *val)
{
    n_read64++;
    return real.read64(ctx, gpa, val);
}
static bool c_read_hpa64(void *ctx, uint64_t hpa, uint64_t *val)
{
    n_read_hpa64++;
    return real.read_hpa64(ctx, hpa, val);
}

static void ring(struct fake_world *fw, unsigned n, unsigned code, uint64_t region_step)
{
    unsigned per = 511, ntab = (n + per - 1) / per;
    for (unsigned t = 0; t < ntab; t++) {
        uint64_t tg = TABLES + 4096ull * t;
        unsigned k = 0;
        for (; k < per && t * per + k < n; k++)
            fw_guest_store64(fw, tg + 8ull * k,
                             (DATA + region_step * (t * per + k)) | ((uint64_t)code << 6));
        fw_guest_store64(fw, tg + 8ull * k, (TABLES + 4096ull * ((t + 1) % ntab)) | TOPA_END);
    }
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "exits-shadow";
    unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 1000;
    bool gpa = !strcmp(what, "exits-gpa");
    struct fake_world *fw = fw_new(strcmp(what, "enable-perf") ? 1 : 0);
    const char *opt = argc > 3 ? argv[3] : "";
    fw_fast_translate(fw); /* count the engine, not the fake EPT's page loop */
    fw_offer_read_hpa64(fw, strstr(opt, "hpa")); /* "hpa": as if pt_vmx.c offered read_hpa64 */
    real = fw->mem;
    if (strstr(opt, "count")) {
        fw->mem.translate = c_translate;
        fw->mem.read64 = c_read64;
        if (real.read_hpa64)
            fw->mem.read_hpa64 = c_read_hpa64;
    }
    struct pt_caps host = {.cpuid7_ebx = 1u << 25,
                           .leaf14 = {{1, 0xf, 0x7, 0}, {(0x249u << 16) | 2, 0x3f1fff, 0, 0}},
                           .vmx_misc = 1ull << 14,
                           .maxphyaddr = 39,
                           .vaddr_bits = 48};
    struct pt_decision d;
    struct pt_cpu_ops cpu = {NULL, nop_rdmsr, nop_wrmsr, nop_vmwrite, nop_lists};
    struct pt_ctrl_mem m = {
        calloc(1, sizeof(struct pt_shadow)), calloc(1, sizeof(struct pt_shadow_scratch)),
        calloc(PT_CTRL_MAX_REGIONS, sizeof(struct pt_topa_region)), PT_CTRL_MAX_REGIONS};
    struct pt_ctrl c;
    struct pt_msr_result r;
    uint64_t ctl = RTIT_CTL_TRACEEN | RTIT_CTL_TOPA | RTIT_CTL_BRANCH_EN | RTIT_CTL_OS;

    if (gpa) {
        host.secondary_allowed1 = 1u << 24;
        host.entry_allowed1 = 1u << 18;
        host.exit_allowed1 = 1u << 25;
    }
    pt_decide(&host, PTV_PT_HOST_GUEST, &d);
    if (pt_ctrl_init(&c, &d, &host, &cpu, &fw->mem, &fw->alloc, &m))
        return 1;
    pt_ctrl_before_entry(&c);
    pt_ctrl_after_exit(&c);
    if (!strcmp(what, "refused"))
        for (unsigned t = 0; t < 64; t++) {
            for (unsigned k = 0; k < 511; k++)
                fw_guest_store64(fw, TABLES + 4096ull * t + 8 * k, 0x800000 | (11ull << 6));
            fw_guest_store64(fw, TABLES + 4096ull * t + 8 * 511,
                             (TABLES + 4096ull * ((t + 1) % 64)) | TOPA_END);
        }
    else if (!strcmp(what, "enable-4k"))
        ring(fw, 2048, 0, 4096);
    else
        ring(fw, 16, 7, 512 << 10);
    if (pt_ctrl_wrmsr(&c, MSR_IA32_RTIT_OUTPUT_BASE, TABLES, &r) ||
        pt_ctrl_wrmsr(&c, MSR_IA32_RTIT_OUTPUT_MASK_PTRS, 0x7f, &r))
        return 1;
    if (!strncmp(what, "exits", 5)) {
        if (pt_ctrl_wrmsr(&c, MSR_IA32_RTIT_CTL, ctl, &r) || !c.hw_ok)
            return 1;
        for (unsigned i = 0; i < n; i++) {
            pt_ctrl_before_entry(&c);
            msrs[MSR_IA32_RTIT_OUTPUT_MASK_PTRS] += 1ull << 32; /* the trace moved on */
            pt_ctrl_after_exit(&c);
        }
        printf("%s: %u exits while tracing, %lu RTIT WRMSRs\n", what, n,
               (unsigned long)c.stats.msr_writes);
        return 0;
    }
    for (unsigned i = 0; i < n; i++) {
        /* the guest edits a table before each enable (refused: unchanged, so the record answers) */
        if (strcmp(what, "refused") && i)
            (void)pt_ctrl_ept_violation(&c, TABLES, 2);
        if (pt_ctrl_wrmsr(&c, MSR_IA32_RTIT_CTL, ctl, &r))
            return 1;
        if (c.hw_ok == !strcmp(what, "refused"))
            return fprintf(stderr, "unexpected outcome: %s\n", c.last_refusal), 1;
        if (pt_ctrl_wrmsr(&c, MSR_IA32_RTIT_CTL, 0, &r))
            return 1;
    }
    printf("%s: %u TraceEn 0->1, %lu builds, %lu refusals (%s)\n", what, n,
           (unsigned long)c.stats.builds, (unsigned long)c.stats.refusals,
           c.err.reason ? c.err.reason : "-");
    if (strstr(opt, "count"))
        printf("callbacks per TraceEn 0->1: translate %lu read64 %lu read_hpa64 %lu\n",
               n_translate / n, n_read64 / n, n_read_hpa64 / n);
    return 0;
}
