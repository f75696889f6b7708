#!/usr/bin/env bash
# The adversarial in-guest suite under the VMM in Bochs (real VMX + EPT), one
# boot: loader -> VMM -> attack.efi (tests/guest/attack*.c) as a hostile guest.
#
#   tests/system/bochs-attacks.sh BUILD_DIR
#
# Verdict: tests/guest/check-attack-log.sh (every attack's lines PASS, the VMM
# answered after each one, at least MIN_ATTACKS attacks ran).  Exit 77 (SKIP)
# only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-300}
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned|SUMMARY: '

. "$here/tests/system/guest-boot.sh"
guest_boot "$build" attacks "$here/tests/guest/attack.cfg" "$build/tests/guest/attack.efi" \
    "$TIMEOUT" "$STOP_RE" || exit $?
sleep 1 # the SUMMARY line is the stop mark: let Bochs flush the lines after it
"$here/tests/guest/check-attack-log.sh" "$serial"
