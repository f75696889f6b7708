#!/usr/bin/env bash
# ptvisor-ctl on the build host (never under ptvisor): every command refuses with one
# line and exit 1 before any VMCALL (which would #UD here), and bad usage exits 2.
#
#   guest/test-ctl-host.sh PTVISOR_CTL
set -u
ctl=$1
status=0
expect() { # RC LINE-REGEX -- ARGS...
    local want=$1 re=$2
    shift 3
    local out rc
    out=$("$ctl" "$@" 2>&1); rc=$?
    printf '%s\n' "$out" | sed 's/^/  /'
    if [ $rc != "$want" ] || ! printf '%s\n' "$out" | grep -qE "$re"; then
        echo "FAIL: ptvisor-ctl $*: rc=$rc (want $want), want a line matching $re"
        status=1
    fi
}
if "$ctl" status 2>&1 | grep -q 'status '; then
    echo "this host runs under ptvisor: the refusal path cannot be checked here"
    exit 77
fi
no_vmm='^ptvisor-ctl: (no hypervisor below|the hypervisor below is not ptvisor)'
for cmd in status start stop dump; do
    expect 1 "$no_vmm" -- $cmd
done
expect 1 "$no_vmm" -- run -u -b 1000 -d -- /bin/true
expect 1 "$no_vmm" -- trace --user -d -- /bin/true
expect 2 '^usage: ptvisor-ctl' --
expect 2 '^usage: ptvisor-ctl' -- frobnicate
expect 2 "^ptvisor-ctl: -b: not an instruction count: 'x'" -- start -b x
expect 2 "^ptvisor-ctl: -b: not an instruction count: '0'" -- start -b 0
expect 2 "^ptvisor-ctl: -r: expected LO-HI in hex, LO <= HI: '2000-1000'" -- start -r 2000-1000
expect 2 "^ptvisor-ctl: unknown option '-z'" -- stop -z
expect 2 '^ptvisor-ctl: run: no command after --' -- run -u --
expect 2 '^ptvisor-ctl: trace: no command after --' -- trace --kernel --
expect 2 '^ptvisor-ctl: unexpected arguments' -- status -- extra
[ $status = 0 ] && echo "ptvisor-ctl host checks passed"
exit $status
