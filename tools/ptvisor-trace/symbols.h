/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace symbols: functions from ELF files (.symtab, else .dynsym, via libelf) and
 * from System.map files, any number of each, each shifted by a bias (load base, KASLR);
 * address -> "func+0xoff" by binary search.
 */
#ifndef PTV_TOOLS_PTT_SYMBOLS_H
#define PTV_TOOLS_PTT_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

struct ptt_sym {
    uint64_t addr, end; /* [addr, end) */
    const char *name;
    unsigned dso;  /* index into ptt_syms.dso */
    unsigned rank; /* for aliases at one address: lower wins */
    uint64_t size; /* 0: unknown (bounded by the next symbol) */
};

struct ptt_syms {
    struct ptt_sym *s;
    size_t n, cap;
    struct ptt_dso {
        char *name;
        uint64_t bias;
    } * dso;
    unsigned ndso;
    char **pool; /* string blocks */
    size_t npool, pool_used;
    size_t last; /* index of the last hit (+1), a cache */
};

/* add every function symbol of an ELF file (raw addresses, see set_bias); the new dso index
 * (>= 0), or -1 with a one-line reason */
int ptt_syms_add_elf(struct ptt_syms *y, const char *path, const char *dso, char *err,
                     size_t errlen);
/* add the code symbols of a System.map ("ADDR TYPE NAME" lines); dso index or -1 */
int ptt_syms_add_map(struct ptt_syms *y, const char *path, const char *dso, char *err,
                     size_t errlen);
/* same, from text in memory (the parser; `name` for messages) */
int ptt_syms_add_map_text(struct ptt_syms *y, const char *text, size_t len, const char *name,
                          const char *dso, char *err, size_t errlen);
/* kallsyms.c: the code symbols of /proc/kallsyms text (runtime addresses: never shifted);
 * refused when it holds no code symbol or only zero addresses (read without the right to see
 * them); dso index or -1 */
int ptt_syms_add_kallsyms(struct ptt_syms *y, const char *path, const char *dso, char *err,
                          size_t errlen);
int ptt_syms_add_kallsyms_text(struct ptt_syms *y, const char *text, size_t len, const char *name,
                               const char *dso, char *err, size_t errlen);
/* the raw (unshifted) address of a symbol of one dso by name; 0, or -1 if absent */
int ptt_syms_addr_of(const struct ptt_syms *y, unsigned dso, const char *name, uint64_t *addr);
/* every address of dso is shifted by bias (load base, KASLR) at finish */
void ptt_syms_set_bias(struct ptt_syms *y, unsigned dso, uint64_t bias);
/* apply the biases, sort, drop aliases, bound symbols without a size by the next one of their
 * file; after the adds, before find */
void ptt_syms_finish(struct ptt_syms *y);
/* the function that contains addr, or NULL */
const struct ptt_sym *ptt_syms_find(struct ptt_syms *y, uint64_t addr);
/* "func+0x1f" or "[unknown]" into buf */
const char *ptt_syms_fmt(struct ptt_syms *y, uint64_t addr, char *buf, size_t len);
void ptt_syms_free(struct ptt_syms *y);

#endif
