/* SPDX-License-Identifier: MIT */
/*
 * The x86 length / control-flow classifier (vmm/trace/x86_class.c):
 *   1. a table of hand-written byte strings, each with the SDM rule it checks;
 *   2. a differential against Zydis 4 (libzydis-dev, the oracle; test code only):
 *      a linear sweep of every executable section of real binaries (>= 10 MB of
 *      64-bit code, the first MiBs again as 32-bit and 16-bit code) and random byte
 *      strings in all three code sizes.  Where Zydis decodes, length, class, rel,
 *      direct target (ZydisCalcAbsoluteAddress), REP / HLT / MOV CR flags must match;
 *      where Zydis says invalid the classifier may still give a length (counted).
 *
 * The oracle part (everything above main()'s tests) is also compiled into
 * tests/fuzz/fuzz_x86_class.c, which includes this file with PTV_FUZZ defined.
 *
 * Zydis runs with its defaults: Intel branches (ZYDIS_DECODER_MODE_AMD_BRANCHES off:
 * 66 is ignored by near branches in 64-bit mode), UD0 with a ModR/M byte (Intel; the
 * UD0_COMPAT mode of later Zydis does not exist in 4.0), no KNC (MVEX).
 *
 * Documented exceptions (where the classifier follows the SDM / header and the
 * mapping of Zydis' answer below says why):
 *   - XBEGIN (C7 F8 rel) and XEND (0F 01 D5) are category COND_BR in Zydis; for Intel
 *     PT they are not branches (a TSX abort is an asynchronous event, reported with
 *     FUP + MODE.TSX, SDM Vol. 3C 33.4.2), so the classifier says NONE and so does
 *     the map below.
 *   - Knights Corner instructions (Zydis ISA extensions KNC / KNCE / KNCV): Zydis 4.0
 *     decodes some of them outside its KNC mode, e.g. JKZD / JKNZD k, rel32 as VEX
 *     0F 84 / 85.  They exist only on the Xeon Phi coprocessor (SDM Vol. 2 does not
 *     list them: #UD on every other CPU); skipped and counted as "zydis-knc".
 *   - Behind enough prefixes Zydis calls an undefined or KNC opcode "too long" (it
 *     sizes the operands before it checks the encoding) where the classifier gives
 *     the #UD opcode a length: counted as Zydis-invalid when the bytes after the
 *     prefixes are no instruction, or a KNC one, for Zydis.
 *   - VIA PadLock (F3 0F A6 / A7: MONTMUL, XSHA*, XCRYPT*, XSTORE) decode as ModR/M
 *     instructions (0F A6 / A7 are not in Intel's map); Zydis' category is PADLOCK,
 *     not a string instruction, so no X86_F_REP.
 *   - Zydis branch-like instructions outside the header's classes (UIRET, RSM, JMPE,
 *     VMRUN, VMMCALL, ...) are NONE; they are counted and printed, never silent.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <elf.h>
#include <Zydis/Zydis.h>
#ifndef PTV_FUZZ
#include <cmocka.h>
#endif
#include "trace/x86_class.h"

/* ------------------------------------------------------------------ the oracle */

static ZydisDecoder zdec[3];
static bool zdec_ready;

static void oracle_init(void)
{
    static const ZydisMachineMode mm[3] = {ZYDIS_MACHINE_MODE_LEGACY_16,
                                           ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
                                           ZYDIS_MACHINE_MODE_LONG_64};
    static const ZydisStackWidth sw[3] = {ZYDIS_STACK_WIDTH_16, ZYDIS_STACK_WIDTH_32,
                                          ZYDIS_STACK_WIDTH_64};
    if (zdec_ready)
        return;
    for (int i = 0; i < 3; i++)
        if (!ZYAN_SUCCESS(ZydisDecoderInit(&zdec[i], mm[i], sw[i])))
            abort();
    zdec_ready = true;
}

/* Zydis' answer in the header's terms (x86_class.h, SDM Vol. 3C 33.4.2) */
static unsigned oracle_class(const ZydisDecodedInstruction *z)
{
    bool far = z->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
    /* a relative immediate (ZYDIS_ATTRIB_IS_RELATIVE is also set by [rip+disp]) */
    bool rel = z->raw.imm[0].is_relative;
    switch (z->mnemonic) {
    case ZYDIS_MNEMONIC_JMP:
        return far ? X86_BR_FAR_JMP : rel ? X86_BR_JMP_DIRECT : X86_BR_JMP_INDIRECT;
    case ZYDIS_MNEMONIC_CALL:
        return far ? X86_BR_FAR_CALL : rel ? X86_BR_CALL_DIRECT : X86_BR_CALL_INDIRECT;
    case ZYDIS_MNEMONIC_RET:
        return far ? X86_BR_FAR_RET : X86_BR_RET;
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ:
        return X86_BR_IRET;
    case ZYDIS_MNEMONIC_INT:
    case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INT3:
    case ZYDIS_MNEMONIC_INTO:
        return X86_BR_INT;
    case ZYDIS_MNEMONIC_SYSCALL:
        return X86_BR_SYSCALL;
    case ZYDIS_MNEMONIC_SYSRET:
        return X86_BR_SYSRET;
    case ZYDIS_MNEMONIC_SYSENTER:
        return X86_BR_SYSENTER;
    case ZYDIS_MNEMONIC_SYSEXIT:
        return X86_BR_SYSEXIT;
    case ZYDIS_MNEMONIC_VMCALL:
    case ZYDIS_MNEMONIC_VMLAUNCH:
    case ZYDIS_MNEMONIC_VMRESUME:
    case ZYDIS_MNEMONIC_VMFUNC:
        return X86_BR_VMX;
    case ZYDIS_MNEMONIC_UD0:
    case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2:
        return X86_BR_UD;
    case ZYDIS_MNEMONIC_XBEGIN: /* exceptions above: not PT branches */
    case ZYDIS_MNEMONIC_XEND:
        return X86_BR_NONE;
    default:
        /* Jcc, LOOP/LOOPE/LOOPNE, JCXZ/JECXZ/JRCXZ */
        if (z->meta.category == ZYDIS_CATEGORY_COND_BR)
            return X86_BR_JCC;
        return X86_BR_NONE;
    }
}

/* Zydis categories of control transfers: an instruction in one of them mapped to
 * NONE is one of the documented exceptions, counted by mnemonic */
static bool oracle_branchlike(const ZydisDecodedInstruction *z)
{
    switch (z->meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_CALL:
    case ZYDIS_CATEGORY_RET:
    case ZYDIS_CATEGORY_INTERRUPT:
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_SYSRET:
    case ZYDIS_CATEGORY_VTX:
        return true;
    default:
        return z->meta.branch_type != ZYDIS_BRANCH_TYPE_NONE;
    }
}

struct diff_stats {
    uint64_t bytes;            /* bytes covered by instructions Zydis decoded */
    uint64_t insns;            /* instructions Zydis decoded, all compared */
    uint64_t zy_invalid;       /* offsets where Zydis says invalid */
    uint64_t zy_invalid_len;   /* ... of which the classifier gave a length */
    uint64_t why_len[16];      /* ... by Zydis status code (undefined encodings: #UD) */
    uint64_t zy_short;         /* Zydis ran out of bytes (section ends) */
    uint64_t truncations;      /* shorter avails checked to give X86_E_SHORT */
    uint64_t knc;              /* Knights Corner only: skipped (exceptions above) */
    uint64_t br[X86_BR_COUNT]; /* per class, of the compared instructions */
    uint64_t disagree;
    uint64_t ind_reg, ind_mem, ind_refused; /* indirect JMP / CALL operands compared */
    bool last_ok; /* the last diff_one() compared an instruction and agreed */
    struct {
        ZydisMnemonic mn;
        uint64_t n;
    } other[32]; /* branch-like in Zydis, NONE in the header's terms */
};

static unsigned g_printed;

