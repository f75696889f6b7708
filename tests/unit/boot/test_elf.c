/* SPDX-License-Identifier: MIT */
/*
 * Host tests for the vmm.elf loader (boot/elf.c): a small synthetic static PIE
 * that loads and relocates, then one corruption per rejection rule.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../boot/elf.h"
#include "../../../boot/elf64.h"

/*
 * Layout of the test image (file offset = address):
 *   0x0000 text  R X  [0x0000, 0x1000)  headers, code at 0x100 (the entry)
 *   0x1000 data  RW   [0x1000, 0x3000)  0x100 bytes in the file, then .bss
 *          0x1000, 0x1008: two pointers to relocate; 0x1020: RELA[2]; 0x1080: dynamic
 */
#define FILE_SIZE 0x1100
#define LOAD_AT   0x40000000ull
#define PH(i)     ((Elf64_Phdr *)(img + 64 + (i)*56))
#define DYN(i)    ((Elf64_Dyn *)(img + 0x1080 + (i)*16))
#define RELA(i)   ((Elf64_Rela *)(img + 0x1020 + (i)*24))

static uint8_t img[FILE_SIZE];

static void build(void)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;

    memset(img, 0, sizeof(img));
    memcpy(eh->e_ident, ELFMAG, 4);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_DYN;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    eh->e_entry = 0x100;
    eh->e_phoff = 64;
    eh->e_ehsize = 64;
    eh->e_phentsize = 56;
    eh->e_phnum = 3;
    *PH(0) = (Elf64_Phdr){PT_LOAD, PF_R | PF_X, 0, 0, 0, 0x1000, 0x1000, 0x1000};
    *PH(1) = (Elf64_Phdr){PT_LOAD, PF_R | PF_W, 0x1000, 0x1000, 0x1000, 0x100, 0x2000, 0x1000};
    *PH(2) = (Elf64_Phdr){PT_DYNAMIC, PF_R | PF_W, 0x1080, 0x1080, 0x1080, 0x40, 0x40, 8};
    memset(img + 0x100, 0xc3, 16); /* "code" */
    *RELA(0) = (Elf64_Rela){0x1000, R_X86_64_RELATIVE, 0x100};
    *RELA(1) = (Elf64_Rela){0x1008, R_X86_64_RELATIVE, 0x1800};
    *DYN(0) = (Elf64_Dyn){DT_RELA, 0x1020};
    *DYN(1) = (Elf64_Dyn){DT_RELASZ, 48};
    *DYN(2) = (Elf64_Dyn){DT_RELAENT, 24};
    *DYN(3) = (Elf64_Dyn){DT_NULL, 0};
}

static int setup(void **state)
{
    build();
    return 0;
}

/* the check fails and its message contains want */
static void rejects(const char *want)
{
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    memset(&im, 0x5a, sizeof(im));
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), -1);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
    build();
}

static void test_load_and_relocate(void **state)
{
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];

    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), 0);
    assert_int_equal(im.vaddr_lo, 0);
    assert_int_equal(im.span, 0x3000);
    assert_int_equal(im.align, 0x1000);
    assert_int_equal(im.entry, 0x100);
    assert_int_equal(im.rela_count, 2);
    assert_int_equal(im.rela_off, 0x1020);

    uint8_t *dst = malloc(im.span);
    memset(dst, 0xaa, im.span);
    ptv_elf_load(img, &im, dst, LOAD_AT);
    uint64_t p0, p1;
    memcpy(&p0, dst + 0x1000, 8);
    memcpy(&p1, dst + 0x1008, 8);
    assert_int_equal(p0, LOAD_AT + 0x100);
    assert_int_equal(p1, LOAD_AT + 0x1800);
    assert_memory_equal(dst + 0x100, img + 0x100, 16);
    assert_memory_equal(dst + 0x1010, img + 0x1010, 0xf0); /* rest of .data as is */
    for (unsigned i = 0x1100; i < 0x3000; i++)             /* .bss zeroed */
        assert_int_equal(dst[i], 0);
    assert_memory_equal(img + 0x1000, "\0\0\0\0\0\0\0\0", 8); /* the file is untouched */
    free(dst);
}

