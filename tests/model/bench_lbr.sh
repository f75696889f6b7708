#!/usr/bin/env bash
# Guest LBR figures, from the LBR differential's twin (tests/model/test_lbr_diff.c
# built -O2 without sanitizers): a guest using LBR (random branches, PMIs, every LBR MSR read
# and written, CPUID, VM exits for other reasons) on a legacy-LBR and an arch-LBR CPU.
#   - VMM instructions its LBR work adds per VM exit: callgrind counts the LBR hooks of the
#     MSR exit and the CPUID exit (lbr_vmx.c: lbr_msr_access, lbr_cpuid_filter), divided by
#     every exit; the exit / entry path itself has no LBR code (DEBUGCTL and IA32_LBR_CTL are
#     switched by the VMCS).
#   - exits its LBR MSR accesses cause (the MSR bitmap the policy sets), PERF_CAPABILITIES aside.
# Skips without valgrind.
set -eu
bin=$1
if ! command -v valgrind >/dev/null; then echo "valgrind not installed: bench-lbr skipped"; exit 0; fi
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
LBR_DIFF_BENCH=1 valgrind --tool=callgrind --callgrind-out-file="$out/cg" --collect-atstart=no \
    --toggle-collect=lbr_hook_msr --toggle-collect=lbr_hook_cpuid "$bin" >"$out/stdout" 2>"$out/stderr" ||
    { cat "$out/stdout" "$out/stderr"; exit 1; }
ins=$(grep '^summary:' "$out/cg" | awk '{print $2}')
exits=0
while IFS='|' read -r tag name e lbr msr diverged; do
    [ "$tag" = BENCH ] || continue
    exits=$((exits + e))
    [ "$diverged" = 0 ] || { echo "bench-lbr: $name: the guest's view differed from bare metal"; exit 1; }
    echo "bench-lbr: $name: $lbr of the guest's $msr RDMSR/WRMSR exited for LBR (PERF_CAPABILITIES reads aside; goal 0); $e exits in all"
done <"$out/stdout"
[ "$exits" -gt 0 ] || { echo "bench-lbr: no figure"; cat "$out/stdout"; exit 1; }
echo "bench-lbr: VMM instructions the guest's LBR adds per VM exit: $(awk -v i="$ins" -v e="$exits" 'BEGIN{printf "%.1f", i/e}') on average over $exits exits (goal <= 50; 0 on exits other than MSR and CPUID)"
