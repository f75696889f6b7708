/* SPDX-License-Identifier: MIT */
/* Host tests for the ptvisor.cfg parser (boot/config.c): every key, every error path. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../boot/config.h"
#include "base/handoff.h"

#define MAX_MSGS 8

struct msgs {
    unsigned n;
    char text[MAX_MSGS][PTV_CFG_MSG_MAX];
};

static void collect(void *ctx, const char *msg)
{
    struct msgs *m = ctx;
    assert_true(strlen(msg) < PTV_CFG_MSG_MAX);
    if (m->n < MAX_MSGS)
        snprintf(m->text[m->n], PTV_CFG_MSG_MAX, "%s", msg);
    m->n++;
}

/* parse text over the defaults; the result must always pass the VMM's check */
static unsigned parse(const char *text, struct ptv_config *cfg, struct msgs *m)
{
    const char *why = NULL;
    memset(m, 0, sizeof(*m));
    ptv_config_defaults(cfg);
    unsigned errors = ptv_config_parse(cfg, text, strlen(text), "ptvisor.cfg", collect, m);
    assert_int_equal(errors, m->n);
    assert_int_equal(ptv_config_check(cfg, &why), 0);
    return errors;
}

/* one line with one error: its message exactly, and the defaults untouched */
static void expect_error(const char *text, const char *msg)
{
    struct ptv_config cfg, def;
    struct msgs m;
    ptv_config_defaults(&def);
    assert_int_equal(parse(text, &cfg, &m), 1);
    assert_string_equal(m.text[0], msg);
    assert_memory_equal(&cfg, &def, sizeof(cfg));
}

static void test_defaults(void **state)
{
    struct ptv_config cfg;
    struct msgs m;
    assert_int_equal(parse("", &cfg, &m), 0);
    assert_int_equal(cfg.serial_port, 0x3f8);
    assert_int_equal(cfg.serial_baud, 115200);
    assert_int_equal(cfg.pt_mode, PTV_PT_AUTO);
    assert_int_equal(cfg.trace_filter, PTV_TRACE_OS | PTV_TRACE_USER);
    assert_int_equal(cfg.trace_buf_size, 4 << 20);
    assert_int_equal(cfg.trace_cr3, 0);
    assert_int_equal(cfg.dump_on, PTV_DUMP_CRASH | PTV_DUMP_VMCALL);
    assert_int_equal(cfg.dump_window, 64 << 10);
    assert_int_equal(cfg.dump_stall_us, 20000);
    assert_int_equal(cfg.log_level, PTV_LOG_INFO);
    assert_int_equal(cfg.pool_size, 32 << 20);
    assert_int_equal(cfg.on_no_vmx, PTV_NO_VMX_BOOT);
    assert_int_equal(cfg.crash_action, PTV_CRASH_HALT);
    assert_int_equal(cfg.start_vmm, 1);
    assert_string_equal(cfg.guest_path, "\\ptvisor\\vmlinuz.efi");
    assert_string_equal(cfg.cmdline, "initrd=\\ptvisor\\initrd.img console=ttyS0,115200 "
                                     "earlyprintk=serial,ttyS0,115200 panic=-1");
}

/* boot/ptvisor.cfg, the shipped file, spells out exactly the built-in defaults */
static void test_default_file(void **state)
{
    static char text[1 << 16];
    struct ptv_config cfg, def;
    struct msgs m = {0};
    FILE *f = fopen("boot/ptvisor.cfg", "rb");

    assert_non_null(f);
    size_t len = fread(text, 1, sizeof(text), f);
    fclose(f);
    ptv_config_defaults(&def);
    memset(&cfg, 0x5a, sizeof(cfg)); /* every key must be set by the file */
    cfg.guest_path[0] = cfg.cmdline[0] = 0;
    ptv_config_parse(&cfg, text, len, "ptvisor.cfg", collect, &m);
    assert_int_equal(m.n, 0);
    cfg._pad0 = 0;
    memset(cfg.guest_path + strlen(cfg.guest_path), 0,
           sizeof(cfg.guest_path) - strlen(cfg.guest_path));
    memset(cfg.cmdline + strlen(cfg.cmdline), 0, sizeof(cfg.cmdline) - strlen(cfg.cmdline));
    assert_memory_equal(&cfg, &def, sizeof(cfg));
}

