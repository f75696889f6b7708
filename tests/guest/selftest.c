// SPDX-License-Identifier: MIT
/*
 * selftest.efi: proves the in-guest test kit itself (libtest, trap catcher) on
 * any x86-64 UEFI machine, no VMM needed.  Booted bare in QEMU by
 * run-qemu-selftest.sh, which expects exactly one deliberate FAIL line
 * ("FAIL: selftest deliberate failure") and one deliberate SKIP.
 */
#include <efi.h>

#include "libtest.h"
#include "x86.h"

#define X86_EFLAGS_IF     (1ull << 9)
#define NONCANONICAL_VA   0x8000000000000000ull
#define UNMAPPED_VA       0x00007ffffffff000ull /* above any firmware identity map */
#define MSR_IA32_APICBASE 0x1b
#define APICBASE_BSP      (1ull << 8)

struct __attribute__((packed)) dtr {
    uint16_t limit;
    uint64_t base;
};

static size_t fmt_into(char *buf, size_t size, const char *fmt, ...) PRINTF_LIKE(3, 4);
static size_t fmt_into(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    size_t n = test_vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

static bool fmt_is(const char *want, const char *fmt, ...) PRINTF_LIKE(2, 3);
static bool fmt_is(const char *want, const char *fmt, ...)
{
    char buf[64];
    va_list ap;

    va_start(ap, fmt);
    size_t n = test_vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t i = 0;
    while (want[i] && buf[i] == want[i])
        i++;
    return want[i] == '\0' && buf[i] == '\0' && n == i;
}

static void check_format(void)
{
    report(fmt_is("-5|42|0", "%d|%u|%x", -5, 42u, 0u), "format %%d %%u %%x");
    report(fmt_is("0000beef|   7|ab  |", "%08x|%4d|%-4s|", 0xbeefu, 7, "ab"), "format widths");
    report(fmt_is("18446744073709551615 -9223372036854775808", "%lu %ld", ~0ul,
                  (int64_t)(-0x7fffffffffffffffll - 1)),
           "format 64-bit extremes");
    report(fmt_is("FF 100% c", "%X 100%% %c", 255u, 'c'), "format %%X %%%% %%c");
    char small[4];
    report(fmt_into(small, sizeof(small), "abc%s", "def") == 6 && small[3] == '\0' &&
               small[0] == 'a' && small[2] == 'c',
           "format truncates and returns the full length");
}

static uint64_t rflags(void)
{
    uint64_t f;
    __asm__ volatile("pushfq; popq %0" : "=r"(f));
    return f;
}

static void check_traps(void)
{
    struct dtr d;
    uint64_t gate_before[2], gate_after[2];

    __asm__ volatile("sidt %0" : "=m"(d));
    __builtin_memcpy(gate_before, (void *)(d.base + 16 * TRAP_GP), 16);
    uint64_t if_before = rflags() & X86_EFLAGS_IF;

    report(ud2_trap() == TRAP_UD, "UD2 caught as #UD");
    int v = store64_trap(NONCANONICAL_VA, 1);
    report(v == TRAP_GP && trap_error_code() == 0, "non-canonical store caught as #GP(0) (vec %d)",
           v);
    uint64_t val = 0;
    v = load64_trap(NONCANONICAL_VA, &val);
    report(v == TRAP_GP && val == 0, "non-canonical load caught, destination untouched");
    v = fetch_trap(NONCANONICAL_VA);
    report(v == TRAP_GP, "jump to a non-canonical address caught as #GP (vec %d)", v);
    v = fetch_trap(UNMAPPED_VA);
    report(v == TRAP_PF, "fetch from an unmapped page caught as #PF (vec %d, err 0x%lx)", v,
           trap_error_code());

    /* SDM Vol. 3A 11.4.4: IA32_APIC_BASE bit 8 marks the BSP, which runs this program */
    v = rdmsr_trap(MSR_IA32_APICBASE, &val);
    report(v == TRAP_NONE && (val & APICBASE_BSP), "RDMSR IA32_APIC_BASE not caught, BSP set");

    __builtin_memcpy(gate_after, (void *)(d.base + 16 * TRAP_GP), 16);
    report(gate_before[0] == gate_after[0] && gate_before[1] == gate_after[1],
           "firmware #GP gate restored");
    report((rflags() & X86_EFLAGS_IF) == if_before, "RFLAGS.IF restored");
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *systab)
{
    test_init(image, systab);
    test_printf("selftest: ptvisor in-guest test kit\n");
    check_format();
    check_traps();
    report(false, "selftest deliberate failure");
    report_skip("selftest deliberate skip");
    report(true, "selftest long line %s",
           "0123456789012345678901234567890123456789012345678901234567890123456789");
    report_summary();
    return EFI_SUCCESS;
}
