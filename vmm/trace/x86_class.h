/* SPDX-License-Identifier: MIT */
/*
 * x86 instruction length and control-flow class, for the software PT tracer.
 * Pure code: compiled unchanged into vmm.elf and into the host tests,
 * which check it against an independent decoder (Zydis, test oracle only) over
 * every instruction of real binaries.  No library in the VMM: see
 * docs/ARCHITECTURE.md section 5.
 *
 * It answers only what a PT packet generator needs: how long the instruction is,
 * how it can change RIP, and (for direct branches) where to.  It does not decide
 * whether an instruction is legal in the current CPL or on this CPU: the CPU does
 * that, the tracer only classifies what the CPU already ran.
 */
#ifndef PTV_X86_CLASS_H
#define PTV_X86_CLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* code size of the segment the bytes execute in (CS.L / CS.D), not CPU mode */
enum x86_code_size { X86_CODE16 = 0, X86_CODE32 = 1, X86_CODE64 = 2 };

/*
 * How an instruction can move RIP, in the terms of Intel PT (SDM Vol. 3C 33.4.2
 * "Packets" / Table 33-1 branch classes):
 *   no packet:  X86_BR_NONE, X86_BR_JMP_DIRECT, X86_BR_CALL_DIRECT
 *   TNT bit:    X86_BR_JCC (Jcc, LOOP/LOOPcc, JCXZ/JECXZ/JRCXZ)
 *   TIP:        X86_BR_JMP_INDIRECT, X86_BR_CALL_INDIRECT, X86_BR_RET (near)
 *   far (TIP, + MODE.Exec / PIP as the transfer changes them):
 *               X86_BR_FAR_JMP, X86_BR_FAR_CALL, X86_BR_FAR_RET, X86_BR_IRET,
 *               X86_BR_INT (INT n, INT3, INTO, INT1), X86_BR_SYSCALL, X86_BR_SYSRET,
 *               X86_BR_SYSENTER, X86_BR_SYSEXIT
 *   others:     X86_BR_VMX (VMCALL, VMLAUNCH, VMRESUME, VMFUNC: leave or may leave
 *               to the VMM), X86_BR_UD (UD0/UD1/UD2: always #UD)
 */
enum x86_branch {
    X86_BR_NONE = 0,
    X86_BR_JCC,
    X86_BR_JMP_DIRECT,
    X86_BR_CALL_DIRECT,
    X86_BR_JMP_INDIRECT,
    X86_BR_CALL_INDIRECT,
    X86_BR_RET,
    X86_BR_FAR_JMP,
    X86_BR_FAR_CALL,
    X86_BR_FAR_RET,
    X86_BR_IRET,
    X86_BR_INT,
    X86_BR_SYSCALL,
    X86_BR_SYSRET,
    X86_BR_SYSENTER,
    X86_BR_SYSEXIT,
    X86_BR_VMX,
    X86_BR_UD,
    X86_BR_COUNT
};

/* special effects a tracer must see besides the branch class */
#define X86_F_MOV_CR3  (1u << 0) /* MOV CR3, r (0F 22 /r with ModRM.reg = 3): PIP */
#define X86_F_MOV_CR   (1u << 1) /* any MOV to a control register (CR0/CR4 can change mode) */
#define X86_F_REP      (1u << 2) /* string instruction with a REP prefix: may stay on ip */
#define X86_F_OPSIZE16 (1u << 3) /* effective operand size 16 (direct targets wrap at 64 KiB) */
#define X86_F_OPSIZE32 (1u << 4) /* effective operand size 32 (targets wrap at 4 GiB) */
#define X86_F_HLT      (1u << 5) /* HLT, MWAIT: may wait for an event */
#define X86_F_INVLPG   (1u << 6) /* INVLPG, INVPCID, INVLPGA, INVLPGB: drops TLB entries */
#define X86_F_NOBLOCK                                                                              \
    (1u << 7)                    /* POPF, MOV SS / POP SS, MOV DR: changes TF, an event's          \
                                  * timing or a debug register (ends a block: swtrace.h) */
