/* SPDX-License-Identifier: MIT */
/*
 * The few ELF64 definitions the loader needs (System V gABI + the x86-64
 * psABI), spelled as in <elf.h>.  Our own copy because the loader is
 * freestanding; do not include <elf.h> next to this file.
 */
#ifndef PTV_BOOT_ELF64_H
#define PTV_BOOT_ELF64_H

#include <stdint.h>

typedef struct {
    unsigned char e_ident[16];
    uint16_t e_type;
    uint16_t e_machine;
    uint32_t e_version;
    uint64_t e_entry;
    uint64_t e_phoff;
    uint64_t e_shoff;
    uint32_t e_flags;
    uint16_t e_ehsize;
    uint16_t e_phentsize;
    uint16_t e_phnum;
    uint16_t e_shentsize;
    uint16_t e_shnum;
    uint16_t e_shstrndx;
} Elf64_Ehdr;
_Static_assert(sizeof(Elf64_Ehdr) == 64, "Elf64_Ehdr");

typedef struct {
    uint32_t p_type;
    uint32_t p_flags;
    uint64_t p_offset;
    uint64_t p_vaddr;
    uint64_t p_paddr;
    uint64_t p_filesz;
    uint64_t p_memsz;
    uint64_t p_align;
} Elf64_Phdr;
_Static_assert(sizeof(Elf64_Phdr) == 56, "Elf64_Phdr");

typedef struct {
    int64_t d_tag;
    uint64_t d_val;
} Elf64_Dyn;
_Static_assert(sizeof(Elf64_Dyn) == 16, "Elf64_Dyn");

typedef struct {
    uint64_t r_offset;
    uint64_t r_info;
    int64_t r_addend;
} Elf64_Rela;
_Static_assert(sizeof(Elf64_Rela) == 24, "Elf64_Rela");

#define ELFMAG      "\177ELF"
#define EI_CLASS    4
#define EI_DATA     5
#define EI_VERSION  6
#define ELFCLASS64  2
#define ELFDATA2LSB 1
#define EV_CURRENT  1
#define ET_EXEC     2
#define ET_DYN      3
#define EM_X86_64   62

#define PT_LOAD    1
#define PT_DYNAMIC 2
#define PT_INTERP  3
#define PT_TLS     7
#define PF_X       0x1
#define PF_W       0x2
#define PF_R       0x4

#define DT_NULL     0
#define DT_NEEDED   1
#define DT_PLTRELSZ 2
#define DT_RELA     7
#define DT_RELASZ   8
#define DT_RELAENT  9
#define DT_REL      17
#define DT_RELSZ    18
#define DT_TEXTREL  22
#define DT_JMPREL   23
#define DT_RELRSZ   35
#define DT_RELR     36

#define ELF64_R_SYM(i)    ((uint32_t)((i) >> 32))
#define ELF64_R_TYPE(i)   ((uint32_t)(i))
#define R_X86_64_NONE     0
#define R_X86_64_RELATIVE 8

#endif
