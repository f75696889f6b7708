/* SPDX-License-Identifier: MIT */
/*
 * ptvisor.cfg parser (see config.h).  Each value parser validates the whole
 * value first and writes its field only when nothing can fail any more, so a
 * rejected line leaves the configuration exactly as it was.
 */
#include <stdbool.h>
#include <stdint.h>
#include "lib/ptv_string.h"
#include "config.h"
#include "fmt.h"

#define DEFAULT_GUEST "\\ptvisor\\vmlinuz.efi"
#define DEFAULT_CMDLINE                                                                            \
    "initrd=\\ptvisor\\initrd.img console=ttyS0,115200 "                                           \
    "earlyprintk=serial,ttyS0,115200 panic=-1"

_Static_assert(sizeof(DEFAULT_GUEST) <= PTV_CFG_PATH_MAX, "default guest path fits");
_Static_assert(sizeof(DEFAULT_CMDLINE) <= PTV_CFG_CMDLINE_MAX, "default cmdline fits");

void ptv_config_defaults(struct ptv_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->serial_port = 0x3f8;
    cfg->serial_baud = 115200;
    cfg->pt_mode = PTV_PT_AUTO;
    cfg->trace_filter = PTV_TRACE_OS | PTV_TRACE_USER;
    cfg->trace_buf_size = 4ull << 20;
    cfg->trace_cr3 = 0;
    cfg->dump_on = PTV_DUMP_CRASH | PTV_DUMP_VMCALL;
    cfg->dump_window = 64ull << 10;
    cfg->dump_stall_us = 20000;
    cfg->log_level = PTV_LOG_INFO;
    cfg->pool_size = 32ull << 20;
    cfg->on_no_vmx = PTV_NO_VMX_BOOT;
    cfg->crash_action = PTV_CRASH_HALT;
    cfg->start_vmm = 1;
    cfg->vmcall_user = PTV_VMCALL_USER_NONE;
    cfg->trace_sw = PTV_SW_TRACE_AUTO;
    cfg->trace_wrap = 1;
    cfg->trace_free = 1;
    cfg->psb_period = 4096;
    memcpy(cfg->guest_path, DEFAULT_GUEST, sizeof(DEFAULT_GUEST));
    memcpy(cfg->cmdline, DEFAULT_CMDLINE, sizeof(DEFAULT_CMDLINE));
}

/* ---- value scanners: (v, n) is the trimmed value, never empty here ---- */

static bool word_is(const char *v, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(v, word, n) == 0;
}

/* index of (v, n) in names[0..count), or -1 */
static int lookup(const char *v, size_t n, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (word_is(v, n, names[i]))
            return i;
    return -1;
}

/* decimal or 0x-prefixed hex, no sign, no overflow */
static bool scan_u64(const char *v, size_t n, uint64_t *out)
{
    unsigned base = 10;
    uint64_t x = 0;
    size_t i = 0;

    if (n > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
        base = 16;
        i = 2;
    }
    if (i == n)
        return false;
    for (; i < n; i++) {
        char c = v[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return false;
        if (x > (UINT64_MAX - d) / base)
            return false;
        x = x * base + d;
    }
    *out = x;
    return true;
}

/* a number with an optional K, M or G suffix (powers of 1024) */
static bool scan_size(const char *v, size_t n, uint64_t *out)
{
    unsigned shift = 0;
    uint64_t x;

    switch (v[n - 1]) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    }
    if (shift)
        n--;
    if (n == 0 || !scan_u64(v, n, &x) || x > (UINT64_MAX >> shift))
        return false;
    *out = x << shift;
    return true;
}

