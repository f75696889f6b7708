#!/usr/bin/env bash
# bochs:user-run: README's "Your own programs" commands, run as they are written there: a small
# dynamic C program (guest/example.c) built on the host, copied into the guest with its loader
# and libc (make run GUEST_FILES=...), run there under `ptvisor-ctl trace -d` (GUEST_CMD) instead
# of the demo, and its dump decoded on the host. One Bochs boot.
#
#   tests/system/user-run.sh OUTDIR
#
# PASS when: the README block is found and its commands succeed; the guest ran the command and
# not the demo; the program ran to its end in the window; the dump was decoded with the symbols
# of the program, libc and the dynamic loader placed where they ran (tools/elf-bases.sh), no
# decode error; and perf's own decoder reads the perf.data and names the program's functions.
set -u
mkdir -p "$1" && out=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/tests/system/log-check.sh"
# the indented lines right after the marker comment
cmds=$(awk '/^<!-- bochs:user-run runs/ { f = 1; next }
            f && /^    / { print substr($0, 5); next }
            f { exit }' "$here/README.md")
[ -n "$cmds" ] || { echo "user-run: no command block after '<!-- bochs:user-run runs' in README.md"; exit 1; }
echo "user-run: README's commands:"
echo "$cmds" | sed 's/^/    /'
run=$out/run
rm -rf "$run"
start=$(date +%s)
# as a user types them: in the repository, no make of ours around them; RUN_DIR and USER_OUT
# only move the outputs into this test's directory
(cd "$here" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL RUN_DIR="$run" USER_OUT="$out/guest" \
    bash -e -c "$cmds") >"$out/commands.log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
echo "user-run: the commands took $secs s (rc $rc), output $out/commands.log"
serial=$run/serial.log
if [ $rc != 0 ] || ! [ -f "$serial" ]; then
    echo "  FAIL README's commands: exit $rc"
    tail -n 20 "$out/commands.log" | sed 's/^/    /'
    exit 1
fi
check "guest ran the user's command (no demo)" '^ptvisor-guest: user command: ptvisor-ctl trace'
check "the command ended with 0" '^ptvisor-guest: user command rc=0$'
check "the dynamic program ran in the guest" '^example: 200 numbers sorted, checksum '
check "ptvisor-ctl traced it to its exit" '^ptvisor-ctl: \./example exited with 0 '
if tr -d '\r' <"$serial" | grep -aq '^ptvisor-guest: hypervisor='; then
    echo "  FAIL the built-in demo ran too (ptv-probe lines in the log)"
    fail=1
fi
id=$(tr -d '\r' <"$serial" | sed -n 's/^ptvisor-ctl: dump \([0-9]*\) of example going out.*/\1/p' | tail -n 1)
d=$run/trace-$id-vmcall
if [ -z "$id" ] || ! [ -f "$d/summary.txt" ]; then
    echo "  FAIL no decoded dump of example (dump ${id:-none}: $d)"
    sed -n '/^run: /p' "$out/commands.log" | tail -n 12 | sed 's/^/    /'
    exit 1
fi
sed 's/^/    /' "$d/summary.txt" | head -n 40
cat "$d/elf-bases.txt" 2>/dev/null | sed 's/^/    placed: /'
n=$(awk '$1 == "instructions" { print $2; exit }' "$d/summary.txt")
derr=$(awk '$1 == "decode" && $2 == "errors" { print $3; exit }' "$d/summary.txt")
if [ "${n:-0}" -ge 10000 ] && [ "${derr:-1}" = 0 ]; then
    echo "  ok   dump $id decoded: $n instructions, 0 decode errors"
else
    echo "  FAIL dump $id: ${n:-no} instructions decoded, ${derr:-?} decode errors"
    fail=1
fi
# the decoded trace names the program's functions, with its file (summary's top functions)
for fn in example_compare main example_checksum; do
    if grep -qE "^ *[0-9]+ +[0-9.]+% +$fn \([^)]*/example\)$" "$d/summary.txt"; then
        echo "  ok   the decoded trace names $(grep -oE "$fn \([^)]*\)" "$d/summary.txt" | head -n 1):" \
            "$(awk -v f="$fn" '$3 == f { print $1; exit }' "$d/summary.txt") instructions"
    else
        echo "  FAIL $fn (example) is not named in the decoded trace ($d/summary.txt)"
        fail=1
    fi
done
if grep -q 'libc\.so\.6@' "$d/elf-bases.txt" 2>/dev/null; then
    echo "  ok   libc placed from the dump: $(grep 'libc\.so\.6@' "$d/elf-bases.txt" | head -n 1)"
else
    echo "  FAIL libc was not placed from the dump ($d/elf-bases.txt)"
    fail=1
fi
if grep -q 'ld-linux-x86-64\.so\.2' "$d/elf-bases.txt" 2>/dev/null; then
    echo "  ok   the dynamic loader placed from its code: $(grep ld-linux "$d/elf-bases.txt" | head -n 1)"
else
    echo "  FAIL the dynamic loader was not found in the dump's code ($d/elf-bases.txt)"
    fail=1
fi
# perf's own Intel PT decoder on the exported perf.data names the program's function too
if command -v perf >/dev/null && [ -f "$d/perf.data" ]; then
    mkdir -p "$out/perf-home"
    if HOME=$out/perf-home DEBUGINFOD_URLS= perf script -i "$d/perf.data" --itrace=i1i -F ip,sym,dso \
        2>"$out/perf.err" | grep -q 'example_compare'; then
        echo "  ok   perf script on $d/perf.data names example_compare"
    else
        echo "  FAIL perf script on $d/perf.data does not name example_compare ($(head -n 1 "$out/perf.err"))"
        fail=1
    fi
fi
exit $fail
