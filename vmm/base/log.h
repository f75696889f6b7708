/* SPDX-License-Identifier: MIT */
/*
 * VMM log lines: "[cpuN subsystem] message", filtered by the configured level.
 *   pr_info("vmx", "launched: guest RIP %lx", rip);
 */
#ifndef PTV_LOG_H
#define PTV_LOG_H

#include <stdbool.h>
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

/* lines written since boot (PTV_VMCALL_VMM_STATS: the guest checks rate limits) */
extern unsigned long log_lines;

/*
 * Rate limit for every line a guest can trigger: the n-th occurrence is printed
 * when n <= 8 or n is a power of two, so N guest events print O(8 + log2 N)
 * lines, each with the running count.  *count is the caller's counter.
 */
static inline bool log_ratelimit(unsigned long *count)
{
    unsigned long n = ++*count;
    return n <= 8 || !(n & (n - 1));
}
#define pr_rl(level, sub, fmt, ...)                                                                \
    do {                                                                                           \
        static unsigned long rl_count_;                                                            \
        if (log_ratelimit(&rl_count_))                                                             \
            log_msg(level, sub, fmt " (%lu so far)", ##__VA_ARGS__, rl_count_);                    \
    } while (0)
#define pr_warn_rl(sub, fmt, ...) pr_rl(PTV_LOG_WARN, sub, fmt, ##__VA_ARGS__)
#define pr_info_rl(sub, fmt, ...) pr_rl(PTV_LOG_INFO, sub, fmt, ##__VA_ARGS__)
#define pr_err_rl(sub, fmt, ...)  pr_rl(PTV_LOG_ERROR, sub, fmt, ##__VA_ARGS__)

#endif
