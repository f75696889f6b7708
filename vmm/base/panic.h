/* SPDX-License-Identifier: MIT */
#ifndef PTV_PANIC_H
#define PTV_PANIC_H

/* A VMM bug: print the message, the VMCS by field name and the ring of recent
 * exits, then halt.  Never called because of what the guest did. */
__attribute__((noreturn, format(printf, 1, 2))) void panic(const char *fmt, ...);

#define BUG_ON(cond)                                                                               \
    do {                                                                                           \
        if (cond)                                                                                  \
            panic("BUG_ON(%s) at %s:%d", #cond, __FILE__, __LINE__);                               \
    } while (0)

/* hook set by vmx/ once a VMCS is current, so panic() can dump it */
extern void (*panic_dump_hook)(void);

#endif