static void test_every_key(void **state)
{
    struct ptv_config cfg;
    struct msgs m;
    const char *text = "# a comment line\n"
                       "serial_port = 0x2f8\n"
                       "  serial_baud=57600   \n"
                       "\tpt_mode\t=\tsystem # trailing comment\n"
                       "pt_buffer = 64K\n"
                       "pt_filter = user\n"
                       "pt_cr3 = 0x1234560\n"
                       "dump_on = vmcall\n"
                       "log_level = debug\n"
                       "vmm_pool = 0x200000\n"
                       "on_no_vmx = halt\n"
                       "on_crash = poweroff\n"
                       "vmm = off\n"
                       "guest = /EFI/test/t.efi\n"
                       "cmdline = console=ttyS0 quiet\n"
                       "sw_trace = on\n"
                       "trace_wrap = off\n"
                       "trace_free = off\n"
                       "psb_period = 64K\n"
                       "trace_boot = 100000\n"
                       "pt_range = 0x1000-0x1fff, 0xffffffff81000000-0xffffffff82000000\n"
                       "\n   \n";
    assert_int_equal(parse(text, &cfg, &m), 0);
    assert_int_equal(cfg.serial_port, 0x2f8);
    assert_int_equal(cfg.serial_baud, 57600);
    assert_int_equal(cfg.pt_mode, PTV_PT_SYSTEM);
    assert_int_equal(cfg.trace_buf_size, 64 << 10);
    assert_int_equal(cfg.trace_filter, PTV_TRACE_USER);
    assert_int_equal(cfg.trace_cr3, 0x1234560);
    assert_int_equal(cfg.dump_on, PTV_DUMP_VMCALL);
    assert_int_equal(cfg.log_level, PTV_LOG_DEBUG);
    assert_int_equal(cfg.pool_size, 2 << 20);
    assert_int_equal(cfg.on_no_vmx, PTV_NO_VMX_HALT);
    assert_int_equal(cfg.crash_action, PTV_CRASH_POWEROFF);
    assert_int_equal(cfg.start_vmm, 0);
    assert_int_equal(cfg.trace_sw, PTV_SW_TRACE_ON);
    assert_int_equal(cfg.trace_wrap, 0);
    assert_int_equal(cfg.trace_free, 0);
    assert_int_equal(cfg.psb_period, 64 << 10);
    assert_int_equal(cfg.trace_boot, 100000);
    assert_int_equal(cfg.trace_nranges, 2);
    assert_int_equal(cfg.trace_range[0].lo, 0x1000);
    assert_int_equal(cfg.trace_range[0].hi, 0x1fff);
    assert_true(cfg.trace_range[1].lo == 0xffffffff81000000ull);
    assert_true(cfg.trace_range[1].hi == 0xffffffff82000000ull);
    assert_string_equal(cfg.guest_path, "\\EFI\\test\\t.efi");
    assert_string_equal(cfg.cmdline, "console=ttyS0 quiet");
}

