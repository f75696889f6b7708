#!/usr/bin/env bash
# make bench-nested: the same Linux guest under ptvisor under QEMU/KVM and directly under
# QEMU/KVM, in the same L1 (the nested vehicle of tests/system/nested-kvm.sh, one Bochs boot;
# tests/system/nested/l1-bench-init runs both QEMUs in turn up to the guest's marker).
#
#   tests/system/nested-bench.sh L1_DISK OUTDIR [TIMEOUT_S]
#
# Figures (ratios only; a figure, never a failure):
#   guest TSC to the marker, ptvisor / bare (KVM's guest TSC follows Bochs' tick count: all the
#     emulator did from the VM's creation on, L1's KVM and QEMU included)
#   VM exits L1's KVM handled to the marker, and per VM exit of ptvisor's guest (its VMM's
#     EXIT_STATS at the marker): the exit multiplier of running nested
set -u
l1=$1 out=$2 timeout=${3:-1500}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$l1" ] && [ -f "$l1.cyl" ] || { echo "nested-bench: $l1 missing"; exit 1; }
mkdir -p "$out"
disk="$out/l1-disk.img" serial="$out/serial.log"
cp --sparse=always "$l1" "$disk"
start=$(date +%s)
BOCHS=${NESTED_BOCHS:-3} MEGS=1536 BOCHS_ERROR=ignore "$here/bochs.sh" "$disk" "$(cat "$l1.cyl")" \
    "$serial" "$timeout" 'NESTED-L1: done' corei7_skylake_x
rm -f "$disk"
echo "nested-bench: $(($(date +%s) - start)) s wall, serial log $serial"
log=$(tr -d '\r' <"$serial")
part() { echo "$log" | sed -n "/^NESTED-L1: bench $1 start/,/^NESTED-L1: bench $1 end/p"; }
val() { sed -n "s/.*$1=\([0-9][0-9]*\).*/\1/p" | tail -n 1; }
tsc_b=$(part bare | grep -a '^ptvisor-guest: tsc=' | val tsc)
tsc_v=$(part ptvisor | grep -a '^ptvisor-guest: tsc=' | val tsc)
kvm_b=$(part bare | grep -a '^NESTED-L1: bench bare kvm_exits=' | val kvm_exits)
kvm_v=$(part ptvisor | grep -a '^NESTED-L1: bench ptvisor kvm_exits=' | val kvm_exits)
ptv=$(part ptvisor | grep -a '^ptvisor-guest: exit-stats cpu=0 status=ok(0) total_exits=' | val total_exits)
echo "$log" | grep -a '^NESTED-L1: ' | sed 's/^/  /'
echo "== the same Linux guest to its marker, nested in Bochs 3.0 -> Linux/KVM -> QEMU"
if [ -n "$tsc_b" ] && [ -n "$tsc_v" ]; then
    echo "guest TSC to the marker: under ptvisor $tsc_v / directly $tsc_b = $(awk -v a="$tsc_v" -v b="$tsc_b" 'BEGIN { printf "%.3f", a / b }')x   (goal <= 1.10x)"
else
    echo "guest TSC to the marker: n/a (under ptvisor ${tsc_v:-none}, directly ${tsc_b:-none})"
fi
if [ -n "$kvm_v" ] && [ -n "$ptv" ] && [ "$ptv" -gt 0 ]; then
    echo "VM exits L1's KVM handled to the marker: $kvm_v under ptvisor, ${kvm_b:-?} directly; ptvisor's guest made $ptv VM exits to ptvisor"
    [ -n "$kvm_b" ] && echo "  KVM exits per exit of ptvisor's guest: $(awk -v a="$kvm_v" -v b="$kvm_b" -v n="$ptv" 'BEGIN { printf "%.1f more than directly (%.1f in all, the firmware'"'"'s and the guest'"'"'s own exits to KVM included)", (a - b) / n, a / n }')"
else
    echo "VM exits L1's KVM handled: n/a (KVM ${kvm_v:-none}, ptvisor's guest ${ptv:-none})"
fi
