/* SPDX-License-Identifier: MIT */
/* The general-purpose registers by their number in instruction encodings (ModRM.reg/rm with
 * REX.R/B, SDM Vol. 2A 2.1.5): the index of every saved-register array of the VMM. */
#ifndef PTV_HW_GPR_H
#define PTV_HW_GPR_H

/* guest GPRs in the instruction-encoding order (0 = RAX ... 15 = R15); the
 * RSP slot is unused: the guest RSP lives in the VMCS (GUEST_RSP) */
enum {
    GPR_RAX,
    GPR_RCX,
    GPR_RDX,
    GPR_RBX,
    GPR_RSP,
    GPR_RBP,
    GPR_RSI,
    GPR_RDI,
    GPR_R8,
    GPR_R9,
    GPR_R10,
    GPR_R11,
    GPR_R12,
    GPR_R13,
    GPR_R14,
    GPR_R15,
    NR_GPRS
};

#endif
