/* SPDX-License-Identifier: MIT */
/*
 * ptt_mkdump: a dump directory (tools/ptvisor-trace/ptt.h) from a real program, without a
 * VMM, as the input of the ptvisor-trace tests.  The program is single-stepped with ptrace;
 * each step's instruction is classified by the VMM's vmm/trace/x86_class.c from the code
 * bytes as they were when the page first ran (recorded then: the snapshot), and fed to the
 * VMM's software PT generator vmm/trace/swpt.c as the VMM's tracer feeds it.  The kernel is
 * outside the trace filter: a SYSCALL is a far transfer to a kernel IP (trace disabled) and
 * a SYSRET-class return (trace enabled again).  Written:
 *
 *   DIR/dump.meta, DIR/cpu0.meta, DIR/cpu0.pt, DIR/snapshots, DIR/snap/NNNN.bin
 *   DIR/truth.txt   "# KEY N" lines (insns, branch counts as ptvisor-trace summary names
 *                   them), then the IP of every instruction that ran, in order, in hex
 *
 * usage: ptt_mkdump [OPTIONS] DIR PROGRAM [ARG...]
 *   --cr3 HEX  trace with OS=1 and a user IP range (PIPs written) and snapshots bound to
 *              that CR3 (default: User=1 only, no PIP, snapshots for "any" address space)
 *   --shift HEX
 *              the program as kernel code: every address it runs at plus HEX (mod 2^64),
 *              traced at CPL 0 (OS=1, User=0) within an IP range around it; its syscalls
 *              leave the range and come back.  For kernel symbols: the program's own ELF,
 *              moved to a kernel link address, is a "vmlinux"
 *   --lstar HEX
 *              the guest's IA32_LSTAR the dump names (dump.meta's syscall_entry, BEGIN lstar=)
 *   --log FILE also the serial log the VMM would write for this dump: the frames of the
 *              VMM's encoder (vmm/trace/frame.c) between lines of guest console output
 *   --append   add to the log instead of replacing it (a log of several dumps)
 *   --dump-id N, --boot-id HEX, --reason vmcall|crash|serial|boot
 *              the dump's id (default 1), boot id (default 1) and reason in the log
 *   --note-kallsyms FILE
 *              after the dump, the guest's kallsyms note of FILE (kallsyms text), written
 *              as `ptvisor-ctl kallsyms` writes it (guest/ptv_note.c)
 *   --note-comm NAME:PID
 *              after the dump, the comm note `ptvisor-ctl trace -d` writes for it
 * Exit 0; 1 on an error (one line); 77 when ptrace is refused here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptv_note.h"
#include "trace/dump.h"
#include "trace/frame.h"
#include "trace/swpt.h"
#include "trace/x86_class.h"

#define PG       4096ull
#define KSYS     0xffffffff81000000ull /* the kernel's syscall entry, outside the filter */
#define USER_TOP 0x00007fffffffffffull
#define RING     (64u << 20)

static const struct x86_insn I_SYSRET = {.len = 3, .branch = X86_BR_SYSRET};

/* --shift: the program as kernel code at its addresses + shift; syscalls go to KSYS_FAR */
static uint64_t shift;
static bool kernel_mode;
#define KSYS_FAR 0xfffffffffff00000ull
static uint64_t lstar;
static uint32_t dump_id = 1, boot_id = 1;
static enum frame_reason reason = FRAME_REASON_VMCALL;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fputs("ptt_mkdump: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- code pages, recorded when they first run (sorted array: few pages) ---- */

struct page {
    uint64_t va;
    uint8_t b[PG];
};
static struct page *pages;
static size_t npages, cappages;

static struct page *page_get(uint64_t va, int memfd)
{
    size_t lo = 0, hi = npages;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pages[mid].va == va)
            return &pages[mid];
        if (pages[mid].va < va)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (npages == cappages) {
        cappages = cappages ? 2 * cappages : 64;
        pages = realloc(pages, cappages * sizeof(*pages));
        if (!pages)
            die("out of memory");
    }
    memmove(&pages[lo + 1], &pages[lo], (npages - lo) * sizeof(*pages));
    pages[lo].va = va;
    if (pread(memfd, pages[lo].b, PG, (off_t)va) != (ssize_t)PG)
        die("code page at %#llx unreadable: %s", (unsigned long long)va, strerror(errno));
    npages++;
    return &pages[lo];
}