static void test_enum_values(void **state)
{
    static const struct {
        const char *line;
        size_t off;
        uint32_t want;
    } cases[] = {
        {"pt_mode = auto", offsetof(struct ptv_config, pt_mode), PTV_PT_AUTO},
        {"pt_mode = off", offsetof(struct ptv_config, pt_mode), PTV_PT_OFF},
        {"pt_mode = host-guest", offsetof(struct ptv_config, pt_mode), PTV_PT_HOST_GUEST},
        {"log_level = error", offsetof(struct ptv_config, log_level), PTV_LOG_ERROR},
        {"log_level = warn", offsetof(struct ptv_config, log_level), PTV_LOG_WARN},
        {"log_level = info", offsetof(struct ptv_config, log_level), PTV_LOG_INFO},
        {"on_no_vmx = boot", offsetof(struct ptv_config, on_no_vmx), PTV_NO_VMX_BOOT},
        {"on_crash = halt", offsetof(struct ptv_config, crash_action), PTV_CRASH_HALT},
        {"on_crash = reboot", offsetof(struct ptv_config, crash_action), PTV_CRASH_REBOOT},
        {"vmm = on", offsetof(struct ptv_config, start_vmm), 1},
        {"pt_filter = os", offsetof(struct ptv_config, trace_filter), PTV_TRACE_OS},
        {"pt_filter = user , os", offsetof(struct ptv_config, trace_filter), 3},
        {"dump_on = none", offsetof(struct ptv_config, dump_on), 0},
        {"dump_on = crash", offsetof(struct ptv_config, dump_on), PTV_DUMP_CRASH},
        {"dump_on = vmcall,crash", offsetof(struct ptv_config, dump_on), 3},
        {"dump_on = boot", offsetof(struct ptv_config, dump_on), PTV_DUMP_BOOT},
        {"dump_stall = 20ms", offsetof(struct ptv_config, dump_stall_us), 20000},
        {"dump_stall = 1us", offsetof(struct ptv_config, dump_stall_us), 1},
        {"dump_stall = 1000ms", offsetof(struct ptv_config, dump_stall_us), 1000000},
        {"dump_window = 0", offsetof(struct ptv_config, dump_window), 0},
        {"dump_window = 1M", offsetof(struct ptv_config, dump_window), 1u << 20},
        {"serial_baud = 9600", offsetof(struct ptv_config, serial_baud), 9600},
        {"serial_baud = 115200", offsetof(struct ptv_config, serial_baud), 115200},
        {"sw_trace = off", offsetof(struct ptv_config, trace_sw), PTV_SW_TRACE_OFF},
        {"sw_trace = tf", offsetof(struct ptv_config, trace_sw), PTV_SW_TRACE_TF},
        {"vmcall_user = trace", offsetof(struct ptv_config, vmcall_user), PTV_VMCALL_USER_TRACE},
        {"trace_free = on", offsetof(struct ptv_config, trace_free), PTV_TRACE_FREE_ON},
        {"trace_free = cr3", offsetof(struct ptv_config, trace_free), PTV_TRACE_FREE_CR3},
        {"trace_free = off", offsetof(struct ptv_config, trace_free), PTV_TRACE_FREE_OFF},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ptv_config cfg;
        struct msgs m;
        uint32_t got;
        assert_int_equal(parse(cases[i].line, &cfg, &m), 0);
        memcpy(&got, (char *)&cfg + cases[i].off, sizeof(got));
        assert_int_equal(got, cases[i].want);
    }
}

static void test_numbers_and_sizes(void **state)
{
    struct ptv_config cfg;
    struct msgs m;
    assert_int_equal(parse("serial_port = com4\npt_buffer = 1G\nvmm_pool = 1m", &cfg, &m), 0);
    assert_int_equal(cfg.serial_port, 0x2e8);
    assert_int_equal(cfg.trace_buf_size, 1ull << 30);
    assert_int_equal(cfg.pool_size, 1 << 20);
    assert_int_equal(parse("serial_port = 0\npt_buffer = 4096\nvmm_pool = 1G", &cfg, &m), 0);
    assert_int_equal(cfg.serial_port, 0);
    assert_int_equal(cfg.trace_buf_size, 4096);
    assert_int_equal(cfg.pool_size, 1ull << 30);
    assert_int_equal(parse("serial_port = 1016\npt_buffer = 0X10000", &cfg, &m), 0);
    assert_int_equal(cfg.serial_port, 0x3f8);
    assert_int_equal(cfg.trace_buf_size, 0x10000);
    assert_int_equal(parse("pt_cr3 = 0xfffffffffffe0", &cfg, &m), 0);
    assert_int_equal(cfg.trace_cr3, 0xfffffffffffe0ull);
}

static void test_crlf_bom_and_empty_cmdline(void **state)
{
    struct ptv_config cfg;
    struct msgs m;
    assert_int_equal(parse("\xef\xbb\xbfvmm = off\r\ncmdline =\r\n", &cfg, &m), 0);
    assert_int_equal(cfg.start_vmm, 0);
    assert_string_equal(cfg.cmdline, "");
}

