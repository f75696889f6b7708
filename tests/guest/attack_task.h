/* SPDX-License-Identifier: MIT */
/* The block attack_task.c builds below 4 GiB and attack_task.S runs in (offsets from its base). */
#ifndef PTV_GUEST_ATTACK_TASK_H
#define PTV_GUEST_ATTACK_TASK_H

#define TS_SEL_CODE32 0x08
#define TS_SEL_DATA   0x10
#define TS_SEL_CODE64 0x18
#define TS_SEL_A      0x20 /* the task that starts (LTR), resumed by B's JMP and C's IRET */
#define TS_SEL_B      0x28 /* JMP target */
#define TS_SEL_C      0x30 /* CALL target */
#define TS_SEL_D      0x38 /* the #GP handler task (IDT task gate) */

#define TB_GDT         0x000 /* 8 descriptors */
#define TB_GDTR        0x040
#define TB_SAVE_GDTR   0x050
#define TB_SAVE_IDTR   0x060
#define TB_SAVE_RSP    0x070
#define TB_SAVE_CR0    0x078
#define TB_SAVE_CS     0x080
#define TB_SAVE_SS     0x082
#define TB_SAVE_DS     0x084
#define TB_SAVE_ES     0x086
#define TB_SAVE_FS     0x088
#define TB_SAVE_GS     0x08a
#define TB_SAVE_TR     0x08c
#define TB_PM32        0x090 /* u32: the copy's atk_task_pm32 */
#define TB_FAR_B       0x098 /* m16:32 far pointers */
#define TB_FAR_C       0x0a0
#define TB_FAR_A       0x0a8
#define TB_FAR_LM64    0x0b0
#define TB_IDTR        0x0b8 /* 32-bit IDT: vectors 0-13 */
#define TB_TSS_A       0x100
#define TB_TSS_B       0x180
#define TB_TSS_C       0x200
#define TB_R_A_EAX     0x280 /* results */
#define TB_R_A_TR      0x284
#define TB_R_A_EFLAGS  0x288
#define TB_R_A_TR2     0x28c
#define TB_R_A_CR0     0x290
#define TB_R_B_EAX     0x294
#define TB_R_B_TR      0x298
#define TB_R_B_EFLAGS  0x29c
#define TB_R_B_CR0     0x2a0
#define TB_R_B_TYPE_A  0x2a4
#define TB_R_B_TYPE_B  0x2a5
#define TB_R_B_ESP     0x2a8
#define TB_R_B_SS      0x2ac
#define TB_R_C_EFLAGS  0x2b0
#define TB_R_C_LINK    0x2b4
#define TB_R_C_TYPE_A  0x2b6
#define TB_R_C_ECX     0x2b8
#define TB_R_D_ERR     0x2bc
#define TB_R_D_ESP     0x2c0
#define TB_R_D_SAVED   0x2c4 /* TSS A's EIP as the switch saved it */
#define TB_R_D_TR      0x2c8
#define TB_R_D_EFLAGS  0x2cc
#define TB_R_D_LINK    0x2d0
#define TB_AFTER_FAULT 0x2d4 /* u32: where task D resumes A */
#define TB_IDT         0x300
#define TB_TSS_D       0x380
#define TB_CODE        0x400 /* the code, copied */
#define TB_CODE_MAX    0xc00
#define TB_STACK_D     0x1400 /* stack tops */
#define TB_STACK_A     0x1800 /* stack tops */
#define TB_STACK_B     0x1c00
#define TB_STACK_C     0x2000
#define TB_SIZE        0x2000

#endif