#define X86_F_JCC_CC  (1u << 12) /* a Jcc on RFLAGS (70-7F, 0F 80-8F), its condition below */
#define X86_F_PUSHF   (1u << 13) /* PUSHF: RFLAGS (its TF with it) stored at the new stack top */
#define X86_F_POPF    (1u << 14) /* POPF: RFLAGS (its TF with it) loaded from the stack */
#define X86_JCC_CC(f) (((f) >> 8) & 0xfu) /* the opcode's low nibble: 0 O, 1 NO, 2 B ... F G */
/* OPSIZE16 / OPSIZE32 are set on instructions with a branch class other than NONE, UD
 * and VMX; neither on near branches in 64-bit mode (64-bit, 66 ignored as on Intel).
 * XBEGIN / XEND are NONE (a TSX abort is asynchronous in PT terms); REP is set only on
 * the string instructions (6C-6F, A4-A7, AA-AF) with an F2 / F3 prefix; MWAITX (AMD)
 * also sets HLT.  INVLPG is the memory form of 0F 01 /7; INVLPGA (0F 01 DF) and INVLPGB
 * (0F 01 FE) are AMD's; INVPCID is 66 0F 38 82 (memory form): the tracer's translation
 * cache (vmm/trace/bcache.h) forgets its translations after any of them. */

#define X86_MAX_INSN 15

struct x86_insn {
    uint8_t len;    /* 1..15 */
    uint8_t branch; /* enum x86_branch */
    uint16_t flags; /* X86_F_* */
    int32_t rel;    /* direct branches (JCC, JMP/CALL_DIRECT): displacement from ip + len */
};

/*
 * Decode the instruction at `code` (at most `avail` bytes are readable) executed
 * with code size `cs`.  Returns 0 and fills *out, or:
 *   X86_E_SHORT  the instruction continues past `avail` (read more and retry)
 *   X86_E_INVALID the bytes are not an instruction (#UD on every CPU; includes
 *                lengths over 15 bytes)
 */
#define X86_E_SHORT   (-1)
#define X86_E_INVALID (-2)
int x86_classify(const uint8_t *code, size_t avail, enum x86_code_size cs, struct x86_insn *out);

/* target of a direct branch at `ip` (JCC / JMP_DIRECT / CALL_DIRECT), truncated to the
 * operand size as the CPU does (SDM Vol. 2 JMP/CALL/Jcc operation: 16-bit EIP wraps) */
uint64_t x86_direct_target(uint64_t ip, const struct x86_insn *in, enum x86_code_size cs);

/* ip after it wrapped at the code size (64-bit: none; 32-bit: 4 GiB; 16-bit: 64 KiB) */
static inline uint64_t x86_ip_wrap(uint64_t ip, enum x86_code_size cs)
{
    return cs == X86_CODE64 ? ip : cs == X86_CODE32 ? (ip & 0xffffffffu) : (ip & 0xffffu);
}

/* may the classified instruction `in` at ip send control to `to` in one step: its fall-through,
 * its direct target; *any: indirect, near RET and far transfers go anywhere (true) */
bool x86_flows_to(uint64_t ip, const struct x86_insn *in, enum x86_code_size cs, uint64_t to,
                  bool *any);

/* does the Jcc `in` (X86_F_JCC_CC set) jump with these RFLAGS (SDM Vol. 2A Jcc, Table B-1) */
bool x86_jcc_taken(const struct x86_insn *in, uint64_t rflags);

/*
 * Where a near indirect JMP / CALL in 64-bit code (FF /2, FF /4: X86_BR_JMP_INDIRECT /
 * X86_BR_CALL_INDIRECT) takes its target from (Vol. 2A 2.2.1, Table 2-2 / 2-3 with REX.B /
 * REX.X): X86_IND_REG, the 64-bit register `base`; X86_IND_MEM, the 8 bytes at the linear
 * address base + index * scale + disp (DS; base X86_IND_RIP: the next instruction's IP,
 * X86_IND_NONE: none).  Registers are numbered as encoded (0 RAX .. 4 RSP .. 15 R15).
 */
enum { X86_IND_REG = 1, X86_IND_MEM = 2 };
#define X86_IND_NONE 0xff
#define X86_IND_RIP  0xfe
struct x86_ind {
    uint8_t kind;
    uint8_t base, index; /* 0-15, X86_IND_RIP (base only), X86_IND_NONE */
    uint8_t scale;       /* 1, 2, 4, 8 */
    int32_t disp;
};

/* the operand of the indirect JMP / CALL in code[0..len) (x86_classify's length): 0, or -1
 * where it is not one in 64-bit code or its target is not taken as above (an FS / GS
 * segment or a 32-bit address size on a memory operand): then it is not predicted */
int x86_indirect_operand(const uint8_t *code, size_t len, enum x86_code_size cs,
                         struct x86_ind *out);

/* "jcc", "ret", ... for logs and test messages */
const char *x86_branch_name(unsigned branch);

#endif