static void print_hex(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static void report(const char *what, int cs, const uint8_t *b, size_t avail, uint64_t ip, int r,
                   const struct x86_insn *in, ZyanStatus zs, const ZydisDecodedInstruction *z,
                   unsigned zcls)
{
    if (g_printed++ >= 20)
        return;
    printf("DISAGREE (%s) code%d ip=%#llx bytes ", what, 16 << cs, (unsigned long long)ip);
    print_hex(b, avail < 15 ? avail : 15);
    printf("\n  ours : ret %d len %u %s rel %d flags %#x\n", r, r ? 0 : in->len,
           r ? "-" : x86_branch_name(in->branch), r ? 0 : in->rel, r ? 0 : in->flags);
    printf("  zydis: status %#x len %u %s (%s) rel %lld\n", (unsigned)zs,
           ZYAN_SUCCESS(zs) ? z->length : 0,
           ZYAN_SUCCESS(zs) ? ZydisMnemonicGetString(z->mnemonic) : "-", x86_branch_name(zcls),
           ZYAN_SUCCESS(zs) ? (long long)z->raw.imm[0].value.s : 0);
}

static bool is_knc(const ZydisDecodedInstruction *z)
{
    return z->meta.isa_ext == ZYDIS_ISA_EXT_KNC || z->meta.isa_ext == ZYDIS_ISA_EXT_KNCE ||
           z->meta.isa_ext == ZYDIS_ISA_EXT_KNCV;
}

/* b (too long for Zydis) is #UD whatever its length: what follows its legacy prefixes /
 * REX is no instruction, or a KNC one, for Zydis (Zydis counts the length of an opcode
 * before it checks the encoding) */
static bool ud_behind_prefixes(int cs, const uint8_t *b, size_t avail)
{
    static const uint8_t pfx[] = {0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3};
    size_t p = 0;
    while (p < avail &&
           (memchr(pfx, b[p], sizeof(pfx)) || (cs == X86_CODE64 && (b[p] & 0xf0) == 0x40)))
        p++;
    /* what follows them, zero-padded: only whether it is an instruction counts */
    uint8_t rest[X86_MAX_INSN] = {0};
    memcpy(rest, b + p, avail - p < sizeof(rest) ? avail - p : sizeof(rest));
    ZydisDecodedInstruction z;
    return p &&
           (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zdec[cs], NULL, rest, sizeof(rest), &z)) ||
            is_knc(&z));
}

/* a register as x86_indirect_operand numbers it (Zydis' id of its 64-bit form), or
 * X86_IND_NONE */
static uint8_t ind_reg(ZydisRegister r)
{
    if (r == ZYDIS_REGISTER_NONE)
        return X86_IND_NONE;
    if (r == ZYDIS_REGISTER_RIP)
        return X86_IND_RIP;
    if (ZydisRegisterGetClass(r) != ZYDIS_REGCLASS_GPR64)
        return 0xee; /* no such operand here: never equal */
    return (uint8_t)ZydisRegisterGetId(r);
}

/* x86_indirect_operand against Zydis' operand of an indirect JMP / CALL: in 64-bit code the
 * same register or memory operand, or a refusal only where the target is not taken from
 * a DS-based 64-bit address (FS / GS, address size 32); outside it always a refusal */
static bool ind_agrees(int cs, const uint8_t *b, const struct x86_insn *in, struct diff_stats *st)
{
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    ZydisDecodedInstruction zf;
    struct x86_ind op;
    int r = x86_indirect_operand(b, in->len, (enum x86_code_size)cs, &op);
    if (cs != X86_CODE64)
        return r != 0;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec[cs], b, in->len, &zf, ops)))
        return false;
    const ZydisDecodedOperand *o = &ops[0];
    if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) { /* FS / GS / 67 change nothing there */
        st->ind_reg++;
        return r == 0 && op.kind == X86_IND_REG && op.base == ind_reg(o->reg.value);
    }
    if (o->type != ZYDIS_OPERAND_TYPE_MEMORY)
        return false;
    if (o->mem.segment == ZYDIS_REGISTER_FS || o->mem.segment == ZYDIS_REGISTER_GS ||
        zf.address_width != 64) { /* FS / GS base or a 32-bit address */
        st->ind_refused++;
        return r != 0;
    }
    st->ind_mem++;
    return r == 0 && op.kind == X86_IND_MEM && op.base == ind_reg(o->mem.base) &&
           op.index == ind_reg(o->mem.index) &&
           (op.index == X86_IND_NONE || op.scale == o->mem.scale) &&
           op.disp == (o->mem.disp.has_displacement ? o->mem.disp.value : 0);
}

