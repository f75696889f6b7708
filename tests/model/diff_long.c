/* SPDX-License-Identifier: MIT */
/* `make fuzz`: the bare-metal differential (diff.h) for N guest operations over all modes,
 * 20,000 operations per program; a progress line every million; exit 1 at the first
 * difference with the mode, seed and what differed. */
#include <stdio.h>
#include <stdlib.h>

#include "model/diff.h"

int main(int argc, char **argv)
{
    uint64_t want = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000, done = 0, next = 1000000;
    uint64_t exits = 0, traced = 0, bytes = 0, episodes = 0;

    for (uint64_t seed = 1; done < want; seed++) {
        enum diff_mode mode = (enum diff_mode)(seed % 4);
        struct diff *x = diff_new(mode, seed);
        uint64_t o, e, t, b, ep;
        if (!diff_run(x, 20000) || !diff_finish(x)) {
            fprintf(stderr, "differential: mode %d seed %llu: %s\n", mode, (unsigned long long)seed,
                    diff_why(x));
            return 1;
        }
        diff_counts(x, &o, &e, &t, &b, &ep);
        done += o, exits += e, traced += t, bytes += b, episodes += ep;
        diff_free(x);
        if (done >= next) {
            printf("diff: %llu operations, %llu exits (%llu while tracing), %llu trace bytes, "
                   "%llu episodes, no difference\n",
                   (unsigned long long)done, (unsigned long long)exits, (unsigned long long)traced,
                   (unsigned long long)bytes, (unsigned long long)episodes);
            fflush(stdout);
            next += 1000000;
        }
    }
    return 0;
}
