#!/usr/bin/env bash
# The PT self-test image (pt_mode = host-guest, pt-selftest.efi as the guest) in
# Bochs, which has no Intel PT.  Proves the honest path: the VMM refuses the
# request with its reason, the guest sees no PT, and the self-test SKIPs instead
# of passing.  The PT checks themselves need a CPU with PT (make selftest-usb).
# Bochs has no LBR either: the guest-LBR checks (tests/guest/lbr_selftest.c) must SKIP too.
# The self-test of the VMM's own trace (tests/guest/vmm_trace_selftest.c) runs for real: Bochs
# has no PT, so the VMM's software tracer is the source, and only its lines may PASS.
#
# With MODE = system (the selftest-system image) the VMM is asked to trace with PT itself; it
# must refuse that with its reason too, and the software tracer stands in.
#
#   tests/system/bochs-pt-selftest.sh IMG OUT_DIR [MODE]
set -u
img=$1 out=$2 mode=${3:-host-guest}
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$img" ] || { echo "FAIL: $img was not built"; exit 1; }
mkdir -p "$out"
serial=$out/serial.log
cp "$img" "$out/disk.img"
cyl=$(( $(stat -c %s "$out/disk.img") / 516096 ))
"$here/tests/system/bochs.sh" "$out/disk.img" "$cyl" "$serial" 180 'SUMMARY: '
echo "bochs.sh exit $?; serial log $serial"
clean=$out/serial.clean
sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$serial" >"$clean"
status=0
check() { # regex, what
    if grep -aqE "$1" "$clean"; then echo "  ok   $2"; else echo "  FAIL $2: no line matching /$1/"; status=1; fi
}
check "\\[cpu0 pt\\] .*pt_mode=$mode" "the VMM states the $mode request and its verdict"
check '\[cpu0 vmx\] launched' "the VMM launched the guest"
check '^SKIP: no Intel PT for the guest' "pt-selftest skips with the reason"
check '^SKIP: lbr: legacy: ' "the LBR self-test skips model-specific LBR with the reason"
check '^SKIP: lbr: arch: ' "the LBR self-test skips arch LBR with the reason"
check '^SUMMARY: [0-9]+ tests, 0 unexpected failures, [1-9][0-9]* skipped' "summary: nothing failed, something skipped"
# the one check that runs without PT hardware: the VMM's software tracer traces the
# known sequence of tests/guest/pt_seq.S, and the guest's own verdict must find it exactly
check '^PASS: vmm trace \(software tracer/(MTF|TF)\): sequence exact: branches TTTTNTN, 1 TIP' \
    "the VMM's software tracer traced the known sequence exactly (checked inside the guest)"
if grep -a '^PASS: ' "$clean" | grep -vqE '^PASS: vmm trace \(software tracer/(MTF|TF)\)'; then
    echo "  FAIL a PT or LBR check passed without the hardware"; status=1
fi
grep -aE '\[cpu0 (pt|lbr|trace)\]|^INFO: lbr|^(PASS|FAIL|SKIP|SUMMARY): ' "$clean" | sed 's/^/  > /'
echo "the PT and LBR checks themselves were not run: they need a CPU with Intel PT / LBR (make selftest-usb)"
exit $status
