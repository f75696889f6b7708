#!/usr/bin/env bash
# The verdict of the software tracer's Bochs boot (tests/system/bochs-trace.sh):
# every in-guest check of trace.efi PASS, then the host decode of the printed
# trace (build/host/trace_check, libipt) equal to the guest's own single-step
# reference; and the VMM's serial dumps in the same log (TRACE_DUMP of window 2,
# the crash dump of the final triple fault) extracted by ptvisor-trace and
# compared with what the guest read and printed.  TRACE_CHECK names the checker
# binary, PTT the ptvisor-trace binary.
#
#   tests/guest/check-trace-log.sh SERIAL_LOG
set -u
serial=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
checker=${TRACE_CHECK:-$here/build/host/trace_check}
ptt=${PTT:-$(dirname "$(dirname "$checker")")/tools/ptvisor-trace}
status=0
fail() { echo "FAIL: $*"; status=1; }
. "$(dirname "$0")/report-verdict.sh"
report_read "$serial" trace.efi
grep -E '^(PASS|FAIL|SKIP|SUMMARY): ' "$report"
report_counts '^INFO: '
# a SKIP only for the one thing measured missing: MTF exits (tests/guest/README.md)
if grep '^SKIP: ' "$report" | grep -qv 'no MTF VM exit'; then
    fail "a SKIP other than the measured absence of MTF exits"
fi
if [ "$s" = 0 ]; then
    [ "$p" -ge 17 ] || fail "only $p PASS lines (expected >= 17)"
else
    [ "$p" -ge 13 ] || fail "only $p PASS lines (expected >= 13 where MTF is missing)"
fi
echo "== the VMM's serial dumps: ptvisor-trace extract"
dumps=$(mktemp -d)
trap 'rm -rf "$dumps"' EXIT
if [ -x "$ptt" ]; then
    "$ptt" extract "$serial" --list || true
    vid=$(sed -n 's/.*TRACE-DUMPED \([0-9]*\).*/\1/p' "$clean" | tail -n 1)
    "$ptt" extract "$serial" --dump "${vid:-1}" -o "$dumps/vmcall" -q ||
        fail "extract of the TRACE_DUMP (dump ${vid:-?}) not complete"
    "$ptt" extract "$serial" -o "$dumps/crash" --last -q || fail "extract of the crash dump (the last) not complete"
    # the dump the host asked for over the serial line (bochs.sh typed ESC [9788~)
    sid=$(sed -n 's/.*TRACE-SERIAL-DUMPED \([0-9]*\).*/\1/p' "$clean" | tail -n 1)
    if [ -n "$sid" ] && "$ptt" extract "$serial" --list 2>/dev/null | grep -qE "^dump $sid .* serial .* complete\$"; then
        echo "PASS: the dump the host asked for over the serial line (dump $sid) is complete"
    else
        fail "no complete dump with reason serial (${sid:-no TRACE-SERIAL-DUMPED line})"
    fi
    # the dump still going out when the guest crashed: abandoned (cut), the crash dump after it whole
    fid=$(sed -n 's/.*TRACE-INFLIGHT 0 \([0-9]*\).*/\1/p' "$clean" | tail -n 1)
    list=$("$ptt" extract "$serial" --list 2>/dev/null)
    if [ -n "$fid" ] && echo "$list" | grep -qE "^dump $fid .* incomplete\$" &&
        echo "$list" | tail -n 1 | grep -qE "^dump $((fid + 1)) .* crash .* complete\$"; then
        echo "PASS: the dump in flight at the crash (dump $fid) is cut, the crash dump after it complete"
    else
        fail "dump in flight at the crash (${fid:-no TRACE-INFLIGHT line}) not cut, or no complete crash dump after it"
    fi
    grep -a '\[dump\]\|dump [0-9]* ' "$serial" | grep -a 'done:' | head -n 3
    # the same log damaged as serial captures get damaged: each damage reported, nothing wrong kept
    if [ -n "$vid" ]; then
        b=$(grep -an "^@PTV1 B $vid 0 " "$serial" | head -n 1 | cut -d: -f1)
        e=$(grep -an "^@PTV1 E $vid 0 " "$serial" | head -n 1 | cut -d: -f1)
        d=$(grep -an "^@PTV1 D $vid 0 " "$serial" | sed -n 3p | cut -d: -f1)
        head -n $((e - 3)) "$serial" >"$dumps/cut.log"
        "$ptt" extract "$dumps/cut.log" --dump "$vid" -o "$dumps/cut" 2>"$dumps/cut.err"
        rc=$?
        [ $rc = 2 ] && grep -q 'no END' "$dumps/cut.err" &&
            echo "PASS: a log cut inside dump $vid: extract says no END, exit 2 (usable, incomplete)" ||
            fail "a log cut inside dump $vid: extract exit $rc, no 'no END' report"
        awk -v n="$d" 'NR == n { c = substr($0, 60, 1); $0 = substr($0, 1, 59) (c == "0" ? "1" : "0") substr($0, 61) } { print }' \
            "$serial" >"$dumps/bad.log"
        "$ptt" extract "$dumps/bad.log" --dump "$vid" -o "$dumps/bad" 2>"$dumps/bad.err"
        rc=$?
        [ $rc = 2 ] && grep -q "^line $d: bad frame line: line CRC32 mismatch" "$dumps/bad.err" &&
            echo "PASS: one damaged frame (line $d): reported by its line, its block missing, exit 2" ||
            fail "a damaged frame on line $d: extract exit $rc, not reported by its line"
        { cat "$serial"; sed -n "${b},${e}p" "$serial"; } >"$dumps/dup.log"
        if "$ptt" extract "$dumps/dup.log" --dump "$vid" -o "$dumps/dup" -q 2>/dev/null &&
            cmp -s "$dumps/dup/cpu0.pt" "$dumps/vmcall/cpu0.pt"; then
            echo "PASS: dump $vid's frames twice in the log: complete, the same bytes"
        else
            fail "dump $vid's frames twice: not complete or other bytes"
        fi
    fi
else
    fail "no ptvisor-trace at $ptt"
fi
echo "== host decode (libipt) of the printed trace"
if [ -x "$checker" ]; then
    "$checker" "$clean" "$dumps/vmcall" "$dumps/crash" || status=1
else
    fail "no checker at $checker"
fi
grep -aE '\[cpu0 [^]]*\] trace: ' "$clean" | head -n 5
[ $status = 0 ] && echo "check-trace-log: PASS" || echo "check-trace-log: FAIL"
exit $status
