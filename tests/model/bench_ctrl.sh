#!/usr/bin/env bash
# PT controller figures (issue 6), in instructions counted by callgrind (skips without valgrind).
set -eu
bin=$1
if ! command -v valgrind >/dev/null; then echo "valgrind not installed: bench-pt-ctrl skipped"; exit 0; fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
measure() { # phase n function... -> instructions inside the functions
    local phase=$1 n=$2; shift 2
    local tog=(); for f in "$@"; do tog+=(--toggle-collect="$f"); done
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --collect-atstart=no "${tog[@]}" \
        "$bin" "$phase" "$n" >"$out/stdout" 2>"$out/stderr" || { cat "$out/stdout" "$out/stderr"; exit 1; }
    grep '^summary:' "$out/cg" | awk '{print $2}'
}
for mode in shadow gpa; do
    i=$(measure exits-$mode 1000 pt_ctrl_before_entry pt_ctrl_after_exit)
    echo "bench-pt-ctrl: VM exit while the guest traces ($mode): $(( i / 1000 )) VMM instructions extra per exit (goal <= 150)"
done
# Each TraceEn 0->1 below is followed by its TraceEn 1->0 (a few dozen instructions): the
# figures are per such pair, i.e. per enable.  (Before 2026-11-24 they were divided by the
# number of WRMSRs, twice the number of enables: half the cost of an enable.)
i=$(measure enable-perf 10 pt_ctrl_wrmsr)
echo "bench-pt-ctrl: TraceEn 0->1, 8 MiB as 16 x 512 KiB (perf-style, rebuilt): $(( i / 10 )) instructions per enable (goal <= 50,000)"
i=$(measure enable-4k 10 pt_ctrl_wrmsr)
echo "bench-pt-ctrl: TraceEn 0->1, 8 MiB as 2,048 x 4 KiB (scrambled EPT, rebuilt): $(( i / 10 )) instructions per enable (goal <= 500,000)"
i=$(measure refused 1 pt_ctrl_wrmsr)
echo "bench-pt-ctrl: worst refused set-up (64 tables x 511 entries, one 8 MiB region), first TraceEn 0->1: $i instructions (goal <= 5,000,000)"
j=$(measure refused 11 pt_ctrl_wrmsr)
echo "bench-pt-ctrl: the same set-up retried: $(( (j - i) / 10 )) instructions per TraceEn 0->1 (refusal remembered)"
echo "bench-pt-ctrl: (engine + the fake EPT's callbacks; the fake answers a translation in O(1), as an"
echo "  EPT walk does; in vmm.elf each guest ToPA entry read also costs one EPT walk in pt_vmx.c)"
