/* SPDX-License-Identifier: MIT */
/*
 * Guest notes: what software in the guest sends over the console beside the VMM's trace
 * dumps, as frame lines of types b, d and e (docs/serial-protocol.md section 12), which
 * `ptvisor-trace extract` joins to the dumps they belong to.  Written by guest/ptvisor-ctl.c
 * (and by the host tests' generator, tests/tools/mkdump.c, with the same code):
 *
 *   kallsyms  the kernel's code symbols at their run addresses (KASLR included), from
 *             /proc/kallsyms: the host names kernel addresses without a vmlinux
 *   comm      the name and pid of the program a dump traced (`ptvisor-ctl trace -d`)
 *
 * The data lines come from the VMM's own encoder (vmm/trace/frame.c, LZ4 by lz4w.c), so a
 * note's bytes travel exactly as a dump's do: blocks with their CRC32, keyed by offset.
 */
#ifndef PTV_GUEST_NOTE_H
#define PTV_GUEST_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "trace/frame.h"

#define PTV_NOTE_COMM_MAX 15 /* the kernel's TASK_COMM_LEN - 1 */

/* the kallsyms note's data from /proc/kallsyms text: the code symbols (types t, T, w, W) with
 * addresses in [lo, hi] but the padding symbols before functions (__pfx_*, __cfi_*: never
 * run, and half of a newer kernel's lines), sorted by address, as "+DELTA TYPE NAME[\t[MODULE]]"
 * lines (each address the previous one plus DELTA, from 0).  *out is malloc'd; *nsym its lines; 0,
 * or -1 with a one-line reason in why (no code symbol, or only zero addresses: read without root)
 */
int ptv_note_kallsyms_data(const char *text, size_t n, uint64_t lo, uint64_t hi, char **out,
                           size_t *outlen, unsigned *nsym, const char **why);

/* a note with data (kind "kallsyms"): its BEGIN line, its DATA lines, its END, through o;
 * id tells it from other notes in the same log (any 32-bit value, e.g. TSC bits); 0 or -1 */
int ptv_note_data(uint32_t id, const char *kind, const uint8_t *p, size_t n,
                  const struct frame_out *o);

/* a comm note: one line naming the program (bytes outside 0x21..0x7e become '_', at most 15
 * kept) and pid of dump `dump` */
void ptv_note_comm(uint32_t id, uint32_t dump, uint64_t pid, const char *comm,
                   const struct frame_out *o);

#endif
