#!/usr/bin/env bash
# Prove the differential can fail: rebuild test_pt_diff with the wiring's old defects 1 (shadow
# region capacity never set) and 2 (output rewinds at every entry) put back into a scratch copy
# of vmm/pt/pt_ctrl.c; each build must FAIL.  With CONT_SRCS, the on-box self-test's verdict
# (test_pt_cont: tests/guest/pt_cont.c on the twin, no bare-metal reference) must also catch
# defect 2 on its own.  Usage: oracle-bites.sh BUILD_DIR "SRCS" CC CFLAGS ["CONT_SRCS"]
set -u
out=$1/bites srcs=$2 cc=$3 cflags=$4 cont_srcs=${5:-}
mkdir -p "$out"
mutate() { # name sed-expression [SRCS]
    local srcs=${3:-$srcs}
    cp vmm/pt/pt_ctrl.c "$out/pt_ctrl_$1.c"
    sed -i "$2" "$out/pt_ctrl_$1.c"
    if cmp -s vmm/pt/pt_ctrl.c "$out/pt_ctrl_$1.c"; then echo "oracle-bites: $1: mutation did not apply"; return 1; fi
    # shellcheck disable=SC2086
    $cc $cflags -o "$out/test_$1" ${srcs//vmm\/pt\/pt_ctrl.c/$out\/pt_ctrl_$1.c} -lcmocka || return 1
    if DIFF_SEEDS=2 ASAN_OPTIONS=detect_leaks=0 "$out/test_$1" >"$out/$1.log" 2>&1; then
        echo "oracle-bites: $1 reintroduced and the differential still PASSES"; return 1
    fi
    echo "oracle-bites: $1 reintroduced -> $(grep -c 'FAILED  \]' "$out/$1.log") failing test lines ($(grep -m1 '^ERROR' "$out/$1.log"))"
}
rc=0
mutate defect1-no-region-capacity 's|    c->scr->walk.max_regions = m->max_regions;|    /* defect 1 */|' || rc=1
rewind='s|    c->hpos_base = c->hw.output_base;|    /* defect 2: the position of the last exit is dropped */|; s|    c->hpos_mask = c->hw.output_mask;||'
mutate defect2-rewind "$rewind" || rc=1
if [ -n "$cont_srcs" ]; then
    mutate defect2-rewind-selftest-verdict "$rewind" "$cont_srcs" || rc=1
    grep -m1 "self-test's verdict" "$out/defect2-rewind-selftest-verdict.log" >/dev/null ||
        { echo "oracle-bites: the self-test's verdict did not name defect 2"; rc=1; }
fi
exit $rc
