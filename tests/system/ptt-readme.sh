#!/usr/bin/env bash
# README's "On the host" commands, run as they stand (make test: host:readme-trace).
#
#   tests/system/ptt-readme.sh README TOOL MKDUMP WORK PTVISOR_CTL
#
# The code blocks that follow a "<!-- ptt-readme" line in README are run line by line, in a
# directory holding what they name: serial.log (three dumps as the VMM writes them: the
# kernel's boot window, then two windows of `myprog`, each with ptvisor-ctl's comm note, and
# the kallsyms the guest's ptvisor-ctl sends), myprog (the workload, tests/tools/ptt_work.c)
# and vmlinux (the workload's ELF moved to a kernel link address; the boot window ran it there
# plus a KASLR offset).  `ptvisor-trace` is TOOL (the sanitized build) on PATH, `ptvisor-ctl`
# the guest's binary.  Each line must exit 0; then what they wrote is checked: every dump
# extracted to its own directory, the program's symbols and name, the kernel's symbols from
# the guest's kallsyms (>= 99% of the kernel instructions named, in summary and in perf.data),
# the KASLR offset found from the kallsyms for the vmlinux.  Without perf the perf parts are
# left out and the step SKIPs (77) once the rest passed.
set -u
readme=$1 tool=$2 mkdump=$3 work=$4 ctl=$5
kaslr=0x1e000000
link=0xffffffff80c00000 # ptt_work's 0x400000 at 0xffffffff81000000
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

