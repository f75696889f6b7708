#!/usr/bin/env bash
# An interactive session with the guest (make shell): its serial console in this terminal, and
# every trace dump it sends extracted and decoded on the host while the session goes on.
#
#   PTT=ptvisor-trace SERIAL_VIEW=serial-view [GUEST_MAP=FILE] tools/shell.sh IMG
#
# IMG boots in Bochs + OVMF (the serial port a socket of tests/system/bochs.sh, SERIAL_IN: the
# keys typed here go to it); its /etc/ptvisor/user-init starts a shell on the serial line
# (mk/91-user.mk). The terminal is put in raw mode: every key goes to the guest, Ctrl-C included.
#   Ctrl-] q     end the session (stops the emulator); `exit` in the guest does it too
#   Ctrl-] d     ask the VMM for a dump of every CPU's window (ESC [9788~ on the serial line)
#   Ctrl-] Ctrl-]  send a Ctrl-] to the guest
# Frame lines of dumps are not shown (tools/serial-view.c); a watcher reads the serial log
# (SHELL_DIR, default build/shell: serial.log) 4 times a second and, for each dump that is
# complete, runs tools/dump-decode.sh: SHELL_DIR/trace-ID-REASON/ with summary.txt, flame.svg and
# perf.data, and a few lines in the terminal. At the end, a dump that never completed is decoded
# as far as it got. SHELL_DIR/timing.log: per dump, when its first line, its last line and its
# decode were seen (seconds since the epoch; "-": not seen before the dump was complete). SHELL_TIMEOUT: the longest a
# session may last (default 86400 s).
set -u
img=$1
here=$(cd "$(dirname "$0")/.." && pwd)
ptt=${PTT:?PTT: the ptvisor-trace binary} view=${SERIAL_VIEW:?SERIAL_VIEW: the serial-view binary}
out=${SHELL_DIR:-$(dirname "$img")/shell}
[ -t 0 ] && [ -t 1 ] || { echo "make shell: needs a terminal on stdin and stdout (for a command without one: make run GUEST_CMD=...)"; exit 1; }
[ -f "$img" ] || { echo "make shell: $img missing"; exit 1; }
mkdir -p "$out"
serial=$out/serial.log fifo=$out/serial.in
rm -rf "$out"/trace-* "$out"/timing.log "$fifo"
mkfifo "$fifo" || exit 1
exec 4<>"$fifo" # held open read-write: never blocks, and the emulator side never sees an EOF
size=$(stat -c %s "$img")
disk=$out/disk.img
cp --sparse=always "$img" "$disk" # OVMF may write to the ESP: keep the image pristine
: >"$serial"
echo "shell: Bochs + OVMF; serial log $serial; OVMF ~15 s, Debian's kernel ~2-4 min to the prompt"
echo "shell: Ctrl-] q ends the session, Ctrl-] d asks the VMM for a dump; dumps are decoded into $out/"
stop='PTVISOR-GUEST-DONE|Kernel panic - not syncing|\[cpu[0-9]+ vmm\] error: halted|crash dump complete'
# Bochs' clock: mk/91-user.mk passes 50 M for the trap-flag tracer of its image; 500 M (what
# tools/run.sh uses) where the image steps with MTF, whose stepped interrupts need it
export BOCHS_IPS=${BOCHS_IPS:-500000000}
SERIAL_IN=$fifo setsid "$here/tests/system/bochs.sh" "$disk" $((size / 516096)) "$serial" \
    "${SHELL_TIMEOUT:-86400}" "$stop" >"$out/bochs.out" 2>&1 &
epid=$!

saved=$(stty -g)
restore() { stty "$saved" 2>/dev/null; }
say() { printf '\r\n[host] %s\r\n' "$*"; } # the terminal is raw: CR LF by hand
stty raw -echo

tail -n +1 -F "$serial" 2>/dev/null | "$view" &
vpid=$!