/* classify the instruction at ip from the recorded bytes (the next page only if it
 * continues there); 0 or -1 */
static int classify(uint64_t ip, int memfd, struct x86_insn *in)
{
    uint8_t b[X86_MAX_INSN];
    size_t off = ip & (PG - 1), n = PG - off < X86_MAX_INSN ? PG - off : X86_MAX_INSN;
    int r;

    memcpy(b, page_get(ip - off, memfd)->b + off, n);
    r = x86_classify(b, n, X86_CODE64, in);
    if (r == X86_E_SHORT) {
        memcpy(b + n, page_get(ip - off + PG, memfd)->b, X86_MAX_INSN - n);
        r = x86_classify(b, X86_MAX_INSN, X86_CODE64, in);
    }
    return r == 0 ? 0 : -1;
}

/* ---- truth ---- */

enum { T_INSNS, T_COND_TAKEN, T_COND_NOT, T_JMP, T_JMP_IND, T_CALL, T_CALL_IND, T_RET, T_FAR, T_N };
static const char *const tname[T_N] = {"insns", "cond_taken", "cond_not", "jmp", "jmp_ind",
                                       "call",  "call_ind",   "ret",      "far"};
static uint64_t tcount[T_N];
static uint64_t *truth;
static size_t ntruth, captruth;

static void ran(uint64_t ip, const struct x86_insn *in, uint64_t nrip)
{
    if (ntruth == captruth) {
        captruth = captruth ? 2 * captruth : 1 << 16;
        truth = realloc(truth, captruth * sizeof(*truth));
        if (!truth)
            die("out of memory");
    }
    truth[ntruth++] = ip;
    tcount[T_INSNS]++;
    switch (in->branch) {
    case X86_BR_JCC:
        tcount[nrip == ip + in->len ? T_COND_NOT : T_COND_TAKEN]++;
        break;
    case X86_BR_JMP_DIRECT:
        tcount[T_JMP]++;
        break;
    case X86_BR_JMP_INDIRECT:
        tcount[T_JMP_IND]++;
        break;
    case X86_BR_CALL_DIRECT:
        tcount[T_CALL]++;
        break;
    case X86_BR_CALL_INDIRECT:
        tcount[T_CALL_IND]++;
        break;
    case X86_BR_RET:
        tcount[T_RET]++;
        break;
    case X86_BR_NONE:
    case X86_BR_VMX:
    case X86_BR_UD:
        break;
    default:
        tcount[T_FAR]++;
        break;
    }
}

/* ---- files ---- */

static void put_file(const char *dir, const char *name, const void *buf, size_t len)
{
    char path[4200];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        die("%s: %s", path, strerror(errno));
}

