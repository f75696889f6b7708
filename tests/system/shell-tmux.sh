#!/usr/bin/env bash
# bochs:shell: `make shell` used as a person would, in a real terminal (tmux: a pane of 200 x 50,
# keys sent with send-keys, the screen read with capture-pane). One Bochs boot.
#
#   tests/system/shell-tmux.sh OUTDIR
#
# Two programs are built on the host and given as GUEST_FILES: guest/example.c (dynamic: its
# loader and libc go with it) and tests/system/shell-10k.c (static, ~10,000 instructions).
# At the guest's prompt the test types `ptvisor-ctl trace -d -- ./example`, then the same for
# ./shell-10k, then a plain command, then `exit`. PASS when: the prompt comes; each trace's
# summary appears on the screen while the session goes on (the host's watcher decoded it), the
# first naming example's own functions; no frame line reaches the screen; the plain command still
# answers after the dumps; `exit` ends the session with the dumps' directories (summary.txt,
# flame.svg, perf.data) in place; the terminal's settings are back as they were.
# Figure (INFO bench): for shell-10k, the wall time from the Enter at the prompt to its decoded
# trace, and the share of it the serial dump took (the VMM's "dump N (" to "dump N done" lines
# as the watcher saw them arrive).
set -u
out=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
command -v tmux >/dev/null || { echo "shell: tmux is not installed (apt-get install tmux)"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
fail=0
ok() { echo "  ok   $*"; }
bad() { echo "  FAIL $*"; fail=1; }
cc -O1 -g -o "$out/example" "$here/guest/example.c" &&
    cc -std=gnu11 -O1 -g -static -nostdlib -no-pie -fno-pie -fno-stack-protector -fno-builtin \
        -fcf-protection=none -o "$out/shell-10k" "$here/tests/system/shell-10k.c" ||
    { echo "shell: cannot build the test programs"; exit 1; }
sess=shell sock=ptvisor-test-$$ # a tmux server of its own
echo 'set -g history-limit 100000' >"$out/tmux.conf"
shdir=$out/shell
pane() { tmux -L "$sock" capture-pane -p -J -S - -t "$sess" 2>/dev/null | tr -d '\r'; }
# wait_for REGEX SECONDS: until the pane shows REGEX; 1 on timeout or a session that ended
wait_for() {
    local deadline=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        pane | grep -qE -- "$1" && return 0
        tmux -L "$sock" has-session -t "$sess" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}
cleanup() {
    tmux -L "$sock" kill-server 2>/dev/null
    [ -n "${stamper:-}" ] && kill -- -"$stamper" 2>/dev/null
}
trap cleanup EXIT
# the session: make shell in the repository as a user types it; before and after it, the
# terminal's settings; SESSION-OVER when make returns
tmux -L "$sock" -f "$out/tmux.conf" new-session -d -s "$sess" -x 200 -y 50 \
    "cd '$here' && stty -g >'$out/stty.before' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
     SHELL_DIR='$shdir' USER_OUT='$out/guest' make shell GUEST_FILES='$out/example $out/shell-10k'; \
     echo make-rc=\$?; stty -g >'$out/stty.after'; echo SESSION-OVER; sleep 600" ||
    { echo "shell: tmux could not start a session"; exit 1; }
start=$(date +%s)
if ! wait_for '^guest:/root# $' "${SHELL_BOOT_TIMEOUT:-1800}"; then
    bad "no guest prompt after $(($(date +%s) - start)) s"
    pane | tail -n 30 | sed 's/^/    | /'
    exit 1
fi
ok "the guest's prompt after $(($(date +%s) - start)) s (boot in Bochs)"
# every serial line from here with the time it arrived (the figure's phases)
setsid bash -c 'tail -n 0 -F "$1" 2>/dev/null | while IFS= read -r l; do printf "%s %s\n" "$EPOCHREALTIME" "${l%$'"'"'\r'"'"'}"; done' \
    - "$shdir/serial.log" >"$out/serial.times" &
stamper=$!

# type_trace PROG N: type the trace command, wait until N decoded dumps are on the screen (the
# host's "PT streams" line ends each); sets t_enter
type_trace() {
    tmux -L "$sock" send-keys -t "$sess" "ptvisor-ctl trace -d -- ./$1" Enter
    t_enter=$(date +%s.%N)
    local deadline=$(($(date +%s) + ${SHELL_TRACE_TIMEOUT:-600}))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        [ "$(pane | grep -cE '^host: PT streams: ')" -ge "$2" ] && return 0
        tmux -L "$sock" has-session -t "$sess" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}
if type_trace example 1; then
    t_enter_example=$t_enter
    ok "ptvisor-ctl trace -d -- ./example: the host decoded its dump during the session"
else
    bad "no decoded dump of ./example on the screen"
fi
if pane | grep -qE '^ +[0-9]+ +[0-9.]+% +example_compare \(.*/example\)'; then
    ok "the summary on the screen names example_compare ($(pane | grep -oE 'example_compare \(.*/example\)' | head -n 1))"
else
    bad "the summary on the screen does not name example_compare"
fi
wait_for '^guest:/root# $' 60 || true
if type_trace shell-10k 2; then
    t_enter_10k=$t_enter
    ok "ptvisor-ctl trace -d -- ./shell-10k: decoded during the session"
else
    bad "no decoded dump of ./shell-10k on the screen"
fi
tmux -L "$sock" send-keys -t "$sess" 'echo "still $((6 * 7))"' Enter
if wait_for '^still 42$' 120; then
    ok "the shell still answers after the dumps"
else
    bad "the shell did not answer 'echo' after the dumps"
fi
if pane | grep -q '@PTV1'; then
    bad "frame lines reached the screen"
else
    ok "no frame line on the screen ($(grep -ac '^@PTV1' "$shdir/serial.log") in the serial log)"
fi
tmux -L "$sock" send-keys -t "$sess" 'exit' Enter
if wait_for '^SESSION-OVER$' 120; then
    ok "exit ended the session: $(pane | grep -E '^shell: session over' | tail -n 1)"
else
    bad "the session did not end after exit"
fi
pane | grep -q '^make-rc=0$' || bad "make shell did not exit with 0 ($(pane | grep '^make-rc=' | tail -n 1))"
if cmp -s "$out/stty.before" "$out/stty.after"; then
    ok "the terminal's settings are restored"
else
    bad "the terminal's settings differ after the session"
fi
for d in "$shdir"/trace-*-vmcall; do
    [ -d "$d" ] || continue
    for f in summary.txt flame.svg perf.data; do
        [ -s "$d/$f" ] || bad "$d/$f missing"
    done
done
n=$(ls -d "$shdir"/trace-*-vmcall 2>/dev/null | wc -l)
[ "$n" = 2 ] && ok "two dump directories with summary, flame graph and perf.data" || bad "$n dump directories, want 2"
# the figures: from the serial lines' times (serial.times) and the watcher's (timing.log)
# figure N PROG T_ENTER: the Nth dump of timing.log, typed at T_ENTER
figure() {
    local id decoded instr t_begin t_end lines
    id=$(sed -n "$1s/^dump \([0-9]*\) .*/\1/p" "$shdir/timing.log")
    decoded=$(sed -n "$1s/.* decoded \([0-9.]*\)$/\1/p" "$shdir/timing.log")
    [ -n "$decoded" ] || return 0
    instr=$(awk '$1 == "instructions" { print $2; exit }' "$shdir/trace-$id-vmcall/summary.txt")
    t_begin=$(grep -a -m1 -E "^[0-9.]+ \[cpu[0-9]+ dump\] dump $id \(" "$out/serial.times" | cut -d' ' -f1)
    t_end=$(grep -a -m1 -E "^[0-9.]+ \[cpu[0-9]+ dump\] dump $id done" "$out/serial.times" | cut -d' ' -f1)
    lines=$(grep -a -cE "^[0-9.]+ @PTV1 [A-Z] $id " "$out/serial.times")
    awk -v p="$2" -v e="$3" -v b="$t_begin" -v f="$t_end" -v d="$decoded" -v n="$instr" -v l="$lines" 'BEGIN {
        total = d - e; dump = f - b;
        printf "  INFO bench shell_prompt_to_decoded_s=%.2f serial_dump_s=%.2f (%.0f%%) program=%s instructions=%s" \
            " (make shell, Bochs: Enter at the prompt to the decoded trace of ptvisor-ctl trace -d -- ./%s:" \
            " %.2f s to the dump'"'"'s first line (exec, trace, window closed), %.2f s the dump (%d frame" \
            " lines), %.2f s the host (watcher poll, extract, decode))\n",
            total, dump, 100 * dump / total, p, n, p, b - e, dump, l, d - f }'
    grep -a "dump $id (.*)\|dump $id done" "$shdir/serial.log" | tr -d '\r' | sed 's/^/    /'
}
figure 1 example "${t_enter_example:-}"
figure 2 shell-10k "${t_enter_10k:-}"
pane | tail -n 60 >"$out/screen.txt"
exit $fail
