#!/usr/bin/env bash
# Judge a serial log of the SMP suite (tests/system/bochs-smp.sh).
#   tests/guest/check-smp-log.sh SERIAL_LOG
# Exit 0 only if every report line is PASS, the SUMMARY agrees with them and
# says 0 failures, all six checks ran ("INFO: check N:") and at least MIN_CHECKS
# PASS lines were printed.  A SKIP counts as a failure: Bochs with CPUS=2 has
# everything the checks need, so a SKIP means the set-up broke.  A check that
# ended the boot is named, with the VMM's last lines as evidence.
set -u
serial=$1
here=$(dirname "$0")
MIN_CHECKS=${MIN_CHECKS:-28}
NR_CHECKS=6
status=0
fail() { echo "FAIL: $*"; status=1; }
report=$(mktemp) clean=$(mktemp)
trap 'rm -f "$report" "$clean"' EXIT
"$here/parse-report.sh" "$serial" >"$report"
sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$serial" >"$clean"
echo "== report lines of smp.efi"
cat "$report"
p=$(grep -c '^PASS: ' "$report"); f=$(grep -c '^FAIL: ' "$report"); s=$(grep -c '^SKIP: ' "$report")
n=$(grep -c '^INFO: check [0-9]*:' "$report")
summary=$(grep '^SUMMARY: ' "$report" | tail -n 1)
if [ -z "$summary" ]; then
    last=$(grep '^INFO: check [0-9]*:' "$report" | tail -n 1)
    fail "no SUMMARY line: the boot ended during '${last#INFO: }'; the VMM's last lines:"
    grep -aE '^\[cpu[0-9]+ ' "$clean" | tail -n 15 | sed 's/^/    /'
elif [ "$summary" != "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ]; then
    fail "'$summary' disagrees with the $p PASS / $f FAIL / $s SKIP lines seen"
fi
[ "$f" = 0 ] || fail "$f check(s) failed inside the guest (FAIL lines above)"
[ "$s" = 0 ] || fail "$s check(s) skipped (SKIP lines above): with 2 CPUs in Bochs none may"
[ "$n" -ge "$NR_CHECKS" ] || fail "$n of the $NR_CHECKS checks started"
[ "$p" -ge "$MIN_CHECKS" ] || fail "$p checks passed, at least $MIN_CHECKS expected"
[ $status = 0 ] && echo "smp log: $n checks, $p lines passed"
exit $status