static void put_text(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put_text(const char *dir, const char *name, const char *fmt, ...)
{
    char *s;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        die("out of memory");
    put_file(dir, name, s, (size_t)n);
    free(s);
}

static void write_dump(const char *dir, const struct swpt_ring *ring, bool have_cr3, uint64_t cr3)
{
    char path[4200], cr3s[32];
    FILE *f;
    unsigned nsnap = 0;

    static const char *const rname[] = {"vmcall", "crash", "serial", "boot"};
    char lstar_line[64] = "";
    if (lstar)
        snprintf(lstar_line, sizeof(lstar_line), "syscall_entry 0x%llx\n",
                 (unsigned long long)lstar);
    put_text(dir, "dump.meta",
             "protocol 1\ndump %u\nreason %s\nsource software\ncpus 1\ntsc_hz 0\n"
             "kernel_base 0x0\n%scomplete yes\nframes_ok 0\nframes_bad 0\nframes_missing 0\n",
             dump_id, rname[reason], lstar_line);
    snprintf(cr3s, sizeof(cr3s), have_cr3 ? "cr3 0x%llx\n" : "", (unsigned long long)cr3);
    put_text(dir, "cpu0.meta",
             "cpu 0\nbytes %llu\nring_size %u\nwrapped 0\noverflows 0\nfilters %s\n%scrc ok\n",
             (unsigned long long)ring->head, RING,
             kernel_mode ? "kernel,range"
             : have_cr3  ? "kernel,user,range"
                         : "user",
             cr3s);
    put_file(dir, "cpu0.pt", ring->buf, (size_t)ring->head);
    /* snapshots: runs of adjacent pages, one file each */
    snprintf(path, sizeof(path), "%s/snapshots", dir);
    f = fopen(path, "w");
    if (!f)
        die("%s: %s", path, strerror(errno));
    for (size_t i = 0; i < npages;) {
        size_t j = i + 1;
        char name[64];
        FILE *s;

        while (j < npages && pages[j].va == pages[j - 1].va + PG)
            j++;
        snprintf(name, sizeof(name), "snap/%04u.bin", nsnap++);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        s = fopen(path, "w");
        if (!s)
            die("%s: %s", path, strerror(errno));
        for (size_t k = i; k < j; k++)
            if (fwrite(pages[k].b, 1, PG, s) != PG)
                die("%s: %s", path, strerror(errno));
        if (fclose(s) != 0)
            die("%s: %s", path, strerror(errno));
        if (have_cr3)
            fprintf(f, "%llx %llu %llx %s\n", (unsigned long long)(pages[i].va + shift),
                    (unsigned long long)((j - i) * PG), (unsigned long long)cr3, name);
        else
            fprintf(f, "%llx %llu any %s\n", (unsigned long long)(pages[i].va + shift),
                    (unsigned long long)((j - i) * PG), name);
        i = j;
    }
    if (fclose(f) != 0)
        die("snapshots: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/truth.txt", dir);
    f = fopen(path, "w");
    if (!f)
        die("%s: %s", path, strerror(errno));
    for (unsigned k = 0; k < T_N; k++)
        fprintf(f, "# %s %llu\n", tname[k], (unsigned long long)tcount[k]);
    for (size_t i = 0; i < ntruth; i++)
        fprintf(f, "%llx\n", (unsigned long long)(truth[i] + shift));
    if (fclose(f) != 0)
        die("truth.txt: %s", strerror(errno));
}

/* ---- the serial log ---- */

static void log_line(void *ctx, const char *line, size_t n)
{
    static unsigned k;

    if (fwrite(line, 1, n, ctx) != n)
        die("log: %s", strerror(errno));
    if (++k % 50 == 0) /* the guest's console goes on between frame lines */
        fprintf(ctx, "[   %u.%06u] guest console line %u\n", k / 1000, k % 1000 * 1000, k);
}

static void note_out(void *ctx, const char *line, size_t n)
{
    if (fwrite(line, 1, n, ctx) != n)
        die("log: %s", strerror(errno));
}

/* the dump driver's reader: the ring's bytes (it never wrapped) and the snapshots */
struct log_src {
    const struct swpt_ring *ring;
    const struct frame_snap *snaps;
    const uint8_t *const *bytes;
};

static size_t log_read(void *ctx, unsigned sect, unsigned stream, uint64_t off, uint8_t *buf,
                       size_t len)
{
    const struct log_src *src = ctx;
    const uint8_t *p = stream == FRAME_STREAM_TRACE     ? src->ring->buf
                       : stream >= FRAME_STREAM_SNAP(0) ? src->bytes[stream - FRAME_STREAM_SNAP(0)]
                                                        : NULL;
    (void)sect;
    if (!p)
        return 0;
    memcpy(buf, p + off, len); /* the driver asks only inside the lengths of the BEGIN */
    return len;
}

static void write_log(const char *path, bool append, const struct swpt_ring *ring, bool have_cr3,
                      uint64_t cr3, const char *note_ks, const char *note_comm)
{
    static struct dump_job job; /* about 23 KiB */
    static struct frame_snap snaps[FRAME_MAX_SNAPS];
    static const uint8_t *snap_bytes[FRAME_MAX_SNAPS];
    static uint8_t flat[FRAME_MAX_SNAPS * 16 * PG];
    uint64_t cr3s[1] = {cr3};
    unsigned n = 0;
    size_t used = 0;
    FILE *f = fopen(path, append ? "a" : "w");

    if (!f)
        die("%s: %s", path, strerror(errno));
    fprintf(f, "Linux version 6.1 (guest console before dump %u)\n", dump_id);
    for (size_t i = 0; i < npages;) { /* runs of adjacent pages, as in the directory */
        size_t j = i + 1;
        while (j < npages && pages[j].va == pages[j - 1].va + PG)
            j++;
        if (n == FRAME_MAX_SNAPS || used + (j - i) * PG > sizeof(flat))
            die("log: too many code pages for one dump");
        snaps[n] =
            (struct frame_snap){pages[i].va + shift, have_cr3 ? cr3 : FRAME_CR3_ANY, (j - i) * PG};
        snap_bytes[n] = flat + used;
        for (size_t k = i; k < j; k++, used += PG)
            memcpy(flat + used, pages[k].b, PG);
        n++;
        i = j;
    }
    const struct frame_begin b = {.boot_id = boot_id,
                                  .dump_id = dump_id,
                                  .cpu = 0,
                                  .ncpus = 1,
                                  .reason = reason,
                                  .source = FRAME_SRC_SOFTWARE,
                                  .filter = kernel_mode ? FRAME_FILTER_KERNEL
                                            : have_cr3  ? FRAME_FILTER_USER | FRAME_FILTER_KERNEL
                                                        : FRAME_FILTER_USER,
                                  .syscall_entry = lstar,
                                  .ring_size = RING,
                                  .cr3s = cr3s,
                                  .ncr3 = have_cr3 ? 1 : 0,
                                  .snaps = snaps,
                                  .nsnap = n,
                                  .trace_len = ring->head};
    const struct dump_sect sect = {.b = b};
    const struct dump_ops ops = {.read = log_read,
                                 .ctx = &(struct log_src){ring, snaps, snap_bytes}};
    const struct frame_out o = {log_line, f};
    if (dump_start(&job, &sect, 1, &ops, &o) != 0)
        die("dump_start: %s", job.err);
    while (dump_step(&job))
        ;
    if (job.err || job.lost)
        die("dump: %s", job.err ? job.err : "bytes lost");
    fprintf(f, "guest console after dump %u\n", dump_id);
    /* the guest's notes, as ptvisor-ctl writes them */
    const struct frame_out no = {note_out, f};
    if (note_comm) {
        char name[64];
        unsigned long pid;
        const char *colon = strrchr(note_comm, ':');
        if (!colon || colon == note_comm || (size_t)(colon - note_comm) >= sizeof(name) ||
            sscanf(colon + 1, "%lu", &pid) != 1)
            die("--note-comm wants NAME:PID, not '%s'", note_comm);
        memcpy(name, note_comm, (size_t)(colon - note_comm));
        name[colon - note_comm] = 0;
        ptv_note_comm(0xc0000000u | dump_id, dump_id, pid, name, &no);
        fprintf(f, "ptvisor-ctl: dump %u of %s going out on the serial console\n", dump_id, name);
    }
    if (note_ks) {
        FILE *k = fopen(note_ks, "r");
        char *text = NULL, *data;
        size_t cap = 0, len = 0, dlen;
        unsigned nsym;
        const char *why;
        if (!k)
            die("%s: %s", note_ks, strerror(errno));
        for (size_t r; (r = fread(text + len, 1, cap - len, k)) > 0 || cap - len == 0;) {
            len += r;
            if (cap - len == 0) {
                cap = cap ? 2 * cap : 1 << 16;
                text = realloc(text, cap);
                if (!text)
                    die("out of memory");
            }
        }
        fclose(k);
        if (ptv_note_kallsyms_data(text, len, 0, ~0ull, &data, &dlen, &nsym, &why) != 0)
            die("%s: %s", note_ks, why);
        if (ptv_note_data(0xa0000000u | dump_id, "kallsyms", (const uint8_t *)data, dlen, &no))
            die("the kallsyms note could not be encoded");
        fprintf(f, "ptvisor-ctl: kallsyms: %u code symbols of %s sent\n", nsym, note_ks);
        free(text);
        free(data);
    }
    if (fclose(f) != 0)
        die("%s: %s", path, strerror(errno));
}

/* ---- stepping ---- */

static uint64_t rip_of(pid_t pid)
{
    struct user_regs_struct r;

    if (ptrace(PTRACE_GETREGS, pid, NULL, &r) != 0)
        die("PTRACE_GETREGS: %s", strerror(errno));
    return r.rip;
}

int main(int argc, char **argv)
{
    uint64_t cr3 = 0x1000, max_steps = 50000000, steps = 0, tsc = 0;
    unsigned psb = 1u << 12;
    bool have_cr3 = false, append = false;
    const char *log = NULL, *note_ks = NULL, *note_comm = NULL;
    int i = 1, st;

    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--append")) {
            append = true;
            i--;
            continue;
        }
        if (i + 1 >= argc)
            die("%s needs a value", argv[i]);
        if (!strcmp(argv[i], "--shift")) {
            shift = strtoull(argv[i + 1], NULL, 16);
            kernel_mode = true;
        } else if (!strcmp(argv[i], "--lstar")) {
            lstar = strtoull(argv[i + 1], NULL, 16);
        } else if (!strcmp(argv[i], "--dump-id")) {
            dump_id = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--boot-id")) {
            boot_id = (uint32_t)strtoul(argv[i + 1], NULL, 16);
        } else if (!strcmp(argv[i], "--reason")) {
            static const char *const rn[] = {"vmcall", "crash", "serial", "boot"};
            unsigned r;
            for (r = 0; r < 4 && strcmp(argv[i + 1], rn[r]); r++)
                ;
            if (r == 4)
                die("--reason: vmcall, crash, serial or boot");
            reason = (enum frame_reason)r;
        } else if (!strcmp(argv[i], "--note-kallsyms")) {
            note_ks = argv[i + 1];
        } else if (!strcmp(argv[i], "--note-comm")) {
            note_comm = argv[i + 1];
        } else if (!strcmp(argv[i], "--cr3")) {
            cr3 = strtoull(argv[i + 1], NULL, 16);
            have_cr3 = true;
        } else if (!strcmp(argv[i], "--max-steps")) {
            max_steps = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--log")) {
            log = argv[i + 1];
        } else if (!strcmp(argv[i], "--psb")) {
            psb = (unsigned)strtoul(argv[i + 1], NULL, 10);
        } else {
            die("unknown option %s", argv[i]);
        }
    }
    if (argc - i < 2)
        die("usage: ptt_mkdump [OPTIONS] DIR PROGRAM [ARG...] (see tests/tools/mkdump.c)");
    if (kernel_mode && have_cr3)
        die("--shift and --cr3 exclude each other");
    const char *dir = argv[i];
    char snapdir[4200];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        die("%s: %s", dir, strerror(errno));
    snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
    if (mkdir(snapdir, 0755) != 0 && errno != EEXIST)
        die("%s: %s", snapdir, strerror(errno));

    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(99);
        execv(argv[i + 1], argv + i + 1);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) != pid)
        die("waitpid: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 99) {
        printf("SKIP: ptrace refused here\n");
        return 77;
    }
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP)
        die("%s: no exec stop (status %#x)", argv[i + 1], st);
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    char mem[64];
    snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
    int memfd = open(mem, O_RDONLY);
    if (memfd < 0)
        die("%s: %s", mem, strerror(errno));

    struct swpt_cfg cfg = {.filter = {.user = true}, .psb_period = psb};
    if (have_cr3) { /* OS = 1 so that PIPs are written; user code by an IP range */
        cfg.filter.kernel = true;
        cfg.filter.nranges = 1;
        cfg.filter.range[0].hi = USER_TOP;
    }
    uint64_t rip0 = rip_of(pid);
    if (kernel_mode) { /* CPL 0 only, the 1 GiB around the moved program */
        cfg.filter.user = false;
        cfg.filter.kernel = true;
        cfg.filter.nranges = 1;
        cfg.filter.range[0].lo = (rip0 & ~0x3fffffffull) + shift;
        cfg.filter.range[0].hi = cfg.filter.range[0].lo + 0x3fffffffull;
        if (cfg.filter.range[0].lo < (1ull << 63) ||
            cfg.filter.range[0].hi < cfg.filter.range[0].lo ||
            (KSYS_FAR >= cfg.filter.range[0].lo && KSYS_FAR <= cfg.filter.range[0].hi))
            die("--shift %#llx: the program does not land in the kernel half below %#llx",
                (unsigned long long)shift, (unsigned long long)KSYS_FAR);
    }
    const char *why;
    if (swpt_cfg_check(&cfg, &why) != 0)
        die("swpt config: %s", why);
    static struct swpt t;
    struct swpt_ring ring = {.size = RING, .stop_on_full = true};
    /* u: where the program runs (CPL 3, or CPL 0 with --shift), k: its syscalls' entry */
    const struct swpt_ctx u = {.cr3 = cr3, .cpl = kernel_mode ? 0 : 3, .cs = X86_CODE64};
    const struct swpt_ctx k = {.cr3 = cr3, .cpl = 0, .cs = X86_CODE64};
    const uint64_t ksys = kernel_mode ? KSYS_FAR : KSYS;
    ring.buf = malloc(RING);
    if (!ring.buf)
        die("out of memory");
    uint64_t rip = rip0;
    swpt_start(&t, &cfg, &ring, &u, rip + shift, tsc);

    for (;;) {
        struct x86_insn in;

        if (steps++ == max_steps)
            die("more than %llu steps", (unsigned long long)max_steps);
        if (classify(rip, memfd, &in) != 0)
            die("x86_classify failed at %#llx", (unsigned long long)rip);
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) != 0)
            die("PTRACE_SINGLESTEP: %s", strerror(errno));
        if (waitpid(pid, &st, 0) != pid)
            die("waitpid: %s", strerror(errno));
        tsc += 100;
        if (WIFEXITED(st) || WIFSIGNALED(st)) { /* exit_group: a syscall that never returns */
            if (in.branch != X86_BR_SYSCALL)
                die("the program ended at %#llx, not by a syscall", (unsigned long long)rip);
            ran(rip, &in, KSYS);
            swpt_insn(&t, rip + shift, &in, ksys, &k, tsc);
            swpt_stop(&t, ksys);
            break;
        }
        if (WSTOPSIG(st) != SIGTRAP)
            die("signal %d at %#llx: signals are not modelled here", WSTOPSIG(st),
                (unsigned long long)rip);
        uint64_t nrip = rip_of(pid);
        if (in.branch == X86_BR_SYSCALL) {
            ran(rip, &in, KSYS);
            swpt_insn(&t, rip + shift, &in, ksys, &k, tsc);
            swpt_insn(&t, ksys, &I_SYSRET, nrip + shift, &u, tsc);
        } else if ((in.flags & X86_F_REP) && nrip == rip) {
            swpt_insn(&t, rip + shift, &in, rip + shift, &u, tsc); /* one more iteration */
        } else {
            bool ok = in.branch == X86_BR_NONE ? nrip == rip + in.len
                      : in.branch == X86_BR_JCC
                          ? nrip == rip + in.len || nrip == x86_direct_target(rip, &in, X86_CODE64)
                      : in.branch == X86_BR_JMP_DIRECT || in.branch == X86_BR_CALL_DIRECT
                          ? nrip == x86_direct_target(rip, &in, X86_CODE64)
                          : in.branch == X86_BR_JMP_INDIRECT || in.branch == X86_BR_CALL_INDIRECT ||
                                in.branch == X86_BR_RET;
            if (!ok)
                die("%s at %#llx went to %#llx", x86_branch_name(in.branch),
                    (unsigned long long)rip, (unsigned long long)nrip);
            ran(rip, &in, nrip);
            swpt_insn(&t, rip + shift, &in, nrip + shift, &u, tsc);
        }
        rip = nrip;
    }
    close(memfd);
    if (ring.stopped)
        die("the %u-byte ring filled up", RING);
    write_dump(dir, &ring, have_cr3, cr3);
    if (log)
        write_log(log, append, &ring, have_cr3, cr3, note_ks, note_comm);
    printf("ptt_mkdump: %s: %llu instructions, %llu PT bytes, %zu code pages\n", dir,
           (unsigned long long)ntruth, (unsigned long long)ring.head, npages);
    free(ring.buf);
    free(truth);
    free(pages);
    return 0;
}