/* Classify b[0..avail) both ways at `ip`; returns Zydis' length (0: invalid / short) */
static unsigned diff_one(int cs, const uint8_t *b, size_t avail, uint64_t ip, struct diff_stats *st)
{
    ZydisDecodedInstruction z;
    ZyanStatus zs = ZydisDecoderDecodeInstruction(&zdec[cs], NULL, b, avail, &z);
    struct x86_insn in = {0};
    int r = x86_classify(b, avail, (enum x86_code_size)cs, &in);

    st->last_ok = false;
    if (r == 0 && (in.len == 0 || in.len > avail || in.len > X86_MAX_INSN)) {
        st->disagree++;
        report("length out of bounds", cs, b, avail, ip, r, &in, zs, &z, 0);
        return 0;
    }
    if (!ZYAN_SUCCESS(zs)) {
        if (zs == ZYDIS_STATUS_NO_MORE_DATA) {
            st->zy_short++;
        } else if (zs == ZYDIS_STATUS_INSTRUCTION_TOO_LONG && r != X86_E_INVALID &&
                   ud_behind_prefixes(cs, b, avail)) {
            st->zy_invalid++; /* #UD: a length the classifier gave, as below */
            st->zy_invalid_len++;
        } else if (zs == ZYDIS_STATUS_INSTRUCTION_TOO_LONG && r != X86_E_INVALID) {
            /* over 15 bytes is invalid for both (Vol. 2A 2.1) */
            st->disagree++;
            report("too long", cs, b, avail, ip, r, &in, zs, &z, 0);
        } else {
            st->zy_invalid++;
            st->zy_invalid_len += r == 0;
            st->why_len[ZYAN_STATUS_CODE(zs) & 15] += r == 0;
        }
        return 0;
    }

    if (is_knc(&z)) {
        st->knc++;
        return z.length;
    }
    unsigned cls = oracle_class(&z);
    bool bad = r != 0 || in.len != z.length || in.branch != cls;
    const char *what = "length/class";
    bool rel = z.raw.imm[0].is_relative;
    bool direct = cls == X86_BR_JCC || cls == X86_BR_JMP_DIRECT || cls == X86_BR_CALL_DIRECT;
    if (!bad && direct) {
        /* rel and the wrapped target (Vol. 2A JMP / Jcc / CALL: EIP & 0000FFFFH with
         * operand size 16) against ZydisCalcAbsoluteAddress.  Exception: outside
         * 64-bit mode Zydis computes in 64 bits and does not wrap at 4 GiB as the SDM
         * does (JMP "Operation": EIP <- tempEIP AND FFFFFFFFH), so the oracle's target
         * is taken modulo 2^32 there */
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        ZydisDecodedInstruction zf;
        ZyanU64 target = 0;
        if (!rel || in.rel != (int32_t)z.raw.imm[0].value.s ||
            !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec[cs], b, avail, &zf, ops)) ||
            !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zf, &ops[0], ip, &target)) ||
            (cs == X86_CODE64 ? target : target & 0xffffffffu) !=
                x86_direct_target(ip, &in, (enum x86_code_size)cs)) {
            bad = true;
            what = "rel/target";
        }
    }
    if (!bad) {
        /* flags: REP on string instructions, HLT / MWAIT, MOV to CRn */
        bool str = z.meta.category == ZYDIS_CATEGORY_STRINGOP ||
                   z.meta.category == ZYDIS_CATEGORY_IOSTRINGOP;
        bool rep = str && (z.attributes &
                           (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE));
        bool hlt = z.mnemonic == ZYDIS_MNEMONIC_HLT || z.mnemonic == ZYDIS_MNEMONIC_MWAIT ||
                   z.mnemonic == ZYDIS_MNEMONIC_MWAITX;
        bool movcr = z.mnemonic == ZYDIS_MNEMONIC_MOV && z.opcode_map == ZYDIS_OPCODE_MAP_0F &&
                     z.opcode == 0x22;
        bool cr3 = false;
        if (movcr) {
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            ZydisDecodedInstruction zf;
            cr3 = ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec[cs], b, avail, &zf, ops)) &&
                  ops[0].reg.value == ZYDIS_REGISTER_CR3;
        }
        /* ends a block (swtrace.h): POPF, MOV SS / POP SS, MOV to or from a debug register */
        bool noblock = z.mnemonic == ZYDIS_MNEMONIC_POPF || z.mnemonic == ZYDIS_MNEMONIC_POPFD ||
                       z.mnemonic == ZYDIS_MNEMONIC_POPFQ || z.mnemonic == ZYDIS_MNEMONIC_XBEGIN ||
                       z.mnemonic == ZYDIS_MNEMONIC_XABORT;
        if ((z.mnemonic == ZYDIS_MNEMONIC_MOV || z.mnemonic == ZYDIS_MNEMONIC_POP) && !noblock) {
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            ZydisDecodedInstruction zf;
            if (ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec[cs], b, avail, &zf, ops)))
                for (unsigned k = 0; k < 2 && k < zf.operand_count; k++)
                    if (ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                        ((k == 0 && ops[k].reg.value == ZYDIS_REGISTER_SS) ||
                         (ops[k].reg.value >= ZYDIS_REGISTER_DR0 &&
                          ops[k].reg.value <= ZYDIS_REGISTER_DR15)))
                        noblock = true;
        }
        bool pushf = z.mnemonic == ZYDIS_MNEMONIC_PUSHF || z.mnemonic == ZYDIS_MNEMONIC_PUSHFD ||
                     z.mnemonic == ZYDIS_MNEMONIC_PUSHFQ;
        bool popf = z.mnemonic == ZYDIS_MNEMONIC_POPF || z.mnemonic == ZYDIS_MNEMONIC_POPFD ||
                    z.mnemonic == ZYDIS_MNEMONIC_POPFQ;
        /* the condition of a Jcc on RFLAGS: its place in this list */
        static const ZydisMnemonic jcc[16] = {
            ZYDIS_MNEMONIC_JO, ZYDIS_MNEMONIC_JNO, ZYDIS_MNEMONIC_JB,  ZYDIS_MNEMONIC_JNB,
            ZYDIS_MNEMONIC_JZ, ZYDIS_MNEMONIC_JNZ, ZYDIS_MNEMONIC_JBE, ZYDIS_MNEMONIC_JNBE,
            ZYDIS_MNEMONIC_JS, ZYDIS_MNEMONIC_JNS, ZYDIS_MNEMONIC_JP,  ZYDIS_MNEMONIC_JNP,
            ZYDIS_MNEMONIC_JL, ZYDIS_MNEMONIC_JNL, ZYDIS_MNEMONIC_JLE, ZYDIS_MNEMONIC_JNLE};
        int cc = -1;
        for (int k = 0; k < 16; k++)
            if (z.mnemonic == jcc[k])
                cc = k;
        bool cc_ok = cc < 0 ? !(in.flags & X86_F_JCC_CC)
                            : (in.flags & X86_F_JCC_CC) && X86_JCC_CC(in.flags) == (unsigned)cc;
        if (rep != !!(in.flags & X86_F_REP) || hlt != !!(in.flags & X86_F_HLT) ||
            movcr != !!(in.flags & X86_F_MOV_CR) || cr3 != !!(in.flags & X86_F_MOV_CR3) ||
            noblock != !!(in.flags & X86_F_NOBLOCK) || pushf != !!(in.flags & X86_F_PUSHF) ||
            popf != !!(in.flags & X86_F_POPF) || !cc_ok) {
            bad = true;
            what = "flags";
        }
    }
    if (!bad && (cls == X86_BR_JMP_INDIRECT || cls == X86_BR_CALL_INDIRECT) &&
        !ind_agrees(cs, b, &in, st)) {
        bad = true;
        what = "indirect operand";
    }
    if (bad) {
        st->disagree++;
        report(what, cs, b, avail, ip, r, &in, zs, &z, cls);
        return z.length;
    }
    st->last_ok = true;
    st->insns++;
    st->bytes += z.length;
    st->br[cls]++;
    if (cls == X86_BR_NONE && oracle_branchlike(&z)) {
        unsigned i;
        for (i = 0; i < 32 && st->other[i].n && st->other[i].mn != z.mnemonic; i++)
            ;
        if (i < 32) {
            st->other[i].mn = z.mnemonic;
            st->other[i].n++;
        }
    }
    return z.length;
}

/* instruction at the end of a 15-byte heap block: for each k <= len the classifier
 * sees exactly k bytes and ASan traps a read of byte k; k < len must be SHORT */
static void check_truncations(int cs, const uint8_t *b, unsigned len, uint8_t *blk,
                              struct diff_stats *st)
{
    for (unsigned k = 0; k <= len; k++) {
        uint8_t *at = blk + X86_MAX_INSN - k;
        memcpy(at, b, k);
        struct x86_insn t;
        int r = x86_classify(at, k, (enum x86_code_size)cs, &t);
        bool ok = k < len ? r == X86_E_SHORT : (r == 0 && t.len == len);
        if (!ok) {
            st->disagree++;
            if (g_printed++ < 20) {
                printf("DISAGREE (truncation) code%d avail %u of %u: ret %d bytes ", 16 << cs, k,
                       len, r);
                print_hex(b, len);
                printf("\n");
            }
        }
        st->truncations++;
    }
}

static void stats_print(const char *name, const struct diff_stats *st, double secs)
{
    printf("%-22s %10llu bytes %9llu insns  zydis-invalid %llu (classifier gave a length "
           "to %llu)  zydis-short %llu  zydis-knc %llu  truncations %llu  disagreements %llu  %.2f "
           "s\n",
           name, (unsigned long long)st->bytes, (unsigned long long)st->insns,
           (unsigned long long)st->zy_invalid, (unsigned long long)st->zy_invalid_len,
           (unsigned long long)st->zy_short, (unsigned long long)st->knc,
           (unsigned long long)st->truncations, (unsigned long long)st->disagree, secs);
    if (st->zy_invalid_len) {
        /* codes of Zydis/Status.h: 1 decoding error (undefined opcode / ModR/M.reg),
         * 3 bad register, 4 illegal LOCK, 5 illegal legacy prefix, 7 invalid map,
         * 8 malformed EVEX, 10 invalid mask: encodings the CPU would #UD, which the
         * tracer never sees retire (x86_class.h) */
        printf("   zydis-invalid given a length, by zydis status:");
        for (unsigned c = 0; c < 16; c++)
            if (st->why_len[c])
                printf(" %u:%llu", c, (unsigned long long)st->why_len[c]);
        printf("\n");
    }
    printf("   classes:");
    for (unsigned c = 0; c < X86_BR_COUNT; c++)
        if (st->br[c])
            printf(" %s %llu", x86_branch_name(c), (unsigned long long)st->br[c]);
    printf("\n   indirect JMP / CALL operands (x86_indirect_operand vs Zydis): register %llu, "
           "memory %llu, refused (FS / GS, 32-bit address) %llu\n",
           (unsigned long long)st->ind_reg, (unsigned long long)st->ind_mem,
           (unsigned long long)st->ind_refused);
    if (st->other[0].n) {
        printf("   zydis control transfers classed none (documented):");
        for (unsigned i = 0; i < 32 && st->other[i].n; i++)
            printf(" %s %llu", ZydisMnemonicGetString(st->other[i].mn),
                   (unsigned long long)st->other[i].n);
        printf("\n");
    }
}

#ifndef PTV_FUZZ
/* ------------------------------------------------------- hand-written cases */

struct hcase {
    uint8_t cs;
    const char *bytes;
    uint8_t n;
    int ret;
    uint8_t len, br;
    int32_t rel;
    uint16_t flags;
    const char *why;
};

#define C16 X86_CODE16
#define C32 X86_CODE32
#define C64 X86_CODE64
/* a decodable case / an error case; n counts the bytes of the literal */
#define OK(cs, s, len, br, rel, fl, why)                                                           \
    {                                                                                              \
        cs, s, sizeof(s) - 1, 0, len, br, rel, fl, why                                             \
    }
#define ER(cs, s, ret, why)                                                                        \
    {                                                                                              \
        cs, s, sizeof(s) - 1, ret, 0, 0, 0, 0, why                                                 \
    }
