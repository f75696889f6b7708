#!/usr/bin/env bash
# bench-decode (a figure): the host tool's decode rate against perf's own Intel PT decoder
# on the same trace.  A real program is single-stepped with ptrace into a dump (ptt_mkdump: the
# VMM's classifier and packet generator), exported with `ptvisor-trace perf`, then decoded by
# `ptvisor-trace decode` and by `perf script --itrace=i1i`, best of 3 each.  One line.
#
#   tests/system/bench-decode.sh PTT MKDUMP [PROGRAM ARGS...]
set -u
ptt=$1 mkdump=$2
shift 2
[ $# -gt 0 ] || set -- /usr/bin/sort /etc/services
command -v perf >/dev/null || { echo "bench-decode: SKIP: perf not installed"; exit 0; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mkdump" "$dir/d" "$@" >"$dir/mkdump.log" 2>&1 || { echo "bench-decode: SKIP: $(tail -n 1 "$dir/mkdump.log")"; exit 0; }
"$ptt" perf "$dir/d" -o "$dir/perf.data" -q || { echo "bench-decode: export failed"; exit 1; }
mkdir -p "$dir/home"
best() { # best wall seconds of 3 runs of "$@" (stdout counted into $dir/n)
    local b=999999 t0 t1
    for _ in 1 2 3; do
        t0=$(date +%s.%N)
        "$@" | wc -l >"$dir/n"
        t1=$(date +%s.%N)
        b=$(awk -v a="$t0" -v z="$t1" -v b="$b" 'BEGIN { s = z - a; print (s < b ? s : b) }')
    done
    echo "$b"
}
td=$(best "$ptt" decode -q "$dir/d")
nd=$(cat "$dir/n")
tp=$(best env HOME="$dir/home" DEBUGINFOD_URLS= perf script -i "$dir/perf.data" --itrace=i1i -F ip)
np=$(cat "$dir/n")
awk -v nd="$nd" -v td="$td" -v np="$np" -v tp="$tp" -v prog="$*" 'BEGIN {
    rd = nd / td; rp = np / tp;
    printf "host decode of %s (%d instructions): ptvisor-trace decode %.2f M instr/s, perf script --itrace=i1i %.2f M instr/s (%d) = %.1fx   (goal >= 1x)\n",
        prog, nd, rd / 1e6, rp / 1e6, np, rd / rp }'
