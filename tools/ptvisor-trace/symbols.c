/* SPDX-License-Identifier: MIT */
/* ptvisor-trace symbols: see symbols.h. */
#include "symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"

#define POOL_BLOCK (64u << 10)
#define MAX_NAME   4096         /* longer names are cut (C++ can be long, not that long) */
#define SIZELESS   (1ull << 20) /* a symbol without size and without a next one */

static char *pool_copy(struct ptt_syms *y, const char *s, size_t n)
{
    char *blk;

    if (n > MAX_NAME)
        n = MAX_NAME;
    if (!y->npool || y->pool_used + n + 1 > POOL_BLOCK) {
        char **np = realloc(y->pool, (y->npool + 1) * sizeof(*np));
        if (!np)
            return NULL;
        y->pool = np;
        blk = malloc(POOL_BLOCK);
        if (!blk)
            return NULL;
        y->pool[y->npool++] = blk;
        y->pool_used = 0;
    }
    blk = y->pool[y->npool - 1] + y->pool_used;
    memcpy(blk, s, n);
    blk[n] = 0;
    y->pool_used += n + 1;
    return blk;
}

static int add_dso(struct ptt_syms *y, const char *dso)
{
    struct ptt_dso *nd = realloc(y->dso, (y->ndso + 1) * sizeof(*nd));

    if (!nd)
        return -1;
    y->dso = nd;
    nd[y->ndso].name = strdup(dso);
    nd[y->ndso].bias = 0;
    if (!nd[y->ndso].name)
        return -1;
    return (int)y->ndso++;
}

static int add_sym(struct ptt_syms *y, uint64_t addr, uint64_t size, const char *name, size_t nlen,
                   unsigned dso, unsigned rank)
{
    if (y->n == y->cap) {
        size_t nc = y->cap ? 2 * y->cap : 4096;
        struct ptt_sym *ns = realloc(y->s, nc * sizeof(*ns));
        if (!ns)
            return -1;
        y->s = ns;
        y->cap = nc;
    }
    const char *copy = pool_copy(y, name, nlen);
    if (!copy)
        return -1;
    y->s[y->n++] =
        (struct ptt_sym){.addr = addr, .size = size, .name = copy, .dso = dso, .rank = rank};
    return 0;
}

/* ---- ELF ---- */

static unsigned elf_rank(unsigned type, unsigned bind)
{
    unsigned r = type == STT_FUNC || type == STT_GNU_IFUNC ? 0 : 4;

    return r + (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
}

int ptt_syms_add_elf(struct ptt_syms *y, const char *path, const char *dso, char *err,
                     size_t errlen)
{
    Elf *e = NULL;
    Elf_Scn *scn = NULL, *symscn = NULL;
    GElf_Shdr sh, symsh = {0};
    int fd, di = -1;

    if (elf_version(EV_CURRENT) == EV_NONE) {
        snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        snprintf(err, errlen, "%s: not an ELF file", path);
        goto out;
    }
    while ((scn = elf_nextscn(e, scn))) {
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && !symscn)) {
            symscn = scn;
            symsh = sh;
        }
    }
    di = add_dso(y, dso);
    if (di < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (!symscn)
        goto out; /* stripped: no symbols, not an error (the code bytes still serve) */
    if (symsh.sh_entsize == 0 || symsh.sh_entsize != gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT)) {
        snprintf(err, errlen, "%s: symbol table with entry size %llu", path,
                 (unsigned long long)symsh.sh_entsize);
        di = -1;
        goto out;
    }
    Elf_Data *data = elf_getdata(symscn, NULL);
    size_t count = data ? data->d_size / symsh.sh_entsize : 0;
    for (size_t i = 1; i < count; i++) {
        GElf_Sym s;
        GElf_Shdr ssh;
        unsigned type, bind;
        const char *name;

        if (!gelf_getsym(data, (int)i, &s))
            continue;
        type = GELF_ST_TYPE(s.st_info);
        bind = GELF_ST_BIND(s.st_info);
        if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE)
            continue;
        if (type == STT_NOTYPE) { /* assembly labels: only in code sections */
            Elf_Scn *ss = elf_getscn(e, s.st_shndx);
            if (!ss || !gelf_getshdr(ss, &ssh) || !(ssh.sh_flags & SHF_EXECINSTR))
                continue;
        } else if (type != STT_FUNC && type != STT_GNU_IFUNC) {
            continue;
        }
        name = elf_strptr(e, symsh.sh_link, s.st_name);
        if (!name || !*name || name[0] == '$' || !strncmp(name, ".L", 2))
            continue;
        if (add_sym(y, s.st_value, s.st_size, name, strlen(name), (unsigned)di,
                    elf_rank(type, bind)) != 0) {
            snprintf(err, errlen, "out of memory");
            di = -1;
            goto out;
        }
    }
out:
    if (e)
        elf_end(e);
    close(fd);
    return di;
}

/* ---- System.map ---- */

static int map_rank(char t)
{
    switch (t) {
    case 'T':
        return 0;
    case 'W':
        return 1;
    case 't':
        return 2;
    case 'w':
        return 3;
    default:
        return -1; /* data, absolute, ...: not code */
    }
}