#define NONE  X86_BR_NONE
#define CC(c) (X86_F_JCC_CC | (c) << 8) /* a Jcc on RFLAGS and its condition */
#define O16   X86_F_OPSIZE16
#define O32   X86_F_OPSIZE32
#define I4    "\x00\x00\x00\x00"
#define I8    I4 I4

static const struct hcase cases[] = {
    /* direct branches: Vol. 2A CALL / JMP / Jcc, "Operation"; 64-bit mode forces the
     * operand size of near branches to 64 and Intel ignores 66 there (rel32) */
    OK(C64, "\xe8\x10\x00\x00\x00", 5, X86_BR_CALL_DIRECT, 0x10, 0, "CALL rel32"),
    OK(C64, "\x66\xe8\x10\x00\x00\x00", 6, X86_BR_CALL_DIRECT, 0x10, 0,
       "66 E8 in 64-bit mode: Intel ignores 66, rel32 (Vol. 2A CALL)"),
    OK(C64, "\x66\xe9\xf0\xff\xff\xff", 6, X86_BR_JMP_DIRECT, -16, 0, "66 E9 in 64-bit: rel32"),
    OK(C64, "\x66\x0f\x84\x00\x01\x00\x00", 7, X86_BR_JCC, 0x100, CC(4),
       "66 0F 84 in 64-bit: rel32"),
    OK(C32, "\x66\xe8\x10\x00", 4, X86_BR_CALL_DIRECT, 0x10, O16, "66 E8 in 32-bit: rel16"),
    OK(C32, "\xe8\x00\x00\x00\x80", 5, X86_BR_CALL_DIRECT, INT32_MIN, O32, "CALL rel32"),
    OK(C16, "\xe8\xfd\xff", 3, X86_BR_CALL_DIRECT, -3, O16, "16-bit CALL rel16"),
    OK(C16, "\x66\xe8\x00\x00\x01\x00", 6, X86_BR_CALL_DIRECT, 0x10000, O32, "16-bit 66 E8 rel32"),
    OK(C64, "\xe9\x00\x00\x00\x80", 5, X86_BR_JMP_DIRECT, INT32_MIN, 0, "JMP rel32"),
    OK(C64, "\xeb\xfe", 2, X86_BR_JMP_DIRECT, -2, 0, "JMP rel8"),
    OK(C16, "\xeb\x7f", 2, X86_BR_JMP_DIRECT, 127, O16, "JMP rel8, 16-bit"),
    OK(C64, "\x74\x05", 2, X86_BR_JCC, 5, CC(4), "Jcc rel8 (Table A-2 70-7F)"),
    OK(C64, "\x0f\x84\x00\x01\x00\x00", 6, X86_BR_JCC, 0x100, CC(4),
       "Jcc rel32 (Table A-3 0F 80-8F)"),
    OK(C32, "\x66\x0f\x85\x34\x12", 5, X86_BR_JCC, 0x1234, O16 | CC(5), "66 Jcc rel16 in 32-bit"),
    OK(C16, "\x0f\x8f\xff\x7f", 4, X86_BR_JCC, 0x7fff, O16 | CC(15), "Jcc rel16 in 16-bit"),
    OK(C64, "\xe2\xfe", 2, X86_BR_JCC, -2, 0, "LOOP rel8: a TNT branch"),
    OK(C64, "\xe0\x00", 2, X86_BR_JCC, 0, 0, "LOOPNE rel8"),
    OK(C64, "\xe3\x10", 2, X86_BR_JCC, 0x10, 0, "JRCXZ rel8"),
    OK(C32, "\x67\xe3\x00", 3, X86_BR_JCC, 0, O32, "67 E3 = JCXZ (address size picks CX)"),
    OK(C64, "\x48\xe3\x00", 3, X86_BR_JCC, 0, 0, "REX.W E3 is JRCXZ still"),
    /* indirect and far: Table A-6 group 5 */
    OK(C64, "\xff\xd0", 2, X86_BR_CALL_INDIRECT, 0, 0, "FF /2 CALL rax"),
    OK(C64, "\xff\x15" I4, 6, X86_BR_CALL_INDIRECT, 0, 0, "FF /2 CALL [rip+disp32]"),
    OK(C64, "\x41\xff\xe3", 3, X86_BR_JMP_INDIRECT, 0, 0, "FF /4 JMP r11"),
    OK(C64, "\x3e\xff\xe0", 3, X86_BR_JMP_INDIRECT, 0, 0, "notrack JMP rax"),
    OK(C64, "\x64\xff\xd3", 3, X86_BR_CALL_INDIRECT, 0, 0,
       "FS CALL rbx: the segment plays no part"),
    OK(C64, "\x65\xf3\xff\xd7", 4, X86_BR_CALL_INDIRECT, 0, 0, "GS F3 CALL rdi"),
    OK(C64, "\x65\xff\x20", 3, X86_BR_JMP_INDIRECT, 0, 0, "JMP gs:[rax]: not predicted"),
    OK(C64, "\xff\x24\xc5" I4, 7, X86_BR_JMP_INDIRECT, 0, 0, "FF /4 [rax*8+disp32] (SIB base 101)"),
    OK(C32, "\x66\xff\xd0", 3, X86_BR_CALL_INDIRECT, 0, O16, "CALL ax in 32-bit"),
    OK(C64, "\xff\x18", 2, X86_BR_FAR_CALL, 0, O32, "FF /3 CALLF m16:32"),
    OK(C64, "\x48\xff\x28", 3, X86_BR_FAR_JMP, 0, 0, "REX.W FF /5 JMPF m16:64"),
    ER(C64, "\xff\xd8", X86_E_INVALID, "FF /3 with mod 11: #UD (Vol. 2A CALL far: m16:xx only)"),
    ER(C64, "\xff\xe8", X86_E_INVALID, "FF /5 with mod 11: #UD"),
    ER(C64, "\xff\xf8", X86_E_INVALID, "FF /7: reserved (Table A-6)"),
    OK(C32, "\x9a" I4 "\x08\x00", 7, X86_BR_FAR_CALL, 0, O32, "9A CALLF ptr16:32"),
    OK(C16, "\xea\x00\x00\x00\xf0", 5, X86_BR_FAR_JMP, 0, O16, "EA JMPF ptr16:16"),
    OK(C16, "\x66\xea" I4 "\x08\x00", 8, X86_BR_FAR_JMP, 0, O32, "66 EA JMPF ptr16:32 in 16-bit"),
    ER(C64, "\x9a" I4 "\x08\x00", X86_E_INVALID, "9A is i64 (Table A-2)"),
    ER(C64, "\xea" I4 "\x08\x00", X86_E_INVALID, "EA is i64"),
    /* returns, interrupts, system calls */
    OK(C64, "\xc3", 1, X86_BR_RET, 0, 0, "RET"),
    OK(C64, "\xc2\x08\x00", 3, X86_BR_RET, 0, 0, "RET imm16"),
    OK(C64, "\xf3\xc3", 2, X86_BR_RET, 0, 0, "REP RET (AMD idiom)"),
    OK(C64, "\xcb", 1, X86_BR_FAR_RET, 0, O32, "RETF"),
    OK(C16, "\xca\x04\x00", 3, X86_BR_FAR_RET, 0, O16, "RETF imm16"),
    OK(C64, "\x48\xcf", 2, X86_BR_IRET, 0, 0, "IRETQ"),
    OK(C32, "\xcf", 1, X86_BR_IRET, 0, O32, "IRETD"),
    OK(C64, "\xcc", 1, X86_BR_INT, 0, O32, "INT3"),
    OK(C64, "\xcd\x80", 2, X86_BR_INT, 0, O32, "INT imm8"),
    OK(C64, "\xf1", 1, X86_BR_INT, 0, O32, "INT1"),
    OK(C32, "\xce", 1, X86_BR_INT, 0, O32, "INTO"),
    ER(C64, "\xce", X86_E_INVALID, "INTO is i64"),
    OK(C64, "\x0f\x05", 2, X86_BR_SYSCALL, 0, O32, "SYSCALL"),
    OK(C64, "\x48\x0f\x07", 3, X86_BR_SYSRET, 0, 0, "SYSRET to 64-bit"),
    OK(C32, "\x0f\x34", 2, X86_BR_SYSENTER, 0, O32, "SYSENTER"),
    OK(C64, "\x0f\x35", 2, X86_BR_SYSEXIT, 0, O32, "SYSEXIT"),
    OK(C64, "\x0f\x01\xc1", 3, X86_BR_VMX, 0, 0, "VMCALL"),
    OK(C64, "\x0f\x01\xc2", 3, X86_BR_VMX, 0, 0, "VMLAUNCH"),
    OK(C64, "\x0f\x01\xc3", 3, X86_BR_VMX, 0, 0, "VMRESUME"),
    OK(C64, "\x0f\x01\xd4", 3, X86_BR_VMX, 0, 0, "VMFUNC"),
    OK(C64, "\x0f\x01\xc4", 3, NONE, 0, 0, "VMXOFF: no exit"),
    OK(C64, "\x0f\x01\x10", 3, NONE, 0, 0, "LGDT [rax]: group 7 memory form"),
    OK(C64, "\x0f\x0b", 2, X86_BR_UD, 0, 0, "UD2"),
    OK(C64, "\x0f\xb9\x04\x24", 4, X86_BR_UD, 0, 0, "UD1 r32, r/m32 with SIB"),
    OK(C64, "\x0f\xff\xc0", 3, X86_BR_UD, 0, 0, "UD0 r32, r/m32 (Intel: ModR/M)"),
    /* special effects */
    OK(C64, "\x0f\x22\xd8", 3, NONE, 0, X86_F_MOV_CR | X86_F_MOV_CR3, "MOV CR3, rax"),
    OK(C64, "\x0f\x22\x18", 3, NONE, 0, X86_F_MOV_CR | X86_F_MOV_CR3,
       "MOV CR3: mod ignored, register form (Vol. 2B MOV CRn)"),
    OK(C64, "\x0f\x22\xc0", 3, NONE, 0, X86_F_MOV_CR, "MOV CR0, rax"),
    OK(C64, "\x44\x0f\x22\xc0", 4, NONE, 0, X86_F_MOV_CR, "MOV CR8, rax (REX.R)"),
    OK(C64, "\x0f\x20\xd8", 3, NONE, 0, 0, "MOV rax, CR3: a read"),
    OK(C32, "\x0f\x23\x05", 3, NONE, 0, X86_F_NOBLOCK, "MOV DR0, ebp: mod ignored"),
    OK(C64, "\x0f\x21\xf8", 3, NONE, 0, X86_F_NOBLOCK, "MOV rax, DR7"),
    OK(C64, "\x9d", 1, NONE, 0, X86_F_NOBLOCK | X86_F_POPF, "POPF: may set TF"),
    OK(C64, "\x9c", 1, NONE, 0, X86_F_PUSHF, "PUSHF: stores TF"),
    OK(C16, "\x66\x9c", 2, NONE, 0, X86_F_PUSHF, "PUSHFD in 16-bit code"),
    OK(C64, "\x8e\xd0", 2, NONE, 0, X86_F_NOBLOCK, "MOV SS, ax: blocks events"),
    OK(C64, "\x8e\xd8", 2, NONE, 0, 0, "MOV DS, ax"),
    OK(C32, "\x17", 1, NONE, 0, X86_F_NOBLOCK, "POP SS"),
    OK(C64, "\xf3\xa4", 2, NONE, 0, X86_F_REP, "REP MOVSB"),
    OK(C64, "\xf3\x48\xab", 3, NONE, 0, X86_F_REP, "REP STOSQ"),
    OK(C64, "\xf2\xae", 2, NONE, 0, X86_F_REP, "REPNE SCASB"),
    OK(C32, "\xf3\x6c", 2, NONE, 0, X86_F_REP, "REP INSB"),
    OK(C64, "\xa4", 1, NONE, 0, 0, "MOVSB"),
    OK(C64, "\xf3\x90", 2, NONE, 0, 0, "PAUSE: not a string op"),
    OK(C64, "\xf4", 1, NONE, 0, X86_F_HLT, "HLT"),
    OK(C64, "\x0f\x01\xc9", 3, NONE, 0, X86_F_HLT, "MWAIT"),
    /* REX and immediates by operand size (Vol. 2A 2.2.1, 3.6; Table A-2 iz / iv) */
    OK(C64, "\x48\xb8" I8, 10, NONE, 0, 0, "MOV r64, imm64"),
    OK(C64, "\x49\xbf" I8, 10, NONE, 0, 0, "MOV r15, imm64"),
    OK(C64, "\xb8" I4, 5, NONE, 0, 0, "MOV r32, imm32"),
    OK(C64, "\x66\xb8\x34\x12", 4, NONE, 0, 0, "MOV r16, imm16"),
    OK(C64, "\x66\x48\xb8" I8, 11, NONE, 0, 0, "REX.W beats 66"),
    OK(C64, "\x48\x66\xb8\x34\x12", 5, NONE, 0, 0, "REX before 66 is ignored (2.2.1)"),
    OK(C64, "\x48\x26\xb8" I4, 7, NONE, 0, 0, "REX before a segment prefix is ignored"),
    OK(C64, "\x48\x41\xb8" I4, 7, NONE, 0, 0, "two REX: the last counts (no W)"),
    OK(C16, "\xb8\x34\x12", 3, NONE, 0, 0, "16-bit MOV r16, imm16"),
    OK(C16, "\x66\xb8" I4, 6, NONE, 0, 0, "16-bit 66 MOV r32, imm32"),
    OK(C32, "\x48", 1, NONE, 0, 0, "DEC eax: 40-4F are not REX outside 64-bit mode"),
    OK(C64, "\xf6\xc0\x01", 3, NONE, 0, 0, "F6 /0 TEST r/m8, imm8"),
    OK(C64, "\xf6\xc8\x01", 3, NONE, 0, 0, "F6 /1 TEST alias, imm8"),
    OK(C64, "\xf6\xd0", 2, NONE, 0, 0, "F6 /2 NOT: no immediate"),
    OK(C64, "\xf7\xc0" I4, 6, NONE, 0, 0, "F7 /0 TEST r/m32, imm32"),
    OK(C64, "\x48\xf7\xc0" I4, 7, NONE, 0, 0, "REX.W F7 /0: imm32 sign-extended"),
    OK(C64, "\x66\xf7\xc0\x01\x00", 5, NONE, 0, 0, "F7 /0 TEST r/m16, imm16"),
    OK(C64, "\xf7\xd8", 2, NONE, 0, 0, "F7 /3 NEG: no immediate"),
    OK(C64, "\xc8\x10\x00\x01", 4, NONE, 0, 0, "ENTER iw, ib"),
    OK(C64, "\x81\xc0" I4, 6, NONE, 0, 0, "81 /0 iz"),
    OK(C64, "\x66\x81\xc0\x34\x12", 5, NONE, 0, 0, "66 81 /0 iw"),
    OK(C64, "\x83\xc0\x01", 3, NONE, 0, 0, "83 /0 ib"),
    OK(C64, "\x69\xc0" I4, 6, NONE, 0, 0, "IMUL r, r/m, iz"),
    OK(C64, "\x6b\xc0\x01", 3, NONE, 0, 0, "IMUL r, r/m, ib"),
    OK(C64, "\x68" I4, 5, NONE, 0, 0, "PUSH imm32"),
    OK(C16, "\x68\x34\x12", 3, NONE, 0, 0, "PUSH imm16"),
    OK(C64, "\xc7\x00" I4, 6, NONE, 0, 0, "MOV r/m32, imm32"),
    OK(C16, "\xc7\x06\x00\x01\x34\x12", 6, NONE, 0, 0, "MOV [disp16], imm16"),
    OK(C64, "\xc7\xf8" I4, 6, NONE, 0, X86_F_NOBLOCK, "XBEGIN rel32: not a PT branch"),
    OK(C64, "\xc6\xf8\x01", 3, NONE, 0, X86_F_NOBLOCK, "XABORT imm8"),
    /* moffs: by address size (Table A-2 note O; 2.2.1.4) */
    OK(C64, "\xa1" I8, 9, NONE, 0, 0, "MOV eax, moffs64"),
    OK(C64, "\x67\xa1" I4, 6, NONE, 0, 0, "67 MOV eax, moffs32"),
    OK(C64, "\x48\xa3" I8, 10, NONE, 0, 0, "MOV moffs64, rax"),
    OK(C32, "\xa1" I4, 5, NONE, 0, 0, "MOV eax, moffs32"),
    OK(C32, "\x67\xa0\x00\x00", 4, NONE, 0, 0, "67 MOV al, moffs16"),
    OK(C16, "\x66\xa1\x00\x00", 4, NONE, 0, 0, "16-bit: 66 changes the operand, not moffs"),
    /* ModR/M, SIB, displacement (Tables 2-1, 2-2, 2-3) */
    OK(C32, "\x8b\x04\x24", 3, NONE, 0, 0, "mov eax, [esp]: SIB"),
    OK(C32, "\x8b\x44\x24\x08", 4, NONE, 0, 0, "SIB + disp8"),
    OK(C32, "\x8b\x84\x24" I4, 7, NONE, 0, 0, "SIB + disp32"),
    OK(C32, "\x8b\x05" I4, 6, NONE, 0, 0, "mod 00 rm 101: disp32"),
    OK(C32, "\x8b\x04\x25" I4, 7, NONE, 0, 0, "SIB base 101, mod 00: disp32"),
    OK(C32, "\x8b\x44\x25\x00", 4, NONE, 0, 0, "SIB base 101, mod 01: [ebp+disp8]"),
    OK(C32, "\x67\x8b\x06\x34\x12", 5, NONE, 0, 0, "67: 16-bit mod 00 rm 110 disp16"),
    OK(C32, "\x67\x8b\x04", 3, NONE, 0, 0, "67: 16-bit rm 100 is [si], no SIB"),
    OK(C16, "\x8b\x46\x02", 3, NONE, 0, 0, "[bp+disp8]"),
    OK(C16, "\x8b\x86\x00\x01", 4, NONE, 0, 0, "[bp+disp16]"),
    OK(C16, "\x8b\x00", 2, NONE, 0, 0, "[bx+si]"),
    OK(C16, "\x67\x8b\x04\x24", 4, NONE, 0, 0, "16-bit 67: 32-bit addressing with SIB"),
    OK(C64, "\x48\x8b\x05" I4, 7, NONE, 0, 0, "RIP-relative"),
    OK(C64, "\x67\x8b\x05" I4, 7, NONE, 0, 0, "67: EIP-relative"),
    OK(C64, "\x67\x8b\x04\x24", 4, NONE, 0, 0, "67 in 64-bit: 32-bit addressing, SIB"),
    OK(C64, "\x41\x8b\x04\x24", 4, NONE, 0, 0, "REX.B r12 base still needs SIB"),
    OK(C64, "\x41\x8b\x45\x00", 4, NONE, 0, 0, "REX.B r13 base mod 01"),
    /* i64 opcodes (Table A-2 superscript i64) valid outside 64-bit mode */
    ER(C64, "\x06", X86_E_INVALID, "PUSH ES i64"),
    ER(C64, "\x07", X86_E_INVALID, "POP ES i64"),
    ER(C64, "\x0e", X86_E_INVALID, "PUSH CS i64"),
    ER(C64, "\x16", X86_E_INVALID, "PUSH SS i64"),
    ER(C64, "\x17", X86_E_INVALID, "POP SS i64"),
    ER(C64, "\x1e", X86_E_INVALID, "PUSH DS i64"),
    ER(C64, "\x1f", X86_E_INVALID, "POP DS i64"),
    ER(C64, "\x27", X86_E_INVALID, "DAA i64"),
    ER(C64, "\x2f", X86_E_INVALID, "DAS i64"),
    ER(C64, "\x37", X86_E_INVALID, "AAA i64"),
    ER(C64, "\x3f", X86_E_INVALID, "AAS i64"),
    ER(C64, "\x60", X86_E_INVALID, "PUSHA i64"),
    ER(C64, "\x61", X86_E_INVALID, "POPA i64"),
    ER(C64, "\x82\xc0\x01", X86_E_INVALID, "82 i64"),
    ER(C64, "\xd4\x0a", X86_E_INVALID, "AAM i64"),
    ER(C64, "\xd5\x0a", X86_E_INVALID, "AAD i64"),
    ER(C64, "\xd6", X86_E_INVALID, "SALC i64"),
    OK(C32, "\x06", 1, NONE, 0, 0, "PUSH ES"),
    OK(C32, "\x1f", 1, NONE, 0, 0, "POP DS"),
    OK(C32, "\x27", 1, NONE, 0, 0, "DAA"),
    OK(C32, "\x60", 1, NONE, 0, 0, "PUSHAD"),
    OK(C32, "\x82\xc0\x01", 3, NONE, 0, 0, "82 /0 ib"),
    OK(C16, "\xd4\x0a", 2, NONE, 0, 0, "AAM imm8"),
    OK(C32, "\xd6", 1, NONE, 0, 0, "SALC"),
    /* VEX / LES / LDS (2.3.5: C4/C5 are VEX in 32-bit mode when ModR/M.mod would be 11) */
    OK(C64, "\xc5\xf8\x77", 3, NONE, 0, 0, "VZEROUPPER: VEX map 1 77 has no ModR/M"),
    OK(C64, "\xc5\xfd\x6f\x00", 4, NONE, 0, 0, "VMOVDQA ymm0, [rax]"),
    OK(C64, "\xc5\xf9\x70\xc1\x1b", 5, NONE, 0, 0, "VPSHUFD: VEX map 1 70 has ib"),
    OK(C64, "\xc4\xe3\x7d\x18\xc1\x01", 6, NONE, 0, 0, "VINSERTF128: map 0F3A ib"),
    OK(C64, "\xc4\xe2\x7d\x18\x00", 5, NONE, 0, 0, "VBROADCASTSS: map 0F38"),
    OK(C64, "\xc4\x62\x7d\x18\x00", 5, NONE, 0, 0, "VEX3 with R=0 in 64-bit"),
    OK(C32, "\xc5\xf8\x77", 3, NONE, 0, 0, "VEX2 in 32-bit (11 in the top bits)"),
    OK(C32, "\xc5\x06", 2, NONE, 0, 0, "LDS eax, [esi]"),
    OK(C32, "\xc4\x00", 2, NONE, 0, 0, "LES eax, [eax]"),
    OK(C16, "\xc4\x1e\x00\x01", 4, NONE, 0, 0, "LES bx, [disp16]"),
    OK(C16, "\xc4\xe2\x7d\x18\x00", 5, NONE, 0, 0, "VEX3 in 16-bit code"),
    ER(C64, "\x66\xc5\xf8\x77", X86_E_INVALID, "66 before VEX: #UD (2.3.2)"),
    ER(C64, "\x48\xc5\xf8\x77", X86_E_INVALID, "REX before VEX: #UD"),
    ER(C64, "\xf3\xc5\xf8\x77", X86_E_INVALID, "F3 before VEX: #UD"),
    OK(C64, "\x67\xc5\xfd\x6f\x00", 5, NONE, 0, 0, "67 before VEX is fine"),
    /* EVEX (2.7.1), BOUND in 32-bit when mod would not be 11 */
    OK(C64, "\x62\xf1\x7c\x48\x10\x00", 6, NONE, 0, 0, "VMOVUPS zmm0, [rax]"),
    OK(C64, "\x62\xf1\x7c\x48\x10\x40\x01", 7, NONE, 0, 0, "disp8*N is one byte"),
    OK(C64, "\x62\xf3\x7d\x48\x23\xc1\x00", 7, NONE, 0, 0, "EVEX map 0F3A ib"),
    OK(C32, "\x62\xf1\x7c\x48\x10\x00", 6, NONE, 0, 0, "EVEX in 32-bit"),
    OK(C32, "\x62\x00", 2, NONE, 0, 0, "BOUND eax, [eax]"),
    ER(C64, "\x62\x00\x00\x00\x00\x00", X86_E_INVALID, "EVEX map 0: no instruction"),
    /* AMD: XOP (APM Vol. 3 1.8, map_select >= 8), 3DNow! (0F 0F /r ib), SSE4a */
    OK(C64, "\x8f\xe9\x78\x81\xc1", 5, NONE, 0, 0, "VFRCZPS: XOP map 9"),
    OK(C64, "\x8f\xe8\x78\xc0\xc1\x05", 6, NONE, 0, 0, "VPROTB imm: XOP map 8 ib"),
    OK(C64, "\x8f\xea\x78\x10\xc0" I4, 9, NONE, 0, 0, "BEXTR imm32: XOP map A"),
    OK(C64, "\x8f\xc0", 2, NONE, 0, 0, "POP rax: 8F /0, map_select 0"),
    OK(C32, "\x8f\x05" I4, 6, NONE, 0, 0, "POP [disp32]"),
    OK(C64, "\x0f\x0f\xc1\xb4", 4, NONE, 0, 0, "PFMUL mm0, mm1"),
    OK(C64, "\x0f\x0f\x40\x10\x9e", 5, NONE, 0, 0, "PFADD mm0, [rax+16]"),
    OK(C64, "\x66\x0f\x78\xc0\x04\x08", 6, NONE, 0, 0, "EXTRQ xmm, ib, ib"),
    OK(C64, "\xf2\x0f\x78\xc1\x04\x08", 6, NONE, 0, 0, "INSERTQ xmm, xmm, ib, ib"),
    OK(C64, "\x0f\x78\xc8", 3, NONE, 0, 0, "VMREAD rax, rcx"),
    /* three-byte maps (Tables) */
    OK(C64, "\x66\x0f\x38\x00\xc1", 5, NONE, 0, 0, "PSHUFB"),
    OK(C64, "\x66\x0f\x3a\x0f\xc1\x08", 6, NONE, 0, 0, "PALIGNR ib"),
    OK(C64, "\xf3\x0f\x1e\xfa", 4, NONE, 0, 0, "ENDBR64"),
    OK(C64, "\x0f\x1f\x84\x00" I4, 8, NONE, 0, 0, "NOPL [rax+rax+disp32]"),
    /* the 15-byte limit (Vol. 2A 2.1: #GP beyond 15 bytes) and truncation */
    OK(C64, "\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x90", 15, NONE, 0, 0,
       "14 prefixes + NOP: 15 bytes"),
    ER(C64, "\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x90", X86_E_INVALID,
       "15 prefixes + NOP: 16 bytes"),
    ER(C64, "\x26\x26\x26\x26\x26\x26\x26\x26\x26\x26\x26\x48\xb8" I8, X86_E_INVALID,
       "11 prefixes + MOV r64, imm64"),
    ER(C64, "\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0\xf0", X86_E_INVALID,
       "15 prefixes, nothing more needed to know"),
    ER(C64, "", X86_E_SHORT, "empty"),
    ER(C64, "\x66", X86_E_SHORT, "a prefix alone"),
    ER(C64, "\x48", X86_E_SHORT, "a REX alone"),
    ER(C64, "\x0f", X86_E_SHORT, "an escape alone"),
    ER(C64, "\x0f\x38", X86_E_SHORT, "0F 38 alone"),
    ER(C64, "\x48\xb8\x00\x00", X86_E_SHORT, "imm64 cut"),
    ER(C64, "\xe8\x00", X86_E_SHORT, "rel32 cut"),
    ER(C64, "\x8b\x04", X86_E_SHORT, "SIB missing"),
    ER(C64, "\x8b\x80\x00", X86_E_SHORT, "disp32 cut"),
    ER(C64, "\xc5\xf8", X86_E_SHORT, "VEX2 opcode missing"),
    ER(C32, "\xc5", X86_E_SHORT, "C5 in 32-bit: VEX or LDS depends on the next byte"),
    ER(C64, "\x62\xf1\x7c", X86_E_SHORT, "EVEX cut"),
};

