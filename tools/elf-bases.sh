#!/usr/bin/env bash
# Where a trace dump's process had its ELF files loaded: the -e arguments for ptvisor-trace.
#
#   tools/elf-bases.sh DUMPDIR ELF...
#
# Prints one line per ELF file the dump shows: FILE@BASE for a position-independent one (a PIE
# program, a shared library, the dynamic loader) whose code pages are among the dump's code
# snapshots (BASE: the address of its lowest loaded page, as ptvisor-trace -e takes it), FILE
# for a fixed-address program (ET_EXEC). A PIE file none of whose pages ran in the window is left
# out. The base is found by content: each executable PT_LOAD page of the file is hashed and
# looked up among the snapshot pages (VA -> bytes), and the load bias most pages agree on wins.
# ELF_BASES_CACHE=DIR keeps the per-file page hashes (keyed by path, size and time).
#
# A file whose code pages are not in the dump (the VMM copies the first pages a window runs;
# those of a process that has exited before its dump cannot be read any more) is placed by the
# trace itself when PTT (ptvisor-trace) is set: decoded with the files placed so far, the trace
# has gaps where code bytes are missing, and a gap at an address that is a function of the file
# (or its entry point) at a page-aligned load bias, outside the files placed, is a vote for that
# bias. A bias wins with two votes, or with one when that gap fits no other bias and no other
# file; rounds go on while they place files (3 at most).
set -u
dir=$1
shift
[ -f "$dir/snapshots" ] || { echo "elf-bases: $dir has no snapshots file (not a dump directory)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the snapshot pages: hash -> "VA VA ..." (decimal)
declare -A snap=()
while read -r va len _ file; do
    [ -f "$dir/$file" ] || continue
    mkdir -p "$tmp/s"
    split -b 4096 -a 6 -d "$dir/$file" "$tmp/s/$((va))."
done <"$dir/snapshots"
if [ -d "$tmp/s" ]; then
    while read -r h f; do
        f=${f##*/}
        v=$((${f%.*} + 10#${f#*.} * 4096))
        snap[$h]+="$v "
    done < <(cd "$tmp/s" && find . -type f -size 4096c -exec sha1sum {} +)
fi

declare -A placed=() # file -> load bias
fixed=() unplaced=()
for elf in "$@"; do
    [ -f "$elf" ] || continue
    type=$(LC_ALL=C readelf -hW "$elf" 2>/dev/null | sed -n 's/^ *Type: *\([A-Z]*\).*/\1/p')
    case $type in
    EXEC) fixed+=("$elf"); continue ;;
    DYN) ;;
    *) continue ;;
    esac
    # "OFFSET VADDR FILESZ EXEC" per PT_LOAD
    loads=$(LC_ALL=C readelf -lW "$elf" 2>/dev/null | awk '$1 == "LOAD" {
        f = ""; for (i = 7; i < NF; i++) f = f $i; print $2, $3, $5, (f ~ /E/) ? 1 : 0 }')
    [ -n "$loads" ] || continue
    minv=$(echo "$loads" | awk '{ print $2 }' | while read -r v; do echo $((v)); done | sort -n | head -n 1)
    # the file's executable pages: "HASH BIAS-WITHOUT-VA" lines, cached
    key=$(printf '%s %s' "$(readlink -f "$elf")" "$(stat -Lc '%s %Y' "$elf")" | sha1sum | cut -c1-16)
    pages=${ELF_BASES_CACHE:+$ELF_BASES_CACHE/$key.pages}
    if [ -z "$pages" ] || ! [ -f "$pages" ]; then
        out=$tmp/pages.$key
        : >"$out"
        while read -r off vaddr filesz x; do
            [ "$x" = 1 ] || continue
            off=$((off)) vaddr=$((vaddr)) filesz=$((filesz))
            first=$((off & ~4095)) last=$(((off + filesz - 1) & ~4095))
            n=$(((last - first) / 4096 + 1))
            rm -rf "$tmp/f" && mkdir -p "$tmp/f"
            dd if="$elf" bs=4096 skip=$((first / 4096)) count=$n conv=sync status=none |
                split -b 4096 -a 6 -d - "$tmp/f/p."
            # a page at file offset O runs at bias + VADDR - OFF + O: keep VADDR - OFF + O
            (cd "$tmp/f" && sha1sum p.*) | while read -r h f; do
                echo "$h $((vaddr - off + first + 10#${f#p.} * 4096))"
            done >>"$out"
        done <<<"$loads"
        if [ -n "$pages" ]; then mkdir -p "$ELF_BASES_CACHE" && mv "$out" "$pages"; else pages=$out; fi
    fi
    # votes per load bias
    declare -A votes=()
    while read -r h rel; do
        for v in ${snap[$h]:-}; do
            b=$((v - rel))
            votes[$b]=$((${votes[$b]:-0} + 1))
        done
    done <"$pages"
    best= bestn=0
    for b in "${!votes[@]}"; do
        [ "${votes[$b]}" -gt "$bestn" ] && { best=$b; bestn=${votes[$b]}; }
    done
    unset votes
    if [ -n "$best" ]; then
        placed[$elf]=$best
    else
        unplaced+=("$elf")
    fi
done

# the span of a file at bias 0: "LOW HIGH" (decimal): lowest PT_LOAD address, end of the highest
span() {
    local lo= hi=0 a b
    while read -r a b; do
        a=$((a)) b=$((a + b))
        { [ -z "$lo" ] || [ "$a" -lt "$lo" ]; } && lo=$a
        [ "$b" -gt "$hi" ] && hi=$b
    done < <(LC_ALL=C readelf -lW "$1" 2>/dev/null | awk '$1 == "LOAD" { print $3, $6 }')
    echo "${lo:-0} $hi"
}
# the function symbols and the entry point of a file (decimal, at bias 0)
funcs() {
    {
        LC_ALL=C readelf -sW "$1" 2>/dev/null | awk '$4 == "FUNC" && $2 !~ /^0+$/ { print "0x" $2 }'
        LC_ALL=C readelf -hW "$1" 2>/dev/null | awk '/Entry point address/ { print $NF }'
    } | while read -r v; do echo $((v)); done | sort -un
}
# the files placed so far as -e arguments, one per line
placed_args() {
    local f lo
    for f in "${!placed[@]}"; do
        lo=$(span "$f")
        printf -- '-e\n%s@%x\n' "$f" $((placed[$f] + (${lo% *} & ~4095)))
    done
}

# the trace's gaps place the others
for _round in 1 2 3; do
    [ -n "${PTT:-}" ] && [ ${#unplaced[@]} -gt 0 ] || break
    mapfile -t args < <(placed_args)
    mapfile -t gaps < <("$PTT" decode -q "${args[@]}" "$dir" 2>/dev/null |
        sed -n 's/.*no code bytes for 0x\([0-9a-f]*\).*/\1/p' | sort -u)
    [ ${#gaps[@]} -gt 0 ] || break
    ranges=()
    for f in "${!placed[@]}"; do
        read -r lo hi <<<"$(span "$f")"
        ranges+=("$((placed[$f] + lo)) $((placed[$f] + hi))")
    done
    outside=()
    for g in "${gaps[@]}"; do
        x=$((16#$g)) inside=
        for r in "${ranges[@]}"; do
            [ "$x" -ge "${r% *}" ] && [ "$x" -lt "${r#* }" ] && { inside=1; break; }
        done
        [ -z "$inside" ] && outside+=("$x")
    done
    [ ${#outside[@]} -gt 0 ] || break
    declare -A votes=() # "FILE<TAB>BIAS" -> votes
    declare -A fits=()  # gap -> how many (file, bias) it fits
    declare -A lastgap=() # "FILE<TAB>BIAS" -> a gap that voted for it
    for elf in "${unplaced[@]}"; do
        mapfile -t fv < <(funcs "$elf")
        for x in "${outside[@]}"; do
            for v in "${fv[@]}"; do
                [ $(((x - v) & 4095)) = 0 ] || continue
                b=$((x - v))
                [ "$b" -ge 65536 ] || continue
                k="$elf"$'\t'"$b"
                votes[$k]=$((${votes[$k]:-0} + 1))
                fits[$x]=$((${fits[$x]:-0} + 1))
                lastgap[$k]=$x
            done
        done
    done
    new=0 still=()
    for elf in "${unplaced[@]}"; do
        best= bestn=0 nb=0
        for k in "${!votes[@]}"; do
            [ "${k%%$'\t'*}" = "$elf" ] || continue
            nb=$((nb + 1))
            [ "${votes[$k]}" -gt "$bestn" ] && { best=${k#*$'\t'}; bestn=${votes[$k]}; }
        done
        # two gaps agree; or one gap that fits only this file at only this bias
        if [ "$bestn" -ge 2 ] ||
            { [ "$bestn" = 1 ] && [ "$nb" = 1 ] && [ "${fits[${lastgap[$elf$'\t'$best]}]}" = 1 ]; }; then
            placed[$elf]=$best
            new=1
        else
            still+=("$elf")
        fi
    done
    unset votes fits lastgap
    unplaced=("${still[@]}")
    [ $new = 1 ] || break
done

for elf in "${fixed[@]}"; do echo "$elf"; done
mapfile -t args < <(placed_args)
for ((i = 1; i < ${#args[@]}; i += 2)); do echo "${args[$i]}"; done
exit 0
