/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the ptvisor.cfg parser (boot/config.c).  Invariants:
 * no crash or UB (ASan/UBSan), every message bounded and NUL-terminated, the
 * result always passes the VMM's own check of the config (vmm/base/handoff.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../boot/config.h"
#include "base/handoff.h"

static void report(void *ctx, const char *msg)
{
    size_t *count = ctx;
    if (strnlen(msg, PTV_CFG_MSG_MAX) >= PTV_CFG_MSG_MAX)
        abort();
    (*count)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ptv_config cfg;
    const char *why;
    char summary[256];
    size_t lines = 1, reported = 0;
    /* a copy of exactly size bytes, so ASan catches any read past the end */
    char *text = malloc(size ? size : 1);

    memcpy(text, data, size);
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    ptv_config_defaults(&cfg);
    unsigned errors = ptv_config_parse(&cfg, text, size, "ptvisor.cfg", report, &reported);
    if (errors != reported || errors > lines)
        abort();
    if (ptv_config_check(&cfg, &why) != 0)
        abort();
    if (cfg.guest_path[0] != '\\' || strlen(cfg.guest_path) >= PTV_CFG_PATH_MAX)
        abort();
    ptv_config_summary(&cfg, summary, sizeof(summary));
    if (strnlen(summary, sizeof(summary)) >= sizeof(summary))
        abort();
    free(text);
    return 0;
}
