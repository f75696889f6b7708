#!/usr/bin/env bash
# The in-guest test kit, proven without a VMM: boot selftest.efi and then
# conformance.efi bare (as \EFI\BOOT\BOOTX64.EFI) in QEMU TCG + OVMF.
#   tests/guest/run-qemu-selftest.sh BUILD_DIR
# selftest.efi: every line PASS except one deliberate FAIL and one deliberate
# SKIP, and the SUMMARY counts agree with the lines.  conformance.efi without a
# VMM: it runs to its SUMMARY and the VMM checks FAIL.  (QEMU TCG reads unknown
# MSRs as 0 instead of #GP, so the RTIT MSR checks FAIL there too.)
set -u
build=$1
here=$(dirname "$0")
base=$build/test/qemu-guest-lib
mkdir -p "$base"
out=$(mktemp -d "$base/run.XXXXXX") # private per run; the last run's logs stay in $base
trap 'cp "$out"/*.serial "$base/" 2>/dev/null; rm -rf "$out"' EXIT
status=0

fail() { echo "FAIL: $*"; status=1; }

# Check that SUMMARY agrees with the PASS/FAIL/SKIP lines of report file $1.
summary_consistent() {
    local r=$1 p f s line
    p=$(grep -c '^PASS: ' "$r"); f=$(grep -c '^FAIL: ' "$r"); s=$(grep -c '^SKIP: ' "$r")
    line=$(grep '^SUMMARY: ' "$r" | tail -n 1)
    [ "$line" = "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ] ||
        { fail "summary '$line' disagrees with $p PASS, $f FAIL, $s SKIP lines"; return 1; }
}

boot() { # name -> $out/name.serial, $out/name.report
    local name=$1
    "$(dirname "$here")/../tools/mkesp.sh" "$out/$name.img" 40 \
        "$build/tests/guest/$name.efi=\\EFI\\BOOT\\BOOTX64.EFI" || return 1
    "$(dirname "$here")/system/qemu.sh" "$out/$name.img" "$out/$name.serial" 90 'SUMMARY: ' ||
        { fail "$name: no SUMMARY line within 90 s"; }
    "$here/parse-report.sh" "$out/$name.serial" >"$out/$name.report"
    echo "== $name.efi in QEMU TCG (no VMM)"
    cat "$out/$name.report"
}

boot selftest
r=$out/selftest.report
summary_consistent "$r"
[ "$(grep -c '^FAIL: ' "$r")" = 1 ] && grep -qx 'FAIL: selftest deliberate failure' "$r" ||
    fail "selftest: expected exactly the deliberate FAIL line"
[ "$(grep -c '^SKIP: ' "$r")" = 1 ] || fail "selftest: expected exactly the deliberate SKIP line"
[ "$(grep -c '^PASS: ' "$r")" -ge 11 ] || fail "selftest: fewer than 11 PASS lines"
long=$(grep '^PASS: selftest long line' "$r")
[ "${#long}" = $((6 + 72)) ] || fail "selftest: long description not cut to 72 characters"

boot conformance
r=$out/conformance.report
summary_consistent "$r"
grep -q '^FAIL: CPUID 0x40000000 signature "ptvisor"' "$r" || fail "conformance: signature check did not FAIL without ptvisor"
grep -q '^FAIL: VMCALL VERSION: raised vector 6' "$r" || fail "conformance: VMCALL without a VMM did not #UD"
grep -q '^FAIL: VMCALL VMM_RANGE: raised vector 6' "$r" || fail "conformance: VMM_RANGE without a VMM did not FAIL"
grep -q '^PASS: 1000 CPUIDs consistent' "$r" || fail "conformance: CPUID loop did not PASS"

[ $status = 0 ] && echo "guest test kit: OK"
exit $status
