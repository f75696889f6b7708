#!/usr/bin/env bash
# The adversarial in-guest suite under the VMM in Bochs (real VMX + EPT), one
# boot: loader -> VMM -> attack.efi (tests/guest/attack*.c) as a hostile guest.
#
#   tests/system/bochs-attacks.sh BUILD_DIR
#
# Verdict: tests/guest/check-attack-log.sh (every attack's lines PASS, the VMM
# answered after each one, at least MIN_ATTACKS attacks ran).  Exit 77 (SKIP)
# only when the loader or the VMM has not been built.  Two CPUs by default
# (CPUS): the AP, idle as a guest in the firmware's loop, must answer every EPT
# shootdown the attacks cause (on-demand drops, APIC window moves).
set -u
export CPUS=${CPUS:-2}
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-300}
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned|SUMMARY: '

. "$here/tests/system/guest-boot.sh"
guest_boot "$build" attacks "$here/tests/guest/attack.cfg" "$build/tests/guest/attack.efi" \
    "$TIMEOUT" "$STOP_RE" || exit $?
sleep 1 # the SUMMARY line is the stop mark: let Bochs flush the lines after it
"$here/tests/guest/check-attack-log.sh" "$serial" || exit 1
# a check this vehicle must pass, not skip (ATK_REQUIRE, a regex: what its CPU offers)
if [ -n "${ATK_REQUIRE:-}" ] && ! grep -aqE "^PASS: ${ATK_REQUIRE}" "$serial"; then
    echo "FAIL: no 'PASS: ${ATK_REQUIRE}' line: this CPU offers what it needs"; exit 1
fi
if [ "$CPUS" -gt 1 ]; then
    grep -aqF "ptvisor: $CPUS of $CPUS CPUs under the VMM" "$serial" ||
        { echo "FAIL: the loader did not put all $CPUS CPUs under the VMM"; exit 1; }
    if grep -aE 'EPT shootdown: CPUs .* did not answer' "$serial"; then
        echo "FAIL: an EPT shootdown went unanswered during the attacks"; exit 1
    fi
    echo "attack log: all $CPUS CPUs under the VMM, every EPT shootdown answered"
fi
