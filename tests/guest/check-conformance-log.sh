#!/usr/bin/env bash
# Judge a serial log of the one-boot conformance run (tests/system/bochs-conformance.sh).
#   tests/guest/check-conformance-log.sh SERIAL_LOG
# Prints the report lines, then one "FAIL: why" per broken rule; exit 0 only if
#  - every report line is PASS (SKIP allowed) and there is at least one PASS,
#  - the SUMMARY line agrees with the PASS/FAIL/SKIP lines and says 0 failures,
#  - after the SUMMARY the VMM printed a line matching TRIPLE_RE and then
#    DUMP_DONE_RE (it finished its crash dump instead of hanging).
set -u
serial=$1
here=$(dirname "$0")
TRIPLE_RE=${TRIPLE_RE:-triple fault}             # agreed with the VMM (vmm/vcpu/exit/exit_fault.c)
DUMP_DONE_RE=${DUMP_DONE_RE:-crash dump complete} # vmm/vcpu/vcpu_report.c, before on_crash
status=0
fail() { echo "FAIL: $*"; status=1; }

. "$here/report-verdict.sh"
report_read "$serial" conformance.efi
cat "$report"
echo "== VMM lines after the SUMMARY"
after=$(sed -n '/SUMMARY: /,$p' "$clean" | tail -n +2)
grep -aiE "$TRIPLE_RE|$DUMP_DONE_RE|guest stopped" <<<"$after" | head -n 10

p=$(grep -c '^PASS: ' "$report"); f=$(grep -c '^FAIL: ' "$report"); s=$(grep -c '^SKIP: ' "$report")
summary=$(grep '^SUMMARY: ' "$report" | tail -n 1)
if [ -z "$summary" ]; then
    fail "no SUMMARY line: the guest did not finish (VMM crash, hang or timeout)"
elif [ "$summary" != "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ]; then
    fail "'$summary' disagrees with the $p PASS / $f FAIL / $s SKIP lines seen"
fi
[ "$f" = 0 ] || fail "$f check(s) failed inside the guest (FAIL lines above)"
[ "$p" -gt 0 ] || fail "no PASS line at all"
if ! grep -aqE "$TRIPLE_RE" <<<"$after"; then
    fail "no VMM line matching /$TRIPLE_RE/ after the SUMMARY"
elif ! sed -n "/$TRIPLE_RE/,\$p" <<<"$after" | grep -aqE "$DUMP_DONE_RE"; then
    fail "the VMM did not finish its crash dump (/$DUMP_DONE_RE/ missing): hang?"
fi
[ $status = 0 ] && echo "conformance log: $p checks passed, $s skipped, VMM reported the triple fault"
exit $status