/* the next item of a comma list at *i, blanks around it trimmed: [*s, *e); false past the end */
static bool next_item(const char *v, size_t n, size_t *i, size_t *s, size_t *e)
{
    if (*i > n)
        return false;
    *s = *i;
    while (*i < n && v[*i] != ',')
        (*i)++;
    *e = *i;
    while (*s < *e && (v[*s] == ' ' || v[*s] == '\t'))
        (*s)++;
    while (*e > *s && (v[*e - 1] == ' ' || v[*e - 1] == '\t'))
        (*e)--;
    (*i)++; /* past the comma (or past the end) */
    return true;
}

/* a comma list of names[] (blanks allowed around items) -> bit i per name i */
static bool scan_flags(const char *v, size_t n, const char *const *names, int count, uint32_t *out)
{
    uint32_t bits = 0;
    size_t i = 0, s, e;

    while (next_item(v, n, &i, &s, &e)) {
        int k = lookup(v + s, e - s, names, count);
        if (k < 0)
            return false;
        bits |= 1u << k;
    }
    *out = bits;
    return true;
}

/* ---- one parser per key: validate, then write the field ---- */

typedef bool (*value_fn)(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err);

static bool fail(struct ptv_fmt *err, const char *why, const char *v, size_t n)
{
    ptv_fmt_str(err, why);
    ptv_fmt_str(err, ": ");
    ptv_fmt_quoted(err, v, n);
    return false;
}

static const char *const pt_mode_names[] = {"auto", "off", "system", "host-guest"};
static const char *const log_level_names[] = {"error", "warn", "info", "debug"};
static const char *const no_vmx_names[] = {"boot", "halt"};
static const char *const crash_names[] = {"halt", "reboot", "poweroff"};
static const char *const on_off_names[] = {"off", "on"};
static const char *const free_names[] = {"off", "on", "cr3"};        /* PTV_TRACE_FREE_* */
static const char *const filter_names[] = {"os", "user"};            /* PTV_TRACE_OS, _USER */
static const char *const dump_names[] = {"crash", "vmcall", "boot"}; /* PTV_DUMP_* */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bool set_serial_port(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    static const char *const com[] = {"com1", "com2", "com3", "com4"};
    static const uint16_t com_port[] = {0x3f8, 0x2f8, 0x3e8, 0x2e8};
    int k = lookup(v, n, com, COUNT(com));
    uint64_t x;

    if (k >= 0)
        x = com_port[k];
    else if (!scan_u64(v, n, &x) || x > PTV_CFG_SERIAL_PORT_MAX)
        return fail(err, "not an I/O port (0 = off, up to 0xfff8, or com1..com4)", v, n);
    cfg->serial_port = (uint16_t)x;
    return true;
}

static bool set_serial_baud(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;

    /* the 16550 divisor latch: baud = 115200 / divisor, divisor 1..65535 */
    if (!scan_u64(v, n, &x) || x == 0 || x > PTV_CFG_UART_CLOCK || PTV_CFG_UART_CLOCK % x)
        return fail(err, "not a baud rate that divides 115200", v, n);
    cfg->serial_baud = (uint32_t)x;
    return true;
}

static bool set_pt_mode(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, pt_mode_names, COUNT(pt_mode_names));
    if (k < 0)
        return fail(err, "expected auto, off, system or host-guest", v, n);
    cfg->pt_mode = (uint32_t)k;
    return true;
}

static bool set_pt_buffer(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;

    if (!scan_size(v, n, &x))
        return fail(err, "not a size (a number with an optional K, M or G)", v, n);
    /* ToPA output regions are power-of-two sized, 4 KiB at least (SDM 33.2.6.2) */
    if (x < PTV_CFG_TRACE_BUF_MIN || (x & (x - 1)))
        return fail(err, "not a power of two >= 4K", v, n);
    if (x > PTV_CFG_TRACE_BUF_MAX)
        return fail(err, "larger than 1G", v, n);
    cfg->trace_buf_size = x;
    return true;
}

static bool set_pt_filter(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint32_t bits;
    if (!scan_flags(v, n, filter_names, COUNT(filter_names), &bits))
        return fail(err, "expected os, user or os,user", v, n);
    cfg->trace_filter = bits;
    return true;
}

