/* SPDX-License-Identifier: MIT */
/* VMM log lines, written through the console that shares the UART with the guest. */
#include "base/log.h"
#include "dev/uart_console.h"
#include "hw/percpu.h"
#include "lib/fmt.h"

static unsigned log_level = PTV_LOG_INFO;
unsigned long log_lines;

void log_set_level(unsigned level)
{
    log_level = level;
}

void log_msg(unsigned level, const char *subsys, const char *fmt, ...)
{
    if (level > log_level)
        return;
    char line[256];
    static const char *const tag[] = {"error: ", "warning: ", "", ""};
    int n =
        ptv_snprintf(line, sizeof(line), "[cpu%u %s] %s", this_cpu_id(), subsys, tag[level & 3]);
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = ptv_vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + ((size_t)m < sizeof(line) - n - 1 ? (size_t)m : sizeof(line) - n - 2);
    line[len++] = '\n';
    log_lines++;
    /* an error goes out at once, even into an open guest console line (uart_mux.h) */
    console_write(line, len, level == PTV_LOG_ERROR);
}

void log_raw(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = ptv_vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    console_write(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1, false);
}
