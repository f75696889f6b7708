#!/usr/bin/env bash
# ptv-probe on the build host (never under ptvisor): the CPUID line is well
# formed, and the VMCALL subcommands refuse to run (exit 2) instead of #UD.
#
#   guest/test-probe-host.sh PTV_PROBE
set -u
probe=$1
line=$("$probe") || { echo "ptv-probe failed"; exit 1; }
echo "$line"
echo "$line" | grep -qE '^ptvisor-guest: hypervisor=[01] signature="[^"]*" max_leaf=0x[0-9a-f]+ pt=[01] vmx=[01]$' ||
    { echo "malformed CPUID line"; exit 1; }
if echo "$line" | grep -q 'signature="ptvisor"'; then
    echo "this host runs under ptvisor: the refusal path cannot be checked here"
    exit 77
fi
for sub in vmcall-version exit-stats "exit-stats 0"; do # $sub unquoted: "exit-stats 0" is two words
    out=$("$probe" $sub); rc=$?
    echo "$out"
    [ $rc = 2 ] && echo "$out" | grep -q 'not run, no ptvisor' || { echo "$sub: expected refusal, rc=$rc"; exit 1; }
done
"$probe" cpuid-loop 0 >/dev/null 2>&1 && { echo "cpuid-loop 0 accepted"; exit 1; }
"$probe" cpuid-loop 1000 2 | grep -qE '^ptvisor-guest: cpuid-loop n=1000 rounds=2 min_delta=[0-9]+$' ||
    { echo "cpuid-loop line malformed"; exit 1; }
# the bare-metal oracle of the rip-wrap attack: this CPU (not under ptvisor) faults at EIP 0
out=$("$probe" rip-wrap); rc=$?
echo "$out"
[ $rc = 77 ] || { [ $rc = 0 ] && [ "$out" = "ptvisor-guest: rip-wrap ok rip=0" ]; } ||
    { echo "rip-wrap: expected a fault at EIP 0, rc=$rc"; exit 1; }
echo "ptv-probe host checks passed"