static bool set_pt_cr3(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;

    /* IA32_RTIT_CR3_MATCH: bits 4:0 reserved (docs/pt-facts.md, SDM 33.2.7.6) */
    if (!scan_u64(v, n, &x) || (x & PTV_CFG_CR3_RSVD_MASK))
        return fail(err, "not a CR3 value (32-byte aligned, below 2^52; 0 = any)", v, n);
    cfg->trace_cr3 = x;
    return true;
}

static bool set_dump_on(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint32_t bits = 0;
    if (!word_is(v, n, "none") && !scan_flags(v, n, dump_names, COUNT(dump_names), &bits))
        return fail(err, "expected none or a list of crash,vmcall,boot", v, n);
    cfg->dump_on = bits;
    return true;
}

static bool set_dump_window(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;

    if (!scan_size(v, n, &x) || (x && (x < PTV_CFG_TRACE_BUF_MIN || x > PTV_CFG_TRACE_BUF_MAX)))
        return fail(err, "not a size between 4K and 1G (0 = the whole ring)", v, n);
    cfg->dump_window = x;
    return true;
}

/* a time: digits with a unit, us or ms */
static bool set_dump_stall(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;
    unsigned mul = 0;

    if (n > 2 && v[n - 2] == 'm' && v[n - 1] == 's')
        mul = 1000;
    else if (n > 2 && v[n - 2] == 'u' && v[n - 1] == 's')
        mul = 1;
    if (!mul || !scan_u64(v, n - 2, &x) || !x || x > PTV_CFG_DUMP_STALL_MAX / mul)
        return fail(err, "not a time between 1us and 1000ms (e.g. 20ms, 500us)", v, n);
    cfg->dump_stall_us = (uint32_t)(x * mul);
    return true;
}

static bool set_log_level(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, log_level_names, COUNT(log_level_names));
    if (k < 0)
        return fail(err, "expected error, warn, info or debug", v, n);
    cfg->log_level = (uint32_t)k;
    return true;
}

static bool set_vmm_pool(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;

    if (!scan_size(v, n, &x))
        return fail(err, "not a size (a number with an optional K, M or G)", v, n);
    if (x < PTV_CFG_POOL_MIN || x > PTV_CFG_POOL_MAX || (x & 0xfff))
        return fail(err, "not a multiple of 4K between 1M and 1G", v, n);
    cfg->pool_size = x;
    return true;
}

static bool set_on_no_vmx(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, no_vmx_names, COUNT(no_vmx_names));
    if (k < 0)
        return fail(err, "expected boot or halt", v, n);
    cfg->on_no_vmx = (uint32_t)k;
    return true;
}

static bool set_on_crash(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, crash_names, COUNT(crash_names));
    if (k < 0)
        return fail(err, "expected halt, reboot or poweroff", v, n);
    cfg->crash_action = (uint32_t)k;
    return true;
}

static bool set_vmm(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, on_off_names, COUNT(on_off_names));
    if (k < 0)
        return fail(err, "expected on or off", v, n);
    cfg->start_vmm = (uint32_t)k;
    return true;
}

static const char *const sw_trace_names[] = {"auto", "off", "on", "tf"}; /* PTV_SW_TRACE_* */

static bool set_sw_trace(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, sw_trace_names, COUNT(sw_trace_names));
    if (k < 0)
        return fail(err, "expected auto, off, on or tf", v, n);
    cfg->trace_sw = (uint32_t)k;
    return true;
}

static bool set_trace_wrap(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, on_off_names, COUNT(on_off_names));
    if (k < 0)
        return fail(err, "expected on (circular ring) or off (stop when full)", v, n);
    cfg->trace_wrap = (uint32_t)k;
    return true;
}

