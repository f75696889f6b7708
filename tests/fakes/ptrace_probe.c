/* SPDX-License-Identifier: MIT */
/* See ptrace_probe.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakes/ptrace_probe.h"

const char *ptrace_unavailable(void)
{
    static char why[200];
    int st;
    pid_t pid = fork();

    if (pid < 0)
        return "fork failed";
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(errno == EPERM ? 99 : 98);
        raise(SIGSTOP);
        _exit(0);
    }
    if (waitpid(pid, &st, 0) != pid)
        return "waitpid failed";
    if (WIFEXITED(st)) {
        snprintf(why, sizeof(why), "PTRACE_TRACEME refused (%s)",
                 WEXITSTATUS(st) == 99 ? "EPERM: no CAP_SYS_PTRACE / seccomp / Yama" : "error");
        return why;
    }
    if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) != 0) {
        snprintf(why, sizeof(why), "PTRACE_SINGLESTEP refused: %s", strerror(errno));
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return why;
    }
    waitpid(pid, &st, 0);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return NULL;
}
