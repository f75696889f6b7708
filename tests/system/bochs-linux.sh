#!/usr/bin/env bash
# Linux under the VMM in Bochs: boot IMG (tools/mkimage.sh layout) on
# corei7_skylake_x with CPUS CPUs (environment, default 1) and check the
# serial console.
#
# make test runs it twice (mk/90-image.mk): bochs:linux with CPUS=2 and sw_trace = tf,
# bochs:linux-mtf with 2 CPUs and sw_trace = auto (the MTF steps Bochs 3.0 delivers).  Bochs 2.7 (BOCHS=2.7) never clears an INIT it VM-exits for, so
# there OVMF's ExitBootServices waits forever for an AP it restarts: use CPUS=1.
#
#   [CPUS=N] tests/system/bochs-linux.sh IMG OUTDIR [TIMEOUT_S]
#   LINUX_LOG=SERIAL_LOG [CPUS=N] tests/system/bochs-linux.sh - OUTDIR   (checks only)
#
# PASS when the serial log shows, in this order of boot:
#   "[cpu0 vmx] launched"                            the VMM blue-pilled the firmware
#   PTVISOR-GUEST-READY                              the guest's /init runs (guest/init)
#   ptvisor-guest: hypervisor=1 signature="ptvisor"  the guest sees ptvisor in CPUID
# and, for SMP, from inside the guest:
#   cpus_online=0-(N-1)                              Linux brought every CPU up
#   cpuinfo cpu=I hypervisor_flag=1                  each CPU has the flag in /proc/cpuinfo
#   pin cpu=I ran_on=I hypervisor=1 signature="ptvisor"
#                                                    a workload pinned on CPU I ran there,
#                                                    and CPUID on that CPU answers ptvisor
# OVMF on Bochs has no MADT: the loader adds one (boot/acpi_fixup.c, a
# test-vehicle aid), so Linux can see the second CPU at all.
# Bochs stops at PTVISOR-GUEST-DONE (or a kernel panic, or TIMEOUT_S).  The image
# is copied first: OVMF may write to the ESP, and the original stays untouched.
set -u
img=$1 out=$2 timeout=${3:-${BOCHS_LINUX_TIMEOUT:-420}}
export CPUS=${CPUS:-1}
here=$(cd "$(dirname "$0")" && pwd)
LAUNCHED='[cpu0 vmx] launched'
# Stop at the end marker, or early when the guest kernel panics or the VMM halts.
STOP='PTVISOR-GUEST-DONE|Kernel panic - not syncing|\[cpu[0-9]+ vmm\] error: halted|crash dump complete'
# EXPECT_PANIC=1: the image's /init panics the kernel on purpose at its end (ptv.panic=1): wait
# for the VMM's panic dump instead, and check it
if [ "${EXPECT_PANIC:-0}" = 1 ]; then
    STOP='panic dump complete|\[cpu[0-9]+ vmm\] error: halted|crash dump complete'
fi
mkdir -p "$out"
if [ -n "${LINUX_LOG:-}" ]; then
    # LINUX_LOG=FILE: no boot here, only the checks, on a serial log another vehicle wrote
    # (tests/system/nested-kvm.sh: the same image run by QEMU/KVM inside Bochs); IMG is unused
    serial=$LINUX_LOG
    [ -f "$serial" ] || { echo "bochs-linux: $serial missing"; exit 1; }
    echo "bochs-linux: the checks on $serial ($CPUS CPUs)"
else
    [ -f "$img" ] || { echo "bochs-linux: $img missing (the loader, VMM or guest did not build)"; exit 1; }
    size=$(stat -c %s "$img")
    cyl=$((size / 516096))
    [ $((cyl * 516096)) = "$size" ] || { echo "bochs-linux: $img is not whole 16x63 cylinders"; exit 1; }
    disk="$out/disk.img" serial="$out/serial.log"
    cp --sparse=always "$img" "$disk"
    start=$(date +%s)
    "$here/bochs.sh" "$disk" "$cyl" "$serial" "$timeout" \
        "$STOP" corei7_skylake_x
    rc=$?
    secs=$(($(date +%s) - start))
    rm -f "$disk"
    echo "bochs-linux: ${secs} s incl. waiting for an emulator slot ($CPUS CPUs, Bochs timeout ${timeout} s, runner rc=$rc), serial log $serial"
