/* SPDX-License-Identifier: MIT */
/* A movable 4 KiB window onto a fixed host page, in bounded memory (see ept_window.h). */
#include <stddef.h>
#include "ept/ept_window.h"

#define WINDOW_SIZE 4096u

/* another window of `all` placed at gpa, or NULL */
static const struct ept_window *placed_at(const struct ept_window *w, struct ept_window *const *all,
                                          unsigned n, uint64_t gpa)
{
    for (unsigned i = 0; i < n; i++)
        if (all[i] && all[i] != w && all[i]->placed && all[i]->gpa == gpa)
            return all[i];
    return NULL;
}

int ept_window_place(struct ept_window *w, struct ept_window *const *all, unsigned n, struct ept *e,
                     struct ept_od *od, uint64_t gpa, uint64_t hpa)
{
    const struct ept_window *other;
    struct ept_window nw = {.gpa = gpa};
    unsigned long before = e->nr_tables;
    int rc;

    if (w->placed || (gpa & (WINDOW_SIZE - 1)))
        return EPT_EINVAL;
    other = placed_at(w, all, n, gpa);
    if (other) { /* its map and pin stand; the page's own mapping is what it saved */
        *w = *other;
        return 0;
    }
    nw.err = ept_translate(e, gpa, &nw.hpa, &nw.perms, &nw.memtype, NULL);
    if (nw.err && nw.err != EPT_ENOENT)
        return nw.err; /* beyond the walk: nothing could be mapped there */
    /* above RAM the window is kept out of the on-demand maps' drops (ept_ondemand.h) */
    rc = ept_od_pin(od, gpa);
    if (rc)
        return rc;
    rc = ept_map(e, gpa, hpa, WINDOW_SIZE, EPT_R | EPT_W, EPT_MT_UC | EPT_MT_IPAT);
    if (rc) {
        ept_od_unpin(od, gpa);
        return rc;
    }
    nw.placed = true;
    nw.tables = e->nr_tables > before ? e->nr_tables - before : 0;
    *w = nw;
    return 0;
}

int ept_window_remove(struct ept_window *w, struct ept_window *const *all, unsigned n,
                      struct ept *e, struct ept_od *od)
{
    unsigned long before = e->nr_tables;
    int rc;

    if (!w->placed)
        return 0;
    w->placed = false;
    if (placed_at(w, all, n, w->gpa))
        return 0; /* another window still shows the page: the last one restores it */
    /* restoring the old leaf leaves the tables the window split uniform: ept.c merges them
     * back; over a hole, pruning retires the tables the window's map created */
    rc = w->err ? ept_unmap_prune(e, w->gpa, WINDOW_SIZE)
                : ept_map(e, w->gpa, w->hpa, WINDOW_SIZE, w->perms, w->memtype);
    ept_od_unpin(od, w->gpa);
    /* above RAM, on-demand maps the guest touched next to the window went into the window's
     * own tables (its pin shrank their blocks), linking nothing ept_od counts: those tables
     * then outlive the window, a few pages per move the guest could repeat for ever.  When
     * fewer tables went than the window's map linked, drop the on-demand maps (one
     * ept_od_drop_all(), its INVEPT through od->flush as for any drop): the tables go with
     * them, and the maps fault in again when next touched */
    if (!rc && w->gpa >= od->floor && w->gpa < od->limit && e->nr_tables + w->tables > before)
        rc = ept_od_drop_all(od, e);
    return rc;
}
