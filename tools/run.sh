#!/usr/bin/env bash
# Boot a ptvisor image in the best vehicle this machine has, serial console live.
#
#   tools/run.sh IMG [auto|kvm|bochs|tcg]
#
# auto: QEMU/KVM nested (-cpu host) when the host has VMX, KVM offers nested VMX
#       and a QEMU probe starts; otherwise Bochs + OVMF (docs/TEST-VEHICLES.md:
#       the one place VMX executes on a machine without it).  tcg = QEMU TCG (no
#       VMX: shows the loader's no-VMX path).  Stops at PTVISOR-GUEST-DONE, on
#       Ctrl-C or after RUN_TIMEOUT seconds (default 900).
#   kvm:  refused in one line, exit 1, when nested KVM cannot work here.
#   tools/run.sh --kvm-check: print why nested QEMU/KVM cannot run here (nothing
#       if it can); exit 1 / 0.  PTV_KVM_DEV, PTV_CPUINFO and PTV_KVM_NESTED
#       replace /dev/kvm, /proc/cpuinfo and kvm_intel's nested parameter (tests).
set -u
kvm_dev=${PTV_KVM_DEV:-/dev/kvm}
cpuinfo=${PTV_CPUINFO:-/proc/cpuinfo}
nested_param=${PTV_KVM_NESTED:-/sys/module/kvm_intel/parameters/nested}

# Why nested KVM cannot be used here, or nothing if it can.
kvm_unusable() {
    [ -e "$kvm_dev" ] || { echo "$kvm_dev missing (no KVM on this host)"; return; }
    [ -r "$kvm_dev" ] && [ -w "$kvm_dev" ] || { echo "$kvm_dev not read/writable by $(id -un)"; return; }
    if ! grep -qw vmx "$cpuinfo" 2>/dev/null; then
        if grep -qw svm "$cpuinfo" 2>/dev/null; then
            echo "host CPU has no vmx flag (AMD SVM host: ptvisor needs Intel VT-x, nested KVM here offers SVM)"
        else
            echo "host CPU has no vmx flag in $cpuinfo"
        fi
        return
    fi
    [ -r "$nested_param" ] || { echo "kvm_intel not loaded ($nested_param missing)"; return; }
    local nested
    nested=$(cat "$nested_param")
    case $nested in Y | 1) ;; *) echo "kvm_intel nested=$nested: load it with nested=1 for nested VMX"; return ;; esac
    command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 not installed"; return; }
    local probe rc
    probe=$(echo quit | timeout 20 qemu-system-x86_64 -machine q35,accel=kvm -cpu host -m 64 \
        -nodefaults -display none -monitor stdio -S 2>&1)
    rc=$?
    if [ $rc != 0 ] || echo "$probe" | grep -qi error; then
        echo "QEMU -accel kvm -cpu host probe failed: $(echo "$probe" | grep -i error | head -n 1)"
    fi
}

if [ "${1:-}" = --kvm-check ]; then
    why=$(kvm_unusable)
    [ -z "$why" ] && exit 0
    echo "run-kvm: nested QEMU/KVM unusable: $why"
    exit 1
fi

img=$1 want=${2:-auto}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${RUN_DIR:-$(dirname "$img")/run}
timeout=${RUN_TIMEOUT:-900}
stop='PTVISOR-GUEST-DONE'
# The emulator also stops early when the guest kernel panics or the VMM halts.
stop_any="$stop|Kernel panic - not syncing|\\[cpu[0-9]+ vmm\\] error: halted|crash dump complete"
mkdir -p "$out"
serial="$out/serial.log"

vehicle=$want
if [ "$want" = auto ]; then
    why=$(kvm_unusable)
    if [ -z "$why" ]; then
        vehicle=kvm
        echo "run: vehicle QEMU/KVM nested (-cpu host): host VMX + nested KVM available"
    else
        vehicle=bochs
        echo "run: vehicle Bochs + OVMF (corei7_skylake_x, real VMX emulation): no nested KVM, $why"
    fi
elif [ "$want" = kvm ]; then
    why=$(kvm_unusable)
    [ -z "$why" ] || { echo "run-kvm: nested QEMU/KVM unusable: $why"; exit 1; }
    echo "run: vehicle QEMU/KVM nested (-cpu host), forced"
