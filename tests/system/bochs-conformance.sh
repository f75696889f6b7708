#!/usr/bin/env bash
# In-guest conformance tests under the VMM in Bochs (real VMX + EPT), one boot:
# loader -> VMM blue-pills OVMF -> conformance.efi (tests/guest/) runs as the
# guest, prints its PASS/FAIL lines and SUMMARY, then forces a triple fault the
# VMM must report with a dump.
#
#   tests/system/bochs-conformance.sh BUILD_DIR
#
# PASS when: every report line is PASS, the SUMMARY line agrees with them and
# says 0 unexpected failures, and after it the VMM printed a line matching
# `triple fault` and finished its crash dump (did not hang).  Exit 77 (SKIP)
# only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/test/bochs-conformance
img=$out/conformance.img serial=$out/serial.log
TIMEOUT=${TIMEOUT:-180}
TRIPLE_RE='triple fault'             # the VMM's report (vmm/vmx/exit_fault.c), agreed
DUMP_DONE_RE='crash dump complete'   # the VMM's last line before on_crash (vmcs_dump.c)

for f in "$build/boot/BOOTX64.EFI" "$build/vmm/vmm.elf"; do
    [ -f "$f" ] || { echo "$f not built yet"; exit 77; }
done
mkdir -p "$out"
LOADER=$build/boot/BOOTX64.EFI VMM=$build/vmm/vmm.elf CYL=40 \
    "$here/tools/mkimage.sh" "$img" "$here/tests/guest/conformance.cfg" \
    "$build/tests/guest/conformance.efi" - || { echo "FAIL: cannot build the image"; exit 1; }
cyl=$(( $(stat -c %s "$img") / 516096 ))

echo "== Bochs: loader + VMM + conformance.efi (timeout ${TIMEOUT} s)"
start=$(date +%s)
"$here/tests/system/bochs.sh" "$img" "$cyl" "$serial" "$TIMEOUT" "$DUMP_DONE_RE"
rc=$?
echo "   bochs.sh exit $rc after $(( $(date +%s) - start )) s; serial log: $serial"

status=0
fail() { echo "FAIL: $*"; status=1; }

clean=$out/serial.clean
sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$serial" >"$clean"
report=$out/report.txt
"$here/tests/guest/parse-report.sh" "$serial" >"$report"
echo "== report lines of conformance.efi"
cat "$report"
echo "== VMM lines after the SUMMARY"
sed -n '/SUMMARY: /,$p' "$clean" | grep -aiE "$TRIPLE_RE|$DUMP_DONE_RE|guest stopped" | head -n 10

p=$(grep -c '^PASS: ' "$report"); f=$(grep -c '^FAIL: ' "$report"); s=$(grep -c '^SKIP: ' "$report")
summary=$(grep '^SUMMARY: ' "$report" | tail -n 1)
if [ -z "$summary" ]; then
    fail "no SUMMARY line: the guest did not finish (VMM crash, hang or timeout)"
else
    [ "$summary" = "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ] ||
        fail "'$summary' disagrees with the $p PASS / $f FAIL / $s SKIP lines seen"
fi
[ "$f" = 0 ] || fail "$f check(s) failed inside the guest (FAIL lines above)"
[ "$p" -gt 0 ] || fail "no PASS line at all"
sed -n '/SUMMARY: /,$p' "$clean" | grep -aqE "$TRIPLE_RE" ||
    fail "no VMM line matching /$TRIPLE_RE/ after the SUMMARY"
sed -n '/SUMMARY: /,$p' "$clean" | grep -aqE "$DUMP_DONE_RE" ||
    fail "the VMM did not finish its crash dump (/$DUMP_DONE_RE/ missing): hang?"
[ $status = 0 ] && echo "bochs conformance: $p checks passed, $s skipped, VMM reported the triple fault"
exit $status