static void test_syntax_errors(void **state)
{
    expect_error("\n\n\n\n\n\nserail_port = 0x3f8\n", "ptvisor.cfg:7: unknown key 'serail_port'");
    expect_error("pt_mode system\n",
                 "ptvisor.cfg:1: missing '=' (expected 'key = value'): 'pt_mode system'");
    expect_error("  = 3\n", "ptvisor.cfg:1: missing key before '='");
    expect_error("pt_mode =   # nothing\n", "ptvisor.cfg:1: pt_mode: empty value");
    expect_error("PT_MODE = off\n", "ptvisor.cfg:1: unknown key 'PT_MODE'");
}

static void test_value_errors(void **state)
{
    expect_error("# c\n\npt_buffer = 3000\n",
                 "ptvisor.cfg:3: pt_buffer: not a power of two >= 4K: '3000'");
    expect_error("pt_buffer = 2K", "ptvisor.cfg:1: pt_buffer: not a power of two >= 4K: '2K'");
    expect_error("pt_buffer = 2G", "ptvisor.cfg:1: pt_buffer: larger than 1G: '2G'");
    expect_error("pt_buffer = 4X", "ptvisor.cfg:1: pt_buffer: not a size (a number with an "
                                   "optional K, M or G): '4X'");
    expect_error("pt_buffer = 99999999999999999999",
                 "ptvisor.cfg:1: pt_buffer: not a size (a number with an optional K, M or G): "
                 "'99999999999999999999'");
    expect_error("pt_buffer = 17179869184G",
                 "ptvisor.cfg:1: pt_buffer: not a size (a number with an optional K, M or G): "
                 "'17179869184G'");
    expect_error("pt_buffer = K", "ptvisor.cfg:1: pt_buffer: not a size (a number with an "
                                  "optional K, M or G): 'K'");
    expect_error("serial_port = 0xfff9", "ptvisor.cfg:1: serial_port: not an I/O port (0 = off, "
                                         "up to 0xfff8, or com1..com4): '0xfff9'");
    expect_error("serial_port = 0x", "ptvisor.cfg:1: serial_port: not an I/O port (0 = off, up "
                                     "to 0xfff8, or com1..com4): '0x'");
    expect_error("serial_port = com5", "ptvisor.cfg:1: serial_port: not an I/O port (0 = off, "
                                       "up to 0xfff8, or com1..com4): 'com5'");
    expect_error("serial_baud = 100000",
                 "ptvisor.cfg:1: serial_baud: not a baud rate that divides 115200: '100000'");
    expect_error("serial_baud = 0",
                 "ptvisor.cfg:1: serial_baud: not a baud rate that divides 115200: '0'");
    expect_error("serial_baud = 230400",
                 "ptvisor.cfg:1: serial_baud: not a baud rate that divides 115200: '230400'");
    expect_error("psb_period = 128",
                 "ptvisor.cfg:1: psb_period: not a power of two between 256 and 1M: '128'");
    expect_error("psb_period = 3K",
                 "ptvisor.cfg:1: psb_period: not a power of two between 256 and 1M: '3K'");
    expect_error("trace_boot = 100000001", "ptvisor.cfg:1: trace_boot: not an instruction count "
                                           "up to 100000000 (0 = off): '100000001'");
    expect_error("vmcall_user = all",
                 "ptvisor.cfg:1: vmcall_user: expected none, stats or trace: 'all'");
    expect_error("sw_trace = maybe",
                 "ptvisor.cfg:1: sw_trace: expected auto, off, on or tf: 'maybe'");
    expect_error("pt_range = 0x2000-0x1000",
                 "ptvisor.cfg:1: pt_range: expected none or ranges lo-hi (inclusive, lo <= hi), "
                 "comma-separated: '0x2000-0x1000'");
    expect_error("pt_range = 0x2000",
                 "ptvisor.cfg:1: pt_range: expected none or ranges lo-hi (inclusive, lo <= hi), "
                 "comma-separated: '0x2000'");
    expect_error("pt_range = 1-2,3-4,5-6,7-8,9-10",
                 "ptvisor.cfg:1: pt_range: more than 4 ranges: '1-2,3-4,5-6,7-8,9-10'");
    expect_error("pt_range = 1-2,",
                 "ptvisor.cfg:1: pt_range: expected none or ranges lo-hi (inclusive, lo <= hi), "
                 "comma-separated: '1-2,'");
    expect_error("pt_mode = shadow",
                 "ptvisor.cfg:1: pt_mode: expected auto, off, system or host-guest: 'shadow'");
    expect_error("pt_filter = kernel",
                 "ptvisor.cfg:1: pt_filter: expected os, user or os,user: 'kernel'");
    expect_error("pt_filter = os,",
                 "ptvisor.cfg:1: pt_filter: expected os, user or os,user: 'os,'");
    expect_error("pt_cr3 = 0x1001", "ptvisor.cfg:1: pt_cr3: not a CR3 value (32-byte aligned, "
                                    "below 2^52; 0 = any): '0x1001'");
    expect_error("pt_cr3 = 0x10000000000000", "ptvisor.cfg:1: pt_cr3: not a CR3 value (32-byte "
                                              "aligned, below 2^52; 0 = any): '0x10000000000000'");
    expect_error("dump_on = always",
                 "ptvisor.cfg:1: dump_on: expected none or a list of crash,vmcall,boot: 'always'");
    expect_error("dump_stall = 2000ms", "ptvisor.cfg:1: dump_stall: not a time between 1us and "
                                        "1000ms (e.g. 20ms, 500us): '2000ms'");
    expect_error("dump_stall = 20", "ptvisor.cfg:1: dump_stall: not a time between 1us and "
                                    "1000ms (e.g. 20ms, 500us): '20'");
    expect_error("dump_stall = 0us", "ptvisor.cfg:1: dump_stall: not a time between 1us and "
                                     "1000ms (e.g. 20ms, 500us): '0us'");
    expect_error("dump_window = 2K", "ptvisor.cfg:1: dump_window: not a size between 4K and 1G "
                                     "(0 = the whole ring): '2K'");
    expect_error("log_level = verbose",
                 "ptvisor.cfg:1: log_level: expected error, warn, info or debug: 'verbose'");
    expect_error("vmm_pool = 512K",
                 "ptvisor.cfg:1: vmm_pool: not a multiple of 4K between 1M and 1G: '512K'");
    expect_error("vmm_pool = 2G",
                 "ptvisor.cfg:1: vmm_pool: not a multiple of 4K between 1M and 1G: '2G'");
    expect_error("vmm_pool = 1048577",
                 "ptvisor.cfg:1: vmm_pool: not a multiple of 4K between 1M and 1G: '1048577'");
    expect_error("vmm_pool = lots", "ptvisor.cfg:1: vmm_pool: not a size (a number with an "
                                    "optional K, M or G): 'lots'");
    expect_error("on_no_vmx = reboot", "ptvisor.cfg:1: on_no_vmx: expected boot or halt: 'reboot'");
    expect_error("on_crash = explode",
                 "ptvisor.cfg:1: on_crash: expected halt, reboot or poweroff: 'explode'");
    expect_error("vmm = yes", "ptvisor.cfg:1: vmm: expected on or off: 'yes'");
    expect_error("trace_free = cpl",
                 "ptvisor.cfg:1: trace_free: expected on (run free out of the "
                 "window), cr3 (only outside its CR3) or off (step all): 'cpl'");
    expect_error("guest = vmlinuz.efi", "ptvisor.cfg:1: guest: not an absolute path on the "
                                        "loader's volume (\\dir\\file.efi): 'vmlinuz.efi'");
}

