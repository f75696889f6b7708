/* SPDX-License-Identifier: MIT */
/*
 * vmm.elf checks and loading (see elf.h).  Every structure is copied out of
 * the file with memcpy (the file may be unaligned and is untrusted) and every
 * offset is checked against the file size before use.
 */
#include <stdbool.h>
#include "lib/ptv_string.h"
#include "elf.h"
#include "elf64.h"
#include "fmt.h"

#define PAGE_SIZE 4096ull
#define VADDR_MAX (1ull << 47) /* a canonical lower-half address, far from overflow */

struct check {
    const uint8_t *file;
    size_t len;
    struct ptv_fmt err;
    Elf64_Phdr load[PTV_ELF_MAX_PHDRS]; /* the PT_LOAD headers, ascending */
    unsigned nr_load;
};

static int bad(struct check *c, const char *what)
{
    ptv_fmt_str(&c->err, what);
    return -1;
}

static int bad_num(struct check *c, const char *what, uint64_t n, const char *rest)
{
    ptv_fmt_str(&c->err, what);
    ptv_fmt_dec(&c->err, n);
    ptv_fmt_str(&c->err, rest);
    return -1;
}

/* [off, off + size) inside the file, without overflow */
static bool in_file(const struct check *c, uint64_t off, uint64_t size)
{
    return off <= c->len && size <= c->len - off;
}

/* the PT_LOAD segment holding [va, va + size), or NULL; file_backed: within p_filesz */
static const Elf64_Phdr *segment_of(const struct check *c, uint64_t va, uint64_t size,
                                    bool file_backed)
{
    for (unsigned i = 0; i < c->nr_load; i++) {
        const Elf64_Phdr *p = &c->load[i];
        uint64_t n = file_backed ? p->p_filesz : p->p_memsz;
        if (va >= p->p_vaddr && va - p->p_vaddr <= n && size <= n - (va - p->p_vaddr))
            return p;
    }
    return NULL;
}

static int check_header(struct check *c, Elf64_Ehdr *eh)
{
    if (c->len < sizeof(*eh) || memcmp(c->file, ELFMAG, 4) != 0)
        return bad(c, "not an ELF file");
    memcpy(eh, c->file, sizeof(*eh));
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_version != EV_CURRENT)
        return bad(c, "not a 64-bit little-endian ELF (version 1)");
    if (eh->e_machine != EM_X86_64)
        return bad_num(c, "not an x86-64 ELF (e_machine ", eh->e_machine, ")");
    if (eh->e_type != ET_DYN)
        return bad_num(c, "not a position-independent executable (e_type ", eh->e_type,
                       ", want ET_DYN: link with -pie)");
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 ||
        eh->e_phnum > PTV_ELF_MAX_PHDRS)
        return bad_num(c, "bad program header table (", eh->e_phnum, " entries)");
    if (!in_file(c, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
        return bad(c, "program header table beyond the end of the file");
    return 0;
}

static int check_load(struct check *c, const Elf64_Phdr *p, unsigned idx, uint64_t *align)
{
    uint64_t a = p->p_align < PAGE_SIZE ? PAGE_SIZE : p->p_align;

    if (p->p_filesz > p->p_memsz)
        return bad_num(c, "segment ", idx, ": file size larger than memory size");
    if (!in_file(c, p->p_offset, p->p_filesz))
        return bad_num(c, "segment ", idx, ": beyond the end of the file");
    if (p->p_vaddr >= VADDR_MAX || p->p_memsz > VADDR_MAX - p->p_vaddr)
        return bad_num(c, "segment ", idx, ": address out of range");
    if ((a & (a - 1)) || a > PTV_ELF_MAX_ALIGN)
        return bad_num(c, "segment ", idx, ": alignment not a power of two <= 2M");
    /* gABI: p_vaddr and p_offset are congruent modulo p_align */
    if (p->p_align > 1 && (p->p_vaddr - p->p_offset) & (p->p_align - 1))
        return bad_num(c, "segment ", idx, ": address and offset disagree modulo alignment");
    if ((p->p_flags & PF_W) && (p->p_flags & PF_X))
        return bad_num(c, "segment ", idx, ": both writable and executable (W^X)");
    if (c->nr_load) {
        const Elf64_Phdr *prev = &c->load[c->nr_load - 1];
        if (p->p_vaddr < prev->p_vaddr + prev->p_memsz)
            return bad_num(c, "segment ", idx, ": overlaps or precedes the segment before it");
    }
    if (a > *align)
        *align = a;
    c->load[c->nr_load++] = *p;
    return 0;
}

/* every relocation: a known type, inside a non-executable loaded segment */
static int check_relocs(struct check *c, const struct ptv_elf_image *img)
{
    for (uint64_t i = 0; i < img->rela_count; i++) {
        Elf64_Rela r;
        const Elf64_Phdr *p;
        memcpy(&r, c->file + img->rela_off + i * sizeof(r), sizeof(r));
        uint32_t type = ELF64_R_TYPE(r.r_info);
        if (type == R_X86_64_NONE)
            continue;
        if (type != R_X86_64_RELATIVE || ELF64_R_SYM(r.r_info) != 0) {
            ptv_fmt_str(&c->err, "relocation ");
            ptv_fmt_dec(&c->err, i);
            return bad_num(c, " has type ", type,
                           ", only R_X86_64_RELATIVE (8) is supported: link a static PIE");
        }
        p = segment_of(c, r.r_offset, 8, false);
        if (!p)
            return bad_num(c, "relocation ", i, " targets no loaded segment");
        if (p->p_flags & PF_X)
            return bad_num(c, "relocation ", i, " targets an executable segment (W^X)");
    }
    return 0;
}

static int check_dynamic(struct check *c, const Elf64_Phdr *dyn, struct ptv_elf_image *img)
{
    uint64_t rela = 0, relasz = 0, relaent = sizeof(Elf64_Rela);
    bool have_rela = false;

    if (!in_file(c, dyn->p_offset, dyn->p_filesz))
        return bad(c, "dynamic section beyond the end of the file");
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn->p_filesz; off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        memcpy(&d, c->file + dyn->p_offset + off, sizeof(d));
        if (d.d_tag == DT_NULL)
            break;
        switch (d.d_tag) {
        case DT_RELA:
            rela = d.d_val;
            have_rela = true;
            break;
        case DT_RELASZ:
            relasz = d.d_val;
            break;
        case DT_RELAENT:
            relaent = d.d_val;
            break;
        case DT_NEEDED:
            return bad(c, "needs a shared library (DT_NEEDED): link a static PIE");
        case DT_TEXTREL:
            return bad(c, "has text relocations (DT_TEXTREL, W^X)");
        case DT_REL:
        case DT_RELSZ:
            if (d.d_val)
                return bad(c, "has REL relocations, only RELA is supported");
            break;
        case DT_JMPREL:
        case DT_PLTRELSZ:
            if (d.d_val)
                return bad(c, "has PLT relocations (DT_JMPREL): link with -z now -fno-plt");
            break;
        case DT_RELR:
        case DT_RELRSZ:
            if (d.d_val)
                return bad(c, "has RELR relocations: link without -z pack-relative-relocs");
            break;
        }
    }
    if (relaent != sizeof(Elf64_Rela))
        return bad_num(c, "DT_RELAENT is ", relaent, ", want 24");
    if (relasz % sizeof(Elf64_Rela))
        return bad_num(c, "DT_RELASZ ", relasz, " is not a multiple of 24");
    if (relasz == 0)
        return 0;
    if (!have_rela)
        return bad(c, "DT_RELASZ without DT_RELA");
    const Elf64_Phdr *p = segment_of(c, rela, relasz, true);
    if (!p)
        return bad(c, "relocation table outside the file-backed segments");
    img->rela_off = p->p_offset + (rela - p->p_vaddr);
    img->rela_count = relasz / sizeof(Elf64_Rela);
    return check_relocs(c, img);
}

