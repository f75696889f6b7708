#!/usr/bin/env bash
# DMA isolation with the VMM's own VT-d code, in QEMU TCG (no VMX needed; issue 31):
# vtd-dma.efi (tests/guest/vtd_dma.c) booted bare on q35 with QEMU's intel-iommu (interrupt
# remapping off, as the VMM leaves it) and the edu DMA device.
#   tests/system/qemu-vtd.sh BUILD_DIR
# PASS needs every check of the program: the control (translation off: edu reaches the "VMM"
# page), the unit translating, the allowed DMA landing, the blocked write and read with their
# fault records.  SKIP (77) where this QEMU has no intel-iommu or edu device.
set -u
build=$1
here=$(dirname "$0")
base=$build/test/qemu-vtd
mkdir -p "$base"
out=$(mktemp -d "$base/run.XXXXXX")
trap 'cp "$out"/*.serial "$out"/*.report "$base/" 2>/dev/null; rm -rf "$out"' EXIT

for dev in intel-iommu edu; do
    if ! qemu-system-x86_64 -device help 2>/dev/null | grep -q "name \"$dev\""; then
        echo "SKIP: qemu-system-x86_64 has no $dev device"
        exit 77
    fi
done
"$here/../../tools/mkesp.sh" "$out/vtd.img" 40 "$build/tests/guest/vtd-dma.efi=\\EFI\\BOOT\\BOOTX64.EFI" ||
    exit 1
QEMU_ARGS="-device intel-iommu,intremap=off -device edu" \
    "$here/qemu.sh" "$out/vtd.img" "$out/vtd.serial" 120 'SUMMARY: ' ||
    { echo "FAIL: no SUMMARY line within 120 s"; cat "$out/vtd.serial.stdout" 2>/dev/null; exit 1; }
"$here/../guest/parse-report.sh" "$out/vtd.serial" >"$out/vtd.report"
cat "$out/vtd.report"
status=0
need() {
    grep -q "^PASS: $1" "$out/vtd.report" || { echo "FAIL: missing 'PASS: $1'"; status=1; }
}
need 'control, translation off: edu DMA lands'
need "the VMM's set-up: DMAR"
need 'unit translating'
need 'allowed: edu reads a RAM page and writes another, the bytes land'
need 'blocked: edu.s write to the VMM page leaves it unchanged'
need 'blocked: the unit recorded edu.s write fault'
need 'blocked: edu.s read of the VMM page never sees its bytes'
need 'blocked: the unit recorded edu.s read fault'
grep -q '^SUMMARY: .* 0 unexpected failures, 0 skipped' "$out/vtd.report" ||
    { echo "FAIL: the program reports failures or skips"; status=1; }
[ $status = 0 ] && echo "VT-d DMA isolation in QEMU: OK"
exit $status