static void test_long_values(void **state)
{
    char text[2048], msg[PTV_CFG_MSG_MAX];
    /* a 128-byte guest path: one too long for the 128-byte field with its NUL */
    snprintf(text, sizeof(text), "guest = \\%0127d", 0);
    snprintf(msg, sizeof(msg), "ptvisor.cfg:1: guest: path longer than 127 bytes: '\\%039d...'", 0);
    expect_error(text, msg);
    /* 512 bytes of cmdline */
    snprintf(text, sizeof(text), "cmdline = %0512d", 0);
    snprintf(msg, sizeof(msg), "ptvisor.cfg:1: cmdline: longer than 511 bytes: '%040d...'", 0);
    expect_error(text, msg);
    /* exactly the largest values fit */
    struct ptv_config cfg;
    struct msgs m;
    snprintf(text, sizeof(text), "guest = \\%0126d\ncmdline = %0511d", 0, 0);
    assert_int_equal(parse(text, &cfg, &m), 0);
    assert_int_equal(strlen(cfg.guest_path), 127);
    assert_int_equal(strlen(cfg.cmdline), 511);
    /* a line over 1024 bytes (even a comment) */
    memset(text, '#', 1025);
    text[1025] = '\0';
    expect_error(text, "ptvisor.cfg:1: line too long (1025 bytes, at most 1024), ignored");
}

