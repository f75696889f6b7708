#!/usr/bin/env bash
# PT controller figures, in instructions counted by callgrind (skips without valgrind).
# The counts are the engine's plus the fake EPT view's callbacks (tests/model/fake_world.c, O(1)
# per translation like an EPT walk, but cheaper than vmm.elf's pt_vmx.c): the callbacks an
# enable makes are printed too, to scale by what they cost on the target.
set -eu
bin=$1
if ! command -v valgrind >/dev/null; then echo "valgrind not installed: bench-pt-ctrl skipped"; exit 0; fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
measure() { # phase n options function... -> instructions inside the functions
    local phase=$1 n=$2 opt=$3; shift 3
    local tog=(); for f in "$@"; do tog+=(--toggle-collect="$f"); done
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --collect-atstart=no "${tog[@]}" \
        "$bin" "$phase" "$n" "$opt" >"$out/stdout" 2>"$out/stderr" || { cat "$out/stdout" "$out/stderr"; exit 1; }
    grep '^summary:' "$out/cg" | awk '{print $2}'
}
calls() { # phase options -> the callback counts per enable (native run)
    "$bin" "$1" 2 "$2,count" | sed -n 's/^callbacks per TraceEn 0->1: //p'
}
for mode in shadow gpa; do
    i=$(measure exits-$mode 1000 - pt_ctrl_before_entry pt_ctrl_after_exit)
    echo "bench-pt-ctrl: VM exit while the guest traces ($mode): $(( i / 1000 )) VMM instructions extra per exit (goal <= 150)"
done
# Each TraceEn 0->1 below is followed by its TraceEn 1->0 (a few dozen instructions): the
# figures are per such pair, i.e. per enable.  (Before 2026-11-24 they were divided by the
# number of WRMSRs, twice the number of enables: half the cost of an enable.)
for opt in - hpa; do
    how="ToPA entries read by GPA, read64: as vmm.elf today"
    [ "$opt" = hpa ] && how="ToPA entries read by HPA, read_hpa64: once pt_vmx.c offers it"
    echo "bench-pt-ctrl: [$how]"
    i=$(measure enable-perf 10 $opt pt_ctrl_wrmsr)
    echo "  TraceEn 0->1, 8 MiB as 16 x 512 KiB (perf-style, rebuilt): $(( i / 10 )) instructions per enable (goal <= 50,000); $(calls enable-perf $opt)"
    i=$(measure enable-4k 10 $opt pt_ctrl_wrmsr)
    echo "  TraceEn 0->1, 8 MiB as 2,048 x 4 KiB (scrambled EPT, rebuilt): $(( i / 10 )) instructions per enable (goal <= 500,000); $(calls enable-4k $opt)"
done
i=$(measure refused 1 - pt_ctrl_wrmsr)
echo "bench-pt-ctrl: worst refused set-up (64 tables x 511 entries, one 8 MiB region), first TraceEn 0->1: $i instructions (goal <= 5,000,000)"
j=$(measure refused 11 - pt_ctrl_wrmsr)
echo "bench-pt-ctrl: the same set-up retried: $(( (j - i) / 10 )) instructions per TraceEn 0->1 (refusal remembered)"
