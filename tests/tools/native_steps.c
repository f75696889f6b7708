/* SPDX-License-Identifier: MIT */
/*
 * The bare-metal side of the guest-trace differential (tests/system/bochs-linux.sh): runs a
 * program that opens and closes its own ptvisor trace window with VMCALLs (the guest's
 * ptt-work, tests/tools/ptt_work.c built with -DPTT_SELF_TRACE) natively on this host under
 * ptrace single-stepping, and prints, one per line in hex, the IP of every instruction that
 * ran inside the window: after TRACE_START's VMCALL, up to (not including) TRACE_STOP's.
 * The host has no ptvisor: a VMCALL at CPL 3 raises #UD (SIGILL); it is answered here as
 * ptvisor answers it (RAX = 0, RIP past the 3-byte instruction) and never delivered.
 *
 *   native_steps PROGRAM [ARG...] > ips.txt     exit 0, 77 (ptrace refused), 1 (error)
 *
 * With -e, every instruction from the program's entry point to its exit (the oracle of
 * `ptvisor-ctl trace -u`, which traces one whole process: tests/tools/ptt_exact.c).
 *
 *   native_steps -e PROGRAM [ARG...] > ips.txt
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptv/vmcall.h"

static void die(const char *what)
{
    fprintf(stderr, "native_steps: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    int st;
    bool whole = argc > 1 && !strcmp(argv[1], "-e");
    if (whole) {
        argv++;
        argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: native_steps [-e] PROGRAM [ARG...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(99);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) != pid)
        die("waitpid");
    if (WIFEXITED(st) && WEXITSTATUS(st) == 99) {
        fprintf(stderr, "native_steps: SKIP: ptrace refused here\n");
        return 77;
    }
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP) {
        fprintf(stderr, "native_steps: %s: no exec stop (status %#x)\n", argv[1], st);
        return 1;
    }
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    bool inside = whole;
    unsigned long windows = whole, steps = 0;
    int sig = 0;
    for (;;) {
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, pid, NULL, &r) != 0)
            die("PTRACE_GETREGS");
        errno = 0;
        long word = ptrace(PTRACE_PEEKTEXT, pid, (void *)r.rip, NULL);
        bool vmcall = !whole && !errno && (word & 0xffffff) == 0xc1010f; /* 0f 01 c1 */
        if (vmcall) { /* ptvisor's answer, as the guest got it: RAX = OK, RIP past it */
            if (r.rax == PTV_VMCALL_TRACE_START) {
                inside = true;
                windows++;
            } else if (r.rax == PTV_VMCALL_TRACE_STOP) {
                inside = false;
            }
            r.rax = PTV_VMCALL_OK;
            r.rip += 3;
            if (ptrace(PTRACE_SETREGS, pid, NULL, &r) != 0)
                die("PTRACE_SETREGS");
            continue;
        }
        if (inside) {
            printf("%llx\n", (unsigned long long)r.rip);
            steps++;
        }
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) != 0)
            die("PTRACE_SINGLESTEP");
        sig = 0;
        if (waitpid(pid, &st, 0) != pid)
            die("waitpid");
        if (WIFEXITED(st) || WIFSIGNALED(st))
            break;
        if (WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP)
            sig = WSTOPSIG(st); /* the program's own signal: delivered */
    }
    fprintf(stderr, "native_steps: %lu window(s), %lu instructions inside%s\n", windows, steps,
            whole ? " (entry to exit)" : "");
    return windows == 1 ? 0 : 1;
}