static void test_cases(void **state)
{
    unsigned bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct hcase *c = &cases[i];
        /* at the end of an exact-size heap block: ASan catches a read past avail */
        uint8_t *blk = malloc(c->n ? c->n : 1);
        uint8_t *at = blk + (c->n ? 0 : 1);
        memcpy(at, c->bytes, c->n);
        struct x86_insn in = {0};
        int r = x86_classify(at, c->n, (enum x86_code_size)c->cs, &in);
        bool ok = r == c->ret;
        if (ok && r == 0)
            ok = in.len == c->len && in.branch == c->br && in.rel == c->rel && in.flags == c->flags;
        if (!ok) {
            bad++;
            printf("case %zu (%s, code%d): got ret %d len %u %s rel %d flags %#x\n", i, c->why,
                   16 << c->cs, r, in.len, x86_branch_name(in.branch), in.rel, in.flags);
        }
        /* every shorter prefix of a decodable case is SHORT */
        for (unsigned k = 0; r == 0 && k < c->len; k++) {
            uint8_t *end = blk + c->n - k;
            memmove(end, c->bytes, k);
            if (x86_classify(end, k, (enum x86_code_size)c->cs, &in) != X86_E_SHORT) {
                bad++;
                printf("case %zu (%s): %u bytes not SHORT\n", i, c->why, k);
            }
        }
        free(blk);
    }
    printf("%zu hand-written cases\n", sizeof(cases) / sizeof(cases[0]));
    assert_int_equal(bad, 0);
}