static bool set_trace_free(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, free_names, COUNT(free_names));
    if (k < 0)
        return fail(err,
                    "expected on (run free out of the window), cr3 (only outside its CR3) or off "
                    "(step all)",
                    v, n);
    cfg->trace_free = (uint32_t)k;
    return true;
}

static bool set_psb_period(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;
    if (!scan_size(v, n, &x) || x < PTV_CFG_PSB_MIN || x > PTV_CFG_PSB_MAX || (x & (x - 1)))
        return fail(err, "not a power of two between 256 and 1M", v, n);
    cfg->psb_period = (uint32_t)x;
    return true;
}

static bool set_trace_boot(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t x;
    if (!scan_u64(v, n, &x) || x > PTV_CFG_TRACE_BOOT_MAX)
        return fail(err, "not an instruction count up to 100000000 (0 = off)", v, n);
    cfg->trace_boot = x;
    return true;
}

/* pt_range = none | lo-hi[,lo-hi...]: up to 4 inclusive IP ranges, lo <= hi */
static bool set_pt_range(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    uint64_t lo[PTV_CFG_TRACE_RANGES], hi[PTV_CFG_TRACE_RANGES];
    unsigned count = 0;
    size_t i = 0, s, e;

    if (word_is(v, n, "none")) {
        cfg->trace_nranges = 0;
        memset(cfg->trace_range, 0, sizeof(cfg->trace_range));
        return true;
    }
    while (next_item(v, n, &i, &s, &e)) {
        size_t dash = s;
        while (dash < e && v[dash] != '-')
            dash++;
        if (count == PTV_CFG_TRACE_RANGES)
            return fail(err, "more than 4 ranges", v, n);
        if (dash == e || !scan_u64(v + s, dash - s, &lo[count]) ||
            !scan_u64(v + dash + 1, e - dash - 1, &hi[count]) || lo[count] > hi[count])
            return fail(err, "expected none or ranges lo-hi (inclusive, lo <= hi), comma-separated",
                        v, n);
        count++;
    }
    memset(cfg->trace_range, 0, sizeof(cfg->trace_range));
    for (unsigned k = 0; k < count; k++) {
        cfg->trace_range[k].lo = lo[k];
        cfg->trace_range[k].hi = hi[k];
    }
    cfg->trace_nranges = count;
    return true;
}

static const char *const vmcall_user_names[] = {"none", "stats", "trace"};

static bool set_vmcall_user(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    int k = lookup(v, n, vmcall_user_names, COUNT(vmcall_user_names));
    if (k < 0)
        return fail(err, "expected none, stats or trace", v, n);
    cfg->vmcall_user = (uint32_t)k;
    return true;
}

static bool set_guest(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    if (n >= PTV_CFG_PATH_MAX)
        return fail(err, "path longer than 127 bytes", v, n);
    if (v[0] != '\\' && v[0] != '/')
        return fail(err, "not an absolute path on the loader's volume (\\dir\\file.efi)", v, n);
    /* UEFI file paths use '\'; accept '/' from Unix habits */
    for (size_t i = 0; i < n; i++)
        cfg->guest_path[i] = v[i] == '/' ? '\\' : v[i];
    memset(cfg->guest_path + n, 0, PTV_CFG_PATH_MAX - n);
    return true;
}

static bool set_cmdline(struct ptv_config *cfg, const char *v, size_t n, struct ptv_fmt *err)
{
    if (n >= PTV_CFG_CMDLINE_MAX)
        return fail(err, "longer than 511 bytes", v, n);
    memcpy(cfg->cmdline, v, n);
    memset(cfg->cmdline + n, 0, PTV_CFG_CMDLINE_MAX - n);
    return true;
}

