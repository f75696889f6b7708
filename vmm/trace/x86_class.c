/* SPDX-License-Identifier: MIT */
/*
 * x86 instruction length and control-flow class (x86_class.h), written from the
 * SDM: Vol. 2A chapter 2 "Instruction Format" (2.1 prefixes and ModR/M / SIB /
 * displacement / immediate, 2.2.1 REX, 2.3 VEX, 2.7 EVEX), Vol. 2 Appendix A
 * "Opcode Map" (Tables A-2 .. A-5, one-, two- and three-byte maps), and for AMD
 * encodings Intel does not list (XOP, 3DNow!, SSE4a EXTRQ/INSERTQ) the AMD64 APM
 * Vol. 3 chapter 1 and Appendix A.
 *
 * The decoder only finds the length and the control-flow class: one attribute
 * byte per opcode of the one- and two-byte maps says whether a ModR/M byte
 * follows and what immediate; the 0F38 / 0F3A / VEX / EVEX / XOP maps are uniform
 * (ModR/M always, the immediate by map).
 */
#include "trace/x86_class.h"

/* attribute byte: the immediate kind in the low nibble, then flags */
enum imm_kind {
    I_NONE = 0,
    I_B,     /* ib */
    I_W,     /* iw (RET/RETF imm16) */
    I_Z,     /* iz: 16 with operand size 16, else 32 */
    I_V,     /* iv: B8+r MOV r, imm16/32/64 */
    I_ENTER, /* iw, ib */
    I_PTR,   /* ptr16:16 / ptr16:32 (9A CALLF, EA JMPF) */
    I_MOFFS, /* A0-A3: an offset of the address size */
    I_J8,    /* rel8 */
    I_JZ,    /* rel16/32 (rel32 in 64-bit mode, Intel ignores 66: Vol. 2A JMP/CALL/Jcc) */
};
#define M   0x10 /* ModR/M follows */
#define N64 0x20 /* invalid in 64-bit mode (Table A-2 superscript i64) */
#define BAD 0x40 /* no instruction (#UD in every mode) */
#define B   I_B
#define W   I_W
#define Z   I_Z
#define V   I_V
#define J8  I_J8
#define JZ  I_JZ
#define MB  (M | I_B)
#define MZ  (M | I_Z)

/* Vol. 2D Table A-2: one-byte opcodes.  Prefixes (26 2E 36 3E 40-4F in 64-bit
 * mode, 64-67 F0 F2 F3) are consumed before this table; 0F, 62 / C4 / C5 (EVEX /
 * VEX) and 8F (XOP) are special-cased before it too. */
