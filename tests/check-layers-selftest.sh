#!/bin/bash
# tools/check-layers.sh must fail, naming the line, on each kind of wrong include: upward (an
# engine including vmx/), between two shims of one rank, from a folder the table does not rank,
# and an include that resolves to nothing.  A copy of vmm/ and include/ is changed, never the tree.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

try() { # NAME FILE LINE-TO-ADD EXPECTED-TEXT
    rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r "$top/vmm" "$top/include" "$tmp/t/"
    mkdir -p "$(dirname "$tmp/t/$2")"
    printf '%s\n' "$3" >>"$tmp/t/$2"
    out=$("$top/tools/check-layers.sh" "$tmp/t" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$4" <<<"$out"; then
        echo "ok: $1: $(grep -F -- "$4" <<<"$out" | head -n 1)"
    else
        echo "FAIL: $1: rc=$rc, expected a line with '$4', got: $out"
        fail=1
    fi
}

"$top/tools/check-layers.sh" "$top" >/dev/null || { echo "FAIL: the tree itself does not pass"; fail=1; }
try "engine includes vmx" vmm/pt/pt_caps.c '#include "vmx/vcpu.h"' 'vmm/pt/pt_caps.c:'
try "shim includes shim" vmm/pmu/shim/pmu_vmx.c '#include "lbr/shim/lbr_vmx.h"' 'pmu/shim (70) may not include lbr/shim (70)'
try "lib includes base" vmm/lib/fmt.c '#include "base/log.h"' 'lib (5) may not include base (25)'
try "unranked folder" vmm/newfolder/x.c '#include "lib/fmt.h"' 'folder vmm/newfolder is not in the layer table'
try "include of nothing" vmm/ept/ept.c '#include "ept/no_such.h"' 'not found under vmm/ or include/'
exit $fail