/* the hand cases agree with Zydis too (where Zydis decodes) */
static void test_cases_vs_zydis(void **state)
{
    struct diff_stats st = {0};
    oracle_init();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        diff_one(cases[i].cs, (const uint8_t *)cases[i].bytes, cases[i].n, 0x1000, &st);
    stats_print("hand cases vs zydis", &st, 0);
    assert_int_equal(st.disagree, 0);
}

static void test_direct_target(void **state)
{
    struct x86_insn in = {.len = 2, .branch = X86_BR_JMP_DIRECT, .rel = 0x10, .flags = O16};
    /* Vol. 2A JMP: "IF OperandSize = 16 THEN EIP <- tempEIP AND 0000FFFFH" */
    assert_int_equal(x86_direct_target(0xfffe, &in, X86_CODE16), 0x10);
    in.flags = O32;
    assert_int_equal(x86_direct_target(0xfffe, &in, X86_CODE16), 0x10010);
    assert_int_equal(x86_direct_target(0xfffffff0u, &in, X86_CODE32), 0x2);
    in.flags = O16;
    assert_int_equal(x86_direct_target(0x12345678u, &in, X86_CODE32), 0x568a);
    in.flags = 0;
    in.rel = -0x20;
    assert_int_equal(x86_direct_target(0x10, &in, X86_CODE64), 0xfffffffffffffff2ull);
    in.rel = INT32_MAX;
    assert_int_equal(x86_direct_target(0x7fffffff00000000ull, &in, X86_CODE64),
                     0x7fffffff80000001ull);
}

