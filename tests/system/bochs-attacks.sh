#!/usr/bin/env bash
# The adversarial in-guest suite under the VMM in Bochs (real VMX + EPT), one
# boot: loader -> VMM -> attack.efi (tests/guest/attack*.c) as a hostile guest.
#
#   tests/system/bochs-attacks.sh BUILD_DIR
#
# Verdict: tests/guest/check-attack-log.sh (every attack's lines PASS, the VMM
# answered after each one, at least MIN_ATTACKS attacks ran).  Exit 77 (SKIP)
# only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
base=$build/test/bochs-attacks
TIMEOUT=${TIMEOUT:-300}
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned|SUMMARY: '

for f in "$build/boot/BOOTX64.EFI" "$build/vmm/vmm.elf" "$build/tests/guest/attack.efi"; do
    [ -f "$f" ] || { echo "$f not built yet"; exit 77; }
done
mkdir -p "$base"
out=$(mktemp -d "$base/run.XXXXXX")
img=$out/attack.img serial=$out/serial.log
keep_logs() {
    for f in "$serial" "$serial.bochs"; do [ -f "$f" ] && cp "$f" "$base/"; done
    rm -rf "$out"
}
trap keep_logs EXIT
LOADER=$build/boot/BOOTX64.EFI VMM=$build/vmm/vmm.elf CYL=40 \
    "$here/tools/mkimage.sh" "$img" "$here/tests/guest/attack.cfg" \
    "$build/tests/guest/attack.efi" - || { echo "FAIL: cannot build the image"; exit 1; }
cyl=$(( $(stat -c %s "$img") / 516096 ))

echo "== Bochs: loader + VMM + attack.efi (timeout ${TIMEOUT} s)"
start=$(date +%s)
"$here/tests/system/bochs.sh" "$img" "$cyl" "$serial" "$TIMEOUT" "$STOP_RE"
rc=$?
sleep 1 # the SUMMARY line is the stop mark: let Bochs flush the lines after it
echo "   bochs.sh exit $rc after $(( $(date +%s) - start )) s; serial log: $base/serial.log"
"$here/tests/guest/check-attack-log.sh" "$serial"
