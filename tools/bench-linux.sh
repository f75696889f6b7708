#!/usr/bin/env bash
# Linux-guest benchmarks in Bochs, where guest RDTSC counts instructions
# (docs/TEST-VEHICLES.md).  Prints figures next to their goals; never fails on
# a figure (a timed expectation is a benchmark, not a test).
#
#   [BENCH_CPUS=N] tools/bench-linux.sh CFG OUTDIR
#
# Two images from the same loader, VMM, kernel and initramfs, both booted in
# Bochs with BENCH_CPUS CPUs (default 1; 2 needs Bochs 3.0, the default of
# tests/system/bochs.sh: Bochs 2.7's INIT bug stops the VMM run in OVMF's
# ExitBootServices; the loader gives Linux an MADT, so both runs use every CPU):
#   vmm:  CFG as it is                (Linux runs under the VMM)
#   bare: CFG with `vmm = off`        (the loader boots Linux natively)
# Figures, from the guest's serial lines (guest/init, guest/ptv-probe.c):
#   (a) VM exits from power-on to the guest's marker, by reason (PTV_VMCALL_EXIT_STATS), per CPU
#       (read on each CPU right after the marker) and in all
#   (b) ticks to PTVISOR-GUEST-READY with N CPUs, vmm / bare (guest RDTSC: Bochs'
#       shared tick count, which with one CPU is its instructions retired; with N CPUs Bochs
#       runs one trace of each CPU per round and adds the round's instructions / N, a halted
#       CPU counting as 16: docs/ARCHITECTURE.md section 2.4, "The 2-CPU boot figure")
#   (c) VMM instructions per CPUID exit: (cpuid-loop delta vmm - bare) / N
# BENCH_SERIAL=1 boots the two images one after the other (one emulator at a time).
set -u
cfg=$1 out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(dirname "$(dirname "$out")")   # OUTDIR is BUILD/bench/linux
kernel=${GUEST_KERNEL:-$build/guest/vmlinuz.efi}
initrd=${GUEST_INITRD:-$build/guest/initrd.img}
timeout=${BENCH_TIMEOUT:-600}
export CPUS=${BENCH_CPUS:-1} # bochs.sh's `cpu: count=`
STOP='PTVISOR-GUEST-DONE|Kernel panic - not syncing|\[cpu[0-9]+ vmm\] error: halted|crash dump complete'
mkdir -p "$out"

# vmcall_user = stats: the guest's user-space probe reads the exit counts (a
# CPL 3 EXIT_STATS is refused under the default config).
for v in vmm bare; do
    grep -vE '^[[:space:]]*(vmm|vmcall_user)[[:space:]]*=' "$cfg" >"$out/$v.cfg"
    echo "vmcall_user = stats" >>"$out/$v.cfg"
done
echo "vmm = on" >>"$out/vmm.cfg"
echo "vmm = off" >>"$out/bare.cfg"
for v in vmm bare; do
    "$here/tools/mkimage.sh" "$out/$v.img" "$out/$v.cfg" "$kernel" "$initrd" >/dev/null || exit 1
done

# Both runs at once (the emulator runner keeps to two machine-wide slots), or one after the
# other with BENCH_SERIAL=1.
boot() {
    local v=$1 size t0
    size=$(stat -c %s "$out/$v.img")
    t0=$(date +%s)
    "$here/tests/system/bochs.sh" "$out/$v.img" $((size / 516096)) "$out/$v.serial.log" \
        "$timeout" "$STOP" corei7_skylake_x
    echo $(($(date +%s) - t0)) >"$out/$v.secs"
}
for v in vmm bare; do
    if [ "${BENCH_SERIAL:-0}" = 1 ]; then boot $v; else boot $v & fi
done
wait

num() { # num LOG KEY -> value of KEY=<digits> on the guest's lines
    tr -d '\r' <"$1" | sed -n "s/^ptvisor-guest: .*\b$2=\([0-9][0-9]*\).*/\1/p" | tail -n 1
}
ok=1
for v in vmm bare; do
    grep -aq PTVISOR-GUEST-DONE "$out/$v.serial.log" ||
        { echo "bench: $v run did not reach PTVISOR-GUEST-DONE: see $out/$v.serial.log"; ok=0; }
done