static const uint8_t map1b[256] = {
    /* each row: 8 opcodes, the first named in the comment */
    /*00*/ M,       M,       M,           M,       B,       Z,       N64, N64,
    /*08*/ M,       M,       M,           M,       B,       Z,       N64, 0,
    /*10*/ M,       M,       M,           M,       B,       Z,       N64, N64,
    /*18*/ M,       M,       M,           M,       B,       Z,       N64, N64,
    /*20*/ M,       M,       M,           M,       B,       Z,       0,   N64,
    /*28*/ M,       M,       M,           M,       B,       Z,       0,   N64,
    /*30*/ M,       M,       M,           M,       B,       Z,       0,   N64,
    /*38*/ M,       M,       M,           M,       B,       Z,       0,   N64,
    /*40*/ 0,       0,       0,           0,       0,       0,       0,   0,
    /*48*/ 0,       0,       0,           0,       0,       0,       0,   0,
    /*50*/ 0,       0,       0,           0,       0,       0,       0,   0,
    /*58*/ 0,       0,       0,           0,       0,       0,       0,   0,
    /*60*/ N64,     N64,     M | N64,     M,       0,       0,       0,   0,
    /*68*/ Z,       MZ,      B,           MB,      0,       0,       0,   0,
    /*70*/ J8,      J8,      J8,          J8,      J8,      J8,      J8,  J8,
    /*78*/ J8,      J8,      J8,          J8,      J8,      J8,      J8,  J8,
    /*80*/ MB,      MZ,      MB | N64,    MB,      M,       M,       M,   M,
    /*88*/ M,       M,       M,           M,       M,       M,       M,   M,
    /*90*/ 0,       0,       0,           0,       0,       0,       0,   0,
    /*98*/ 0,       0,       I_PTR | N64, 0,       0,       0,       0,   0,
    /*A0*/ I_MOFFS, I_MOFFS, I_MOFFS,     I_MOFFS, 0,       0,       0,   0,
    /*A8*/ B,       Z,       0,           0,       0,       0,       0,   0,
    /*B0*/ B,       B,       B,           B,       B,       B,       B,   B,
    /*B8*/ V,       V,       V,           V,       V,       V,       V,   V,
    /*C0*/ MB,      MB,      W,           0,       M | N64, M | N64, MB,  MZ,
    /*C8*/ I_ENTER, 0,       W,           0,       0,       B,       N64, 0,
    /*D0*/ M,       M,       M,           M,       B | N64, B | N64, N64, 0,
    /*D8*/ M,       M,       M,           M,       M,       M,       M,   M,
    /*E0*/ J8,      J8,      J8,          J8,      B,       B,       B,   B,
    /*E8*/ JZ,      JZ,      I_PTR | N64, J8,      0,       0,       0,   0,
    /*F0*/ 0,       0,       0,           0,       0,       0,       M,   M,
    /*F8*/ 0,       0,       0,           0,       0,       0,       M,   M,
};

/* Vol. 2D Table A-3: two-byte opcodes 0F xx (0F 38 / 0F 3A escapes special-cased;
 * 0F 0F is AMD 3DNow!: ModR/M then an imm8 opcode suffix, APM Vol. 3 A.3; 0F A6 /
 * 0F A7 are VIA PadLock, ModR/M forms such as F3 0F A7 C0 XSTORE) */
static const uint8_t map0f[256] = {
    /*00*/ M,  M,   M,   M,   BAD, 0,   0,   0,
    /*08*/ 0,  0,   BAD, 0,   BAD, M,   0,   MB,
    /*10*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*18*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*20*/ M,  M,   M,   M,   BAD, BAD, BAD, BAD,
    /*28*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*30*/ 0,  0,   0,   0,   0,   0,   BAD, 0,
    /*38*/ 0,  BAD, 0,   BAD, BAD, BAD, BAD, BAD,
    /*40*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*48*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*50*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*58*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*60*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*68*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*70*/ MB, MB,  MB,  MB,  M,   M,   M,   0,
    /*78*/ M,  M,   BAD, BAD, M,   M,   M,   M,
    /*80*/ JZ, JZ,  JZ,  JZ,  JZ,  JZ,  JZ,  JZ,
    /*88*/ JZ, JZ,  JZ,  JZ,  JZ,  JZ,  JZ,  JZ,
    /*90*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*98*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*A0*/ 0,  0,   0,   M,   MB,  M,   M,   M,
    /*A8*/ 0,  0,   0,   M,   MB,  M,   M,   M,
    /*B0*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*B8*/ M,  M,   MB,  M,   M,   M,   M,   M,
    /*C0*/ M,  M,   MB,  M,   MB,  MB,  MB,  M,
    /*C8*/ 0,  0,   0,   0,   0,   0,   0,   0,
    /*D0*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*D8*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*E0*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*E8*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*F0*/ M,  M,   M,   M,   M,   M,   M,   M,
    /*F8*/ M,  M,   M,   M,   M,   M,   M,   M,
};

/* the whole instruction so far must fit in 15 bytes (Vol. 2A 2.1: "... longer than
 * 15 bytes ... #GP") and in what the caller has */
static int need(size_t n, size_t avail)
{
    if (n > X86_MAX_INSN)
        return X86_E_INVALID;
    if (n > avail)
        return X86_E_SHORT;
    return 0;
}