fi

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
check "CPL 3 CPUID at EIP 0xfffffffe wraps to 0" "ptvisor-guest: rip-wrap ok rip=0"
if [ "${EXPECT_PANIC:-0}" = 1 ]; then
    check "guest ran to the end (then panics on purpose)" "ptvisor-guest: panicking now"
else
    check "guest ran to the end" "PTVISOR-GUEST-DONE"
fi
if grep -aqF 're-delivers INIT at every VM entry' "$serial"; then
    echo "  note $CPUS CPUs: this emulator re-delivers INIT to VMX guests (Bochs 2.7): APs cannot" \
        "be restarted under the VMM, see the header of this script"
fi
[ "$CPUS" = 1 ] && echo "  note 1 CPU in this run: the SMP checks run with CPUS=2 (bochs:linux)"
true

# ---- SMP: each failure names the CPU and what is missing
guest_val() { # guest_val KEY -> the value of KEY=... on the guest's last line that has it
    tr -d '\r' <"$serial" | sed -n "s/^ptvisor-guest: .*\b$1=\([^ ]*\).*/\1/p" | tail -n 1
}
# same_as_native DIR LABEL OK-TEXT NATIVE-ARGS...: DIR's dump decoded (code from its snapshots
# alone, no ELF) against the program stepped natively here (NATIVE_STEPS NATIVE-ARGS: ptrace,
# answering its VMCALLs as ptvisor does), instruction by instruction; says SKIP, "ok LABEL:
# OK-TEXT" (@N@: the instruction count) or FAIL.  0: equal; sets n_native.
same_as_native() {
    local d=$1 label=$2 okmsg=$3 nrc n_guest first
    shift 3
    "$PTT" decode -q "$d" 2>"$d/decode.err" | awk '{ sub(/^0x/, "", $2); print $2 }' >"$d/guest.ips"
    "$NATIVE_STEPS" "$@" >"$d/native.ips" 2>"$d/native.err"
    nrc=$?
    n_native=$(wc -l <"$d/native.ips") n_guest=$(wc -l <"$d/guest.ips")
    if [ $nrc = 77 ]; then
        echo "  SKIP $label vs native: ptrace refused on this host ($(cat "$d/native.err"))"
        return 1
    fi
    if [ $nrc = 0 ] && [ "$n_native" -gt 1000 ] && cmp -s "$d/native.ips" "$d/guest.ips"; then
        echo "  ok   $label: ${okmsg//@N@/$n_native}"
        return 0
    fi
    first=$(cmp "$d/native.ips" "$d/guest.ips" 2>&1 | head -n 1)
    echo "  FAIL $label vs native: guest $n_guest, native $n_native instructions (rc $nrc); $first"
    fail=1
    return 1
}
smp_context() { # what the loader, the VMM and the kernel said about bringing up CPUs
    tr -d '\r' <"$serial" |
        grep -aE 'ptvisor: (firmware has no MADT|ACPI|[0-9]+ of [0-9]+ CPUs)|\[cpu[0-9]+ [a-z]+\] (error|launched)|\[cpu[0-9]+ smp\]|smpboot: (Allowing|Total|CPU[0-9]+: (failed|stuck))|do_boot_cpu failed|APIC: (No|Unable)' |
        head -n 12 | sed 's/^/         /'
}
want_online=0
[ "$CPUS" -gt 1 ] && want_online=0-$((CPUS - 1))
online=$(guest_val cpus_online)
if ! grep -aqF PTVISOR-GUEST-READY "$serial"; then
    echo "  FAIL SMP checks of $CPUS CPUs not run: the guest's /init never ran; on the way:"
    smp_context
    fail=1
elif [ "$online" = "$want_online" ]; then
    echo "  ok   all $CPUS CPUs online in the guest (cpus_online=$online)"
else
    echo "  FAIL all $CPUS CPUs online in the guest: cpus_online=${online:-<no line>}, want $want_online" \
        "(possible=$(guest_val cpus_possible))"
    smp_context
    fail=1
