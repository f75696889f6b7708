/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: the options the reading commands share, and the code image a dump decodes
 * against (image.h): snapshots as libipt sections (through an image section cache, so that
 * they stay mapped), ELF code from the user's files through libipt's read callback, which
 * libipt asks only where no section of the address space covers the address: snapshot bytes
 * take precedence over ELF bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

/* where a 64-bit Linux kernel points IA32_LSTAR */
#define SYSCALL_ENTRY_SYM "entry_SYSCALL_64"

/* ---- messages ---- */

int ptt_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ptvisor-trace: %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

void ptt_warn(const struct ptt_opts *o, const char *fmt, ...)
{
    va_list ap;

    if (o->quiet)
        return;
    fprintf(stderr, "ptvisor-trace: %s: warning: ", o->cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

FILE *ptt_open_out(const struct ptt_opts *o)
{
    FILE *f;

    if (!o->out || !strcmp(o->out, "-"))
        return stdout;
    f = fopen(o->out, "w");
    if (!f)
        ptt_fail(o->cmd, "%s: %s", o->out, strerror(errno));
    return f;
}

int ptt_close_out(const struct ptt_opts *o, FILE *f)
{
    int bad = ferror(f);

    if (f == stdout) {
        if (fflush(f) != 0 || bad)
            return ptt_fail(o->cmd, "writing the output: %s", strerror(errno));
        return 0;
    }
    if (fclose(f) != 0 || bad)
        return ptt_fail(o->cmd, "%s: %s", o->out, strerror(errno));
    return 0;
}

/* ---- options ---- */

static int num_arg(const char *s, uint64_t *v, bool hex_default)
{
    char *end;

    if (!*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    if (hex_default || (s[0] == '0' && (s[1] | 0x20) == 'x'))
        *v = strtoull(s, &end, 16);
    else
        *v = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

enum {
    O_KASLR = 256,
    O_CPU,
    O_BRANCHES,
    O_EVENTS,
    O_TOP,
    O_DEPTH,
    O_PERCPU,
    O_TITLE,
    O_FOLDED,
    O_WIDTH,
    O_PROGRESS,
    O_KALLSYMS
};

int ptt_opts_parse(int argc, char **argv, unsigned accept, const char *help, struct ptt_opts *o)
{
    static const struct option lo[] = {
        {"elf", required_argument, NULL, 'e'},
        {"kernel", required_argument, NULL, 'k'},
        {"vmlinux", required_argument, NULL, 'k'},
        {"kallsyms", required_argument, NULL, O_KALLSYMS},
        {"map", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"kaslr", required_argument, NULL, O_KASLR},
        {"cpu", required_argument, NULL, O_CPU},
        {"branches", no_argument, NULL, O_BRANCHES},
        {"events", no_argument, NULL, O_EVENTS},
        {"top", required_argument, NULL, O_TOP},
        {"depth", required_argument, NULL, O_DEPTH},
        {"per-cpu", no_argument, NULL, O_PERCPU},
        {"title", required_argument, NULL, O_TITLE},
        {"folded", required_argument, NULL, O_FOLDED},
        {"width", required_argument, NULL, O_WIDTH},
        {"progress", no_argument, NULL, O_PROGRESS},
        {NULL, 0, NULL, 0},
    };
    static const struct {
        int opt;
        unsigned need;
    } gated[] = {
        {'o', PTT_OPT_OUT},       {O_BRANCHES, PTT_OPT_BRANCHES}, {O_EVENTS, PTT_OPT_EVENTS},
        {O_TOP, PTT_OPT_TOP},     {O_DEPTH, PTT_OPT_DEPTH},       {O_PERCPU, PTT_OPT_PERCPU},
        {O_TITLE, PTT_OPT_FLAME}, {O_FOLDED, PTT_OPT_FLAME},      {O_WIDTH, PTT_OPT_FLAME}};
    const char *cmd = argv[0];
    uint64_t v;
    int c;

    memset(o, 0, sizeof(*o));
    o->cmd = cmd;
    o->cpu = -1;
    o->top = 20;
    o->depth = 256;
    o->width = 1200;
    optind = 0; /* GNU: re-initialise (several commands may parse in one process) */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "e:k:m:o:qh", lo, NULL)) != -1) {
        for (unsigned i = 0; i < sizeof(gated) / sizeof(gated[0]); i++)
            if (gated[i].opt == c && !(accept & gated[i].need)) {
                ptt_fail(cmd, "%s takes no %s (see ptvisor-trace %s --help)", cmd, argv[optind - 1],
                         cmd);
                return -1;
            }
        switch (c) {
        case 'h':
            fputs(help, stdout);
            return 1;
        case 'e': {
            struct ptt_elf_opt *e = &o->elf[o->nelf];
            char *at = strrchr(optarg, '@');
            if (o->nelf == PTT_MAX_FILES) {
                ptt_fail(cmd, "more than %u -e files", PTT_MAX_FILES);
                return -1;
            }
            e->path = optarg;
            if (at) {
                if (num_arg(at + 1, &e->base, true) != 0) {
                    ptt_fail(cmd, "-e %s: \"%s\" is not a hex load base", optarg, at + 1);
                    return -1;
                }
                *at = 0;
                e->has_base = true;
            }
            o->nelf++;
            break;
        }
        case 'k':
            if (o->kernel) {
                ptt_fail(cmd, "one -k / --vmlinux only");
                return -1;
            }
            o->kernel = optarg;
            break;
        case O_KALLSYMS:
            if (o->kallsyms) {
                ptt_fail(cmd, "one --kallsyms only");
                return -1;
            }
            o->kallsyms = optarg;
            break;
        case 'm':
            if (o->nmap == PTT_MAX_FILES) {
                ptt_fail(cmd, "more than %u -m files", PTT_MAX_FILES);
                return -1;
            }
            o->map[o->nmap++] = optarg;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'q':
            o->quiet = true;
            break;
        case O_KASLR:
            if (num_arg(optarg, &o->kaslr, true) != 0) {
                ptt_fail(cmd, "--kaslr %s: not a hex offset", optarg);
                return -1;
            }
            o->has_kaslr = true;
            break;
        case O_CPU:
            if (num_arg(optarg, &v, false) != 0 || v >= PTT_MAX_CPUS) {
                ptt_fail(cmd, "--cpu %s: not a CPU number below %u", optarg, PTT_MAX_CPUS);
                return -1;
            }
            o->cpu = (int)v;
            break;
        case O_BRANCHES:
            o->branches = true;
            break;
        case O_EVENTS:
            o->events = true;
            break;
        case O_TOP:
            if (num_arg(optarg, &v, false) != 0 || v == 0 || v > 100000) {
                ptt_fail(cmd, "--top %s: not a number from 1 to 100000", optarg);
                return -1;
            }
            o->top = (unsigned)v;
            break;
        case O_DEPTH:
            if (num_arg(optarg, &v, false) != 0 || v == 0 || v > 65536) {
                ptt_fail(cmd, "--depth %s: not a number from 1 to 65536", optarg);
                return -1;
            }
            o->depth = (unsigned)v;
            break;
        case O_PERCPU:
            o->per_cpu = true;
            break;
        case O_TITLE:
            o->title = optarg;
            break;
        case O_FOLDED:
            o->folded = optarg;
            break;
        case O_WIDTH:
            if (num_arg(optarg, &v, false) != 0 || v < 200 || v > 100000) {
                ptt_fail(cmd, "--width %s: not a number of pixels from 200 to 100000", optarg);
                return -1;
            }
            o->width = (unsigned)v;
            break;
        case O_PROGRESS:
            o->progress = true;
            break;
        default:
            if (optopt && optopt < 256 && strchr("ekmo", optopt))
                ptt_fail(cmd, "-%c needs an argument (see ptvisor-trace %s --help)", optopt, cmd);
            else
                ptt_fail(cmd, "unknown or incomplete option %s (see ptvisor-trace %s --help)",
                         argv[optind - 1], cmd);
            return -1;
        }
    }
    if (optind < argc)
        o->input = argv[optind++];
    if (optind < argc) {
        ptt_fail(cmd, "one dump directory or serial log, not also \"%s\"", argv[optind]);
        return -1;
    }
    if (!o->input && !o->folded) {
        ptt_fail(cmd,
                 "which dump? give a dump directory or a serial log (see ptvisor-trace %s "
                 "--help)",
                 cmd);
        return -1;
    }
    return 0;
}

/* ---- ELF code ---- */

struct elf_info {
    uint64_t low;  /* lowest PT_LOAD vaddr, page aligned down */
    uint64_t text; /* lowest PF_X PT_LOAD vaddr */
    unsigned type; /* ET_EXEC / ET_DYN */
};

static int file_map(struct ptt_image *im, const char *path, char *err, size_t errlen)
{
    struct stat st;
    struct ptt_file *f = &im->file[im->nfile];
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        snprintf(err, errlen, "%s: not a regular, non-empty file", path);
        close(fd);
        return -1;
    }
    f->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return -1;
    }
    f->size = (size_t)st.st_size;
    f->path = strdup(path);
    if (!f->path) {
        munmap(f->map, f->size);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return (int)im->nfile++;
}

