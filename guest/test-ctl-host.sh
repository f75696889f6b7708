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
# kallsyms needs no VMM: a file's code symbols as a guest note, refusals with one line
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctl-host.XXXXXX")
printf '0000000000000000 T _text\n0000000000000000 t f\n' >"$tmp/zero"
printf 'ffffffff81000000 T _text\nffffffff81000010 t f\nffffffff81000100 D d\nffffffffc0001000 t m\t[mod]\n' >"$tmp/ks"
expect 1 "^ptvisor-ctl: kallsyms: $tmp/none: No such file" -- kallsyms "$tmp/none"
expect 1 '^ptvisor-ctl: kallsyms: .*every address is 0' -- kallsyms "$tmp/zero"
expect 1 '^ptvisor-ctl: kallsyms: .*no code symbol' -- kallsyms -r 1-2 "$tmp/ks"
expect 2 "^ptvisor-ctl: kallsyms: -r: expected LO-HI in hex: 'x'" -- kallsyms -r x
expect 0 '^ptvisor-ctl: kallsyms: 3 code symbols of .* sent' -- kallsyms "$tmp/ks"
"$ctl" kallsyms "$tmp/ks" | grep -qE '^@PTV1 b [0-9a-f]+ 0 1/1 note=kallsyms t=[0-9a-f]+ [0-9a-f]{8}$' ||
    { echo "FAIL: ptvisor-ctl kallsyms wrote no note record"; status=1; }
rm -rf "$tmp"
[ $status = 0 ] && echo "ptvisor-ctl host checks passed"
exit $status
