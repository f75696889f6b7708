/* SPDX-License-Identifier: MIT */
/*
 * VMM log lines: "[cpuN subsystem] message", filtered by the configured level.
 *   pr_info("vmx", "launched: guest RIP %lx", rip);
 */
#ifndef PTV_LOG_H
#define PTV_LOG_H

#include <ptv/config.h>

void log_set_level(unsigned level);
void log_msg(unsigned level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* raw text without prefix (dumps) */
void log_raw(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define pr_err(sub, ...)   log_msg(PTV_LOG_ERROR, sub, __VA_ARGS__)
#define pr_warn(sub, ...)  log_msg(PTV_LOG_WARN, sub, __VA_ARGS__)
#define pr_info(sub, ...)  log_msg(PTV_LOG_INFO, sub, __VA_ARGS__)
#define pr_debug(sub, ...) log_msg(PTV_LOG_DEBUG, sub, __VA_ARGS__)

#endif
