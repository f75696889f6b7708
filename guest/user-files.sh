#!/usr/bin/env bash
# Put the user's files into a guest root tree (the initramfs's extra files), dynamic ELF programs
# with the loader and shared libraries they need.
#
#   guest/user-files.sh ROOT MANIFEST SPEC...
#
# SPEC is HOST or HOST:GUEST. HOST is a file or directory on this machine; it goes to GUEST in the
# guest (an absolute path), by default /root/NAME: the guest's working directory, where
# `make run GUEST_CMD=...` runs its command and `make shell` starts. A directory is copied whole.
#
# Every x86-64 ELF file among them is followed the way the dynamic loader would: its interpreter
# (PT_INTERP) and its DT_NEEDED libraries, recursively, searched like ld.so on this host does: the
# object's DT_RPATH (and the program's), LD_LIBRARY_PATH, its DT_RUNPATH, the ld.so cache
# (`ldconfig -p`), then ld.so's system directories. Each is copied (symbolic links resolved) to
# the same path in the guest. Libraries outside ld.so's system directories are found there
# through LD_LIBRARY_PATH, which ROOT/etc/ptvisor/env sets. Libraries a program dlopen()s at run
# time cannot be seen this way: name them in SPEC (HOST:GUEST puts them where it looks).
#
# MANIFEST gets one line per ELF file copied, "GUEST-PATH<TAB>HOST-PATH" (the host decodes the
# guest's trace with their symbols). Any error is one line on stderr and exit 1.
set -u
root=$1 manifest=$2
shift 2
sys_dirs=(/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib /usr/lib)
err() { echo "guest files: $*" >&2; exit 1; }
command -v readelf >/dev/null || err "readelf not found (apt-get install binutils)"

declare -A copied=() # guest path -> host path
declare -A seen=()   # host objects already followed
lib_dirs=()
: >"$manifest.tmp"