int ptt_syms_add_map_text(struct ptt_syms *y, const char *text, size_t len, const char *name,
                          const char *dso, char *err, size_t errlen)
{
    int di = add_dso(y, dso);
    unsigned line = 0;
    size_t pos = 0;

    if (di < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    while (pos < len) {
        const char *p = text + pos, *eol = memchr(p, '\n', len - pos);
        size_t n = eol ? (size_t)(eol - p) : len - pos;
        uint64_t addr = 0;
        size_t i = 0, digits = 0;

        pos += n + (eol ? 1 : 0);
        line++;
        if (n && p[n - 1] == '\r')
            n--;
        if (n == 0)
            continue;
        /* ADDR: 1..16 hex digits */
        while (i < n && ptt_hexdig((unsigned char)p[i]) >= 0) {
            if (++digits > 16)
                break;
            addr = addr << 4 | (uint64_t)ptt_hexdig((unsigned char)p[i++]);
        }
        if (digits == 0 || digits > 16 || i + 3 > n || p[i] != ' ' || p[i + 2] != ' ') {
            snprintf(err, errlen,
                     "%s:%u: not a symbol line (ADDR TYPE NAME, as in System.map and "
                     "/proc/kallsyms)",
                     name, line);
            return -1;
        }
        int rank = map_rank(p[i + 1]);
        const char *nm = p + i + 3;
        size_t nl = n - (i + 3);
        /* a module suffix "\t[mod]" (kallsyms) ends the name */
        for (size_t k = 0; k < nl; k++)
            if (nm[k] == '\t' || nm[k] == ' ') {
                nl = k;
                break;
            }
        if (nl == 0) {
            snprintf(err, errlen, "%s:%u: symbol without a name", name, line);
            return -1;
        }
        for (size_t k = 0; k < nl; k++)
            if ((unsigned char)nm[k] < 0x21 || (unsigned char)nm[k] > 0x7e) {
                snprintf(err, errlen, "%s:%u: symbol name with byte 0x%02x", name, line,
                         (unsigned char)nm[k]);
                return -1;
            }
        if (rank < 0 && !(nl == 5 && !memcmp(nm, "_text", 5)))
            continue;
        if (add_sym(y, addr, 0, nm, nl, (unsigned)di, rank < 0 ? 9 : (unsigned)rank) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return di;
}

int ptt_syms_add_map(struct ptt_syms *y, const char *path, const char *dso, char *err,
                     size_t errlen)
{
    char *text;
    size_t len;
    int r;

    if (ptt_read_file(path, 256u << 20, &text, &len, err, errlen) != 0)
        return -1;
    r = ptt_syms_add_map_text(y, text, len, path, dso, err, errlen);
    free(text);
    return r;
}

/* ---- lookups ---- */

int ptt_syms_addr_of(const struct ptt_syms *y, unsigned dso, const char *name, uint64_t *addr)
{
    for (size_t i = 0; i < y->n; i++)
        if (y->s[i].dso == dso && !strcmp(y->s[i].name, name)) {
            *addr = y->s[i].addr;
            return 0;
        }
    return -1;
}

void ptt_syms_set_bias(struct ptt_syms *y, unsigned dso, uint64_t bias)
{
    if (dso < y->ndso)
        y->dso[dso].bias = bias;
}

static int sym_cmp(const void *a, const void *b)
{
    const struct ptt_sym *x = a, *z = b;

    if (x->addr != z->addr)
        return x->addr < z->addr ? -1 : 1;
    if (x->rank != z->rank)
        return x->rank < z->rank ? -1 : 1;
    if (x->dso != z->dso)
        return x->dso < z->dso ? -1 : 1;
    return strcmp(x->name, z->name);
}

void ptt_syms_finish(struct ptt_syms *y)
{
    size_t k = 0;

    for (size_t i = 0; i < y->n; i++)
        y->s[i].addr += y->dso[y->s[i].dso].bias;
    if (y->n)
        qsort(y->s, y->n, sizeof(*y->s), sym_cmp);
    for (size_t i = 0; i < y->n; i++) /* one symbol per address: the best ranked */
        if (k == 0 || y->s[k - 1].addr != y->s[i].addr)
            y->s[k++] = y->s[i];
    y->n = k;
    for (size_t i = 0; i < y->n; i++) {
        struct ptt_sym *s = &y->s[i];
        uint64_t next = i + 1 < y->n ? y->s[i + 1].addr : s->addr + SIZELESS;

        if (next < s->addr) /* wrapped */
            next = UINT64_MAX;
        s->end = s->size ? s->addr + s->size : next;
        if (s->end < s->addr)
            s->end = UINT64_MAX;
    }
    y->last = 0;
}

const struct ptt_sym *ptt_syms_find(struct ptt_syms *y, uint64_t addr)
{
    size_t lo = 0, hi = y->n;

    if (y->last) {
        const struct ptt_sym *c = &y->s[y->last - 1];
        if (addr >= c->addr && addr < c->end)
            return c;
    }
    while (lo < hi) { /* the last symbol with s->addr <= addr */
        size_t mid = lo + (hi - lo) / 2;
        if (y->s[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct ptt_sym *s = &y->s[lo - 1];
    if (addr >= s->end)
        return NULL;
    y->last = lo;
    return s;
}

const char *ptt_syms_fmt(struct ptt_syms *y, uint64_t addr, char *buf, size_t len)
{
    const struct ptt_sym *s = ptt_syms_find(y, addr);

    if (!s)
        snprintf(buf, len, "[unknown]");
    else
        snprintf(buf, len, "%s+0x%llx", s->name, (unsigned long long)(addr - s->addr));
    return buf;
}

void ptt_syms_free(struct ptt_syms *y)
{
    for (size_t i = 0; i < y->npool; i++)
        free(y->pool[i]);
    for (unsigned i = 0; i < y->ndso; i++)
        free(y->dso[i].name);
    free(y->pool);
    free(y->dso);
    free(y->s);
    memset(y, 0, sizeof(*y));
}