static const struct key {
    const char *name;
    value_fn set;
    bool may_be_empty;
} keys[] = {
    {"serial_port", set_serial_port, false}, {"serial_baud", set_serial_baud, false},
    {"pt_mode", set_pt_mode, false},         {"pt_buffer", set_pt_buffer, false},
    {"pt_filter", set_pt_filter, false},     {"pt_cr3", set_pt_cr3, false},
    {"dump_on", set_dump_on, false},         {"log_level", set_log_level, false},
    {"vmm_pool", set_vmm_pool, false},       {"on_no_vmx", set_on_no_vmx, false},
    {"on_crash", set_on_crash, false},       {"vmm", set_vmm, false},
    {"vmcall_user", set_vmcall_user, false}, {"guest", set_guest, false},
    {"cmdline", set_cmdline, true},          {"sw_trace", set_sw_trace, false},
    {"trace_wrap", set_trace_wrap, false},   {"trace_free", set_trace_free, false},
    {"psb_period", set_psb_period, false},   {"trace_boot", set_trace_boot, false},
    {"dump_window", set_dump_window, false}, {"dump_stall", set_dump_stall, false},
    {"pt_range", set_pt_range, false},
};
#define NR_KEYS COUNT(keys)

/* ---- lines ---- */

struct parser {
    struct ptv_config *cfg;
    const char *name;
    ptv_cfg_report_fn report;
    void *ctx;
    unsigned errors;
    uint64_t seen_on[NR_KEYS]; /* line of the first occurrence, 0 = not yet */
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *n)
{
    while (*n && is_blank(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_blank((*s)[*n - 1]))
        (*n)--;
}

/* start "NAME:LINE: " */
static void begin(struct parser *p, struct ptv_fmt *f, char *buf, uint64_t lineno)
{
    ptv_fmt_init(f, buf, PTV_CFG_MSG_MAX);
    ptv_fmt_str(f, p->name);
    ptv_fmt_str(f, ":");
    ptv_fmt_dec(f, lineno);
    ptv_fmt_str(f, ": ");
}

static void error(struct parser *p, const char *msg)
{
    p->errors++;
    if (p->report)
        p->report(p->ctx, msg);
}

/* first byte that may not appear in the file: NUL, non-ASCII, control */
static size_t bad_byte(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 || c >= 0x7f || (c < 0x20 && c != '\t'))
            return i;
    }
    return n;
}

static void parse_line(struct parser *p, const char *s, size_t n, uint64_t lineno)
{
    char buf[PTV_CFG_MSG_MAX];
    struct ptv_fmt f;
    size_t i;

    begin(p, &f, buf, lineno);
    if (n > PTV_CFG_LINE_MAX) {
        ptv_fmt_str(&f, "line too long (");
        ptv_fmt_dec(&f, n);
        ptv_fmt_str(&f, " bytes, at most 1024), ignored");
        error(p, buf);
        return;
    }
    i = bad_byte(s, n);
    if (i < n) {
        if (s[i]) {
            ptv_fmt_str(&f, "non-ASCII or control byte ");
            ptv_fmt_hex(&f, (unsigned char)s[i]);
        } else {
            ptv_fmt_str(&f, "NUL byte");
        }
        ptv_fmt_str(&f, " at column ");
        ptv_fmt_dec(&f, i + 1);
        ptv_fmt_str(&f, " (the file must be ASCII), line ignored");
        error(p, buf);
        return;
    }
    for (i = 0; i < n && s[i] != '#'; i++)
        ;
    n = i;
    trim(&s, &n);
    if (n == 0)
        return;

    for (i = 0; i < n && s[i] != '='; i++)
        ;
    if (i == n) {
        ptv_fmt_str(&f, "missing '=' (expected 'key = value'): ");
        ptv_fmt_quoted(&f, s, n);
        error(p, buf);
        return;
    }
    const char *key = s, *val = s + i + 1;
    size_t klen = i, vlen = n - i - 1;
    trim(&key, &klen);
    trim(&val, &vlen);
    if (klen == 0) {
        ptv_fmt_str(&f, "missing key before '='");
        error(p, buf);
        return;
    }
    int k;
    for (k = 0; k < NR_KEYS; k++)
        if (word_is(key, klen, keys[k].name))
            break;
    if (k == NR_KEYS) {
        ptv_fmt_str(&f, "unknown key ");
        ptv_fmt_quoted(&f, key, klen);
        error(p, buf);
        return;
    }
    if (p->seen_on[k]) {
        ptv_fmt_str(&f, "duplicate key '");
        ptv_fmt_str(&f, keys[k].name);
        ptv_fmt_str(&f, "' (first on line ");
        ptv_fmt_dec(&f, p->seen_on[k]);
        ptv_fmt_str(&f, "), ignored");
        error(p, buf);
        return;
    }
    p->seen_on[k] = lineno;
    ptv_fmt_str(&f, keys[k].name);
    ptv_fmt_str(&f, ": ");
    if (vlen == 0 && !keys[k].may_be_empty) {
        ptv_fmt_str(&f, "empty value");
        error(p, buf);
        return;
    }
    if (!keys[k].set(p->cfg, val, vlen, &f))
        error(p, buf);
}

