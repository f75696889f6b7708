/* SPDX-License-Identifier: MIT */
/*
 * A tracee for tests/unit/trace/test_swpt_ptrace.c: signal handlers entered (raise -> tgkill, the
 * kernel builds a frame and enters the handler) and left (rt_sigreturn), a loop with
 * conditional branches, indirect calls through a table, and returns.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t hits;
static volatile unsigned long acc;

static void on_usr1(int sig)
{
    for (int i = 0; i < 20; i++)
        acc += (unsigned long)(i * sig) ^ acc >> 3;
    hits++;
}

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    acc += (unsigned long)sig + (unsigned long)si->si_signo;
    hits++;
}

static unsigned long f1(unsigned long x)
{
    return x * 3 + 1;
}

static unsigned long f2(unsigned long x)
{
    return x / 2;
}

int main(void)
{
    struct sigaction sa;
    unsigned long (*const tab[])(unsigned long) = {f1, f2};

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR2, &sa, NULL);
    for (int round = 0; round < 5; round++) {
        unsigned long x = 27 + (unsigned long)round;

        for (int n = 0; n < 200 && x != 1; n++)
            x = tab[x & 1](x); /* Collatz: a jcc and an indirect call each step */
        acc += x;
        raise(round & 1 ? SIGUSR2 : SIGUSR1);
    }
    printf("swpt_sig: %d signals handled\n", (int)hits);
    return hits == 5 ? 0 : 1;
}
