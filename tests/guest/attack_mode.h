/* SPDX-License-Identifier: MIT */
/* The block attack_mode.c builds below 4 GiB and attack_mode.S runs in (offsets from its base):
 * IA-32e activation refused by the 64-bit mode consistency checks. */
#ifndef PTV_GUEST_ATTACK_MODE_H
#define PTV_GUEST_ATTACK_MODE_H

#define MS_SEL_CODE32  0x08 /* flat 32-bit code */
#define MS_SEL_DATA    0x10
#define MS_SEL_CODE64  0x18 /* back to long mode */
#define MS_SEL_CODE32L 0x20 /* L = 1, D = 1: 32-bit code outside IA-32e mode */
#define MS_SEL_CODE16L 0x28 /* L = 1, D = 0: 16-bit code outside IA-32e mode, base = the block */
#define MS_SEL_TSS16   0x30 /* a 16-bit TSS */
#define MS_SEL_TSS32   0x38 /* a 32-bit TSS: TR again before long mode */

#define MB_GDT       0x000 /* 8 descriptors */
#define MB_GDTR      0x040
#define MB_SAVE_GDTR 0x050
#define MB_SAVE_IDTR 0x060
#define MB_SAVE_RSP  0x070
#define MB_SAVE_CR0  0x078
#define MB_SAVE_CS   0x080
#define MB_SAVE_SS   0x082
#define MB_SAVE_DS   0x084
#define MB_SAVE_ES   0x086
#define MB_SAVE_FS   0x088
#define MB_SAVE_GS   0x08a
#define MB_SAVE_TR   0x08c
#define MB_PM32      0x090 /* u32: the copy's atk_mode_pm32 */
#define MB_FAR       0x098 /* m16:32 far pointer, set before each far JMP */
#define MB_FAR_LM64  0x0a0
#define MB_IDTR      0x0a8 /* 32-bit IDT: vectors 0-13, only #GP present */
#define MB_RESUME    0x0b0 /* u32: where the #GP handler resumes (CS = MS_SEL_CODE32) */
#define MB_ERR       0x0b4 /* u32: the last #GP's error code, ~0 before */
#define MB_EIP       0x0b8 /* u32: the last #GP's saved EIP */
#define MB_CS        0x0bc /* u32: the last #GP's saved CS */
/* per attempt i (0-5: TSS16 bare / exiting, CS L+D, CS L alone): #GP error code (~0: none),
 * saved EIP, CR0 and EFER after it */
#define MB_RES(i)  (0x100 + 16 * (i))
#define MB_RES_ERR 0
#define MB_RES_EIP 4
#define MB_RES_CR0 8
#define MB_RES_EFL 12 /* IA32_EFER low word */
#define MB_ATTEMPTS 6
#define MB_IDT      0x180 /* 14 gates of 8 bytes */
#define MB_TSS16    0x200 /* 0x2c bytes */
#define MB_TSS32    0x240 /* 0x68 bytes */
#define MB_CODE     0x400 /* the code, copied */
#define MB_CODE_MAX 0xa00
#define MB_STACK    0x1000 /* stack top */
#define MB_SIZE     0x1000

#endif
