// SPDX-License-Identifier: MIT
/* attack.efi group "cpu" (attack.h). */
#include "attack.h"

const struct attack attacks_cpu[] = {
    {0},
};
