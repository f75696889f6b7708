#!/usr/bin/env bash
# Linux under the VMM in Bochs: boot IMG (tools/mkimage.sh layout) on
# corei7_skylake_x and check the serial console.
#
#   tests/system/bochs-linux.sh IMG OUTDIR [TIMEOUT_S]
#
# PASS when the serial log shows, in this order of boot:
#   "[cpu0 vmx] launched"                            the VMM blue-pilled the firmware
#   PTVISOR-GUEST-READY                              the guest's /init runs (guest/init)
#   ptvisor-guest: hypervisor=1 signature="ptvisor"  the guest sees ptvisor in CPUID
# Bochs stops at PTVISOR-GUEST-DONE (or a kernel panic, or TIMEOUT_S).  The image
# is copied first: OVMF may write to the ESP, and the original stays untouched.
set -u
img=$1 out=$2 timeout=${3:-${BOCHS_LINUX_TIMEOUT:-420}}
here=$(cd "$(dirname "$0")" && pwd)
LAUNCHED='[cpu0 vmx] launched'
# Stop at the end marker, or early when the guest kernel panics or the VMM halts.
STOP='PTVISOR-GUEST-DONE|Kernel panic - not syncing|\[cpu[0-9]+ vmm\] error: halted|crash dump complete'
[ -f "$img" ] || { echo "bochs-linux: $img missing (the loader, VMM or guest did not build)"; exit 1; }
size=$(stat -c %s "$img")
cyl=$((size / 516096))
[ $((cyl * 516096)) = "$size" ] || { echo "bochs-linux: $img is not whole 16x63 cylinders"; exit 1; }
mkdir -p "$out"
disk="$out/disk.img" serial="$out/serial.log"
cp --sparse=always "$img" "$disk"
start=$(date +%s)
"$here/bochs.sh" "$disk" "$cyl" "$serial" "$timeout" \
    "$STOP" corei7_skylake_x
rc=$?
secs=$(($(date +%s) - start))
rm -f "$disk"
echo "bochs-linux: ${secs} s incl. waiting for an emulator slot (Bochs timeout ${timeout} s, runner rc=$rc), serial log $serial"

fail=0
check() { # check DESCRIPTION fixed-string
    if grep -aqF -- "$2" "$serial"; then
        echo "  ok   $1"
    else
        echo "  FAIL $1: no line containing '$2'"
        fail=1
    fi
}
check "VMM launched" "$LAUNCHED"
check "guest /init reached" "PTVISOR-GUEST-READY"
check "guest sees ptvisor in CPUID" 'ptvisor-guest: hypervisor=1 signature="ptvisor"'
check "CPL 3 CPUID at EIP 0xfffffffe wraps to 0 (issue 7)" "ptvisor-guest: rip-wrap ok rip=0"
check "guest ran to the end" "PTVISOR-GUEST-DONE"
grep -a '^ptvisor-guest:' "$serial" | tr -d '\r' | sed 's/^/  guest> /'
if [ $fail != 0 ]; then
    echo "---- last lines of $serial ----"
    tail -n 40 "$serial" | tr -d '\r'
    exit 1
fi
exit 0
