// SPDX-License-Identifier: MIT
/* attack.efi group "msr" (attack.h). */
#include "attack.h"

const struct attack attacks_msr[] = {
    {0},
};
