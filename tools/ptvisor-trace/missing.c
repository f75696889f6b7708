/* SPDX-License-Identifier: MIT */
/*
 * ptvisor-trace: stand-ins for the commands written in other files (extract.c, perf.c), so
 * that the tool builds while they are not there.  Weak: the real ones replace them at link
 * time when their files are in tools/ptvisor-trace/ (the build takes *.c).
 */
#include <stdio.h>

#include "ptt.h"

__attribute__((weak)) int ptt_cmd_extract(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ptvisor-trace: extract: not built\n");
    return 1;
}

__attribute__((weak)) int ptt_extract_log(const char *log, const char *dir, int quiet, char *err,
                                          size_t errlen)
{
    (void)dir;
    (void)quiet;
    snprintf(err, errlen, "%s: a serial log, but extract is not built: give a dump directory", log);
    return -1;
}

__attribute__((weak)) int ptt_cmd_perf(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "ptvisor-trace: perf: not built\n");
    return 1;
}
