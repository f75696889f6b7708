#!/usr/bin/env bash
# The loader's pin check of vmm.elf (boot/vmm_pin.h) in Bochs, one case per run:
#
#   tests/system/bochs-vmm-pin.sh CASE [BUILD_DIR]
#
#   tampered  the vmm.elf the loader was built with, one bit of one byte in the middle of the
#             file flipped after the build (what a guest with root could write on the ESP): one
#             mismatch line with both digests' first 16 hex digits (from sha256sum here), the
#             VMM is never called (no hand-off, no entry call), the loader goes on natively
#   pristine  the same vmm.elf unchanged: the line that its SHA-256 matches, then the loader
#             calls the VMM entry and the VMM runs
#
# Bochs, not QEMU TCG: the loader reads vmm.elf only once the CPU has VMX (QEMU TCG has none;
# qemu:no-vmm-elf checks that it is not read there).  The image has no guest, so the tampered
# boot ends with the loader returning to the firmware.  Exit 0 PASS, else FAIL.
set -u
case_=$1 build=${2:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
loader=$build/boot/BOOTX64.EFI
vmm=$build/vmm/vmm.elf
work=$build/test/bochs-vmm-pin/$case_
mkdir -p "$work"
for f in "$loader" "$vmm"; do [ -f "$f" ] || { echo "missing $f"; exit 1; }; done

pin=$(sha256sum "$vmm" | cut -c1-16)
elf=$work/vmm.elf
cp "$vmm" "$elf"
case $case_ in
tampered)
    off=$(($(stat -c %s "$vmm") / 2))
    byte=$(od -An -tu1 -j "$off" -N1 "$vmm" | tr -d ' ')
    printf "\\$(printf %03o $((byte ^ 1)))" | dd of="$elf" bs=1 seek="$off" conv=notrunc status=none
    [ "$(cmp "$vmm" "$elf" | wc -l)" = 1 ] && [ "$(cmp -l "$vmm" "$elf" | wc -l)" = 1 ] ||
        { echo "could not change exactly one byte"; exit 1; }
    found=$(sha256sum "$elf" | cut -c1-16)
    echo "byte $off: $byte -> $((byte ^ 1)); sha256sum: built $pin..., on the ESP $found..."
    want="ptvisor: \\ptvisor\\vmm.elf: SHA-256 mismatch: expected $pin..., found $found... (not the vmm.elf this loader was built with) -- booting natively"
    stop='ptvisor: returning to the firmware'
    ;;
pristine)
    want="ptvisor: \\ptvisor\\vmm.elf: SHA-256 $pin... matches the loader's built-in digest"
    stop='ptvisor: VMM active on the BSP|ptvisor: returning to the firmware'
    ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
tools/mkesp.sh "$work/esp.img" 40 "$loader=\\EFI\\BOOT\\BOOTX64.EFI" \
    "boot/ptvisor.cfg=\\ptvisor\\ptvisor.cfg" "$elf=\\ptvisor\\vmm.elf" || exit 1
tests/system/bochs.sh "$work/esp.img" 40 "$work/serial.log" 120 "$stop"
tr -d '\r' <"$work/serial.log" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' >"$work/clean.log"
grep -a 'ptvisor' "$work/clean.log"

fails=0
has_line() {
    if grep -aqFx -- "$1" "$work/clean.log"; then echo "ok: '$1'"; else
        echo "FAIL: no line '$1'"; fails=$((fails + 1)); fi
}
has_text() {
    if grep -aqF -- "$1" "$work/clean.log"; then echo "ok: '$1'"; else
        echo "FAIL: no '$1'"; fails=$((fails + 1)); fi
}
lacks() {
    if grep -aqF -- "$1" "$work/clean.log"; then echo "FAIL: unexpected '$1'"; fails=$((fails + 1));
    else echo "ok: no '$1'"; fi
}
has_line 'ptvisor: VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=0x0 (unlocked: the VMM locks it)'
has_line "$want"
[ "$(grep -ac 'vmm.elf: SHA-256' "$work/clean.log")" = 1 ] || {
    echo "FAIL: not exactly one SHA-256 line"; fails=$((fails + 1)); }
if [ "$case_" = tampered ]; then
    lacks 'ptvisor: handoff:'
    lacks 'ptvisor: calling the VMM'
    has_line 'ptvisor: guest \ptvisor\vmlinuz.efi: Not Found'
    has_line 'ptvisor: returning to the firmware in 5 seconds'
else
    lacks 'mismatch'
    has_text 'ptvisor: calling the VMM entry at '
    has_line 'ptvisor: VMM active on the BSP'
fi
[ "$fails" -eq 0 ] && { echo "PASS $case_"; exit 0; }
echo "FAIL $case_: $fails check(s)"
exit 1
