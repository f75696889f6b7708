#!/usr/bin/env bash
# The VM exit cost benchmark under the VMM in Bochs, one boot: loader -> VMM ->
# exitcost.efi (tests/guest/exitcost.c).  Guest RDTSC counts instructions in Bochs, so the
# figures are VMM instructions per exit, per exit kind.
#
#   tests/system/bochs-exitcost.sh BUILD_DIR
#
# Prints the guest's "bench exit=" lines; exit 1 when a check in the guest failed, the
# SUMMARY is missing or a figure is; 77 (SKIP) when the loader or the VMM is not built.
# One CPU by default (CPUS), as bench-linux's CPUID figure.
set -u
export CPUS=${CPUS:-1}
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-200}
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned|SUMMARY: '

. "$here/tests/system/guest-boot.sh"
guest_boot "$build" exitcost "$here/tests/guest/exitcost.cfg" "$build/tests/guest/exitcost.efi" \
    "$TIMEOUT" "$STOP_RE" || exit $?
sleep 1 # the SUMMARY line is the stop mark: let Bochs flush the lines after it
status=0
fail() { echo "FAIL: $*"; status=1; }
. "$here/tests/guest/report-verdict.sh"
report_read "$serial" exitcost.efi
cat "$report"
report_counts '^INFO: bench exit='
for k in cpuid vmcall rdmsr io; do
    grep -q "^INFO: bench exit=$k " "$report" || fail "no figure for $k"
done
exit $status
