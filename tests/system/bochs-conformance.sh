#!/usr/bin/env bash
# In-guest conformance tests under the VMM in Bochs (real VMX + EPT), one boot:
# loader -> VMM blue-pills OVMF -> conformance.efi (tests/guest/) runs as the
# guest, prints its PASS/FAIL lines and SUMMARY, then forces a triple fault the
# VMM must report with a dump.
#
#   tests/system/bochs-conformance.sh BUILD_DIR
#
# The verdict comes from tests/guest/check-conformance-log.sh: every report line
# PASS, the SUMMARY agrees and says 0 unexpected failures, and after it the VMM
# printed a line matching `triple fault` and finished its crash dump (no hang).
# Exit 77 (SKIP) only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
base=$build/test/bochs-conformance
TIMEOUT=${TIMEOUT:-180}
# Stop Bochs at the end of the VMM's crash dump, or early when the run cannot get
# there (VMM panic, guest returned to the loader); check-conformance-log.sh judges.
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned'

for f in "$build/boot/BOOTX64.EFI" "$build/vmm/vmm.elf"; do
    [ -f "$f" ] || { echo "$f not built yet"; exit 77; }
done
# A private directory per run (two `make test` in one build tree must not share
# a serial log); the last run's logs are kept as $base/serial.log*.
mkdir -p "$base"
out=$(mktemp -d "$base/run.XXXXXX")
img=$out/conformance.img serial=$out/serial.log
keep_logs() {
    for f in "$serial" "$serial.bochs"; do [ -f "$f" ] && cp "$f" "$base/"; done
    rm -rf "$out"
}
trap keep_logs EXIT
LOADER=$build/boot/BOOTX64.EFI VMM=$build/vmm/vmm.elf CYL=40 \
    "$here/tools/mkimage.sh" "$img" "$here/tests/guest/conformance.cfg" \
    "$build/tests/guest/conformance.efi" - || { echo "FAIL: cannot build the image"; exit 1; }
cyl=$(( $(stat -c %s "$img") / 516096 ))

echo "== Bochs: loader + VMM + conformance.efi (timeout ${TIMEOUT} s)"
start=$(date +%s)
"$here/tests/system/bochs.sh" "$img" "$cyl" "$serial" "$TIMEOUT" "$STOP_RE"
rc=$?
echo "   bochs.sh exit $rc after $(( $(date +%s) - start )) s; serial log: $base/serial.log"

"$here/tests/guest/check-conformance-log.sh" "$serial"