for f in "$readme" "$tool" "$mkdump" "$work" "$ctl"; do
    [ -e "$f" ] || { echo "ptt-readme: $f missing"; exit 1; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/ptt-readme.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/bin" "$dir/gen"
ln -s "$(realpath "$tool")" "$dir/bin/ptvisor-trace"
ln -s "$(realpath "$ctl")" "$dir/bin/ptvisor-ctl"
export PATH="$dir/bin:$PATH" HOME="$dir" # perf: no ~/.debug of the user's
have_perf=1
command -v perf >/dev/null 2>&1 || have_perf=0

# ---- the inputs ----
cp "$work" "$dir/myprog"
objcopy --change-addresses $link --add-symbol entry_SYSCALL_64=.text:0x100,local \
    --add-symbol _text=.text:0,global "$work" "$dir/vmlinux" || { echo "objcopy failed"; exit 1; }
# the guest's /proc/kallsyms: the vmlinux's symbols at their run addresses
nm -n --defined-only "$dir/vmlinux" | while read -r a t n; do
    printf '%016x %s %s\n' $((0x$a + kaslr)) "$t" "$n"
done >"$dir/gen/kallsyms"
entry=$(awk '$3 == "entry_SYSCALL_64" { print $1 }' "$dir/gen/kallsyms")
log=$dir/serial.log
gen() { "$mkdump" --log "$log" --append "$@" "$work" >/dev/null || { echo "ptt_mkdump $*: failed"; exit 1; }; }
gen --shift "$(printf %x $((link + kaslr)))" --reason boot --dump-id 1 "$dir/gen/d1"
# the guest's kallsyms, as its ptvisor-ctl writes them (once per boot)
"$dir/bin/ptvisor-ctl" kallsyms "$dir/gen/kallsyms" >>"$log" || { echo "ptvisor-ctl kallsyms failed"; exit 1; }
gen --dump-id 2 --lstar "$entry" --note-comm myprog:4242 "$dir/gen/d2"
gen --dump-id 3 --lstar "$entry" --note-comm myprog:4343 "$dir/gen/d3"
echo "inputs: serial.log with $(grep -c '^@PTV1 ' "$log") frame lines, myprog, vmlinux"

# ---- README's commands ----
n=0
while IFS= read -r line; do
    n=$((n + 1))
    if [ $have_perf = 0 ] && [[ "$line" == *perf\ script* ]]; then
        echo "skip (no perf): $line"
        continue
    fi
    echo "\$ $line"
    (cd "$dir" && bash -o pipefail -c "$line") >"$dir/out.$n" 2>"$dir/err.$n"
    rc=$?
    sed 's/^/    | /' "$dir/out.$n" | head -n 12
    sed 's/^/    ! /' "$dir/err.$n" | head -n 12
    [ $rc = 0 ] || fail "README line $n exited $rc: $line"
done < <(awk '/^<!-- ptt-readme/ { want = 1; next }
              want && /^    [^ ]/ { sub(/^    /, ""); print; seen = 1; next }
              want && seen && !/^    / { want = 0; seen = 0 }' "$readme")
[ $n -ge 7 ] || fail "README has $n commands to run, not the 7 of its ptt-readme blocks"

# ---- what they did ----
grep -q "^ptvisor-trace extract: 3 dumps in serial.log" "$dir/out.1" &&
    grep -q -- "-> trace/dump-1-boot" "$dir/out.1" && grep -q -- "-> trace/dump-3-vmcall" "$dir/out.1" &&
    [ -f "$dir/trace/dump-2-vmcall/cpu0.pt" ] &&
    ok "extract: every dump in its own directory, said on stdout" ||
    fail "extract: $(cat "$dir/out.1" "$dir/err.1" | tr '\n' ' ')"
grep -q "holds 3 dumps: reading the last, trace/dump-3-vmcall" "$dir/err.2" &&
    grep -q "partition (myprog)" "$dir/out.2" && grep -q "traced program: myprog (pid 4343)" "$dir/out.2" &&
    ok "summary: the last dump, the program's symbols and name" || fail "summary: $(head -c 600 "$dir/out.2")"
[ "$(grep -c ' partition+0x' "$dir/out.3")" -gt 1000 ] && ok "decode: the program's instructions named" ||
    fail "decode named no partition instructions"
grep -q partition "$dir/flame.svg" 2>/dev/null && ok "flamegraph: partition in flame.svg" || fail "flame.svg"
if [ $have_perf = 1 ]; then
    comms=$(awk 'NF { print $1 }' "$dir/out.5" | sort -u | tr '\n' ' ')
    [ "$comms" = "myprog " ] && ok "perf script -F comm: myprog on every line" ||
        fail "perf script's comm column: '$comms'"
    perf script -i "$dir/perf.data" --itrace=i100000i -F comm,pid,tid 2>/dev/null | grep -q "myprog  *4343/4343" &&
        ok "perf script -F comm,pid,tid: myprog 4343/4343" || fail "perf.data's process is not myprog 4343"
fi
# the kernel's boot window: named from the kallsyms the guest sent; the vmlinux shifted by the
# offset the kallsyms gave
named() { # summary output -> "named of all" for the kernel
    awk '/^  at kernel addresses/ { all = $NF; k = 1; next } k && /^    named by a symbol/ { print $NF, all; exit }' "$1"
}
read -r kn ka < <(named "$dir/out.6")
[ -n "${ka:-}" ] && [ "$ka" -gt 0 ] && [ $((kn * 100)) -ge $((ka * 99)) ] &&
    grep -q "the guest's own" "$dir/out.6" &&
    ok "summary: $kn of $ka kernel instructions named from the guest's kallsyms" ||
    fail "summary of the boot window: ${kn:-?} of ${ka:-?} named"
read -r kn ka < <(named "$dir/out.7")
[ -n "${ka:-}" ] && [ "$ka" -gt 0 ] && [ $((kn * 100)) -ge $((ka * 99)) ] &&
    grep -q "KASLR offset 0x1e000000 from the kallsyms' _text" "$dir/out.7" &&
    ok "summary --vmlinux: $kn of $ka named, the KASLR offset from the kallsyms" ||
    fail "summary --vmlinux: ${kn:-?} of ${ka:-?} named; $(grep KASLR "$dir/out.7")"
if [ $have_perf = 1 ]; then
    (cd "$dir" && ptvisor-trace perf trace/dump-1-boot -o kernel.data -q) || fail "perf of the boot window"
    perf script -i "$dir/kernel.data" --itrace=i1i -F ip,sym 2>/dev/null >"$dir/kernel.txt"
    all=$(grep -c . "$dir/kernel.txt")
    unk=$(grep -c '\[unknown\]' "$dir/kernel.txt")
    [ "$all" -gt 100000 ] && [ $((unk * 100)) -le "$all" ] &&
        ok "perf script: $((all - unk)) of $all kernel instructions named in perf.data" ||
        fail "perf script of the boot window: $unk of $all unknown"
    perf report -i "$dir/kernel.data" --itrace=i1000i --stdio --sort sym 2>/dev/null | grep -q "\] partition" &&
        ok "perf report: the kernel's partition" || fail "perf report names no partition"
fi
if [ $fails != 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
if [ $have_perf = 0 ]; then
    echo "SKIP: perf is not installed (everything else passed)"
    exit 77
fi
echo "PASS"
