#!/usr/bin/env bash
# Nested QEMU/KVM, really run: ptvisor as a QEMU/KVM guest inside Bochs.
#
#   tests/system/nested-kvm.sh L1_DISK OUTDIR [TIMEOUT_S]
#
# L1_DISK (tests/system/nested/mkl1.sh) boots Debian's kernel in Bochs with VMX; its /init
# (tests/system/nested/l1-init) loads kvm_intel and runs tests/system/qemu.sh with ACCEL=kvm
# CPU=host -- the command line `make run-kvm` uses -- on ptvisor's image, and relays that
# machine's serial console to Bochs' COM1.  Three levels: Bochs (L0, the "hardware"), Linux
# with KVM (L1), ptvisor (L2, the VMM under test), ptvisor's Linux guest (L3).
#
# The checks: L1's KVM came up with nested VMX; ptvisor launched and names KVM below it;
# then every check bochs:linux makes on its own serial log (tests/system/bochs-linux.sh with
# LINUX_LOG: the guest's markers, ptvisor's CPUID signature, the CPL-3 trace rule attacked
# from inside, ptvisor-ctl trace of ptt-exact decoded on the host equal to its native run,
# the crash dump of the guest's kernel panic) and, nested only: VMX and PT hidden from the
# guest (KVM offers no PT to an L1).  Environment as for bochs-linux.sh (PTT, EXACT_ELF, ...).
#
# NESTED_BOCHS (default 3: Bochs 3.0, which delivers MTF, so KVM offers it to ptvisor) picks
# the L0; NESTED_BOCHS=2.7 runs Debian 12's (no MTF: ptvisor steps with the trap flag there).
# L1's quirks on Bochs (kvm_intel without APICv, APIC timer without TSC deadline) are in
# tests/system/nested/ and docs/ARCHITECTURE.md §2.4.
set -u
l1=$1 out=$2 timeout=${3:-${NESTED_TIMEOUT:-1500}}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$l1" ] && [ -f "$l1.cyl" ] || { echo "nested-kvm: $l1 missing (tests/system/nested/mkl1.sh did not run)"; exit 1; }
mkdir -p "$out"
disk="$out/l1-disk.img" serial="$out/serial.log"
cp --sparse=always "$l1" "$disk"
start=$(date +%s)
# L1 gets 1.5 GiB: its initramfs (~80 MiB unpacked) and QEMU's guest (-m 512)
BOCHS=${NESTED_BOCHS:-3} MEGS=1536 BOCHS_ERROR=ignore "$here/bochs.sh" "$disk" "$(cat "$l1.cyl")" \
    "$serial" "$timeout" 'NESTED-L1: done' corei7_skylake_x
rc=$?
secs=$(($(date +%s) - start))
rm -f "$disk"
echo "nested-kvm: ${secs} s wall for the whole chain (Bochs ${NESTED_BOCHS:-3} -> Linux/KVM -> QEMU -> ptvisor -> Linux), runner rc=$rc, serial log $serial"
tr -d '\r' <"$serial" | grep -a '^NESTED-L1: ' | grep -v 'qemu> ' | sed 's/^/  /'

. "$here/log-check.sh"
check "L1 Linux up in Bochs with VMX" '^NESTED-L1: up: '
check "L1's kvm_intel loaded with nested VMX and EPT" '^NESTED-L1: kvm_intel loaded: nested=Y ept=Y'
check "QEMU -accel kvm -cpu host started on ptvisor's image" '^NESTED-L1: starting: ACCEL=kvm CPU=host'
check "ptvisor's VMM names KVM below it" '^\[cpu0 vmx\] hypervisor below: KVMKVMKVM;'
check "ptvisor's VMM launched under KVM" '^\[cpu0 vmx\] launched'
check "the guest sees no VMX and no PT (KVM offers no PT to an L1)" \
    '^ptvisor-guest: hypervisor=1 signature="ptvisor" max_leaf=0x[0-9a-f]+ pt=0 vmx=0$'
check "QEMU ended at the guest's end (qemu.sh rc=0)" '^NESTED-L1: qemu.sh rc=0 '
tr -d '\r' <"$serial" | grep -a '^\[cpu0 vmx\] \(hypervisor below\|controls allowed\)' | sed 's/^/  /'
echo "-- the checks bochs:linux makes, on this serial log:"
NO_WORK=1 LINUX_LOG=$serial CPUS=1 "$here/bochs-linux.sh" - "$out" || fail=1
if [ $fail != 0 ]; then
    echo "---- what QEMU said (L1) ----"
    tr -d '\r' <"$serial" | grep -a '^NESTED-L1: qemu> ' | tail -n 30
    exit 1
fi
exit 0