#define NEED(n)                                                                                    \
    do {                                                                                           \
        int e_ = need((n), avail);                                                                 \
        if (e_)                                                                                    \
            return e_;                                                                             \
    } while (0)

/*
 * ModR/M, SIB and displacement (Vol. 2A 2.1.5 Tables 2-1 / 2-2 / 2-3): *p is on the
 * ModR/M byte; on return after the displacement (whose bytes the caller checks
 * with the immediate).  reg_only: the mod field is ignored, always a register
 * operand (MOV CR / DR, Vol. 2B MOV-Move to/from Control Registers).
 */
static int modrm(const uint8_t *c, size_t avail, size_t *p, unsigned asz, bool reg_only,
                 uint8_t *out)
{
    NEED(*p + 1);
    uint8_t m = c[(*p)++];
    unsigned mod = m >> 6, rm = m & 7;
    *out = m;
    if (reg_only || mod == 3)
        return 0;
    if (asz == 16) {
        if (mod == 1)
            *p += 1;
        else if (mod == 2 || rm == 6)
            *p += 2;
        return 0;
    }
    if (rm == 4) {
        NEED(*p + 1);
        uint8_t sib = c[(*p)++];
        if (mod == 0 && (sib & 7) == 5)
            *p += 4; /* no base: disp32 */
    } else if (mod == 0 && rm == 5) {
        *p += 4; /* disp32, RIP-relative in 64-bit mode (2.2.1.6) */
    }
    if (mod == 1)
        *p += 1;
    else if (mod == 2)
        *p += 4;
    return 0;
}

