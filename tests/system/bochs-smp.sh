#!/usr/bin/env bash
# The SMP in-guest suite under the VMM in Bochs with 2 CPUs (real VMX + EPT),
# one boot: loader -> VMM -> smp.efi (tests/guest/smp*.c) as the guest.
#
#   tests/system/bochs-smp.sh BUILD_DIR
#
# Verdict: tests/guest/check-smp-log.sh (every check PASS, each of the seven
# checks ran, the SUMMARY agrees; SKIPs only for the Bochs 2.7 INIT
# re-delivery the VMM itself reported: tests/guest/README.md).  Exit 77 (SKIP) only when the loader or the
# VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-90}
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned|SUMMARY: '
export CPUS=2

. "$here/tests/system/guest-boot.sh"
guest_boot "$build" smp "$here/tests/guest/smp.cfg" "$build/tests/guest/smp.efi" \
    "$TIMEOUT" "$STOP_RE" || exit $?
sleep 1 # the SUMMARY line is the stop mark: let Bochs flush the lines after it
"$here/tests/guest/check-smp-log.sh" "$serial"
