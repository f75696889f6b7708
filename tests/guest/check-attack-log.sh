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
. "$here/report-verdict.sh"
report_read "$serial" attack.efi
grep -v '^INFO: attack [0-9]*:' "$report"
report_counts '^INFO: attack [0-9]*:'
[ "$n" -ge "$MIN_ATTACKS" ] || fail "$n attacks ran, at least $MIN_ATTACKS expected"
# uart group (attack_uart.c): a guest line written in pieces around VMM lines is whole
if grep -aq 'ATK-UART-WHOLE-LINE' "$clean" &&
    ! grep -aqx 'ATK-UART-WHOLE-LINE begin middle end' "$clean"; then
    fail "the guest's line ATK-UART-WHOLE-LINE was split by VMM output:"
    grep -a -A2 'ATK-UART-WHOLE-LINE begin' "$clean" | head -n 6 | sed 's/^/    /'
fi
# lbr checks (attack_msr.c): the VMM logged its LBR decision with the reason (docs/lbr.md)
if grep -q '^INFO: attack [0-9]*: lbr:' "$report" &&
    ! grep -aqE '^\[cpu0 lbr\] model-specific LBR (shown|hidden)' "$clean"; then
    fail "lbr checks ran, but no '[cpu0 lbr] model-specific LBR shown/hidden (...)' boot line"
fi
[ $status = 0 ] && echo "attack log: $n attacks, $p checks passed, $s skipped"
exit $status