static int add_seg(struct ptt_image *im, uint64_t va, uint64_t len, const uint8_t *data,
                   unsigned file)
{
    struct ptt_seg *n = realloc(im->seg, (im->nseg + 1) * sizeof(*n));

    if (!n)
        return -1;
    im->seg = n;
    n[im->nseg++] = (struct ptt_seg){va, len, data, file};
    return 0;
}

/* the PF_X PT_LOAD segments of a mapped ELF file (added to the image when `add`) */
static int elf_segs(struct ptt_image *im, unsigned file, bool add, uint64_t bias,
                    struct elf_info *info, char *err, size_t errlen)
{
    const struct ptt_file *f = &im->file[file];
    Elf *e;
    GElf_Ehdr eh;
    size_t nph;
    int rc = -1;

    if (elf_version(EV_CURRENT) == EV_NONE) {
        snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
        return -1;
    }
    e = elf_memory(f->map, f->size);
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
        snprintf(err, errlen, "%s: not an ELF file", f->path);
        goto out;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 && eh.e_ident[EI_CLASS] != ELFCLASS32) {
        snprintf(err, errlen, "%s: ELF class %u", f->path, eh.e_ident[EI_CLASS]);
        goto out;
    }
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        snprintf(err, errlen, "%s: not an executable or shared object (ELF type %u)", f->path,
                 eh.e_type);
        goto out;
    }
    if (elf_getphdrnum(e, &nph) != 0) {
        snprintf(err, errlen, "%s: program headers: %s", f->path, elf_errmsg(-1));
        goto out;
    }
    info->low = UINT64_MAX;
    info->text = UINT64_MAX;
    info->type = eh.e_type;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (ph.p_offset > f->size || ph.p_filesz > f->size - ph.p_offset) {
            snprintf(err, errlen, "%s: PT_LOAD %zu lies past the end of the file", f->path, i);
            goto out;
        }
        if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr) {
            snprintf(err, errlen, "%s: PT_LOAD %zu wraps past 2^64", f->path, i);
            goto out;
        }
        if ((ph.p_vaddr & ~0xfffull) < info->low)
            info->low = ph.p_vaddr & ~0xfffull;
        if (!(ph.p_flags & PF_X) || ph.p_filesz == 0)
            continue;
        if (ph.p_vaddr < info->text)
            info->text = ph.p_vaddr;
        if (add && add_seg(im, ph.p_vaddr + bias, ph.p_filesz,
                           (const uint8_t *)f->map + ph.p_offset, file) != 0) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    if (info->text == UINT64_MAX) {
        snprintf(err, errlen, "%s: no executable PT_LOAD segment", f->path);
        goto out;
    }
    rc = 0;
