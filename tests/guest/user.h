/* SPDX-License-Identifier: MIT */
/* One VMCALL from CPL 3 (user.c). */
#ifndef PTV_GUEST_USER_H
#define PTV_GUEST_USER_H

/* user.S loads it into RBX before the VMCALL: a refused call leaves it there */
#define USER_RBX_MARK 0x5e5e5e5e

#ifndef __ASSEMBLER__
#include <stdint.h>

struct user_result {
    uint64_t rax, rbx; /* after the VMCALL; RBX was 0x5e5e5e5e before it */
    int vector;        /* the fault that ended the trip: 6 (#UD of the UD2) expected */
    uint64_t rip, cs;  /* where it happened */
    uint64_t ud2_rip;  /* where the UD2 is */
};

/*
 * Run VMCALL with RAX = fn at CPL 3.  Returns NULL after the trip, else why
 * ring 3 could not be reached (nothing was changed then).
 */
const char *user_vmcall(uint64_t fn, struct user_result *res);
#endif

#endif
