/* SPDX-License-Identifier: MIT */
/* The LBR checks of pt-selftest.efi (tests/guest/lbr_selftest.c; docs/lbr.md "On-box self-test").
 */
#ifndef PTV_GUEST_LBR_SELFTEST_H
#define PTV_GUEST_LBR_SELFTEST_H

/* Under ptvisor: PASS/FAIL per LBR kind the guest is shown, SKIP with the reason per kind not. */
void lbr_selftest(void);

#endif