out:
    if (e)
        elf_end(e);
    return rc;
}

static int seg_cmp(const void *a, const void *b)
{
    const struct ptt_seg *x = a, *y = b;

    return x->va < y->va ? -1 : x->va > y->va;
}

static const struct ptt_seg *seg_find(const struct ptt_image *im, uint64_t ip)
{
    size_t lo = 0, hi = im->nseg;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (im->seg[mid].va <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || ip - im->seg[lo - 1].va >= im->seg[lo - 1].len)
        return NULL;
    return &im->seg[lo - 1];
}

static int read_elf(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip, void *ctx)
{
    const struct ptt_image *im = ctx;
    const struct ptt_seg *s = seg_find(im, ip);
    uint64_t n;

    (void)asid;
    if (!s)
        return -pte_nomap;
    n = s->len - (ip - s->va);
    if (n > size)
        n = size;
    memcpy(buf, s->data + (ip - s->va), (size_t)n);
    return (int)n;
}

/* the CR3 bits a PIP packet carries (SDM Vol. 3C 33.4.2.7: CR3[51:5]); a snapshot's CR3 may
 * come with PCID or flag bits below 5 and bit 63, which libipt's address space never has */
#define PIP_CR3_MASK 0x000fffffffffffe0ull

/* ---- snapshots vs ELF bytes ---- */