unsigned ptv_config_parse(struct ptv_config *cfg, const char *text, size_t len, const char *name,
                          ptv_cfg_report_fn report, void *ctx)
{
    struct parser p = {.cfg = cfg, .name = name, .report = report, .ctx = ctx};
    uint64_t lineno = 0;
    size_t pos = 0;

    /* a UTF-8 byte order mark, as some Windows editors write, is not content */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        pos = 3;
    while (pos < len) {
        size_t end = pos, n;
        while (end < len && text[end] != '\n')
            end++;
        n = end - pos;
        if (n && text[pos + n - 1] == '\r') /* CRLF files */
            n--;
        parse_line(&p, text + pos, n, ++lineno);
        pos = end + 1;
    }
    return p.errors;
}

static void size_str(struct ptv_fmt *f, uint64_t x)
{
    static const char unit[] = {'G', 'M', 'K'};
    for (int i = 0; i < 3; i++) {
        unsigned shift = 30 - 10 * (unsigned)i;
        if (x && (x & ((1ull << shift) - 1)) == 0) {
            ptv_fmt_dec(f, x >> shift);
            char u[2] = {unit[i], 0};
            ptv_fmt_str(f, u);
            return;
        }
    }
    ptv_fmt_dec(f, x);
}

static const char *name_of(const char *const *names, int count, uint32_t v)
{
    return v < (uint32_t)count ? names[v] : "?";
}

void ptv_config_summary(const struct ptv_config *cfg, char *buf, size_t cap)
{
    struct ptv_fmt f;

    ptv_fmt_init(&f, buf, cap);
    ptv_fmt_str(&f, "vmm=");
    ptv_fmt_str(&f, name_of(on_off_names, COUNT(on_off_names), cfg->start_vmm));
    ptv_fmt_str(&f, " pt_mode=");
    ptv_fmt_str(&f, name_of(pt_mode_names, COUNT(pt_mode_names), cfg->pt_mode));
    ptv_fmt_str(&f, " pt_buffer=");
    size_str(&f, cfg->trace_buf_size);
    ptv_fmt_str(&f, " vmm_pool=");
    size_str(&f, cfg->pool_size);
    ptv_fmt_str(&f, " serial=");
    ptv_fmt_hex(&f, cfg->serial_port);
    ptv_fmt_str(&f, ",");
    ptv_fmt_dec(&f, cfg->serial_baud);
    ptv_fmt_str(&f, " log_level=");
    ptv_fmt_str(&f, name_of(log_level_names, COUNT(log_level_names), cfg->log_level));
    ptv_fmt_str(&f, " on_no_vmx=");
    ptv_fmt_str(&f, name_of(no_vmx_names, COUNT(no_vmx_names), cfg->on_no_vmx));
    ptv_fmt_str(&f, " guest=");
    ptv_fmt_str(&f, cfg->guest_path);
}
