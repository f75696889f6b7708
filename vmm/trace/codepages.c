/* SPDX-License-Identifier: MIT */
/* The code pages a trace window executed: see codepages.h. */
#include "trace/codepages.h"

void cp_init(struct codepages *s, struct cp_entry *mem, uint32_t cap)
{
    s->e = mem;
    s->cap = cap;
    cp_reset(s);
}

void cp_reset(struct codepages *s)
{
    for (uint32_t i = 0; i < s->cap; i++)
        s->e[i] = (struct cp_entry){0};
    s->n = 0;
    s->overflow = 0;
    s->last_valid = false;
}

void cp_key(uint64_t cr3, uint64_t va, uint64_t *key_cr3, uint64_t *key_va)
{
    *key_va = va & ~(CP_PAGE - 1);
    *key_cr3 = va >= CP_KERNEL_LO ? CP_CR3_ANY : cr3;
}

static uint32_t hash(uint64_t cr3, uint64_t va)
{
    uint64_t h = (va >> 12) * 0x9e3779b97f4a7c15ull ^ cr3 * 0xc2b2ae3d27d4eb4full;
    return (uint32_t)(h >> 32);
}

static bool used(const struct cp_entry *e)
{
    return e->va || e->cr3;
}

/* the slot of (cr3, va) or the free slot where it would go; NULL: full and absent */
static struct cp_entry *find(struct codepages *s, uint64_t cr3, uint64_t va)
{
    uint32_t mask = s->cap - 1;
    for (uint32_t i = hash(cr3, va) & mask, probes = 0; probes < s->cap;
         i = (i + 1) & mask, probes++) {
        struct cp_entry *e = &s->e[i];
        if (!used(e) || (e->va == va && e->cr3 == cr3))
            return e;
    }
    return 0;
}

int cp_note(struct codepages *s, uint64_t cr3, uint64_t va)
{
    cp_key(cr3, va, &cr3, &va);
    if (s->last_valid && s->last_va == va && s->last_cr3 == cr3)
        return 0; /* the common case: the same page as the last instruction */
    struct cp_entry *e = find(s, cr3, va);
    if (e && used(e)) {
        s->last_valid = true, s->last_va = va, s->last_cr3 = cr3;
        return 0;
    }
    if (!e || s->n >= s->cap / 4 * 3 || (!va && !cr3)) {
        s->overflow++;
        return -1;
    }
    *e = (struct cp_entry){.va = va, .cr3 = cr3};
    s->n++;
    s->last_valid = true, s->last_va = va, s->last_cr3 = cr3;
    return 1;
}

void cp_set_crc(struct codepages *s, uint64_t cr3, uint64_t va, uint32_t crc)
{
    cp_key(cr3, va, &cr3, &va);
    struct cp_entry *e = find(s, cr3, va);
    if (e && used(e)) {
        e->crc = crc;
        e->seen = 1;
    }
}

const struct cp_entry *cp_slot(const struct codepages *s, uint32_t i)
{
    return i < s->cap && used(&s->e[i]) ? &s->e[i] : 0;
}
