// SPDX-License-Identifier: MIT
/* attack.efi group "mem" (attack.h). */
#include "attack.h"

const struct attack attacks_mem[] = {
    {0},
};