static void test_nonzero_base_and_unaligned_file(void **state)
{
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    uint8_t *copy = malloc(FILE_SIZE + 1 + 0x3000); /* file at +1, image after it */

    /* link address 0x200000: vaddr_lo follows it, relocation = load - 0x200000 + addend */
    PH(0)->p_vaddr = 0x200000;
    PH(1)->p_vaddr = 0x201000;
    PH(2)->p_vaddr = 0x201080;
    ((Elf64_Ehdr *)img)->e_entry = 0x200100;
    DYN(0)->d_val = 0x201020;
    RELA(0)->r_offset = 0x201000;
    RELA(0)->r_addend = 0x200100;
    RELA(1)->r_info = R_X86_64_NONE; /* ignored */
    memcpy(copy + 1, img, FILE_SIZE);
    assert_int_equal(ptv_elf_check(copy + 1, FILE_SIZE, &im, err, sizeof(err)), 0);
    assert_int_equal(im.vaddr_lo, 0x200000);
    assert_int_equal(im.entry, 0x100);
    uint8_t *dst = copy + 0x1101; /* unaligned destination too */
    ptv_elf_load(copy + 1, &im, dst, LOAD_AT);
    uint64_t p0, p1;
    memcpy(&p0, dst + 0x1000, 8);
    memcpy(&p1, dst + 0x1008, 8);
    assert_int_equal(p0, LOAD_AT + 0x100);
    assert_int_equal(p1, 0);
    free(copy);
}

static void test_no_dynamic(void **state)
{
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    PH(2)->p_type = 0x6474e551; /* PT_GNU_STACK: ignored */
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), 0);
    assert_int_equal(im.rela_count, 0);
    /* an empty PT_LOAD is skipped, and a larger alignment is reported */
    PH(2)->p_type = PT_LOAD;
    PH(2)->p_memsz = 0;
    PH(2)->p_filesz = 0;
    PH(1)->p_align = 0x200000;
    PH(1)->p_offset = 0x1000;
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), 0);
    assert_int_equal(im.align, 0x200000);
}

static void test_bad_headers(void **state)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];

    assert_int_equal(ptv_elf_check(img, 63, &im, err, sizeof(err)), -1);
    assert_string_equal(err, "not an ELF file");
    img[1] = 'X';
    rejects("not an ELF file");
    eh->e_ident[EI_CLASS] = 1;
    rejects("not a 64-bit little-endian ELF");
    eh->e_ident[EI_DATA] = 2;
    rejects("not a 64-bit little-endian ELF");
    eh->e_version = 2;
    rejects("not a 64-bit little-endian ELF");
    eh->e_machine = 3;
    rejects("not an x86-64 ELF (e_machine 3)");
    eh->e_type = ET_EXEC;
    rejects("not a position-independent executable (e_type 2, want ET_DYN: link with -pie)");
    eh->e_phentsize = 32;
    rejects("bad program header table");
    eh->e_phnum = 0;
    rejects("bad program header table (0 entries)");
    eh->e_phnum = PTV_ELF_MAX_PHDRS + 1;
    rejects("bad program header table (33 entries)");
    eh->e_phoff = FILE_SIZE - 100;
    rejects("program header table beyond the end of the file");
    eh->e_phoff = UINT64_MAX - 10;
    rejects("program header table beyond the end of the file");
}

static void test_bad_segments(void **state)
{
    PH(1)->p_filesz = 0x3000;
    rejects("segment 1: file size larger than memory size");
    PH(1)->p_offset = FILE_SIZE - 0x80;
    PH(1)->p_align = 0x80;
    rejects("segment 1: beyond the end of the file");
    PH(1)->p_offset = UINT64_MAX - 0x10;
    rejects("segment 1: beyond the end of the file");
    PH(1)->p_vaddr = 1ull << 47;
    rejects("segment 1: address out of range");
    PH(1)->p_memsz = UINT64_MAX - 0x800;
    rejects("segment 1: address out of range");
    PH(1)->p_align = 0x3000;
    rejects("segment 1: alignment not a power of two <= 2M");
    PH(1)->p_align = 0x400000;
    rejects("segment 1: alignment not a power of two <= 2M");
    PH(1)->p_vaddr = 0x1800;
    rejects("segment 1: address and offset disagree modulo alignment");
    PH(0)->p_flags = PF_R | PF_W | PF_X;
    rejects("segment 0: both writable and executable (W^X)");
    PH(1)->p_vaddr = 0;
    PH(1)->p_offset = 0;
    rejects("segment 1: overlaps or precedes the segment before it");
    PH(0)->p_memsz = 0x1001;
    rejects("segment 1: overlaps or precedes the segment before it");
    PH(2)->p_type = PT_INTERP;
    rejects("has an interpreter (PT_INTERP)");
    PH(2)->p_type = PT_TLS;
    rejects("has thread-local storage (PT_TLS)");
    *PH(0) = *PH(2);
    rejects("more than one PT_DYNAMIC");
    PH(0)->p_type = PH(1)->p_type = 0x6474e551;
    rejects("no loadable segment");
    PH(1)->p_memsz = PTV_ELF_MAX_SPAN;
    rejects("image spans 65540 KiB, more than 64 MiB");
    ((Elf64_Ehdr *)img)->e_entry = 0x1000;
    rejects("entry point outside the executable segments");
    ((Elf64_Ehdr *)img)->e_entry = 0x5000;
    rejects("entry point outside the executable segments");
}