vmm_log="$out/vmm.serial.log" bare_log="$out/bare.serial.log"
# at the marker, each CPU's own counts (guest/init); the sum is the figure
percpu=$(tr -d '\r' <"$vmm_log" | sed -n 's/^ptvisor-guest: exit-stats cpu=\([0-9]*\) status=ok(0) total_exits=\([0-9]*\).*/\1 \2/p')
if [ -n "$percpu" ]; then
    exits=$(echo "$percpu" | awk '{ s += $2 } END { print s }')
else
    exits=$(num "$vmm_log" total_exits) # one vCPU's: an initramfs from before the per-CPU lines
fi
tsc_vmm=$(num "$vmm_log" tsc) tsc_bare=$(num "$bare_log" tsc)
loop_n=$(num "$vmm_log" n)
loop_vmm=$(num "$vmm_log" min_delta) loop_bare=$(num "$bare_log" min_delta)

echo "== Linux guest in Bochs (corei7_skylake_x, $CPUS CPUs), guest RDTSC = Bochs ticks since reset"
online_vmm=$(tr -d '\r' <"$vmm_log" | sed -n 's/^ptvisor-guest: cpus_online=\([^ ]*\).*/\1/p' | tail -n 1)
online_bare=$(tr -d '\r' <"$bare_log" | sed -n 's/^ptvisor-guest: cpus_online=\([^ ]*\).*/\1/p' | tail -n 1)
echo "CPUs online in the guest: vmm ${online_vmm:-?}, bare ${online_bare:-?}"
if [ -n "$exits" ]; then
    echo "(a) VM exits, power-on to the guest's marker, all CPUs: $exits   (goal <= 2,000)"
else
    st=$(tr -d '\r' <"$vmm_log" | sed -n 's/^ptvisor-guest: exit-stats status=\([^ ]*\).*/\1/p' | tail -n 1)
    echo "(a) VM exits, power-on to the guest's marker: n/a (exit-stats ${st:-not reached})   (goal <= 2,000)"
fi
# Per CPU and basic exit reason (SDM Vol. 3C appendix C numbers), as the guest read them.
if [ -n "$percpu" ]; then
    tr -d '\r' <"$vmm_log" | sed -n \
        -e 's/^ptvisor-guest: exit-stats cpu=\([0-9]*\) status=ok(0) total_exits=\([0-9]*\).*/    CPU \1: \2 exits/p' \
        -e 's/^ptvisor-guest: exit-stats cpu=[0-9]* reason=\([0-9]*\) count=\([0-9]*\).*/      reason \1: \2 exits/p'
else
    tr -d '\r' <"$vmm_log" | sed -n 's/^ptvisor-guest: exit-stats reason=\([0-9]*\) count=\([0-9]*\).*/      reason \1: \2 exits/p'
fi
if [ -n "$tsc_vmm" ] && [ -n "$tsc_bare" ]; then
    ratio=$(awk -v a="$tsc_vmm" -v b="$tsc_bare" 'BEGIN { printf "%.4f", a / b }')
    echo "(b) boot to PTVISOR-GUEST-READY, $CPUS CPUs: vmm $tsc_vmm / bare $tsc_bare ticks = ${ratio}x   (goal <= 1.01x)"
else
    echo "(b) boot to PTVISOR-GUEST-READY, $CPUS CPUs: n/a (vmm ${tsc_vmm:-none}, bare ${tsc_bare:-none})   (goal <= 1.01x)"
fi
if [ -n "$loop_vmm" ] && [ -n "$loop_bare" ] && [ -n "$loop_n" ]; then
    per=$(awk -v a="$loop_vmm" -v b="$loop_bare" -v n="$loop_n" 'BEGIN { printf "%.1f", (a - b) / n }')
    echo "(c) VMM instructions per CPUID exit: ($loop_vmm - $loop_bare) / $loop_n = $per   (goal <= 300)"
else
    echo "(c) VMM instructions per CPUID exit: n/a   (goal <= 300)"
fi
echo "wall time in Bochs (incl. waiting for an emulator slot): vmm $(cat "$out/vmm.secs") s, bare $(cat "$out/bare.secs") s"
echo "logs: $vmm_log $bare_log"
[ $ok = 1 ] || echo "bench: incomplete (see above)"
exit 0