int ptv_elf_check(const void *file, size_t len, struct ptv_elf_image *img, char *err, size_t errcap)
{
    struct check c = {.file = file, .len = len};
    struct ptv_elf_image out = {.align = PAGE_SIZE};
    Elf64_Phdr dyn = {0};
    bool have_dyn = false;
    Elf64_Ehdr eh;
    unsigned i;

    ptv_fmt_init(&c.err, err, errcap);
    if (check_header(&c, &eh))
        return -1;
    for (i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr p;
        memcpy(&p, c.file + eh.e_phoff + i * sizeof(p), sizeof(p));
        if (p.p_type == PT_LOAD && p.p_memsz == 0)
            continue;
        if (p.p_type == PT_LOAD && check_load(&c, &p, i, &out.align))
            return -1;
        if (p.p_type == PT_INTERP)
            return bad(&c, "has an interpreter (PT_INTERP): link a static PIE");
        if (p.p_type == PT_TLS)
            return bad(&c, "has thread-local storage (PT_TLS)");
        if (p.p_type == PT_DYNAMIC) {
            if (have_dyn)
                return bad(&c, "more than one PT_DYNAMIC");
            dyn = p;
            have_dyn = true;
        }
    }
    if (c.nr_load == 0)
        return bad(&c, "no loadable segment");
    const Elf64_Phdr *last = &c.load[c.nr_load - 1];
    out.vaddr_lo = c.load[0].p_vaddr & ~(PAGE_SIZE - 1);
    out.span = last->p_vaddr + last->p_memsz - out.vaddr_lo;
    out.span = (out.span + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
    if (out.span > PTV_ELF_MAX_SPAN)
        return bad_num(&c, "image spans ", out.span >> 10, " KiB, more than 64 MiB");
    const Elf64_Phdr *ep = segment_of(&c, eh.e_entry, 1, false);
    if (!ep || !(ep->p_flags & PF_X))
        return bad(&c, "entry point outside the executable segments");
    out.entry = eh.e_entry - out.vaddr_lo;
    if (have_dyn && check_dynamic(&c, &dyn, &out))
        return -1;
    *img = out;
    return 0;
}

void ptv_elf_load(const void *file, const struct ptv_elf_image *img, void *dst, uint64_t load_addr)
{
    const uint8_t *f = file;
    uint8_t *d = dst;
    Elf64_Ehdr eh;

    memcpy(&eh, f, sizeof(eh));
    memset(d, 0, img->span);
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr p;
        memcpy(&p, f + eh.e_phoff + i * sizeof(p), sizeof(p));
        if (p.p_type == PT_LOAD && p.p_memsz)
            memcpy(d + (p.p_vaddr - img->vaddr_lo), f + p.p_offset, p.p_filesz);
    }
    /* R_X86_64_RELATIVE: B + A (x86-64 psABI 4.4), B = load_addr - vaddr_lo */
    for (uint64_t i = 0; i < img->rela_count; i++) {
        Elf64_Rela r;
        memcpy(&r, f + img->rela_off + i * sizeof(r), sizeof(r));
        if (ELF64_R_TYPE(r.r_info) != R_X86_64_RELATIVE)
            continue;
        uint64_t v = load_addr - img->vaddr_lo + (uint64_t)r.r_addend;
        memcpy(d + (r.r_offset - img->vaddr_lo), &v, sizeof(v));
    }
}