fi
for i in $(seq 0 $((CPUS - 1))); do
    grep -aqF PTVISOR-GUEST-READY "$serial" || break
    hv=$(tr -d '\r' <"$serial" | sed -n "s/^ptvisor-guest: cpuinfo cpu=$i hypervisor_flag=\([01]\)\$/\1/p" | tail -n 1)
    case "$hv" in
    1) echo "  ok   CPU $i: /proc/cpuinfo shows the hypervisor flag" ;;
    0) echo "  FAIL CPU $i: /proc/cpuinfo has no hypervisor flag on CPU $i (that CPU runs outside the VMM)"; fail=1 ;;
    *) echo "  FAIL CPU $i: not in /proc/cpuinfo (Linux did not bring CPU $i online)"; fail=1 ;;
    esac
    pin=$(tr -d '\r' <"$serial" | grep -a "^ptvisor-guest: pin cpu=$i " | tail -n 1)
    if echo "$pin" | grep -qF "pin cpu=$i ran_on=$i hypervisor=1 signature=\"ptvisor\""; then
        echo "  ok   CPU $i: pinned workload ran on CPU $i under ptvisor"
    elif [ -z "$pin" ]; then
        echo "  FAIL CPU $i: no pinned workload ran (no 'ptvisor-guest: pin cpu=$i' line: CPU $i unknown to Linux or /init stopped early)"
        fail=1
    elif echo "$pin" | grep -q 'error='; then
        echo "  FAIL CPU $i: the workload could not be pinned there: ${pin#ptvisor-guest: }"
        fail=1
    elif ! echo "$pin" | grep -q "ran_on=$i "; then
        echo "  FAIL CPU $i: the pinned workload ran elsewhere: ${pin#ptvisor-guest: }"
        fail=1
    else
        echo "  FAIL CPU $i: the workload ran on CPU $i but CPUID there does not answer ptvisor" \
            "(outside the VMM): ${pin#ptvisor-guest: }"
        fail=1
    fi
done
# ---- the guest traced ptt-work with ptvisor-ctl, the VMM dumped the window
# on this console; extract it and decode it with the workload's symbols (PTT, WORK_ELF)
if grep -aq 'ptvisor-guest: trace skipped' "$serial"; then
    echo "  FAIL trace: the guest could not use ptvisor-ctl: $(grep -a 'trace skipped' "$serial" | tail -n 1 | tr -d '\r')"
    fail=1
