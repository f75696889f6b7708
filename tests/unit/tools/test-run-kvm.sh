#!/usr/bin/env bash
# tools/run.sh's nested-KVM check, against a fake /dev/kvm, /proc/cpuinfo, kvm_intel nested
# parameter and QEMU (a stub first in PATH): each missing piece gives its one-line reason and
# exit 1, quickly; `tools/run.sh IMG kvm` refuses in that one line without starting anything.
set -u
here=$(cd "$(dirname "$0")/../../.." && pwd)
run="$here/tools/run.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
mkdir -p "$t/bin"
: >"$t/kvm"
printf 'flags\t\t: fpu vme de pse tsc msr pae vmx ept\n' >"$t/cpuinfo.intel"
printf 'flags\t\t: fpu vme de pse tsc msr pae svm npt\n' >"$t/cpuinfo.amd"
printf 'flags\t\t: fpu vme de pse tsc msr pae\n' >"$t/cpuinfo.none"
echo Y >"$t/nested.Y"
echo N >"$t/nested.N"
cat >"$t/bin/qemu-system-x86_64" <<'STUB'
#!/bin/sh
[ -n "${FAKE_QEMU_ERROR:-}" ] && { echo "qemu-system-x86_64: $FAKE_QEMU_ERROR" >&2; exit 1; }
cat >/dev/null
exit 0
STUB
chmod +x "$t/bin/qemu-system-x86_64"

# expect NAME RC LINE [env...]: run `run.sh --kvm-check` with env, compare rc and whole output
expect() {
    local name=$1 rc=$2 line=$3
    shift 3
    local out got start secs
    start=$(date +%s)
    out=$(env PATH="$t/bin:$PATH" "$@" "$run" --kvm-check 2>&1)
    got=$?
    secs=$(($(date +%s) - start))
    if [ "$got" != "$rc" ] || [ "$out" != "$line" ] || [ "$secs" -gt 5 ]; then
        echo "FAIL $name: rc=$got (want $rc) ${secs}s output [$out] want [$line]"
        fails=$((fails + 1))
    else
        echo "ok   $name: ${line:-<no output>}"
    fi
}

ok_env=(PTV_KVM_DEV="$t/kvm" PTV_CPUINFO="$t/cpuinfo.intel" PTV_KVM_NESTED="$t/nested.Y")
R="run-kvm: nested QEMU/KVM unusable:"
expect "no /dev/kvm" 1 "$R $t/nokvm missing (no KVM on this host)" \
    "${ok_env[@]}" PTV_KVM_DEV="$t/nokvm"
expect "AMD host" 1 \
    "$R host CPU has no vmx flag (AMD SVM host: ptvisor needs Intel VT-x, nested KVM here offers SVM)" \
    "${ok_env[@]}" PTV_CPUINFO="$t/cpuinfo.amd"
expect "no vmx flag" 1 "$R host CPU has no vmx flag in $t/cpuinfo.none" \
    "${ok_env[@]}" PTV_CPUINFO="$t/cpuinfo.none"
expect "kvm_intel not loaded" 1 "$R kvm_intel not loaded ($t/nonested missing)" \
    "${ok_env[@]}" PTV_KVM_NESTED="$t/nonested"
expect "nested=N" 1 "$R kvm_intel nested=N: load it with nested=1 for nested VMX" \
    "${ok_env[@]}" PTV_KVM_NESTED="$t/nested.N"
expect "QEMU probe fails" 1 \
    "$R QEMU -accel kvm -cpu host probe failed: qemu-system-x86_64: error: failed to set MSR 0x10a" \
    "${ok_env[@]}" FAKE_QEMU_ERROR="error: failed to set MSR 0x10a"
expect "usable" 0 "" "${ok_env[@]}"

# the kvm vehicle itself: exactly the one line, exit 1, no emulator, no serial log
out=$(env PATH="$t/bin:$PATH" "${ok_env[@]}" PTV_KVM_DEV="$t/nokvm" RUN_DIR="$t/run" \
    "$run" "$t/img" kvm 2>&1)
rc=$?
if [ $rc != 1 ] || [ "$out" != "$R $t/nokvm missing (no KVM on this host)" ] ||
    [ -e "$t/run/serial.log" ]; then
    echo "FAIL run.sh IMG kvm: rc=$rc output [$out]"
    fails=$((fails + 1))
else
    echo "ok   run.sh IMG kvm refuses in one line"
fi

[ $fails = 0 ] && echo "test-run-kvm: all passed" || echo "test-run-kvm: $fails failed"
[ $fails = 0 ]
