/* SPDX-License-Identifier: MIT */
/*
 * The bare-metal differential (tests/model/diff.h) driven by libFuzzer: byte 0 picks the mode,
 * then 17-byte operations (op, a, b).  Any difference between bare metal and the VMM aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct diff *x;
    bool ok = true;

    if (size < 1)
        return 0;
    x = diff_new((enum diff_mode)(data[0] % 4), data[0]);
    for (size_t i = 1; ok && i + 17 <= size; i += 17) {
        uint64_t a, b;
        memcpy(&a, data + i + 1, 8);
        memcpy(&b, data + i + 9, 8);
        ok = diff_step(x, data[i], a, b);
    }
    if (ok)
        ok = diff_finish(x);
    if (!ok) {
        fprintf(stderr, "differential: %s\n", diff_why(x));
        abort();
    }
    diff_free(x);
    return 0;
}
