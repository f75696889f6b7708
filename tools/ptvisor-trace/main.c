/* SPDX-License-Identifier: MIT */
/* ptvisor-trace: one binary, one subcommand per file (ptt.h); this file only dispatches and
 * holds the manual (`ptvisor-trace --help`). */
#include <stdio.h>
#include <string.h>

#include "ptt.h"

static const char manual[] =
    "NAME\n"
    "    ptvisor-trace - read the Intel PT traces that ptvisor dumps over the serial line\n"
    "\n"
    "SYNOPSIS\n"
    "    ptvisor-trace extract LOG -o DIR [--dump N | --last | --list]\n"
    "    ptvisor-trace decode [-e FILE[@BASE]]... [-k VMLINUX] [-m SYSTEM.MAP]...\n"
    "                         [--kallsyms FILE] [--branches] DIR|LOG\n"
    "    ptvisor-trace stacks [OPTIONS] DIR|LOG\n"
    "    ptvisor-trace flamegraph [OPTIONS] DIR|LOG -o FILE.svg\n"
    "    ptvisor-trace summary [OPTIONS] DIR|LOG\n"
    "    ptvisor-trace perf DIR|LOG -o perf.data\n"
    "    ptvisor-trace COMMAND --help\n"
    "\n"
    "DESCRIPTION\n"
    "    ptvisor keeps a ring of Intel PT packets per CPU (from the CPU's PT or from its\n"
    "    software tracer) and dumps a window of it, with the guest code pages that window\n"
    "    executed, as framed lines on its serial console. This tool turns the captured serial\n"
    "    log into a dump directory, and a dump into an instruction flow, call stacks, a flame\n"
    "    graph, numbers, or a perf.data file for `perf script` / `perf report`.\n"
    "    Every command that reads a trace takes a dump directory or the serial log itself\n"
    "    (extracted into a temporary directory first). Decoding uses libipt.\n"
    "\n"
    "COMMANDS\n"
    "    extract     serial log -> a directory per dump (DIR/dump-ID-REASON); reports lost,\n"
    "                corrupted and duplicated frames with their numbers\n"
    "    decode      one line per instruction (or per taken branch), perf-script-like\n"
    "    stacks      folded call stacks (\"a;b;c COUNT\"), counted in instructions\n"
    "    flamegraph  a self-contained SVG flame graph of those stacks\n"
    "    summary     instructions, branches, events, gaps, top functions\n"
    "    perf        a perf.data file with the trace as Intel PT AUX data\n"
    "\n"
    "OPTIONS (decode, stacks, flamegraph, summary)\n"
    "    -e, --elf FILE[@BASE]\n"
    "           code and symbols of a guest program or library; BASE (hex) is the address\n"
    "           of its lowest loaded page (the first line of it in /proc/PID/maps); without\n"
    "           it, the link addresses. Repeatable.\n"
    "    -k, --vmlinux, --kernel VMLINUX\n"
    "           code and symbols of the guest kernel, at its link addresses shifted by the\n"
    "           KASLR offset (KERNEL SYMBOLS).\n"
    "    -m, --map SYSTEM.MAP\n"
    "           kernel symbols from a System.map (shifted like -k). Repeatable.\n"
    "    --kallsyms FILE\n"
    "           kernel symbols from the guest's /proc/kallsyms (read as root), at the\n"
    "           addresses it gives (KASLR included). Default: the dump's own DIR/kallsyms.\n"
    "    --kaslr OFF\n"
    "           the KASLR offset (hex) instead of the one found (KERNEL SYMBOLS).\n"
    "    --cpu N\n"
    "           only the trace of CPU N.\n"
    "    -o, --output FILE\n"
    "           write to FILE (flamegraph: the SVG) instead of standard output.\n"
    "    --progress\n"
    "           a progress line on stderr every few seconds (default: only on a terminal).\n"
    "    -q, --quiet\n"
    "           no warnings.\n"
    "    -h, --help\n"
    "           this manual; `ptvisor-trace COMMAND --help`: the command's own options.\n"
    "\n"
    "CODE BYTES\n"
    "    To follow a trace the decoder needs the bytes of every instruction that ran. They\n"
    "    come first from the dump's code snapshots (the bytes that ran, read by the VMM, per\n"
    "    address space), then from -e and -k files where no snapshot covers an address.\n"
    "    Snapshot bytes take precedence: where a file's bytes differ from a snapshot's at the\n"
    "    same address, one warning per file says how many bytes in how many places. For a\n"
    "    kernel that is expected (Linux patches its own text at run time: alternatives,\n"
    "    static keys, ftrace); for a program it means another build or a wrong BASE.\n"
    "    Where no bytes are known, decode prints a gap line and goes on at the next PSB.\n"
    "\n"
    "KERNEL SYMBOLS\n"
    "    Kernel addresses are named from the guest's kallsyms, a vmlinux or a System.map.\n"
    "    kallsyms holds run addresses: `ptvisor-ctl kallsyms` in the guest sends its\n"
    "    /proc/kallsyms over the console, extract writes it into the directory of every\n"
    "    dump of that boot (DIR/kallsyms), and every command uses it; --kallsyms names\n"
    "    another file. A vmlinux or System.map holds link addresses, shifted by the KASLR\n"
    "    offset, the first of: --kaslr; dump.meta's kernel_base minus the start of the\n"
    "    text; the guest's LSTAR (syscall_entry, in every dump taken after Linux set it\n"
    "    up) minus entry_SYSCALL_64; the kallsyms' _text minus the file's _text; else 0.\n"
    "    `summary` says which, and what share of the kernel's instructions has a name.\n"
    "\n"
    "FILES\n"
    "    DIR/dump.meta        the dump: protocol, reason, source, CPUs, kernel_base, ...\n"
    "    DIR/cpuN.pt          the raw PT bytes of CPU N (holes lost in transit cut out)\n"
    "    DIR/cpuN.meta        bytes, ring size, wrap, overflows, CR3s, missing ranges, CRC\n"
    "    DIR/snapshots        \"VA LEN CR3|any FILE\" per code snapshot, FILE under DIR/snap/\n"
    "    DIR/crash.txt        the crash report, when the dump was made for a crash\n"
    "    DIR/kallsyms         the guest kernel's symbols, when the guest sent them\n"
    "    DIR/console.log      the guest's console with the frame lines removed\n"
    "    (docs/serial-protocol.md: the frames; tools/ptvisor-trace/ptt.h: the directory)\n"
    "\n"
    "EXIT STATUS\n"
    "    0  done (gaps in a trace are reported in the output, not an error)\n"
    "    1  an error: a one-line message \"ptvisor-trace: COMMAND: CAUSE\" on stderr\n"
    "\n"
    "EXAMPLES\n"
    "    ptvisor-trace extract serial.log -o trace      # trace/dump-1-boot/, ...\n"
    "    ptvisor-trace extract serial.log -o dump --last\n"
    "    ptvisor-trace summary dump -k vmlinux\n"
    "    ptvisor-trace summary trace/dump-1-boot --kallsyms kallsyms.txt\n"
    "    ptvisor-trace decode dump -k vmlinux -e guest/init@400000 | less\n"
    "    ptvisor-trace decode --branches serial.log -m System.map\n"
    "    ptvisor-trace stacks dump -k vmlinux > stacks.txt\n"
    "    ptvisor-trace flamegraph dump -k vmlinux -o trace.svg\n"
    "    ptvisor-trace perf dump -o perf.data && perf script -i perf.data --itrace=i1i\n";

static const struct {
    const char *name;
    int (*run)(int, char **);
} cmds[] = {
    {"extract", ptt_cmd_extract},       {"decode", ptt_cmd_decode},   {"stacks", ptt_cmd_stacks},
    {"flamegraph", ptt_cmd_flamegraph}, {"summary", ptt_cmd_summary}, {"perf", ptt_cmd_perf},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "ptvisor-trace: which command? extract, decode, stacks, flamegraph, "
                        "summary or perf (ptvisor-trace --help)\n");
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(manual, stdout);
        return fflush(stdout) != 0;
    }
    for (unsigned i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ptvisor-trace: \"%s\" is not a command (ptvisor-trace --help)\n", argv[1]);
    return 1;
}