elif [ -n "${PTT:-}" ]; then
    # the CPL 3 trace rule, from inside: a process may trace only itself in user mode, and only
    # it may stop, dump or read its window (ptv-probe trace-user: one line per attack)
    check "ptvisor-ctl run (the whole CPU) refused from user space" "ptvisor-guest: trace ctl-run rc=1"
    if grep -aqE '^ptvisor-guest: trace-user passed=[1-9][0-9]* failed=0' "$serial"; then
        echo "  ok   CPL 3 trace rule from inside: $(grep -a '^ptvisor-guest: trace-user passed=' "$serial" | tr -d '\r' | tail -n 1 | sed 's/^ptvisor-guest: //')"
    else
        echo "  FAIL CPL 3 trace rule from inside (ptv-probe trace-user):"
        grep -a '^ptvisor-guest: trace-user' "$serial" | tr -d '\r' | grep -v ' ok ' | sed 's/^/         /'
        fail=1
    fi
    # after the trace windows, a debugger's single steps (PTRACE_SINGLESTEP) reach the guest as on
    # bare metal: the tracer's trap flag takes only the single steps that are its own
    check "ptrace single steps after the trace windows" "ptvisor-guest: ptrace-step stepped=100 of 100"
    # inside a window: with MTF steps (STEPS_MTF=1, bochs:linux-mtf); trap-flag steps take a TF that
    # IRET loads for the tracer's (ARCHITECTURE section 5)
    if [ "${NO_STEPS:-0}" != 1 ] && [ "${STEPS_MTF:-0}" = 1 ]; then
        check "ptrace single steps inside a trace window" "ptvisor-guest: ptrace-step stepped=20 of 20"
    fi
    # a window on each CPU at once (ptv-probe trace-own, one copy pinned on each), each
    # told only its own 200 getpid calls in user mode
    if [ "$CPUS" -gt 1 ]; then
        for i in 0 1; do
            own=$(tr -d '\r' <"$serial" | grep -a "^ptvisor-guest: trace-own cpu=$i " | tail -n 1)
            n=$(echo "$own" | sed -n 's/.* instructions=\([0-9]*\).*/\1/p')
            if echo "$own" | grep -q "ran_on=$i start=0 stop=0 " && [ "${n:-0}" -ge 1200 ] &&
                [ "${n:-0}" -le 2500 ]; then
                echo "  ok   a window on each CPU at once: CPU $i's own window, $n instructions"
            else
                echo "  FAIL a window on each CPU at once: CPU $i: ${own:-<no trace-own line>}"
                fail=1
            fi
        done
    fi
    # NO_WORK=1: the image's ptv.work=0 leaves ptt-work out, and its checks (ptv.steps=0,
    # NO_STEPS=1, implies it)
    if [ "${NO_WORK:-0}" = 1 ] || [ "${NO_STEPS:-0}" = 1 ]; then
        check "ptt-work left out as the image says (ptv.work=0)" "ptvisor-guest: trace workload skipped (ptv.work=0)"
    else
        check "guest traced ptt-work from inside" "ptvisor-guest: trace workload result="
        rm -rf "$out/trace"
        # ptt-work dumps its own window (its owner: the CPL 3 rule) and waits until it is out
        wid=$(tr -d '\r' <"$serial" | sed -n 's/^ptvisor-guest: trace dump \([0-9]*\) rc=0$/\1/p' | head -n 1)
        if [ -n "$wid" ] && [ "$wid" != 0 ]; then
            echo "  ok   ptt-work dumped its own window: dump $wid"
        else
            echo "  FAIL ptt-work dumped its own window: $(grep -a '^ptvisor-guest: trace dump' "$serial" | tr -d '\r' | tail -n 1)"
            fail=1
        fi
        if "$PTT" extract "$serial" --dump "${wid:-0}" -o "$out/trace" -q; then
            echo "  ok   trace: ptvisor-trace extract: a complete dump ($(grep -a '^reason\|^source' "$out/trace/dump.meta" | tr '\n' ' '))"
        else
            echo "  FAIL trace: ptvisor-trace extract found no complete dump in $serial"
            fail=1
        fi
        if [ -d "$out/trace" ]; then
            "$PTT" summary -e "$WORK_ELF" "$out/trace" >"$out/trace/summary.txt" 2>"$out/trace/summary.err"
            sed 's/^/         /' "$out/trace/summary.txt" | head -n 20
            for fn in hot_mix sort_rec fib apply; do
                if grep -q "$fn" "$out/trace/summary.txt"; then
                    echo "  ok   trace: the decoded guest trace runs $fn (symbols of $WORK_ELF)"
                else
                    echo "  FAIL trace: $fn not in the decoded guest trace ($out/trace/summary.txt)"
                    fail=1
                fi
            done
            "$PTT" flamegraph -e "$WORK_ELF" "$out/trace" -o "$out/trace/flame.svg" 2>/dev/null &&
                echo "  ok   trace: flame graph $out/trace/flame.svg"
            # the kernel's boot from the loader's hand-off (trace_boot = TRACE_BOOT, dump_on = boot)
            bid=$("$PTT" extract "$serial" --list 2>/dev/null | awk '$5 == "boot" { print $2 }' | tail -n 1)
            if [ -n "${TRACE_BOOT:-}" ] && [ "$TRACE_BOOT" != 0 ]; then
                rm -rf "$out/boot-trace"
                if [ -z "$bid" ]; then
                    echo "  FAIL boot trace: no dump with reason boot in the log (trace_boot = $TRACE_BOOT)"
                    fail=1
                elif ! "$PTT" extract "$serial" --dump "$bid" -o "$out/boot-trace" -q 2>"$out/boot-extract.txt"; then
                    echo "  FAIL boot trace: dump $bid not complete"
                    fail=1
                else
                    "$PTT" summary "$out/boot-trace" >"$out/boot-trace/summary.txt" 2>&1
                    n=$(awk '$1 == "instructions" && $2 ~ /^[0-9]+$/ { print $2; exit }' "$out/boot-trace/summary.txt")
                    derr=$(awk '$1 == "decode" && $2 == "errors" { print $3 }' "$out/boot-trace/summary.txt")
                    gaps=$(awk '$1 == "gaps" { print $2 }' "$out/boot-trace/summary.txt")
                    if [ "${n:-0}" -ge $((TRACE_BOOT * 9 / 10)) ] && [ "${derr:-1}" = 0 ]; then
                        echo "  ok   boot trace: the kernel's first $TRACE_BOOT instructions from the hand-off," \
                            "$n decoded, 0 decode errors, ${gaps:-?} gaps (events under trap-flag stepping)"
                    else
                        echo "  FAIL boot trace: ${n:-no} instructions decoded of $TRACE_BOOT, decode errors ${derr:-?}"
                        fail=1
                    fi
                fi
            fi
            # the differential (same_as_native): the guest's trace == ptt-work stepped natively
            if [ -n "${NATIVE_STEPS:-}" ]; then
                if same_as_native "$out/trace" trace \
                    "the guest's decoded trace == its native run, @N@ instructions in order" "$WORK_ELF"; then
                    # perf's own Intel PT decoder on the exported perf.data: the same sequence
                    if [ -n "${PERF:-}" ] && command -v "$PERF" >/dev/null; then
                        mkdir -p "$out/trace/perf-home"
                        if "$PTT" perf "$out/trace" -o "$out/trace/perf.data" -q &&
                            HOME="$out/trace/perf-home" DEBUGINFOD_URLS= "$PERF" script -i "$out/trace/perf.data" \
                                --itrace=i1i -F ip 2>"$out/trace/perf.err" | awk '{ print $1 }' >"$out/trace/perf.ips" &&
                            cmp -s "$out/trace/native.ips" "$out/trace/perf.ips"; then
                            echo "  ok   trace: perf script (perf's own PT decoder) on the exported perf.data == the native run, $n_native instructions"
                        else
                            echo "  FAIL trace: perf script on $out/trace/perf.data differs from the native run" \
                                "($(wc -l <"$out/trace/perf.ips" 2>/dev/null) instructions; $(head -n 1 "$out/trace/perf.err" 2>/dev/null))"
                            fail=1
                        fi
                    fi
                    # the tracer's cost: the same work untraced and traced, guest TSC (Bochs: instructions)
                    plain=$(guest_val plain_ticks) traced=$(guest_val traced_ticks)
                    [ -n "$plain" ] && [ -n "$traced" ] &&
                        echo "  INFO bench tracer_ticks_per_instruction=$(( (traced - plain) / n_native ))" \
                            "(work untraced $plain ticks, traced $traced ticks, $n_native instructions)"
                fi
            fi
        fi
    fi
