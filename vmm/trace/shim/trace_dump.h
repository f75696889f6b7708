/* SPDX-License-Identifier: MIT */
/* Serial trace dumps from the VMM: the shim over vmm/trace/dump.c. */
#ifndef PTV_TRACE_DUMP_SHIM_H
#define PTV_TRACE_DUMP_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/frame.h"

struct vcpu;

/*
 * Start a paced dump of v's trace window (TRACE_DUMP, the end of the trace_boot window):
 * its lines go out in slices before v's VM entries, each slice holding the guest at most
 * dump_stall (at least one line).  0, or PTV_VMCALL_EBUSY (a dump is going out),
 * PTV_VMCALL_EINVAL (nothing to dump: this vCPU never traced).  *id: the dump's number.
 */
int trace_dump_start(struct vcpu *v, enum frame_reason why);
int trace_dump_request(struct vcpu *v, uint32_t *id);

/* after a guest read of the UART: the host asked for a dump over the serial line
 * (UART_DUMP_REQUEST, dev/uart_mux.h) since the last look: every CPU's window, paced on v */
void trace_dump_serial(struct vcpu *v);

/* dumps started since boot (any trigger, any CPU) */
uint32_t trace_dump_count(void);

/* true while a dump started by this vCPU is still going out */
bool trace_dump_busy(const struct vcpu *v);

/* before each VM entry while v->dumping: the next slice (vcpu_loop.c) */
void trace_dump_slice(struct vcpu *v);
/* the VMX-preemption timer expired: stop it unless a dump still goes out */
void trace_dump_timer_exit(struct vcpu *v);

/*
 * A guest crash (vcpu_stop_guest): the crash report `text` and every CPU's trace window, out
 * at once (the guest is dead: no stall budget).  A paced dump in flight is abandoned (its
 * sections then have no END: extract reports them cut).
 */
void trace_dump_crash(struct vcpu *v, const char *text, size_t len);

#endif
