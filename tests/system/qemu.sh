#!/usr/bin/env bash
# Boot a disk image in QEMU (TCG, or KVM with ACCEL=kvm) + OVMF.
#
#   tests/system/qemu.sh IMG SERIAL_LOG TIMEOUT_S [STOP_REGEX]
#
# Serial goes to SERIAL_LOG; QEMU is stopped when STOP_REGEX appears or after
# TIMEOUT_S.  Exit 0 if STOP_REGEX was seen (or none given), 124 on timeout.
# ACCEL=kvm CPU=host runs nested (the VMM then really gets VMX).  QEMU_ARGS: more arguments
# (e.g. devices: "-device intel-iommu,intremap=off -device edu").
set -u
. "$(dirname "$0")/emu-slot.sh"
img=$1 serial=$2 timeout=$3 stop=${4:-}
accel=${ACCEL:-tcg} cpu=${CPU:-max}
dir=$(dirname "$serial"); mkdir -p "$dir"
vars="$serial.vars.fd"
cp /usr/share/OVMF/OVMF_VARS_4M.fd "$vars"
: >"$serial"
# shellcheck disable=SC2086 # QEMU_ARGS is a list of words
qemu-system-x86_64 -machine q35,accel=$accel -cpu $cpu -m 512 -nodefaults -display none ${QEMU_ARGS:-} \
    -serial file:"$serial" -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
    -drive if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd \
    -drive if=pflash,format=raw,file="$vars" -drive file="$img",format=raw,snapshot=on \
    >"$serial.stdout" 2>&1 &
pid=$!
deadline=$(( $(date +%s) + timeout ))
while kill -0 $pid 2>/dev/null; do
    if [ -n "$stop" ] && grep -aqE "$stop" "$serial"; then break; fi
    [ "$(date +%s)" -ge "$deadline" ] && break
    sleep 0.5
done
kill $pid 2>/dev/null; wait $pid 2>/dev/null
if [ -z "$stop" ] || grep -aqE "$stop" "$serial"; then exit 0; fi
exit 124