/* x86_jcc_taken against this host's CPU: each of the 16 Jcc run after POPF of every
 * combination of CF, PF, ZF, SF and OF */
#define JCC_ON_CPU(op)                                                                             \
    static bool cpu_##op(uint64_t fl)                                                              \
    {                                                                                              \
        unsigned char r;                                                                           \
        __asm__ volatile("push %1; popfq; mov $1, %0; " #op " 1f; mov $0, %0; 1:"                  \
                         : "=&r"(r)                                                                \
                         : "r"(fl)                                                                 \
                         : "cc", "memory");                                                        \
        return r;                                                                                  \
    }
JCC_ON_CPU(jo)
JCC_ON_CPU(jno)
JCC_ON_CPU(jb)
JCC_ON_CPU(jae)
JCC_ON_CPU(je)
JCC_ON_CPU(jne)
JCC_ON_CPU(jbe)
JCC_ON_CPU(ja)
JCC_ON_CPU(js)
JCC_ON_CPU(jns)
JCC_ON_CPU(jp)
JCC_ON_CPU(jnp)
JCC_ON_CPU(jl)
JCC_ON_CPU(jge)
JCC_ON_CPU(jle)
JCC_ON_CPU(jg)

static void test_jcc_taken(void **state)
{
    (void)state;
    static bool (*const cpu[16])(uint64_t) = {cpu_jo,  cpu_jno, cpu_jb,  cpu_jae, cpu_je, cpu_jne,
                                              cpu_jbe, cpu_ja,  cpu_js,  cpu_jns, cpu_jp, cpu_jnp,
                                              cpu_jl,  cpu_jge, cpu_jle, cpu_jg};
    static const uint64_t bit[5] = {1u << 0, 1u << 2, 1u << 6, 1u << 7, 1u << 11};
    for (unsigned cc = 0; cc < 16; cc++) {
        /* the classifier's own decode of both encodings gives the condition */
        uint8_t short_jcc[2] = {(uint8_t)(0x70 + cc), 0},
                near_jcc[6] = {0x0f, (uint8_t)(0x80 + cc)};
        struct x86_insn s, n;
        assert_int_equal(x86_classify(short_jcc, 2, X86_CODE64, &s), 0);
        assert_int_equal(x86_classify(near_jcc, 6, X86_CODE64, &n), 0);
        assert_true(s.flags & X86_F_JCC_CC);
        assert_true(n.flags & X86_F_JCC_CC);
        for (unsigned m = 0; m < 32; m++) {
            uint64_t fl = 0x202; /* IF and the reserved bit 1 */
            for (unsigned k = 0; k < 5; k++)
                if (m >> k & 1)
                    fl |= bit[k];
            bool want = cpu[cc](fl);
            if (x86_jcc_taken(&s, fl) != want || x86_jcc_taken(&n, fl) != want)
                fail_msg("Jcc %#x with RFLAGS %#lx: the CPU %s", 0x70 + cc, (unsigned long)fl,
                         want ? "jumps" : "falls through");
        }
    }
    /* LOOP / JrCXZ depend on rCX: no condition on RFLAGS */
    uint8_t loop[2] = {0xe2, 0};
    struct x86_insn l;
    assert_int_equal(x86_classify(loop, 2, X86_CODE64, &l), 0);
    assert_false(l.flags & X86_F_JCC_CC);
}

