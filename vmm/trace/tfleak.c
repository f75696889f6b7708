/* SPDX-License-Identifier: MIT */
/* Event frames that carry the tracer's trap flag (tfleak.h). */
#include "trace/tfleak.h"

#define CR3_PCID 0xfffull

void tfl_init(struct tfl *l)
{
    l->n = 0;
    l->next_seq = 0;
    l->recorded = l->taken = l->dropped = 0;
}

static bool same_frame(const struct tfl_frame *a, const struct tfl_frame *b)
{
    return a->cr3 == b->cr3 && a->cs == b->cs && a->ret == b->ret && a->rsp == b->rsp;
}

static void remove_at(struct tfl *l, unsigned i)
{
    l->n--;
    l->f[i] = l->f[l->n];
    l->seq[i] = l->seq[l->n];
}

/* the record that goes when the table is full: the oldest of the context (CR3) that holds the
 * most, so one context's flood of events pushes out its own records before anyone else's */
static unsigned victim(const struct tfl *l)
{
    unsigned best = 0, best_n = 0;
    for (unsigned i = 0; i < l->n; i++) {
        unsigned n = 0, oldest = i;
        for (unsigned j = 0; j < l->n; j++)
            if (l->f[j].cr3 == l->f[i].cr3) {
                n++;
                if (l->seq[j] < l->seq[oldest])
                    oldest = j;
            }
        if (n > best_n || (n == best_n && l->seq[oldest] < l->seq[best])) {
            best_n = n;
            best = oldest;
        }
    }
    return best;
}

void tfl_record(struct tfl *l, const struct tfl_frame *f)
{
    struct tfl_frame g = *f;
    g.cr3 &= ~CR3_PCID;
    l->recorded++;
    for (unsigned i = 0; i < l->n; i++)
        if (same_frame(&l->f[i], &g)) {
            l->seq[i] = l->next_seq++;
            return;
        }
    if (l->n == TFL_MAX) {
        remove_at(l, victim(l));
        l->dropped++;
    }
    l->f[l->n] = g;
    l->seq[l->n] = l->next_seq++;
    l->n++;
}

bool tfl_explains(const struct tfl_frame *f, uint64_t cr3, uint16_t cs, uint64_t rip, uint64_t rsp,
                  tfl_reach_fn reach, void *ctx)
{
    if ((f->cr3 & ~CR3_PCID) != (cr3 & ~CR3_PCID) || f->cs != cs)
        return false;
    if (rip == f->ret && rsp == f->rsp)
        return true;
    return rsp - f->rsp + TFL_RSP_SLACK <= 2 * TFL_RSP_SLACK && reach(ctx, f, rip);
}

bool tfl_take(struct tfl *l, uint64_t cr3, uint16_t cs, uint64_t rip, uint64_t rsp,
              tfl_reach_fn reach, void *ctx)
{
    int best = -1;
    for (unsigned i = 0; i < l->n; i++)
        if ((best < 0 || l->seq[i] > l->seq[best]) &&
            tfl_explains(&l->f[i], cr3, cs, rip, rsp, reach, ctx))
            best = (int)i;
    if (best < 0)
        return false;
    remove_at(l, (unsigned)best);
    l->taken++;
    return true;
}

bool tfl_insn_reaches(const struct x86_insn *in, uint64_t ip, enum x86_code_size cs, uint64_t to)
{
    bool any;
    return x86_flows_to(ip, in, cs, to, &any);
}