static void test_bad_bytes(void **state)
{
    const char nul[] = "vmm = o\0ff\npt_mode = off\n";
    struct ptv_config cfg;
    struct msgs m = {0};
    ptv_config_defaults(&cfg);
    assert_int_equal(ptv_config_parse(&cfg, nul, sizeof(nul) - 1, "ptvisor.cfg", collect, &m), 1);
    assert_string_equal(m.text[0], "ptvisor.cfg:1: NUL byte at column 8 (the file must be ASCII), "
                                   "line ignored");
    assert_int_equal(cfg.start_vmm, 1);
    assert_int_equal(cfg.pt_mode, PTV_PT_OFF); /* the next line still counts */

    expect_error("# caf\xc3\xa9\n", "ptvisor.cfg:1: non-ASCII or control byte 0xc3 at column 6 "
                                    "(the file must be ASCII), line ignored");
    expect_error("vmm = \x1b[0moff", "ptvisor.cfg:1: non-ASCII or control byte 0x1b at column 7 "
                                     "(the file must be ASCII), line ignored");
}

static void test_duplicate_and_recovery(void **state)
{
    struct ptv_config cfg;
    struct msgs m;
    const char *text = "pt_mode = system\n"
                       "bogus\n"
                       "pt_buffer = 3000\n"
                       "pt_mode = off\n"
                       "log_level = warn\n";
    assert_int_equal(parse(text, &cfg, &m), 3);
    assert_string_equal(m.text[0], "ptvisor.cfg:2: missing '=' (expected 'key = value'): 'bogus'");
    assert_string_equal(m.text[1], "ptvisor.cfg:3: pt_buffer: not a power of two >= 4K: '3000'");
    assert_string_equal(m.text[2], "ptvisor.cfg:4: duplicate key 'pt_mode' (first on line 1), "
                                   "ignored");
    assert_int_equal(cfg.pt_mode, PTV_PT_SYSTEM); /* the first one wins */
    assert_int_equal(cfg.trace_buf_size, 4 << 20);
    assert_int_equal(cfg.log_level, PTV_LOG_WARN);
    /* a key whose first value was bad still counts as seen */
    assert_int_equal(parse("vmm = maybe\nvmm = off\n", &cfg, &m), 2);
    assert_string_equal(m.text[1], "ptvisor.cfg:2: duplicate key 'vmm' (first on line 1), ignored");
    assert_int_equal(cfg.start_vmm, 1);
}

static void test_no_report_callback(void **state)
{
    struct ptv_config cfg;
    ptv_config_defaults(&cfg);
    assert_int_equal(ptv_config_parse(&cfg, "x\ny\n", 4, "f", NULL, NULL), 2);
}

static void test_summary(void **state)
{
    struct ptv_config cfg;
    char buf[256];
    ptv_config_defaults(&cfg);
    ptv_config_summary(&cfg, buf, sizeof(buf));
    assert_string_equal(buf, "vmm=on pt_mode=auto pt_buffer=4M vmm_pool=32M serial=0x3f8,115200 "
                             "log_level=info on_no_vmx=boot guest=\\ptvisor\\vmlinuz.efi");
    ptv_config_summary(&cfg, buf, 10);
    assert_string_equal(buf, "vmm=on pt");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_default_file),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_enum_values),
        cmocka_unit_test(test_numbers_and_sizes),
        cmocka_unit_test(test_crlf_bom_and_empty_cmdline),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_long_values),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_duplicate_and_recovery),
        cmocka_unit_test(test_no_report_callback),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
