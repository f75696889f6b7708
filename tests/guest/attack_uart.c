// SPDX-License-Identifier: MIT
/* attack.efi group "uart" (attack.h). */
#include "attack.h"

const struct attack attacks_uart[] = {
    {0},
};
