/* SPDX-License-Identifier: MIT */
/*
 * The loader's console: every "ptvisor: ..." line goes to ConOut and, when
 * the firmware's console does not already include a serial port, also to the
 * configured UART (the VMM's own 16550 driver, vmm/dev/serial.c), so that the
 * serial log of a real machine holds the loader's decisions too.  Lines
 * printed before the config is read are kept and replayed to the UART.
 */
#include "loader.h"
#include "dev/serial.h"

#define BACKLOG_MAX 2048

static bool mirror, decided;
static char backlog[BACKLOG_MAX];
static UINTN backlog_len;

/* does the ConOut variable (a multi-instance device path) name a UART? */
static bool conout_has_uart(void)
{
    static CHAR16 name[] = L"ConOut";
    UINTN size = 0;
    uint8_t *dp = LibGetVariableAndSize(name, &EfiGlobalVariable, &size);
    bool uart = false;
    for (UINTN off = 0; dp && off + 4 <= size;) {
        EFI_DEVICE_PATH *n = (EFI_DEVICE_PATH *)(dp + off);
        UINTN len = DevicePathNodeLength(n);
        if (DevicePathType(n) == MESSAGING_DEVICE_PATH && DevicePathSubType(n) == MSG_UART_DP)
            uart = true;
        if (len < 4)
            break;
        off += len;
    }
    if (dp)
        FreePool(dp);
    return uart;
}

static void to_uart(const char *s, UINTN n)
{
    if (mirror)
        serial_write(s, n);
    else if (!decided && backlog_len + n <= BACKLOG_MAX) {
        for (UINTN i = 0; i < n; i++)
            backlog[backlog_len + i] = s[i];
        backlog_len += n;
    }
}

void console_configure(const struct ptv_config *cfg)
{
    bool uart = conout_has_uart();
    mirror = cfg->serial_port && !uart;
    decided = true;
    if (mirror) {
        serial_init(cfg->serial_port, cfg->serial_baud);
        serial_write(backlog, backlog_len);
    }
    backlog_len = 0;
    if (!uart)
        sayf(L"the firmware console has no serial port: loader lines also go to %a",
             cfg->serial_port ? "the configured serial port" : "nowhere else (serial_port = 0)");
}

void sayf(const CHAR16 *fmt, ...)
{
    CHAR16 w[256];
    char a[256];
    va_list ap;
    va_start(ap, fmt);
    VSPrint(w, sizeof(w), (CHAR16 *)fmt, ap);
    va_end(ap);
    Print(L"ptvisor: %s\r\n", w);
    UINTN n = 0;
    for (const char *p = "ptvisor: "; *p; p++)
        a[n++] = *p;
    for (UINTN i = 0; w[i] && n < sizeof(a) - 1; i++)
        a[n++] = w[i] < 0x80 ? (char)w[i] : '?';
    a[n++] = '\n';
    to_uart(a, n);
}

void say(const char *msg)
{
    sayf(L"%a", msg);
}
