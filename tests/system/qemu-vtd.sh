#!/usr/bin/env bash
# DMA isolation with the VMM's own VT-d code, in QEMU TCG (no VMX needed):
# vtd-dma.efi (tests/guest/vtd_dma.c) booted bare on q35 with QEMU's intel-iommu (interrupt
# remapping off, as the VMM leaves it) and the edu DMA device.
#   tests/system/qemu-vtd.sh BUILD_DIR [dma|linux]
# dma: PASS needs every check of the program: the control (translation off: edu reaches the
# "VMM" page), the VMM's set-up, the unit translating, the allowed DMA landing, the blocked
# write and read with their fault records.
# linux: the same, then the DMAR renamed as the loader renames it and Linux (the guest image)
# started with the unit still translating: it must reach its marker, list the renamed table,
# and find no DMAR (no DMA-remapping lines of its own).
# SKIP (77) where this QEMU has no intel-iommu or edu device, or (linux) there is no guest image.
set -u
build=$1 mode=${2:-dma}
here=$(dirname "$0")
base=$build/test/qemu-vtd-$mode
mkdir -p "$base"
out=$(mktemp -d "$base/run.XXXXXX")
trap 'cp "$out"/*.serial "$out"/*.report "$base/" 2>/dev/null; rm -rf "$out"' EXIT

for dev in intel-iommu edu; do
    if ! qemu-system-x86_64 -device help 2>/dev/null | grep -q "name \"$dev\""; then
        echo "SKIP: qemu-system-x86_64 has no $dev device"
        exit 77
    fi
done
files=("$build/tests/guest/vtd-dma.efi=\\EFI\\BOOT\\BOOTX64.EFI")
stop='SUMMARY: ' timeout=120
if [ "$mode" = linux ]; then
    kernel=$build/guest/vmlinuz.efi initrd=$build/guest/initrd.img
    if [ ! -f "$kernel" ] || [ ! -f "$initrd" ]; then
        echo "SKIP: no guest image ($kernel, $initrd): run make guest-image"
        exit 77
    fi
    files+=("$kernel=\\ptvisor\\vmlinuz.efi" "$initrd=\\ptvisor\\initrd.img")
    stop='PTVISOR-GUEST-READY|Kernel panic|INFO: Linux returned' timeout=240
fi
"$here/../../tools/mkesp.sh" "$out/vtd.img" 64 "${files[@]}" || exit 1
QEMU_ARGS="-device intel-iommu,intremap=off -device edu" \
    "$here/qemu.sh" "$out/vtd.img" "$out/vtd.serial" "$timeout" "$stop" ||
    { echo "FAIL: no '$stop' within $timeout s"; tail -n 30 "$out/vtd.serial";
      cat "$out/vtd.serial.stdout" 2>/dev/null; exit 1; }
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
if [ "$mode" = linux ]; then
    clean=$out/clean.log
    tr -d '\r' <"$out/vtd.serial" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' >"$clean"
    echo "---- Linux's ACPI and DMAR lines ----"
    grep -aE 'ACPI: (PTVD|DMAR)|DMAR|IOMMU|PTVISOR-GUEST-READY|Kernel panic' "$clean" | head -n 20
    echo "----"
    grep -aq 'INFO: DMAR renamed PTVD; starting Linux' "$clean" ||
        { echo "FAIL: the program did not start Linux"; status=1; }
    grep -aq 'PTVISOR-GUEST-READY' "$clean" || { echo "FAIL: Linux did not reach its marker"; status=1; }
    grep -aq 'ACPI: PTVD ' "$clean" || { echo "FAIL: Linux does not list the renamed table"; status=1; }
    if grep -aqE 'ACPI: DMAR |DMAR: ' "$clean"; then
        echo "FAIL: Linux found a DMAR"; status=1
    fi
    grep -aq 'Kernel panic' "$clean" && { echo "FAIL: Linux panicked"; status=1; }
fi
[ $status = 0 ] && echo "VT-d DMA isolation in QEMU ($mode): OK"
exit $status
