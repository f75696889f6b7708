#!/usr/bin/env bash
# Judge a serial log of the adversarial suite (tests/system/bochs-attacks.sh).
#   tests/guest/check-attack-log.sh SERIAL_LOG
# Exit 0 only if every report line is PASS or SKIP, the SUMMARY agrees with them
# and says 0 failures, and at least MIN_ATTACKS "attack N:" lines were printed.
# An attack that ended the boot is named, with the VMM's last lines as evidence.
set -u
serial=$1
here=$(dirname "$0")
MIN_ATTACKS=${MIN_ATTACKS:-30}
status=0
fail() { echo "FAIL: $*"; status=1; }
report=$(mktemp) clean=$(mktemp)
trap 'rm -f "$report" "$clean"' EXIT
"$here/parse-report.sh" "$serial" >"$report"
sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$serial" >"$clean"
echo "== report lines of attack.efi"
grep -v '^INFO: attack [0-9]*:' "$report"
p=$(grep -c '^PASS: ' "$report"); f=$(grep -c '^FAIL: ' "$report"); s=$(grep -c '^SKIP: ' "$report")
n=$(grep -c '^INFO: attack [0-9]*:' "$report")
summary=$(grep '^SUMMARY: ' "$report" | tail -n 1)
if [ -z "$summary" ]; then
    last=$(grep '^INFO: attack [0-9]*:' "$report" | tail -n 1)
    fail "no SUMMARY line: the boot ended during '${last#INFO: }'; the VMM's last lines:"
    grep -aE '^\[cpu[0-9]+ ' "$clean" | tail -n 15 | sed 's/^/    /'
elif [ "$summary" != "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ]; then
    fail "'$summary' disagrees with the $p PASS / $f FAIL / $s SKIP lines seen"
fi
[ "$f" = 0 ] || fail "$f check(s) failed inside the guest (FAIL lines above)"
[ "$n" -ge "$MIN_ATTACKS" ] || fail "$n attacks ran, at least $MIN_ATTACKS expected"
# uart group (attack_uart.c): a guest line written in pieces around VMM lines is whole
if grep -aq 'ATK-UART-WHOLE-LINE' "$clean" &&
    ! grep -aqx 'ATK-UART-WHOLE-LINE begin middle end' "$clean"; then
    fail "the guest's line ATK-UART-WHOLE-LINE was split by VMM output:"
    grep -a -A2 'ATK-UART-WHOLE-LINE begin' "$clean" | head -n 6 | sed 's/^/    /'
fi
[ $status = 0 ] && echo "attack log: $n attacks, $p checks passed, $s skipped"
exit $status
