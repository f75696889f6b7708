/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: kernel symbols in the format of /proc/kallsyms (runtime addresses, KASLR
 * already applied): a file the user gives (--kallsyms) or DIR/kallsyms, the one a guest sent
 * with its dumps (a kallsyms note, docs/serial-protocol.md section 12, which extract turns
 * back into kallsyms text: frame_kallsyms_text in frame_dec.c).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "symbols.h"

int ptt_syms_add_kallsyms_text(struct ptt_syms *y, const char *text, size_t len, const char *name,
                               const char *dso, char *err, size_t errlen)
{
    size_t before = y->n;
    bool nonzero = false;
    int di = ptt_syms_add_map_text(y, text, len, name, dso, err, errlen);

    if (di < 0)
        return -1;
    for (size_t i = before; i < y->n; i++)
        nonzero = nonzero || y->s[i].addr != 0;
    if (y->n == before) {
        snprintf(err, errlen, "%s: no code symbols (no t, T, w or W line)", name);
        return -1;
    }
    if (!nonzero) {
        snprintf(err, errlen,
                 "%s: every address is 0: the kernel hides them from whoever read the file "
                 "(kptr_restrict); read /proc/kallsyms as root",
                 name);
        return -1;
    }
    return di;
}

int ptt_syms_add_kallsyms(struct ptt_syms *y, const char *path, const char *dso, char *err,
                          size_t errlen)
{
    char *text;
    size_t len;
    int r;

    if (ptt_read_file(path, 256u << 20, &text, &len, err, errlen) != 0)
        return -1;
    r = ptt_syms_add_kallsyms_text(y, text, len, path, dso, err, errlen);
    free(text);
    return r;
}