static void test_bad_dynamic(void **state)
{
    PH(2)->p_filesz = 0x1000;
    rejects("dynamic section beyond the end of the file");
    DYN(3)->d_tag = DT_NEEDED;
    rejects("needs a shared library (DT_NEEDED)");
    DYN(3)->d_tag = DT_TEXTREL;
    rejects("has text relocations");
    *DYN(3) = (Elf64_Dyn){DT_REL, 0x1000};
    rejects("has REL relocations, only RELA is supported");
    *DYN(3) = (Elf64_Dyn){DT_JMPREL, 0x1000};
    rejects("has PLT relocations (DT_JMPREL)");
    *DYN(3) = (Elf64_Dyn){DT_RELRSZ, 8};
    rejects("has RELR relocations");
    DYN(2)->d_val = 16;
    rejects("DT_RELAENT is 16, want 24");
    DYN(1)->d_val = 40;
    rejects("DT_RELASZ 40 is not a multiple of 24");
    DYN(0)->d_tag = 0x6ffffff9; /* DT_RELACOUNT instead of DT_RELA */
    rejects("DT_RELASZ without DT_RELA");
    DYN(0)->d_val = 0x10f0;
    rejects("relocation table outside the file-backed segments");
    DYN(1)->d_val = UINT64_MAX - 23;
    rejects("DT_RELASZ");
    /* a dynamic section without DT_NULL, ending at the segment's end, is fine */
    *DYN(3) = (Elf64_Dyn){DT_RELAENT, 24};
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), 0);
    assert_int_equal(im.rela_count, 2);
}

static void test_bad_relocations(void **state)
{
    RELA(1)->r_info = 7; /* R_X86_64_JUMP_SLOT */
    rejects("relocation 1 has type 7, only R_X86_64_RELATIVE (8) is supported");
    RELA(0)->r_info = ((uint64_t)5 << 32) | R_X86_64_RELATIVE;
    rejects("relocation 0 has type 8");
    RELA(0)->r_offset = 0x2ff9;
    rejects("relocation 0 targets no loaded segment");
    RELA(0)->r_offset = 0x3000;
    rejects("relocation 0 targets no loaded segment");
    RELA(0)->r_offset = UINT64_MAX - 3;
    rejects("relocation 0 targets no loaded segment");
    RELA(1)->r_offset = 0x200;
    rejects("relocation 1 targets an executable segment (W^X)");
    /* the last 8 bytes of .bss are a legal target */
    RELA(1)->r_offset = 0x2ff8;
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), 0);
}

/* a real static PIE from gcc + ld (tests/fuzz/seeds/fuzz_elf/README) */
static void test_real_static_pie(void **state)
{
    static uint8_t file[1 << 16];
    struct ptv_elf_image im;
    char err[PTV_ELF_ERR_MAX];
    FILE *f = fopen("tests/fuzz/seeds/fuzz_elf/static-pie.elf", "rb");

    assert_non_null(f);
    size_t len = fread(file, 1, sizeof(file), f);
    fclose(f);
    if (ptv_elf_check(file, len, &im, err, sizeof(err)))
        fail_msg("static-pie.elf: %s", err);
    assert_int_equal(im.vaddr_lo, 0);
    assert_int_equal(im.span, 0x5000);
    assert_int_equal(im.entry, 0x1000);
    assert_int_equal(im.rela_count, 2);
    uint8_t *dst = calloc(1, im.span);
    ptv_elf_load(file, &im, dst, LOAD_AT);
    /* table[] = {&x, &y}: both now point into the loaded .data */
    uint64_t table[2];
    Elf64_Rela r;
    memcpy(&r, file + im.rela_off, sizeof(r));
    memcpy(table, dst + r.r_offset, sizeof(table));
    for (int i = 0; i < 2; i++)
        assert_true(table[i] >= LOAD_AT + 0x3f00 && table[i] < LOAD_AT + im.span);
    free(dst);
}

static void test_error_buffer_is_bounded(void **state)
{
    struct ptv_elf_image im;
    char err[8];
    memset(err, 'x', sizeof(err));
    ((Elf64_Ehdr *)img)->e_machine = 3;
    assert_int_equal(ptv_elf_check(img, sizeof(img), &im, err, sizeof(err)), -1);
    assert_string_equal(err, "not an ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_load_and_relocate, setup),
        cmocka_unit_test_setup(test_nonzero_base_and_unaligned_file, setup),
        cmocka_unit_test_setup(test_no_dynamic, setup),
        cmocka_unit_test_setup(test_bad_headers, setup),
        cmocka_unit_test_setup(test_bad_segments, setup),
        cmocka_unit_test_setup(test_bad_dynamic, setup),
        cmocka_unit_test_setup(test_bad_relocations, setup),
        cmocka_unit_test(test_real_static_pie),
        cmocka_unit_test_setup(test_error_buffer_is_bounded, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