static void test_branch_name(void **state)
{
    for (unsigned c = 0; c < X86_BR_COUNT; c++) {
        assert_non_null(x86_branch_name(c));
        assert_string_not_equal(x86_branch_name(c), "?");
    }
    assert_string_equal(x86_branch_name(X86_BR_JCC), "jcc");
    assert_string_equal(x86_branch_name(X86_BR_COUNT), "?");
}

/* ---------------------------------------------------- real-binary differential */

/* deterministic, sorted; all from this project's Debian packages (tools/deps.sh):
 * bochs, busybox-static, libc6, qemu-system-x86 (and its libcrypto dependency) */
static const char *const bins[] = {
    "/bin/busybox",
    "/usr/bin/bochs-bin",
    "/usr/bin/qemu-system-x86_64",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
};
#define MIN_BYTES_64 10000000ull
#define BYTES_32     (4ull << 20)
#define BYTES_16     (2ull << 20)

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* linear sweep of one section in code size cs, at most `budget` bytes; returns bytes swept */
static uint64_t sweep(int cs, const uint8_t *b, size_t n, uint64_t vaddr, uint64_t budget,
                      struct diff_stats *st)
{
    size_t off = 0;
    while (off < n && off < budget) {
        uint64_t ip = vaddr + off;
        if (cs == X86_CODE16)
            ip &= 0xffff; /* an IP in a 64 KiB segment, so wraps happen */
        else if (cs == X86_CODE32)
            ip &= 0xffffffffu;
        unsigned l = diff_one(cs, b + off, n - off, ip, st);
        off += l ? l : 1;
    }
    return off;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_real_binaries(void **state)
{
    struct diff_stats st[3] = {{0}};
    double t0 = now(), secs[3] = {0};
    uint64_t swept[3] = {0};
    oracle_init();
    for (size_t f = 0; f < sizeof(bins) / sizeof(bins[0]); f++) {
        size_t size;
        uint8_t *img = read_file(bins[f], &size);
        if (!img) {
            printf("skip %s (missing)\n", bins[f]);
            continue;
        }
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
        if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
            eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64 ||
            eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
            (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum) {
            printf("skip %s (not an x86-64 ELF64)\n", bins[f]);
            free(img);
            continue;
        }
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
        uint64_t file_bytes = 0;
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            if (!(sh[i].sh_flags & SHF_EXECINSTR) || sh[i].sh_type == SHT_NOBITS ||
                sh[i].sh_offset > size || size - sh[i].sh_offset < sh[i].sh_size)
                continue;
            const uint8_t *b = img + sh[i].sh_offset;
            size_t n = sh[i].sh_size;
            double t = now();
            swept[2] += sweep(X86_CODE64, b, n, sh[i].sh_addr, UINT64_MAX, &st[2]);
            secs[2] += now() - t;
            file_bytes += n;
            for (int cs = 0; cs < 2; cs++) {
                uint64_t want = cs ? BYTES_32 : BYTES_16;
                if (swept[cs] < want) {
                    t = now();
                    swept[cs] += sweep(cs, b, n, sh[i].sh_addr, want - swept[cs], &st[cs]);
                    secs[cs] += now() - t;
                }
            }
        }
        printf("used %s: %llu bytes of executable sections\n", bins[f],
               (unsigned long long)file_bytes);
        free(img);
    }
    stats_print("64-bit sweep", &st[2], secs[2]);
    stats_print("32-bit sweep", &st[1], secs[1]);
    stats_print("16-bit sweep", &st[0], secs[0]);
    printf("real-binary differential: %.2f s\n", now() - t0);
    assert_int_equal(st[0].disagree + st[1].disagree + st[2].disagree, 0);
    /* the proof needs the volume: 10 M bytes decoded by both in 64-bit mode */
    assert_true(st[2].bytes >= MIN_BYTES_64);
    assert_true(st[2].ind_reg > 0 && st[2].ind_mem > 0); /* both kinds were compared */
    assert_true(swept[1] >= BYTES_32 && swept[0] >= BYTES_16);
}

/* ------------------------------------------------------------ random bytes */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t xs64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* random bytes, often starting with prefixes / escapes so every path is reached */
static void random_insn(uint8_t *b)
{
    static const uint8_t lead[] = {0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x2e, 0x48, 0x41, 0x0f,
                                   0xc4, 0xc5, 0x62, 0x8f, 0xff, 0xf6, 0xf7, 0x64, 0x65};
    for (int i = 0; i < 24; i += 8) {
        uint64_t v = xs64();
        memcpy(b + i, &v, 8);
    }
    unsigned k = xs64() % 16 ? xs64() % 4 : 8 + xs64() % 8; /* now and then near 15 */
    for (unsigned i = 0; i < k; i++)
        b[i] = lead[xs64() % sizeof(lead)];
    if (xs64() % 4 == 0)
        b[k] = 0x0f, b[k + 1] = (xs64() & 1) ? 0x38 : 0x3a;
}

#define RANDOM_PER_MODE 1000000

static void test_random(void **state)
{
    uint8_t *blk = malloc(X86_MAX_INSN);
    oracle_init();
    uint64_t total = 0;
    for (int cs = 0; cs < 3; cs++) {
        struct diff_stats st = {0};
        double t = now();
        for (int i = 0; i < RANDOM_PER_MODE; i++) {
            uint8_t b[24];
            random_insn(b);
            uint64_t ip = xs64();
            if (cs == X86_CODE16)
                ip &= 0xffff;
            else if (cs == X86_CODE32)
                ip &= 0xffffffffu;
            /* the 15 bytes at the end of a 15-byte heap block */
            memcpy(blk, b, X86_MAX_INSN);
            unsigned l = diff_one(cs, blk, X86_MAX_INSN, ip, &st);
            if (st.last_ok && (i & 3) == 0)
                check_truncations(cs, b, l, blk, &st);
        }
        static const char *const name[3] = {"random 16-bit", "random 32-bit", "random 64-bit"};
        stats_print(name[cs], &st, now() - t);
        total += st.disagree;
    }
    free(blk);
    assert_int_equal(total, 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),         cmocka_unit_test(test_cases_vs_zydis),
        cmocka_unit_test(test_direct_target), cmocka_unit_test(test_branch_name),
        cmocka_unit_test(test_random),        cmocka_unit_test(test_real_binaries),
        cmocka_unit_test(test_jcc_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* !PTV_FUZZ */