struct span {
    uint64_t va, last, cr3; /* last: the snapshot's last byte (va + len may be 2^64) */
};

static int span_va_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    return x->va < y->va ? -1 : x->va > y->va;
}

static int span_cr3_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    if (x->cr3 != y->cr3)
        return x->cr3 < y->cr3 ? -1 : 1;
    return span_va_cmp(a, b);
}

/* snapshots that overlap another one in the same address space (libipt: the one added later
 * is used there), counted for one warning; O(n log n) */
static unsigned snap_overlaps(const struct ptt_dump *d)
{
    struct span *sp = malloc((d->nsnap + 1) * sizeof(*sp));
    unsigned n = 0;
    uint64_t last_all = 0, last_any = 0;
    bool have_all = false, have_any = false;

    if (!sp)
        return 0;
    for (unsigned i = 0; i < d->nsnap; i++)
        sp[i] = (struct span){d->snap[i].va, d->snap[i].va + (d->snap[i].len - 1),
                              d->snap[i].cr3 == PTT_CR3_ANY ? PTT_CR3_ANY
                                                            : d->snap[i].cr3 & PIP_CR3_MASK};
    /* by address: an "any" snapshot against everything before it, a CR3 one against the
     * "any" ones before it */
    qsort(sp, d->nsnap, sizeof(*sp), span_va_cmp);
    for (unsigned i = 0; i < d->nsnap; i++) {
        bool any = sp[i].cr3 == PTT_CR3_ANY;
        if (any ? have_all && sp[i].va <= last_all : have_any && sp[i].va <= last_any)
            n++;
        if (!have_all || sp[i].last > last_all)
            last_all = sp[i].last;
        have_all = true;
        if (any && (!have_any || sp[i].last > last_any))
            last_any = sp[i].last;
        have_any |= any;
    }
    /* within one CR3 */
    qsort(sp, d->nsnap, sizeof(*sp), span_cr3_cmp);
    last_all = d->nsnap ? sp[0].last : 0;
    for (unsigned i = 1; i < d->nsnap; i++) {
        if (sp[i].cr3 == PTT_CR3_ANY || sp[i].cr3 != sp[i - 1].cr3) {
            last_all = sp[i].last;
            continue;
        }
        if (sp[i].va <= last_all)
            n++;
        if (sp[i].last > last_all)
            last_all = sp[i].last;
    }
    free(sp);
    return n;
}

