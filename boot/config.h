/* SPDX-License-Identifier: MIT */
/*
 * The ptvisor.cfg parser: plain bytes in, struct ptv_config out.  Pure code,
 * compiled unchanged into the loader, the host tests and the fuzzer.
 *
 * Format: one `key = value` per line, `#` starts a comment, blanks around
 * keys, '=' and values are ignored, the file is ASCII.  Every bad line is
 * reported once (file:line: what) and skipped; its key keeps its default.
 */
#ifndef PTV_BOOT_CONFIG_H
#define PTV_BOOT_CONFIG_H

#include <stddef.h>
#include "ptv/config.h"

#define PTV_CFG_LINE_MAX 1024 /* bytes per line without the newline */
#define PTV_CFG_MSG_MAX  160  /* bytes per error message, with the NUL */

/* called once per bad line with "NAME:LINE: message" */
typedef void (*ptv_cfg_report_fn)(void *ctx, const char *msg);

void ptv_config_defaults(struct ptv_config *cfg);

/*
 * Parse len bytes of text (not NUL-terminated; NUL bytes are errors) over
 * the values already in *cfg (normally the defaults).  name is the file name
 * used in messages.  Returns the number of bad lines.
 */
unsigned ptv_config_parse(struct ptv_config *cfg, const char *text, size_t len, const char *name,
                          ptv_cfg_report_fn report, void *ctx);

/* "vmm=on pt_mode=auto ..." (one line, for the boot log) */
void ptv_config_summary(const struct ptv_config *cfg, char *buf, size_t cap);

#endif
