/* SPDX-License-Identifier: MIT */
#include "base/panic.h"
#include "hw/cpu.h"
#include "base/log.h"
#include "dev/serial.h"
#include "lib/fmt.h"

void (*panic_dump_hook)(void);

void panic(const char *fmt, ...)
{
    static volatile int in_panic;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    ptv_vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cli();
    pr_err("panic", "%s", msg);
    if (!in_panic++ && panic_dump_hook)
        panic_dump_hook();
    pr_err("panic", "VMM halted");
    halt_forever();
}
