/* SPDX-License-Identifier: MIT */
/* Can this process single-step a child with ptrace here?  Shared by the host tests whose oracle
 * is a real program stepped with PTRACE_SINGLESTEP (they SKIP, exit 77, with the reason). */
#ifndef PTV_TEST_PTRACE_PROBE_H
#define PTV_TEST_PTRACE_PROBE_H

/* NULL when it can, else why not (a static string) */
const char *ptrace_unavailable(void);

#endif