static int32_t read_rel(const uint8_t *c, unsigned n)
{
    if (n == 1)
        return (int8_t)c[0];
    if (n == 2)
        return (int16_t)(uint16_t)(c[0] | c[1] << 8);
    return (int32_t)((uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
                     (uint32_t)c[3] << 24);
}

static bool is_string_op(uint8_t op)
{
    return (op >= 0x6c && op <= 0x6f) || (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf);
}

int x86_classify(const uint8_t *code, size_t avail, enum x86_code_size cs, struct x86_insn *out)
{
    size_t p = 0;
    uint8_t rex = 0, last_rep = 0;
    bool p66 = false, p67 = false, lock = false;

    /* Vol. 2A 2.1.1 legacy prefixes, in any order; 2.2.1 a REX prefix counts only
     * right before the opcode (a legacy prefix after it makes it ignored) */
    for (;;) {
        NEED(p + 1);
        uint8_t b = code[p];
        if (b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x64 || b == 0x65) {
        } else if (b == 0x66) {
            p66 = true;
        } else if (b == 0x67) {
            p67 = true;
        } else if (b == 0xf0) {
            lock = true;
        } else if (b == 0xf2 || b == 0xf3) {
            last_rep = b;
        } else if (cs == X86_CODE64 && (b & 0xf0) == 0x40) {
            rex = b;
            p++;
            continue;
        } else {
            break;
        }
        rex = 0;
        p++;
    }

    /* Vol. 2A 3.6 / Table 3-4: effective operand and address sizes */
    bool rexw = rex & 8;
    unsigned osz, asz;
    if (cs == X86_CODE16) {
        osz = p66 ? 32 : 16;
        asz = p67 ? 32 : 16;
    } else if (cs == X86_CODE32) {
        osz = p66 ? 16 : 32;
        asz = p67 ? 16 : 32;
    } else {
        osz = rexw ? 64 : p66 ? 16 : 32;
        asz = p67 ? 32 : 64;
    }

    uint8_t op = code[p++];
    uint8_t attr, m = 0;
    unsigned br = X86_BR_NONE, flags = 0;
    int map = 0; /* 0: one-byte, 1: 0F, 2: 0F38, 3: 0F3A, other: VEX/EVEX/XOP */

    bool vex = false;
    unsigned vmap = 0, vimm = 0;
    if (op == 0xc4 || op == 0xc5 || op == 0x62) {
        /* VEX (2.3.5) / EVEX (2.7.1): always in 64-bit mode; elsewhere only when the
         * byte after has its top two bits 11, which as ModR/M would be the register
         * form LES / LDS / BOUND do not have */
        if (cs == X86_CODE64) {
            vex = true;
        } else {
            NEED(p + 1);
            vex = (code[p] & 0xc0) == 0xc0;
        }
        if (vex) {
            unsigned nb = op == 0xc5 ? 1 : op == 0xc4 ? 2 : 3;
            NEED(p + nb);
            vmap = op == 0xc5 ? 1 : op == 0xc4 ? (code[p] & 0x1fu) : (code[p] & 7u);
            p += nb;
        }
    } else if (op == 0x8f) {
        /* AMD XOP (APM Vol. 3 1.8): 8F with map_select >= 8, else POP r/m (reg 0) */
        NEED(p + 1);
        if ((code[p] & 0x1f) >= 8) {
            vex = true;
            NEED(p + 2);
            vmap = code[p] & 0x1fu;
            p += 2;
        }
    }

    if (vex) {
        /* 2.3.2 / 2.7: a VEX / EVEX / XOP after 66, F2, F3, LOCK or REX is #UD */
        if (p66 || last_rep || lock || rex)
            return X86_E_INVALID;
        NEED(p + 1);
        uint8_t vop = code[p++];
        bool has_modrm = true;
        if (op == 0x8f) {
            if (vmap == 8)
                vimm = 1;
            else if (vmap == 0xa)
                vimm = 4; /* BEXTR / LWPINS / LWPVAL imm32 */
            else if (vmap != 9)
                return X86_E_INVALID;
        } else if (vmap == 1) {
            vimm = (map0f[vop] & 0xf) == I_B;
            has_modrm = !(op != 0x62 && vop == 0x77); /* VZEROUPPER / VZEROALL */
        } else if (vmap == 3) {
            vimm = 1;
        } else if (!(vmap == 2 || (op == 0x62 && (vmap == 5 || vmap == 6)))) {
            return X86_E_INVALID;
        }
        if (has_modrm) {
            int e = modrm(code, avail, &p, asz, false, &m);
            if (e)
                return e;
        }
        p += vimm;
        NEED(p);
        out->len = (uint8_t)p;
        out->branch = X86_BR_NONE;
        out->flags = 0;
        out->rel = 0;
        return 0;
    }

    if (op == 0x0f) {
        NEED(p + 1);
        op = code[p++];
        if (op == 0x38 || op == 0x3a) {
            map = op == 0x38 ? 2 : 3;
            NEED(p + 1);
            op = code[p++];
            attr = map == 2 ? M : MB; /* Tables: ModR/M always, 0F3A an ib */
        } else {
            map = 1;
            attr = map0f[op];
        }
    } else {
        attr = map1b[op];
    }
    if ((attr & BAD) || (cs == X86_CODE64 && (attr & N64)))
        return X86_E_INVALID;

    if (attr & M) {
        bool reg_only = map == 1 && op >= 0x20 && op <= 0x23;
        int e = modrm(code, avail, &p, asz, reg_only, &m);
        if (e)
            return e;
    }
    unsigned reg = (m >> 3) & 7, mod = m >> 6;

    /* near branches: 64-bit operand size in 64-bit mode whatever 66 says (Intel) */
    bool near64 = cs == X86_CODE64;
    unsigned isz = 0, kind = attr & 0xf;
    if (map == 0 && (op == 0xf6 || op == 0xf7) && reg < 2)
        kind = op == 0xf6 ? I_B : I_Z; /* TEST r/m, imm (Vol. 2B TEST) */
    if (map == 1 && op == 0x78 && (last_rep == 0xf2 || (!last_rep && p66)))
        isz = 2; /* AMD SSE4a INSERTQ (F2) / EXTRQ (66) xmm, imm8, imm8 */
    switch (kind) {
    case I_B:
    case I_J8:
        isz = 1;
        break;
    case I_W:
        isz = 2;
        break;
    case I_Z:
        isz = osz == 16 ? 2 : 4;
        break;
    case I_V:
        isz = osz / 8;
        break;
    case I_ENTER:
        isz = 3;
        break;
    case I_PTR:
        isz = osz == 16 ? 4 : 6;
        break;
    case I_MOFFS:
        isz = asz / 8;
        break;
    case I_JZ:
        isz = near64 || osz != 16 ? 4 : 2;
        break;
    }
    size_t imm_at = p;
    p += isz;
    NEED(p);

    if (kind == I_J8 || kind == I_JZ)
        out->rel = read_rel(code + imm_at, isz);
    else
        out->rel = 0;

    if (map == 0) {
        if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3))
            br = X86_BR_JCC;
        if (op >= 0x70 && op <= 0x7f)
            flags |= X86_F_JCC_CC | (op & 0xfu) << 8;
        else if (op == 0xe8)
            br = X86_BR_CALL_DIRECT;
        else if (op == 0xe9 || op == 0xeb)
            br = X86_BR_JMP_DIRECT;
        else if (op == 0x9a)
            br = X86_BR_FAR_CALL;
        else if (op == 0xea)
            br = X86_BR_FAR_JMP;
        else if (op == 0xc2 || op == 0xc3)
            br = X86_BR_RET;
        else if (op == 0xca || op == 0xcb)
            br = X86_BR_FAR_RET;
        else if (op == 0xcf)
            br = X86_BR_IRET;
        else if (op == 0xcc || op == 0xcd || op == 0xce || op == 0xf1)
            br = X86_BR_INT;
        else if (op == 0xf4)
            flags |= X86_F_HLT;
        else if (op == 0x9c)
            flags |= X86_F_PUSHF;
        else if (op == 0x9d || op == 0x17 || (op == 0x8e && reg == 2) ||
                 ((op == 0xc6 || op == 0xc7) && m == 0xf8))
            flags |=
                X86_F_NOBLOCK |
                (op == 0x9d ? X86_F_POPF : 0); /* POPF, POP SS, MOV SS, r/m; XABORT, XBEGIN: a
                                                * transaction aborts to its fallback with no exit */
        else if (is_string_op(op) && last_rep)
            flags |= X86_F_REP;
        else if (op == 0xff) {
            /* Group 5 (Table A-6): /2 CALL r/m, /3 CALLF m16:xx, /4 JMP r/m,
             * /5 JMPF m16:xx (memory only: mod 11 is #UD), /7 reserved */
            static const uint8_t grp5[8] = {
                X86_BR_NONE,         X86_BR_NONE,    X86_BR_CALL_INDIRECT, X86_BR_FAR_CALL,
                X86_BR_JMP_INDIRECT, X86_BR_FAR_JMP, X86_BR_NONE,          X86_BR_NONE};
            if (reg == 7 || ((reg == 3 || reg == 5) && mod == 3))
                return X86_E_INVALID;
            br = grp5[reg];
        }
    } else if (map == 2) {
        if (op == 0x82 && p66 && mod != 3)
            flags |= X86_F_INVLPG; /* INVPCID r, m128 (Vol. 2B INVPCID) */
    } else if (map == 1) {
        if (op >= 0x80 && op <= 0x8f) {
            br = X86_BR_JCC;
            flags |= X86_F_JCC_CC | (op & 0xfu) << 8;
        } else if (op == 0x21 || op == 0x23)
            flags |= X86_F_NOBLOCK; /* MOV r, DRn / MOV DRn, r */
        else if (op == 0x05)
            br = X86_BR_SYSCALL;
        else if (op == 0x07)
            br = X86_BR_SYSRET;
        else if (op == 0x34)
            br = X86_BR_SYSENTER;
        else if (op == 0x35)
            br = X86_BR_SYSEXIT;
        else if (op == 0x0b || op == 0xb9 || op == 0xff)
            br = X86_BR_UD; /* UD2, UD1, UD0 (Vol. 2B UD) */
        else if (op == 0x01) {
            /* Table A-6 group 7, mod 11: C1 VMCALL, C2 VMLAUNCH, C3 VMRESUME, D4 VMFUNC;
             * C9 MWAIT (and AMD FB MWAITX) may wait */
            if (m == 0xc1 || m == 0xc2 || m == 0xc3 || m == 0xd4)
                br = X86_BR_VMX;
            else if (m == 0xc9 || m == 0xfb)
                flags |= X86_F_HLT;
            else if ((reg == 7 && mod != 3) || m == 0xdf || (m == 0xfe && !last_rep))
                flags |= X86_F_INVLPG; /* INVLPG m; AMD INVLPGA, INVLPGB (F3 0F 01 FE is
                                        * RMPADJUST) */
        } else if (op == 0x22) {
            flags |= X86_F_MOV_CR;
            if (reg == 3 && !(rex & 4))
                flags |= X86_F_MOV_CR3;
        }
    }

    /* operand size of branches: what a direct target and RIP wrap to */
    if (br != X86_BR_NONE && br != X86_BR_UD && br != X86_BR_VMX) {
        bool near = br == X86_BR_JCC || br == X86_BR_JMP_DIRECT || br == X86_BR_CALL_DIRECT ||
                    br == X86_BR_JMP_INDIRECT || br == X86_BR_CALL_INDIRECT || br == X86_BR_RET;
        unsigned bsz = near && near64 ? 64 : osz;
        if (bsz == 16)
            flags |= X86_F_OPSIZE16;
        else if (bsz == 32)
            flags |= X86_F_OPSIZE32;
    }

    out->len = (uint8_t)p;
    out->branch = (uint8_t)br;
    out->flags = (uint16_t)flags;
    return 0;
}

