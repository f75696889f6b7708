#!/usr/bin/env bash
# One trace dump of a serial log, extracted and decoded: summary, flame graph, perf.data.
#
#   PTT=ptvisor-trace tools/dump-decode.sh LOG ID REASON DIR
#
# DIR gets the dump (ptvisor-trace extract --dump ID) and summary.txt, flame.svg, perf.data;
# DIR.extract.txt what extract said. A few lines on stdout say where everything is, each
# starting with "$TAG: " (default run). Symbols (ptvisor-trace -e) for a dump the guest made:
#   GUEST_MAP=FILE   the guest's ELF files ("GUEST-PATH<TAB>HOST-PATH" lines, guest/user-files.sh):
#                    those whose code ran in the window, placed where it ran (tools/elf-bases.sh)
#   WORK_ELF=FILE    the built-in demo's workload; a program `ptvisor-ctl trace -d` names that
#                    lies next to it is used instead
# Exit status: extract's (0 complete, 2 incomplete but decoded, 1 nothing usable).
set -u
log=$1 id=$2 reason=$3 tdir=$4
tag=${TAG:-run}
here=$(cd "$(dirname "$0")/.." && pwd)
ptt=${PTT:?PTT: the ptvisor-trace binary}
"$ptt" extract "$log" --dump "$id" -o "$tdir" -q 2>"$tdir.extract.txt"
xrc=$?
[ $xrc = 0 ] || echo "$tag: dump $id: extract exit $xrc (2: incomplete but usable): $tdir.extract.txt"
[ -d "$tdir" ] || exit 1
elf=()
if [ "$reason" != boot ]; then
    [ -n "${WORK_ELF:-}" ] && [ -f "$WORK_ELF" ] && elf=(-e "$WORK_ELF")
    # `ptvisor-ctl trace -d` names its program: its ELF next to WORK_ELF gives the symbols
    prog=$(tr -d '\r' <"$log" | sed -n "s/^ptvisor-ctl: dump $id of \([A-Za-z0-9._-]*\) going out.*/\1/p" | tail -n 1)
    [ -n "$prog" ] && [ -n "${WORK_ELF:-}" ] && [ -f "$(dirname "$WORK_ELF")/$prog" ] &&
        elf=(-e "$(dirname "$WORK_ELF")/$prog")
    if [ -n "${GUEST_MAP:-}" ] && [ -s "$GUEST_MAP" ]; then
        mapfile -t placed < <(cut -f2 "$GUEST_MAP" | LC_ALL=C sort -u | tr '\n' '\0' |
            xargs -0 -r "$here/tools/elf-bases.sh" "$tdir")
        for p in "${placed[@]}"; do elf+=(-e "$p"); done
        [ ${#placed[@]} -gt 0 ] && printf '%s\n' "${placed[@]}" >"$tdir/elf-bases.txt"
    fi
fi
echo "$tag: dump $id ($reason) -> $tdir"
[ -s "$tdir/elf-bases.txt" ] &&
    echo "$tag: symbols of $(sed 's|.*/||' "$tdir/elf-bases.txt" | tr '\n' ' ')(placed where they ran: $tdir/elf-bases.txt)"
"$ptt" summary "${elf[@]}" "$tdir" >"$tdir/summary.txt" 2>&1
awk '/^(trace bytes|instructions|branches|gaps) / { print } /^top/ { t = 9 } t && t-- { print }' \
    "$tdir/summary.txt" | sed 's/^/  /'
"$ptt" flamegraph "${elf[@]}" "$tdir" -o "$tdir/flame.svg" 2>/dev/null &&
    echo "$tag: flame graph $tdir/flame.svg (open it in a browser); decode: $ptt decode ${elf[*]} $tdir"
"$ptt" perf "${elf[@]}" "$tdir" -o "$tdir/perf.data" -q 2>/dev/null &&
    echo "$tag: perf.data $tdir/perf.data: perf script -i $tdir/perf.data --itrace=i1i"
echo "$tag: PT streams: $(ls "$tdir"/cpu*.pt 2>/dev/null | tr '\n' ' ')"
exit $xrc
