// SPDX-License-Identifier: MIT
/* attack.efi group "vmcall" (attack.h). */
#include "attack.h"

const struct attack attacks_vmcall[] = {
    {0},
};