int x86_indirect_operand(const uint8_t *code, size_t len, enum x86_code_size cs,
                         struct x86_ind *out)
{
    size_t p = 0;
    uint8_t rex = 0;
    bool p67 = false, fsgs = false;
    if (cs != X86_CODE64)
        return -1;
    /* legacy prefixes (2.1.1): 66 and F2 / F3 do not change a near branch in 64-bit mode,
     * CS / DS / ES / SS have base 0 there (3E is also CET's NOTRACK); a REX counts only
     * right before the opcode (2.2.1) */
    for (;; p++) {
        if (p >= len)
            return -1;
        uint8_t b = code[p];
        if ((b & 0xf0) == 0x40) {
            rex = b;
            continue;
        }
        fsgs |= b == 0x64 || b == 0x65;
        p67 |= b == 0x67;
        if (!(b == 0x64 || b == 0x65 || b == 0x67 || b == 0x26 || b == 0x2e || b == 0x36 ||
              b == 0x3e || b == 0x66 || b == 0xf0 || b == 0xf2 || b == 0xf3))
            break;
        rex = 0;
    }
    if (p + 2 > len || code[p] != 0xff)
        return -1;
    uint8_t m = code[p + 1];
    unsigned mod = m >> 6, reg = (m >> 3) & 7, rm = m & 7;
    if (reg != 2 && reg != 4)
        return -1;
    p += 2;
    *out = (struct x86_ind){.kind = X86_IND_MEM, .index = X86_IND_NONE, .scale = 1};
    if (mod == 3) { /* a register: segment and address size play no part */
        out->kind = X86_IND_REG;
        out->base = (uint8_t)(rm | (rex & 1) << 3);
        return p == len ? 0 : -1;
    }
    if (p67 || fsgs)
        return -1; /* a 32-bit address or an FS / GS base: not predicted */
    unsigned dsz = mod == 1 ? 1 : mod == 2 ? 4 : 0;
    if (rm == 4) { /* SIB (Table 2-3): index 100 without REX.X is none; base 101 with mod 00
                    * is none, with a disp32 */
        if (p >= len)
            return -1;
        uint8_t sib = code[p++];
        unsigned idx = ((sib >> 3) & 7) | (rex & 2) << 2, base = sib & 7;
        out->scale = (uint8_t)(1u << (sib >> 6));
        out->index = idx == 4 ? X86_IND_NONE : (uint8_t)idx;
        if (mod == 0 && base == 5) {
            out->base = X86_IND_NONE;
            dsz = 4;
        } else
            out->base = (uint8_t)(base | (rex & 1) << 3);
    } else if (mod == 0 && rm == 5) {
        out->base = X86_IND_RIP; /* RIP-relative whatever REX.B (2.2.1.6) */
        dsz = 4;
    } else
        out->base = (uint8_t)(rm | (rex & 1) << 3);
    if (p + dsz != len)
        return -1;
    out->disp = dsz ? read_rel(code + p, dsz) : 0;
    return 0;
}