# "ELF64 X86-64", another "CLASS MACHINE" for other ELF files, nothing for non-ELF files
elf_kind() {
    [ -f "$1" ] && [ "$(head -c 4 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || return 0
    LC_ALL=C readelf -hW "$1" 2>/dev/null | awk -F: '
        $1 ~ /^ *Class/ { c = $2 } $1 ~ /^ *Machine/ { m = $2 }
        END { gsub(/^ +| +$/, "", c); gsub(/^ +| +$/, "", m);
              if (m == "Advanced Micro Devices X86-64") m = "X86-64"; print c " " m }'
}

# ld.so cache: NAME -> PATH (x86-64 entries, no hardware-capability variants)
declare -A cache=()
while read -r name path; do
    [ -n "${cache[$name]:-}" ] || cache[$name]=$path
done < <(ldconfig -p 2>/dev/null | awk '/\(libc6,x86-64[),]/ && !/hwcap/ && / => / { print $1, $NF }')

# copy HOST to GUEST (a file; symbolic links resolved); GUEST is absolute
put() {
    local host=$1 guest=$2
    if [ -n "${copied[$guest]:-}" ]; then
        [ "$(readlink -f "${copied[$guest]}")" = "$(readlink -f "$host")" ] && return 0
        err "$guest: two different files for one guest path ($host and ${copied[$guest]})"
    fi
    mkdir -p "$root$(dirname "$guest")" || exit 1
    cp -L --preserve=mode "$host" "$root$guest" || err "$host: cannot copy it"
    copied[$guest]=$host
    [ "$(elf_kind "$host")" = "ELF64 X86-64" ] && printf '%s\t%s\n' "$guest" "$(readlink -f "$host")" >>"$manifest.tmp"
    return 0
}

# the DT_ entries of an ELF file: "TAG VALUE" (NEEDED, RPATH, RUNPATH)
dyn_entries() {
    LC_ALL=C readelf -dW "$1" 2>/dev/null |
        sed -n 's/^ *0x[0-9a-f]* (\(NEEDED\|RPATH\|RUNPATH\)) *[^[]*\[\(.*\)\]$/\1 \2/p'
}

# expand $ORIGIN, $LIB and $PLATFORM of a search path list for an object in directory $2
expand_dirs() {
    local list=$1 origin=$2 d
    list=${list//\$\{ORIGIN\}/$origin} list=${list//\$ORIGIN/$origin}
    list=${list//\$\{LIB\}/lib\/x86_64-linux-gnu} list=${list//\$LIB/lib\/x86_64-linux-gnu}
    list=${list//\$\{PLATFORM\}/x86_64} list=${list//\$PLATFORM/x86_64}
    local IFS=:
    for d in $list; do [ -n "$d" ] && echo "$d"; done
}

main_rpath=()
# follow one ELF file (host path): its interpreter and DT_NEEDED, each copied at its path
follow() {
    local obj=$1 who=$2 kind
    local real
    real=$(readlink -f "$obj")
    [ -n "${seen[$real]:-}" ] && return 0
    seen[$real]=1
    kind=$(elf_kind "$obj")
    [ -z "$kind" ] && return 0
    case $kind in
    "ELF64 X86-64") ;;
    "ELF32 "*) err "$who: a 32-bit ELF file (the guest runs x86-64 programs and libraries only)" ;;
    *) err "$who: an ELF file for ${kind#* } (the guest runs x86-64 programs and libraries only)" ;;
    esac
    local interp
    interp=$(LC_ALL=C readelf -lW "$obj" 2>/dev/null | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]$/\1/p')
    if [ -n "$interp" ]; then
        [ -f "$interp" ] || err "$who: its interpreter $interp is not on this host"
        put "$interp" "$interp"
        follow "$interp" "$interp"
    fi
    local tag val rpath=() runpath=() needed=() d
    while read -r tag val; do
        case $tag in
        NEEDED) needed+=("$val") ;;
        RPATH) mapfile -t rpath < <(expand_dirs "$val" "$(dirname "$real")") ;;
        RUNPATH) mapfile -t runpath < <(expand_dirs "$val" "$(dirname "$real")") ;;
        esac
    done < <(dyn_entries "$obj")
    [ ${#runpath[@]} -gt 0 ] && rpath=() # DT_RUNPATH present: DT_RPATH is ignored
    [ "$who" = "$obj" ] && [ -n "$interp" ] && main_rpath=("${rpath[@]}")
    local n found dirs ldp=()
    [ -n "${LD_LIBRARY_PATH:-}" ] && mapfile -t ldp < <(expand_dirs "$LD_LIBRARY_PATH" "$PWD")
    for n in "${needed[@]}"; do
        found=
        if [[ $n == */* ]]; then
            [ -f "$n" ] && found=$n
        else
            dirs=("${rpath[@]}")
            [ ${#runpath[@]} -eq 0 ] && dirs+=("${main_rpath[@]}")
            dirs+=("${ldp[@]}" "${runpath[@]}")
            for d in "${dirs[@]}"; do
                [ "$(elf_kind "$d/$n")" = "ELF64 X86-64" ] && { found=$d/$n; break; }
            done
            if [ -z "$found" ] && [ -n "${cache[$n]:-}" ] && [ "$(elf_kind "${cache[$n]}")" = "ELF64 X86-64" ]; then
                found=${cache[$n]}
            fi
            if [ -z "$found" ]; then
                for d in "${sys_dirs[@]}"; do
                    [ "$(elf_kind "$d/$n")" = "ELF64 X86-64" ] && { found=$d/$n; break; }
                done
            fi
        fi
        [ -n "$found" ] || err "$who needs $n, which is not on this host (searched like ld.so:" \
            "${rpath[*]:+DT_RPATH ${rpath[*]}, }${ldp[*]:+LD_LIBRARY_PATH, }${runpath[*]:+DT_RUNPATH ${runpath[*]}, }the ld.so cache, ${sys_dirs[*]})"
        found=$(realpath -s "$found")
        put "$found" "$found"
        d=$(dirname "$found")
        case " ${sys_dirs[*]} ${lib_dirs[*]} " in *" $d "*) ;; *) lib_dirs+=("$d") ;; esac
        follow "$found" "$found"
    done
}

mkdir -p "$root" || exit 1
for spec in "$@"; do
    host=$spec guest=
    if [[ $spec =~ ^(.+):(/.*)$ ]] && ! [ -e "$spec" ]; then
        host=${BASH_REMATCH[1]} guest=${BASH_REMATCH[2]}
    fi
    [ "$host" = / ] || host=${host%/}
    [ -e "$host" ] || err "$host: no such file or directory"
    [ -f "$host" ] || [ -d "$host" ] || err "$host: neither a file nor a directory"
    [ -n "$guest" ] || guest=/root/$(basename "$(realpath -s "$host")")
    guest=$(realpath -m -s "$guest")
    case $guest in /) err "$spec: the guest's / itself (name a path below it)" ;; esac
    if [ -d "$host" ]; then
        while IFS= read -r -d '' f; do
            put "$f" "$guest/${f#"$host"/}"
        done < <(find "$host" -type f -print0 2>/dev/null | LC_ALL=C sort -z)
        while IFS= read -r -d '' f; do
            follow "$f" "$f"
        done < <(find "$host" -type f -print0 2>/dev/null | LC_ALL=C sort -z)
    else
        put "$host" "$guest"
        follow "$host" "$host"
    fi
done
mkdir -p "$root/etc/ptvisor"
if [ ${#lib_dirs[@]} -gt 0 ]; then
    printf 'export LD_LIBRARY_PATH=%q\n' "$(IFS=:; echo "${lib_dirs[*]}")" >"$root/etc/ptvisor/env"
else
    : >"$root/etc/ptvisor/env"
fi
LC_ALL=C sort -u "$manifest.tmp" >"$manifest" && rm -f "$manifest.tmp"