else
    echo "run: vehicle $want, forced"
fi

case $vehicle in
kvm)  runner=(env ACCEL=kvm CPU=host "$here/tests/system/qemu.sh" "$img" "$serial" "$timeout" "$stop_any") ;;
tcg)  runner=(env ACCEL=tcg "$here/tests/system/qemu.sh" "$img" "$serial" "$timeout" "$stop_any") ;;
bochs)
    # Bochs' clock at 500 M emulated instructions a second (not 50 M): the run image's
    # sw_trace = auto steps with MTF on Bochs 3.0, which steps the handlers of the interrupts
    # taken in a window, and at 50 M a timer tick is too short for a stepped one: the guest
    # livelocks in its first window (docs/ARCHITECTURE.md section 5; bochs:linux-mtf)
    export BOCHS_IPS=${BOCHS_IPS:-500000000}
    size=$(stat -c %s "$img")
    disk="$out/disk.img"
    cp --sparse=always "$img" "$disk" # OVMF may write to the ESP: keep the image pristine
    runner=("$here/tests/system/bochs.sh" "$disk" $((size / 516096)) "$serial" "$timeout" "$stop_any") ;;
*) echo "run: unknown vehicle $vehicle (auto|kvm|bochs|tcg)"; exit 2 ;;
esac

echo "run: serial log $serial (emulator log next to it); Ctrl-C stops"
[ "$vehicle" = bochs ] && echo "run: Bochs: OVMF ~15 s, Debian's kernel ~2 min more before userspace"
rm -f "$serial"
: >"$serial"
start=$(date +%s)
# The runner gets its own process group; Ctrl-C or a kill of this script is
# passed on as SIGINT, which Bochs and QEMU take as a clean stop.
setsid "${runner[@]}" &
rpid=$!
tail -n +1 -F "$serial" 2>/dev/null &
tpid=$!
trap 'echo; echo "run: interrupted, stopping the emulator"; kill -INT -- -$rpid 2>/dev/null' INT TERM HUP
while :; do
    wait $rpid
    rc=$?
    kill -0 $rpid 2>/dev/null || break
done
trap - INT TERM HUP
sleep 0.5
kill $tpid 2>/dev/null
wait $tpid 2>/dev/null
secs=$(($(date +%s) - start))
[ "$vehicle" = bochs ] && rm -f "$disk"
echo
if grep -aq "$stop" "$serial"; then
    echo "run: guest reached $stop after $secs s ($vehicle)"
else
    echo "run: stopped after $secs s without $stop (rc=$rc, $vehicle); see $serial and $serial.*"
    [ -s "$serial.stdout" ] && { echo "run: emulator said:"; tail -n 5 "$serial.stdout" | sed 's/^/  /'; }
fi

# The trace the guest took (guest/init: ptvisor-ctl) and the VMM dumped on the console:
# extracted, summarised and drawn (PTT: the ptvisor-trace binary, WORK_ELF: the workload)
ptt=${PTT:-}
if [ -z "$ptt" ] || ! [ -x "$ptt" ]; then
    exit 0
fi
if ! grep -aq '^@PTV1 \|@PTV1 B ' "$serial"; then
    echo "run: no trace dump in the log (the guest's /init traces with ptvisor-ctl when vmcall_user = trace)"
    exit 0
fi
# every dump in the log: the boot window (trace_boot, dump_on = boot) and the guest's own
# (tools/dump-decode.sh; GUEST_MAP: the user's ELF files for symbols, make run GUEST_FILES=...)
rm -rf "$out"/trace "$out"/trace-*
last=
while read -r _ id _ _ reason _; do
    tdir="$out/trace-$id-$reason"
    PTT=$ptt "$here/tools/dump-decode.sh" "$serial" "$id" "$reason" "$tdir" </dev/null
    [ -d "$tdir" ] && last=$tdir
done < <("$ptt" extract "$serial" --list 2>/dev/null)
[ -n "$last" ] && ln -sfn "$(basename "$last")" "$out/trace" && echo "run: $out/trace -> $last"