bool x86_jcc_taken(const struct x86_insn *in, uint64_t rflags)
{
    bool cf = rflags & 1, pf = rflags >> 2 & 1, zf = rflags >> 6 & 1, sf = rflags >> 7 & 1,
         of = rflags >> 11 & 1, r;
    unsigned cc = X86_JCC_CC(in->flags);
    switch (cc >> 1) {
    case 0:
        r = of;
        break;
    case 1:
        r = cf;
        break;
    case 2:
        r = zf;
        break;
    case 3:
        r = cf || zf;
        break;
    case 4:
        r = sf;
        break;
    case 5:
        r = pf;
        break;
    case 6:
        r = sf != of;
        break;
    default:
        r = zf || sf != of;
        break;
    }
    return (cc & 1) ? !r : r;
}

uint64_t x86_direct_target(uint64_t ip, const struct x86_insn *in, enum x86_code_size cs)
{
    uint64_t t = ip + in->len + (uint64_t)(int64_t)in->rel;
    if (cs == X86_CODE64)
        return t; /* near branches are 64-bit in 64-bit mode */
    if (in->flags & X86_F_OPSIZE16)
        return t & 0xffff;
    return t & 0xffffffffu;
}

const char *x86_branch_name(unsigned branch)
{
    static const char *const names[X86_BR_COUNT] = {
        [X86_BR_NONE] = "none",
        [X86_BR_JCC] = "jcc",
        [X86_BR_JMP_DIRECT] = "jmp",
        [X86_BR_CALL_DIRECT] = "call",
        [X86_BR_JMP_INDIRECT] = "jmp-indirect",
        [X86_BR_CALL_INDIRECT] = "call-indirect",
        [X86_BR_RET] = "ret",
        [X86_BR_FAR_JMP] = "far-jmp",
        [X86_BR_FAR_CALL] = "far-call",
        [X86_BR_FAR_RET] = "far-ret",
        [X86_BR_IRET] = "iret",
        [X86_BR_INT] = "int",
        [X86_BR_SYSCALL] = "syscall",
        [X86_BR_SYSRET] = "sysret",
        [X86_BR_SYSENTER] = "sysenter",
        [X86_BR_SYSEXIT] = "sysexit",
        [X86_BR_VMX] = "vmx",
        [X86_BR_UD] = "ud",
    };
    return branch < X86_BR_COUNT ? names[branch] : "?";
}

bool x86_flows_to(uint64_t ip, const struct x86_insn *in, enum x86_code_size cs, uint64_t to,
                  bool *any)
{
    uint64_t fall = x86_ip_wrap(ip + in->len, cs);
    *any = false;
    switch (in->branch) {
    case X86_BR_NONE:
    case X86_BR_VMX: /* the VMM emulated it: execution goes on after it */
        return to == fall;
    case X86_BR_JCC:
        return to == fall || to == x86_direct_target(ip, in, cs);
    case X86_BR_JMP_DIRECT:
    case X86_BR_CALL_DIRECT:
        return to == x86_direct_target(ip, in, cs);
    case X86_BR_UD:
        return false; /* always #UD: an event */
    default:          /* indirect, near RET, far transfers */
        *any = true;
        return true;
    }
}
