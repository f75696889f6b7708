#!/usr/bin/env bash
# The guest image on its own, without loader or VMM: QEMU TCG + OVMF starts
# vmlinuz.efi from the UEFI shell (startup.nsh) with the initramfs.  Proves the
# kernel, the initramfs and /init reach their markers, and that ptv-probe
# refuses its VMCALLs where no ptvisor is below it (a VMCALL there would #UD).
#
#   guest/test-direct.sh VMLINUZ INITRD OUTDIR
set -u
kernel=$1 initrd=$2 out=$3
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
printf 'fs0:\\vmlinuz.efi initrd=\\initrd.img console=ttyS0,115200\r\n' >"$out/startup.nsh"
"$here/tools/mkesp.sh" "$out/direct.img" 40 "$kernel=\\vmlinuz.efi" "$initrd=\\initrd.img" \
    "$out/startup.nsh=\\startup.nsh" || exit 1
serial="$out/serial.log"
ACCEL=tcg "$here/tests/system/qemu.sh" "$out/direct.img" "$serial" 120 \
    'PTVISOR-GUEST-DONE|Kernel panic - not syncing'
. "$here/tests/system/log-check.sh"
check "/init reached" '^PTVISOR-GUEST-READY$'
check "TSC line" '^ptvisor-guest: tsc=[0-9]+$'
check "CPUID line" '^ptvisor-guest: hypervisor=[01] signature="[^"]*" max_leaf=0x[0-9a-f]+ pt=[01] vmx=[01]$'
check "VMCALLs refused without ptvisor" '^ptvisor-guest: no ptvisor below this guest'
check "CPUID loop" '^ptvisor-guest: cpuid-loop n=[0-9]+ rounds=[0-9]+ min_delta=[0-9]+$'
check "/init finished" '^PTVISOR-GUEST-DONE$'
tr -d '\r' <"$serial" | grep -a '^ptvisor-guest:' | sed 's/^/  guest> /'
if [ $fail != 0 ]; then
    echo "---- last lines of $serial ----"
    tail -n 30 "$serial" | tr -d '\r'
    exit 1
fi