/* per ELF file: bytes and places where a snapshot has other bytes */
static void compare_snaps(struct ptt_image *im, const struct ptt_dump *d, uint64_t *bytes,
                          uint64_t *places)
{
    for (unsigned i = 0; i < d->nsnap; i++) {
        const struct ptt_snap *s = &d->snap[i];
        int fd = open(s->path, O_RDONLY | O_CLOEXEC);
        uint8_t *m;

        if (fd < 0)
            continue;
        m = mmap(NULL, (size_t)s->len, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            continue;
        for (unsigned k = 0; k < im->nseg; k++) {
            const struct ptt_seg *g = &im->seg[k];
            uint64_t lo = s->va > g->va ? s->va : g->va;
            uint64_t hi_s = s->va + s->len, hi_g = g->va + g->len;
            uint64_t hi = hi_s < hi_g ? hi_s : hi_g;
            bool in_run = false;

            for (uint64_t a = lo; a < hi; a++) {
                bool diff = m[a - s->va] != g->data[a - g->va];
                if (diff) {
                    bytes[g->file]++;
                    if (!in_run)
                        places[g->file]++;
                }
                in_run = diff;
            }
        }
        munmap(m, (size_t)s->len);
    }
}

/* ---- the image ---- */

/* kallsyms: the given file, or the dump's own (DIR/kallsyms, from the guest) */
static int kallsyms_pick(struct ptt_image *im, const struct ptt_dump *d, const struct ptt_opts *o,
                         char *err, size_t errlen)
{
    char *own;

    if (o->kallsyms) {
        im->kallsyms = o->kallsyms;
        return 0;
    }
    if (asprintf(&own, "%s/kallsyms", d->dir ? d->dir : ".") < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (d->dir && access(own, F_OK) == 0) {
        im->kallsyms_path = own;
        im->kallsyms = own;
    } else {
        free(own);
    }
    return 0;
}

/*
 * The KASLR offset of the link-address kernel files (-k vmlinux, -m System.map), first found:
 *   --kaslr; the dump's kernel_base minus the start of the kernel's text; the guest's LSTAR
 *   minus entry_SYSCALL_64; the kallsyms's _text (runtime) minus the file's _text (link),
 *   or its entry_SYSCALL_64 minus the file's; else 0.
 * link: the file's dso (its symbols unshifted), text: the start of its text (0: unknown).
 */
static bool kaslr_of(const struct ptt_image *im, const struct ptt_dump *d, unsigned link,
                     uint64_t text, const struct ptt_syms *ks, uint64_t *kaslr, const char **how)
{
    uint64_t a, b;

    if (d->kernel_base && text) {
        *kaslr = d->kernel_base - text;
        *how = "the dump's kernel_base";
        return true;
    }
    if (d->syscall_entry && ptt_syms_addr_of(&im->syms, link, SYSCALL_ENTRY_SYM, &a) == 0) {
        *kaslr = d->syscall_entry - a; /* the guest's LSTAR is its entry_SYSCALL_64 */
        *how = "the guest's LSTAR (entry_SYSCALL_64)";
        return true;
    }
    if (ks && ptt_syms_addr_of(ks, 0, "_text", &b) == 0 &&
        ptt_syms_addr_of(&im->syms, link, "_text", &a) == 0) {
        *kaslr = b - a;
        *how = "the kallsyms' _text";
        return true;
    }
    if (ks && ptt_syms_addr_of(ks, 0, SYSCALL_ENTRY_SYM, &b) == 0 &&
        ptt_syms_addr_of(&im->syms, link, SYSCALL_ENTRY_SYM, &a) == 0) {
        *kaslr = b - a;
        *how = "the kallsyms' entry_SYSCALL_64";
        return true;
    }
    return false;
}

static int build_elfs(struct ptt_image *im, const struct ptt_dump *d, const struct ptt_opts *o,
                      char *err, size_t errlen)
{
    struct elf_info info;
    struct ptt_syms ks;
    uint64_t kaslr = 0;
    bool have_kaslr = o->has_kaslr, have_ks = false;
    const char *how = o->has_kaslr ? "--kaslr" : NULL;
    int f, dso;

    memset(&ks, 0, sizeof(ks));
    if (o->has_kaslr)
        kaslr = o->kaslr;
    if (kallsyms_pick(im, d, o, err, errlen) != 0)
        return -1;
    if (im->kallsyms && (o->kernel || o->nmap)) { /* its anchors, for the KASLR offset */
        if (ptt_syms_add_kallsyms(&ks, im->kallsyms, "[kernel.kallsyms]", err, errlen) < 0) {
            ptt_syms_free(&ks);
            return -1;
        }
        have_ks = true;
    }
    for (unsigned i = 0; i < o->nelf; i++) {
        const struct ptt_elf_opt *e = &o->elf[i];
        uint64_t bias = 0;

        if ((f = file_map(im, e->path, err, errlen)) < 0)
            goto fail;
        if (elf_segs(im, (unsigned)f, false, 0, &info, err, errlen) != 0)
            goto fail;
        if (e->has_base)
            bias = e->base - info.low;
        else if (info.type == ET_DYN)
            ptt_warn(o,
                     "%s is position independent and has no @LOADBASE: decoded at its link "
                     "addresses (0x%llx)",
                     e->path, (unsigned long long)info.low);
        if (elf_segs(im, (unsigned)f, true, bias, &info, err, errlen) != 0)
            goto fail;
        if ((dso = ptt_syms_add_elf(&im->syms, e->path, e->path, err, errlen)) < 0)
            goto fail;
        ptt_syms_set_bias(&im->syms, (unsigned)dso, bias);
    }
    if (o->kernel) {
        if ((f = file_map(im, o->kernel, err, errlen)) < 0)
            goto fail;
        if (elf_segs(im, (unsigned)f, false, 0, &info, err, errlen) != 0)
            goto fail;
        if ((dso = ptt_syms_add_elf(&im->syms, o->kernel, o->kernel, err, errlen)) < 0)
            goto fail;
        if (!have_kaslr)
            have_kaslr =
                kaslr_of(im, d, (unsigned)dso, info.text, have_ks ? &ks : NULL, &kaslr, &how);
        if (elf_segs(im, (unsigned)f, true, kaslr, &info, err, errlen) != 0)
            goto fail;
        ptt_syms_set_bias(&im->syms, (unsigned)dso, kaslr);
    }
    for (unsigned i = 0; i < o->nmap; i++) {
        uint64_t text = 0;

        if ((dso = ptt_syms_add_map(&im->syms, o->map[i],
                                    o->kernel ? o->kernel : "[kernel.kallsyms]", err, errlen)) < 0)
            goto fail;
        if (!have_kaslr) {
            ptt_syms_addr_of(&im->syms, (unsigned)dso, "_text", &text);
            have_kaslr = kaslr_of(im, d, (unsigned)dso, text, have_ks ? &ks : NULL, &kaslr, &how);
            if (!have_kaslr && d->kernel_base && !text)
                ptt_warn(o,
                         "%s has no _text: its addresses are not shifted to the dump's "
                         "kernel_base (give --kaslr)",
                         o->map[i]);
        }
        ptt_syms_set_bias(&im->syms, (unsigned)dso, kaslr);
    }
    if (o->kernel || o->nmap)
        im->kaslr_how = have_kaslr ? how : "none known (0 assumed)";
    /* the kallsyms last: where it names what a vmlinux names, the vmlinux's symbol (with its
     * size) is kept */
    if (im->kallsyms &&
        ptt_syms_add_kallsyms(&im->syms, im->kallsyms, "[kernel.kallsyms]", err, errlen) < 0)
        goto fail;
    ptt_syms_free(&ks);
    im->kaslr = kaslr;
    if (im->nseg)
        qsort(im->seg, im->nseg, sizeof(*im->seg), seg_cmp);
    for (unsigned i = 1; i < im->nseg; i++)
        if (im->seg[i].va < im->seg[i - 1].va + im->seg[i - 1].len) {
            snprintf(err, errlen, "the code of %s and %s overlap at 0x%llx (a wrong @LOADBASE?)",
                     im->file[im->seg[i - 1].file].path, im->file[im->seg[i].file].path,
                     (unsigned long long)im->seg[i].va);
            return -1;
        }
    return 0;
fail:
    ptt_syms_free(&ks);
    return -1;
}

int ptt_image_build(struct ptt_image *im, const struct ptt_dump *d, const struct ptt_opts *o,
                    char *err, size_t errlen)
{
    struct pt_image_section_cache *isc;
    uint64_t dbytes[PTT_MAX_FILES + 1] = {0}, dplaces[PTT_MAX_FILES + 1] = {0};
    unsigned n;

    memset(im, 0, sizeof(*im));
    im->pt = pt_image_alloc("ptvisor-trace");
    im->iscache = isc = pt_iscache_alloc("snapshots");
    if (!im->pt || !isc) {
        snprintf(err, errlen, "libipt: out of memory");
        return -1;
    }
    pt_iscache_set_limit(isc, 1ull << 30); /* keeps up to 1 GiB of snapshots mapped */
    for (unsigned i = 0; i < d->nsnap; i++) {
        const struct ptt_snap *s = &d->snap[i];
        struct pt_asid asid;
        int isid, r;

        pt_asid_init(&asid);
        if (s->cr3 != PTT_CR3_ANY) /* as a PIP carries it: CR3[51:5] (SDM 33.4.2.7) */
            asid.cr3 = s->cr3 & PIP_CR3_MASK;
        isid = pt_iscache_add_file(isc, s->path, 0, s->len, s->va);
        r = isid < 0 ? isid : pt_image_add_cached(im->pt, isc, isid, &asid);
        if (r < 0) {
            snprintf(err, errlen, "snapshot %s: libipt: %s", s->path, pt_errstr(pt_errcode(r)));
            return -1;
        }
    }
    if ((n = snap_overlaps(d)))
        ptt_warn(o,
                 "%u snapshot%s another in the same address space: the one listed later is "
                 "used there",
                 n, n == 1 ? " overlaps" : "s overlap");
    if (build_elfs(im, d, o, err, errlen) != 0)
        return -1;
    ptt_syms_finish(&im->syms);
    if (im->nseg) {
        compare_snaps(im, d, dbytes, dplaces);
        for (unsigned f = 0; f < im->nfile; f++)
            if (dbytes[f]) {
                bool kern = o->kernel && !strcmp(im->file[f].path, o->kernel);
                ptt_warn(o,
                         "%s: %llu byte%s in %llu place%s differ from the dump's code snapshots; "
                         "the snapshot bytes (those that ran) are used there%s",
                         im->file[f].path, (unsigned long long)dbytes[f], dbytes[f] == 1 ? "" : "s",
                         (unsigned long long)dplaces[f], dplaces[f] == 1 ? "" : "s",
                         kern ? " (expected: Linux patches its text at run time)"
                              : " (a different build, or a wrong @LOADBASE?)");
            }
        pt_image_set_callback(im->pt, read_elf, im);
    }
    return 0;
}

void ptt_image_free(struct ptt_image *im)
{
    if (im->pt)
        pt_image_free(im->pt);
    if (im->iscache)
        pt_iscache_free(im->iscache);
    for (unsigned i = 0; i < im->nfile; i++) {
        munmap(im->file[i].map, im->file[i].size);
        free(im->file[i].path);
    }
    free(im->seg);
    free(im->kallsyms_path);
    ptt_syms_free(&im->syms);
    memset(im, 0, sizeof(*im));
}

/* ---- the session ---- */

int ptt_session_open(struct ptt_session *s, int argc, char **argv, unsigned accept,
                     const char *help, int *exit_status)
{
    int r;

    memset(s, 0, sizeof(*s));
    r = ptt_opts_parse(argc, argv, accept, help, &s->o);
    if (r != 0) {
        *exit_status = r > 0 ? 0 : 1;
        return -1;
    }
    return ptt_session_load(s, exit_status);
}

int ptt_session_load(struct ptt_session *s, int *exit_status)
{
    char err[600];

    if (ptt_dump_load(s->o.input, &s->d, err, sizeof(err)) != 0) {
        *exit_status = ptt_fail(s->o.cmd, "%s", err);
        return -1;
    }
    if (s->d.ncpu == 0) {
        *exit_status = ptt_fail(s->o.cmd, "%s: the dump has no CPU trace (cpus 0)", s->d.dir);
        ptt_dump_free(&s->d);
        return -1;
    }
    if (s->o.cpu >= 0) {
        unsigned i;
        for (i = 0; i < s->d.ncpu && s->d.cpu[i].cpu != (unsigned)s->o.cpu; i++)
            ;
        if (i == s->d.ncpu) {
            *exit_status =
                ptt_fail(s->o.cmd, "--cpu %d: the dump has no trace of CPU %d", s->o.cpu, s->o.cpu);
            ptt_dump_free(&s->d);
            return -1;
        }
    }
    if (ptt_image_build(&s->im, &s->d, &s->o, err, sizeof(err)) != 0) {
        *exit_status = ptt_fail(s->o.cmd, "%s", err);
        ptt_image_free(&s->im);
        ptt_dump_free(&s->d);
        return -1;
    }
    if (s->d.given && !s->o.quiet) {
        struct stat gs;
        if (stat(s->d.given, &gs) == 0 && S_ISDIR(gs.st_mode))
            fprintf(stderr,
                    "ptvisor-trace: %s: %s holds %u dumps: reading the last, %s (name another "
                    "one's directory to read it)\n",
                    s->o.cmd, s->d.given, s->d.ndumps, s->d.dir);
        else
            fprintf(stderr,
                    "ptvisor-trace: %s: %s holds %u dumps: reading the last, dump %u "
                    "(`ptvisor-trace extract %s -o DIR` writes each to its own directory)\n",
                    s->o.cmd, s->d.given, s->d.ndumps, s->d.dump_id, s->d.given);
    }
    if (!s->d.complete)
        ptt_warn(&s->o, "%s: the dump is not complete (dump.meta: complete no)", s->d.dir);
    for (unsigned i = 0; i < s->d.ncpu; i++) {
        const struct ptt_cpu *c = &s->d.cpu[i];
        if (c->crc_bad)
            ptt_warn(&s->o, "cpu%u: the trace's CRC did not match (cpu%u.meta: crc bad)", c->cpu,
                     c->cpu);
        if (c->holes)
            ptt_warn(&s->o, "cpu%u: %u range%s of the trace lost in transit (decoded around)",
                     c->cpu, c->holes, c->holes == 1 ? "" : "s");
    }
    if (s->d.nsnap == 0 && s->im.nseg == 0)
        ptt_warn(&s->o, "no code bytes: the dump has no snapshots and no -e/-k file was given");
    return 0;
}

void ptt_session_close(struct ptt_session *s)
{
    ptt_image_free(&s->im);
    ptt_dump_free(&s->d);
}
