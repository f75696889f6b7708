#!/usr/bin/env bash
# Instructions per shadowed guest ToPA entry (pt_shadow_build) and per reuse
# (pt_shadow_prepare fast path), measured with callgrind.
#   tests/model/bench_shadow.sh build/host/bench_shadow [entries] [iterations]
set -eu
bin=$1 n=${2:-2048} it=${3:-20}
if ! command -v valgrind >/dev/null; then
    echo "valgrind not installed: bench-pt-shadow skipped"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
measure() { # function -> instructions spent inside it (inclusive)
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1" --collect-atstart=no \
        --toggle-collect="$1" "$bin" "$n" "$it" >"$out/stdout.$1" 2>"$out/stderr.$1"
    grep '^summary:' "$out/cg.$1" | awk '{print $2}'
}
build=$(measure pt_shadow_build)
prep=$(measure pt_shadow_prepare)
entries=$(( n * it ))
echo "bench-pt-shadow: $n-entry guest ToPA (scrambled EPT), $it builds"
echo "  pt_shadow_build:   $build instructions, $(( build / entries )) per guest entry"
echo "  pt_shadow_prepare: $prep instructions (reuse path; unchanged setup, moved position), $(( prep / it )) per call"
