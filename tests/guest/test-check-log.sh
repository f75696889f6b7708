#!/usr/bin/env bash
# The conformance verdict must be able to say FAIL: run check-conformance-log.sh
# on a good serial log and on logs broken in each way it must catch.
#   tests/guest/test-check-log.sh
set -u
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

esc=$'\e' cr=$'\r'
good() {
    printf '%s\n' "ptvisor: starting guest \\ptvisor\\tests\\conformance.efi: triple-fault" \
        "${esc}[0m${esc}[37m${esc}[40mPASS: CPUID.1:ECX[31] hypervisor present$cr" \
        "PASS: VMCALL VERSION returns OK$cr" \
        "[cpu0 ept] warning: guest write of VMM memory at GPA 0x1000 blocked (1 so far)" \
        "SKIP: INVD: no hypervisor$cr" \
        "SUMMARY: 2 tests, 0 unexpected failures, 1 skipped$cr" \
        "[cpu0 vmx] error: guest triple fault at RIP 0x1e1aa8bb" \
        "---- guest registers ----" \
        "[cpu0 vmx] error: crash dump complete; on_crash action follows"
}

expect() { # want(0|1) name  <log on stdin>
    local want=$1 name=$2 rc
    cat >"$tmp/$name.log"
    "$here/check-conformance-log.sh" "$tmp/$name.log" >"$tmp/$name.out" 2>&1
    rc=$?
    if { [ "$want" = 0 ] && [ $rc = 0 ]; } || { [ "$want" = 1 ] && [ $rc != 0 ]; }; then
        echo "PASS: $name (exit $rc)"
    else
        echo "FAIL: $name: exit $rc, wanted $([ "$want" = 0 ] && echo 0 || echo non-zero)"
        sed 's/^/    /' "$tmp/$name.out"
        status=1
    fi
}

good | expect 0 good-log
good | sed -e 's/^PASS: VMCALL/FAIL: VMCALL/' -e 's/0 unexpected/1 unexpected/' | expect 1 one-check-failed
good | grep -v 'VMCALL VERSION' | expect 1 report-line-missing
good | sed 's/1 skipped/0 skipped/' | expect 1 summary-miscounts-skips
good | grep -v 'SUMMARY' | expect 1 no-summary
good | grep -v 'triple fault' | expect 1 no-triple-fault-report
good | grep -v 'crash dump complete' | expect 1 dump-not-finished
good | sed '/SUMMARY/d' | sed '$a SUMMARY: 2 tests, 0 unexpected failures, 1 skipped' | expect 1 triple-fault-before-summary
good | grep -v '^.*PASS: ' | sed 's/2 tests/0 tests/' | expect 1 no-pass-at-all
exit $status