# ---- the watcher (state in files: it runs in a subshell, and once more at the end)
state=$out/.watch
: >"$state"
now() { date +%s.%N | cut -c1-14; }
# handle_dumps FINAL: decode each dump that is complete and not decoded yet (FINAL=1: those that
# never completed too, as far as they got)
handle_dumps() {
    local final=$1 line id boot reason st key t what first last
    # when the VMM's first and last line of each dump came (timing.log)
    while read -r what id; do
        grep -qx "$what $id .*" "$state" || echo "$what $id $(now)" >>"$state"
    done < <(tr -d '\r' <"$serial" |
        sed -n 's/^\[cpu[0-9]* dump\] dump \([0-9]*\) (.*/start \1/p; s/^\[cpu[0-9]* dump\] dump \([0-9]*\) done:.*/end \1/p')
    while read -r line; do
        set -- $line
        id=$2 boot=$4 reason=$5 st=${!#}
        key=$boot-$id
        grep -qx "done $key" "$state" && continue
        [ "$st" = complete ] || [ "$final" = 1 ] || continue
        echo "done $key" >>"$state"
        t=$(now)
        printf '\r\n' # off the prompt's line
        TAG=host PTT=$ptt GUEST_MAP=${GUEST_MAP:-} ELF_BASES_CACHE=$out/.elf-pages "$here/tools/dump-decode.sh" "$serial" "$id" "$reason" \
            "$out/trace-$id-$reason" </dev/null 2>&1 | sed 's/$/\r/'
        first=$(sed -n "s/^start $id //p" "$state" | head -n 1)
        last=$(sed -n "s/^end $id //p" "$state" | head -n 1)
        echo "dump $id reason $reason first_line ${first:--} last_line ${last:--} complete_seen $t" \
            "decoded $(now)" >>"$out/timing.log"
        printf '\r\n'
    done < <("$ptt" extract "$serial" --list 2>/dev/null)
}
(
    while kill -0 $epid 2>/dev/null; do
        handle_dumps 0
        sleep 0.25
    done
) &
wpid=$!
trap 'restore; kill -INT -- -$epid 2>/dev/null; kill $wpid $vpid 2>/dev/null' EXIT
trap 'exit 1' INT TERM HUP

# ---- the keyboard
quit=
while [ -z "$quit" ]; do
    if ! kill -0 $epid 2>/dev/null; then break; fi
    IFS= read -r -s -n 1 -d '' -t 1 k
    rc=$?
    [ $rc -gt 128 ] && continue # timeout: look at the emulator again
    [ $rc = 0 ] || break        # the terminal is gone
    if [ "$k" = $'\x1d' ]; then
        IFS= read -r -s -n 1 -d '' k2
        case $k2 in
        q | Q) quit=1 ;;
        d | D) printf '\033[9788~' >&4; say "asked the VMM for a dump (ESC [9788~)" ;;
        $'\x1d') printf '\x1d' >&4 ;;
        *) say "Ctrl-] q: end the session, Ctrl-] d: ask for a dump, Ctrl-] Ctrl-]: send Ctrl-]" ;;
        esac
        continue
    fi
    if [ -z "$k" ]; then printf '\0' >&4; else printf '%s' "$k" >&4; fi
done

if kill -0 $epid 2>/dev/null; then
    say "ending the session: stopping the emulator"
    kill -INT -- -$epid 2>/dev/null
fi
wait $epid 2>/dev/null
kill $wpid 2>/dev/null
wait $wpid 2>/dev/null
sleep 0.5
kill $vpid 2>/dev/null
restore
trap - EXIT
echo
handle_dumps 1 | tr -d '\r'
rm -f "$disk" "$fifo" "$state"
if ! grep -aq PTVISOR-GUEST-READY "$serial"; then
    echo "shell: the guest never reached its shell; the emulator said:"
    tail -n 5 "$out/bochs.out" "$serial.stdout" 2>/dev/null | sed 's/^/  /'
fi
n=$(ls -d "$out"/trace-* 2>/dev/null | grep -vc '\.extract\.txt$')
echo "shell: session over; $n dump(s) decoded under $out/ (serial log $serial)"