fi
# ---- `ptvisor-ctl trace -u -- ptt-exact`: one process through its CR3, from its entry point to
# its exit, while a second process (ptt-exact hog: the same code at the same addresses) shares
# the CPU; decoded from the dump alone it must be the program stepped natively here, entry to
# exit (EXACT_ELF, NATIVE_STEPS -e): nothing of the other process, nothing lost, nothing before
# NO_STEPS=1 (nested-kvm.sh): the image's ptv.steps=0 leaves ptt-exact out
if [ "${NO_STEPS:-0}" = 1 ]; then
    check "ptt-exact left out as the image says (ptv.steps=0)" "ptvisor-guest: trace exact skipped (ptv.steps=0)"
elif [ -n "${PTT:-}" ] && [ -n "${EXACT_ELF:-}" ] && ! grep -aq 'ptvisor-guest: trace skipped' "$serial"; then
    check "ptvisor-ctl trace -- ptt-exact ran" "ptvisor-guest: trace exact rc=0"
    xid=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
        sed -n 's/^ptvisor-ctl: dump \([0-9]*\) of ptt-exact going out.*/\1/p' | head -n 1)
    rm -rf "$out/exact"
    if [ -z "$xid" ] || ! "$PTT" extract "$serial" --dump "$xid" -o "$out/exact" -q; then
        echo "  FAIL trace exact: no complete dump of the one-process window (dump ${xid:-none})"
        fail=1
    else
        tr -d '\r' <"$serial" | grep -a '^ptvisor-ctl: \(tracing pid\|stopped\)' | sed 's/^/         /'
        "$PTT" summary -e "$EXACT_ELF" "$out/exact" >"$out/exact/summary.txt" 2>&1
        # what the window traced (from user space the VMM tells its owner only that: the CPL 3
        # rule; the steps of the kernel and the other process are no longer counted there)
        traced=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
            sed -n 's/^ptvisor-ctl: stopped: [0-9]* bytes, \([0-9]*\) instructions.*/\1/p' | head -n 1)
        ticks=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
            sed -n 's/^ptvisor-ctl: ptt-exact exited with 0 (\([0-9]*\) TSC ticks.*/\1/p' | head -n 1)
        # the window's gaps are one count wherever they are told: the OVF packets in its stream,
        # which the VMM gave its owner (TRACE_STOP), wrote in the dump's metadata, and the
        # host's decode finds (summary's overflows); the kernel's and the hog's losses are in none
        gaps_ctl=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
            sed -n 's/^ptvisor-ctl: stopped: [0-9]* bytes, [0-9]* instructions, \([0-9]*\) gaps.*/\1/p' | head -n 1)
        ovf_meta=$(cat "$out/exact"/cpu*.meta 2>/dev/null | awk '$1 == "overflows" { n += $2; seen = 1 } END { if (seen) print n }')
        ovf_dec=$(awk '$1 == "overflows" { print $NF; exit }' "$out/exact/summary.txt")
        if [ -n "$gaps_ctl" ] && [ "$gaps_ctl" = "${ovf_meta:-x}" ] && [ "$gaps_ctl" = "${ovf_dec:-x}" ]; then
            echo "  ok   trace exact: one count of gaps: $gaps_ctl told to its owner == the dump's overflows == OVF packets decoded"
        else
            echo "  FAIL trace exact: gaps told to its owner ${gaps_ctl:-?}, the dump's overflows ${ovf_meta:-?}, OVF packets decoded ${ovf_dec:-?}: not one count"
            fail=1
        fi
        # an event inside the user-only window (the first touch of a data page faults, a timer
        # interrupt) leaves it as hardware PT writes it: FUP + TIP.PGD where the handler is out of
        # the filter, TIP.PGE back at the same IP; perf's own decoder shows each as "tr end async"
        # then "tr strt" there, as many as the events the VMM told the owner.  MTF steps see each
        # event at its handler; trap-flag steps see it at the handler's first MOV to CR3 (KPTI),
        # which exits in a one-process window (ARCHITECTURE section 5, "Free running")
        if [ -n "${PERF:-}" ] && command -v "$PERF" >/dev/null; then
            ev_ctl=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
                sed -n 's/^ptvisor-ctl: stopped: .* gaps, \([0-9]*\) events.*/\1/p' | head -n 1)
            mkdir -p "$out/exact/perf-home"
            if "$PTT" perf "$out/exact" -o "$out/exact/perf.data" -q &&
                HOME="$out/exact/perf-home" DEBUGINFOD_URLS= "$PERF" script -i "$out/exact/perf.data" \
                    --itrace=be -F flags,ip,addr 2>/dev/null >"$out/exact/perf-branches.txt"; then
                pairs=$(awk '/tr end +async/ { at = ""; for (i = 1; i < NF; i++) if ($(i+1) == "=>") at = $i; next }
                    /tr strt/ && at != "" { for (i = 1; i <= NF; i++) if ($i == "=>") { if ($(i+1) == at) n++; else bad++ } at = "" }
                    END { print n + 0, bad + 0 }' "$out/exact/perf-branches.txt")
                set -- $pairs
                if [ -n "$ev_ctl" ] && [ "$ev_ctl" -gt 0 ] && [ "$1" = "$ev_ctl" ] && [ "$2" = 0 ]; then
                    echo "  ok   trace exact: perf shows each of the window's $ev_ctl events as hardware PT writes it (tr end async, then tr strt at the same IP)"
                else
                    echo "  FAIL trace exact: events told to the owner ${ev_ctl:-?}, async exits that come back at their IP in perf's decode $1 (others $2): $out/exact/perf-branches.txt"
                    fail=1
                fi
            else
                echo "  FAIL trace exact: perf.data of the window, or perf script on it, failed ($out/exact)"
                fail=1
            fi
        fi
        if [ -n "$ticks" ] && [ -n "$traced" ] && [ "$traced" -gt 0 ]; then
            echo "  INFO bench ctl_trace_ticks_per_traced_instruction=$((ticks / traced)) (ptvisor-ctl trace -u -- ptt-exact beside ptt-exact hog: $ticks ticks for the $traced instructions the window traced; the kernel's and the hog's ran out of context meanwhile)"
        fi
        # the instructions the VMM stepped for that window (its `window closed` line, the last one
        # before ptvisor-ctl's `stopped`): the traced ones and what it could not run free
        stepped=$(tr -d '\r' <"$serial" | sed -n '/^ptvisor-guest: trace exact start/,$p' |
            awk '/\[cpu[0-9]* trace\] window closed: [0-9]* instructions/ { for (i = 1; i < NF; i++) if ($i == "closed:") n = $(i+1) }
                 /^ptvisor-ctl: stopped: / { print n; exit }')
        if [ -n "$stepped" ] && [ -n "$traced" ] && [ "$traced" -gt 0 ]; then
            echo "  INFO bench ctl_trace_steps_per_traced_instruction=$(awk -v s="$stepped" -v t="$traced" 'BEGIN { printf "%.3f", s / t }') ($stepped instructions stepped for the $traced the window traced)"
        fi
        # another process's busy loop while a window is open (it runs free outside the window's
        # CR3), against the same loop with no window: a figure, not a check
        spin_w=$(tr -d '\r' <"$serial" | sed -n 's/^ptvisor-guest: spin-child window rounds=[0-9]* ticks=\([0-9]*\).*/\1/p' | head -n 1)
        spin_a=$(tr -d '\r' <"$serial" | sed -n 's/^ptvisor-guest: spin-child alone rounds=[0-9]* ticks=\([0-9]*\).*/\1/p' | head -n 1)
        if [ -n "$spin_w" ] && [ -n "$spin_a" ] && [ "$spin_w" -gt 0 ]; then
            echo "  INFO bench busy_loop_speed_in_window=$(awk -v a="$spin_a" -v w="$spin_w" 'BEGIN { printf "%.3f", a / w }') (1,000,000 rounds of a child of the traced process: $spin_w ticks while the window is open, $spin_a alone; 1.000 = as fast)"
        fi
        if [ -n "${NATIVE_STEPS:-}" ] &&
            same_as_native "$out/exact" "trace exact" "ptvisor-ctl trace's window == ptt-exact stepped natively, entry to exit, @N@ instructions in order (the other process and the kernel filtered out)" -e "$EXACT_ELF"; then
            # what the VMM told the window's owner is about the window alone
            if [ "${traced:-x}" = "$n_native" ]; then
                echo "  ok   trace exact: the VMM told its owner $traced instructions traced: the native run's, nothing of the kernel or the hog"
            else
                echo "  FAIL trace exact: the VMM told its owner ${traced:-no} instructions traced, the native run has $n_native"
                fail=1
            fi
        fi
    fi
fi
# ---- a kernel panic (ptv.panic=1): the VMM saw the panic line and sent its crash report and
# every CPU's window before the guest reset itself (panic=-1)
if [ "${EXPECT_PANIC:-0}" = 1 ] && [ -n "${PTT:-}" ]; then
    cid=$("$PTT" extract "$serial" --list 2>/dev/null | awk '$5 == "crash" { print $2 }' | tail -n 1)
    rm -rf "$out/panic"
    if [ -n "$cid" ] && "$PTT" extract "$serial" --dump "$cid" -o "$out/panic" -q 2>/dev/null &&
        grep -q 'guest kernel panic' "$out/panic/crash.txt" && grep -q 'guest LBR' "$out/panic/crash.txt"; then
        echo "  ok   kernel panic: the VMM's crash dump $cid is complete, crash.txt names the panic" \
            "($(wc -c <"$out/panic/crash.txt") bytes, LBR section), $(ls "$out/panic"/cpu*.pt | wc -l) CPU window(s)"
    else
        echo "  FAIL kernel panic: no complete crash dump with the panic's report (dump ${cid:-none})"
        fail=1
    fi
fi
grep -a '^ptvisor-guest:' "$serial" | tr -d '\r' | sed 's/^/  guest> /'
if [ $fail != 0 ]; then
    echo "---- last lines of $serial ----"
    tail -n 40 "$serial" | tr -d '\r'
    exit 1
fi
exit 0
