/* SPDX-License-Identifier: MIT */
/*
 * A 4 KiB window of guest-physical space shown onto one fixed host page, movable by the guest:
 * the relocated xAPIC window (vcpu/exit/exit_msr.c; the real APIC never moves).  Placing it saves
 * what the page mapped before; removing it gives that back.  Pure: the same file compiles into
 * the VMM and into tests/unit/ept/test_ept_window.c.
 *
 * Bound (README, Security): a placed window holds at most levels - 1 EPT
 * table pages (a 1 GiB leaf split down to 4 KiB, or fresh tables over a hole), and removing it
 * gives them back: the old mapping restored makes the split tables uniform again and ept.c
 * merges them into the leaf they came from; a window over a hole is unmapped with
 * ept_unmap_prune().  Either way the pages are retired and become spares at the next INVEPT
 * (a merge's own, break-before-make in ept.h, or the caller's after a prune), so a guest moving its
 * window N times holds at most 2 x (levels - 1) table pages per window (the placed window's, and
 * the removed one's until that INVEPT), for any N. Above the identity map the page is pinned
 * (ept_ondemand.h) while the window is there; on-demand maps made meanwhile next to it may land in
 * the window's tables, and when removing it leaves some of those tables linked, the on-demand maps
 * are dropped (ept_od_drop_all()) so that they go: the bound holds with on-demand maps around the
 * window too.
 *
 * Windows share one EPT (one per vCPU, one guest): two placed at the same page share its
 * saved mapping, and only the last to leave restores it and unpins the page -- else the
 * first to leave would restore it under the other, or the last would "restore" the other's
 * window for good (the page showing the APIC, its split kept: a leak the guest could
 * repeat).  Callers pass every window (`all`, n of them; w may be among them), under the
 * EPT's lock.
 */
#ifndef PTV_EPT_WINDOW_H
#define PTV_EPT_WINDOW_H

#include <stdbool.h>
#include <stdint.h>
#include "ept/ept.h"
#include "ept/ept_ondemand.h"

struct ept_window {
    bool placed;  /* mapped at gpa, with the old mapping saved */
    uint64_t gpa; /* 4 KiB aligned */
    int err;      /* what ept_translate() said of gpa before: 0, or EPT_ENOENT (a hole) */
    uint64_t hpa; /* the old mapping, when err == 0 */
    unsigned perms, memtype;
    unsigned long tables; /* table pages its map linked (what removing it must give back) */
};

/*
 * Show hpa (R/W, UC, guest PAT ignored) at gpa, saving what gpa mapped (or, where another of
 * `all` is placed at gpa already, sharing what it saved); w must not be placed.  0, or the
 * error of the pin or the map (nothing placed then; the pin is undone).
 */
int ept_window_place(struct ept_window *w, struct ept_window *const *all, unsigned n, struct ept *e,
                     struct ept_od *od, uint64_t gpa, uint64_t hpa)
    __attribute__((warn_unused_result));

/*
 * Take w away: unless another of `all` is still placed at its page, give the page back what
 * it mapped (a hole stays a hole, its empty tables pruned) and unpin it.  Nothing if w is not
 * placed.  Above RAM, where tables the window's map linked stay linked (on-demand maps in
 * them), every on-demand map is dropped too (ept_od_drop_all(), which INVEPTs through
 * od->flush).  0 or the EPT's error (w is removed either way).  INVEPT is needed afterwards
 * (ept_flush_needed()).
 */
int ept_window_remove(struct ept_window *w, struct ept_window *const *all, unsigned n,
                      struct ept *e, struct ept_od *od) __attribute__((warn_unused_result));

#endif
