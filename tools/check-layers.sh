#!/bin/bash
# The VMM's include rules (docs/ARCHITECTURE.md section 2.0): every folder of vmm/ has a rank,
# and a file includes only files of its own folder or of a folder ranked below its own.  Two
# folders of one rank never include each other (the feature shims).  Prints each offending
# include as FILE:LINE: "INCLUDE": FOLDER (rank) may not include FOLDER (rank), and exits 1.
# A folder missing from the table fails too: a new folder says where it stands.
# Usage: tools/check-layers.sh [TREE]   (TREE: a checkout, default the one this script is in)
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2

# folder (relative to vmm/) -> rank; higher folders may include lower ones
declare -A RANK=(
    [core]=90          # start-up on every CPU: owns the order things are set up in
    [vcpu]=80          # the run loop, VMCS set-up, the crash report, the self-check
    [vcpu/exit]=75     # one handler per exit class
    [pt/shim]=70 [trace/shim]=70 [lbr/shim]=70 [pmu/shim]=70 [iommu/shim]=70  # feature shims
    [vmx]=60           # VMX mechanics: VMXON, VMCS accessors and fields, controls, EPT pointer
    [emul]=55          # pure architectural rules the handlers apply
    [trace]=50 [pt]=45 [lbr]=44 [pmu]=43 [iommu]=42 [ept]=40  # engines, pure
    [host]=35          # the VMM's own descriptor tables, exception handlers, page tables
    [smp]=30           # IPIs, shootdowns, CPU states
    [base]=25          # VMM-wide state, page pool, log, panic, the handoff
    [dev]=20           # UART and console multiplexer
    [hw]=10            # CPU instructions, registers and architectural constants
    [lib]=5            # freestanding string and formatting
    [include]=0        # include/ptv: the ABI shared with the loader, guest tools and host tools
)

folder_of() { # sets FOLDER: vmm/a/b/c.h -> a/b ; include/ptv/x.h -> include
    case $1 in
    include/*) FOLDER=include ;;
    vmm/*) FOLDER=${1#vmm/}; FOLDER=${FOLDER%/*}; [ "$FOLDER" = "${1#vmm/}" ] && FOLDER=. ;;
    *) FOLDER="" ;;
    esac
}

bad=0
declare -A SEEN=()
# every quoted include of every file, one grep: FILE:LINE:TEXT
while IFS=: read -r f line inc; do
    folder_of "$f"; src=$FOLDER
    if [ -z "${RANK[$src]+x}" ]; then
        [ -n "${SEEN[$f]+x}" ] || echo "$f: folder vmm/$src is not in the layer table of tools/check-layers.sh"
        SEEN[$f]=1
        bad=1
        continue
    fi
    inc=${inc#*\"}; inc=${inc%%\"*}
    tgt=""
    for c in "${f%/*}/$inc" "vmm/$inc" "include/$inc"; do
        if [ -f "$c" ]; then tgt=$c; break; fi
    done
    [ -n "$tgt" ] || { echo "$f:$line: \"$inc\": not found under vmm/ or include/"; bad=1; continue; }
    [[ $tgt == */../* ]] && tgt=$(realpath -m --relative-to=. "$tgt")
    folder_of "$tgt"; dst=$FOLDER
    [ "$dst" = "$src" ] && continue
    if [ -z "${RANK[$dst]+x}" ] || [ "${RANK[$dst]}" -ge "${RANK[$src]}" ]; then
        echo "$f:$line: \"$inc\": $src (${RANK[$src]}) may not include $dst (${RANK[$dst]:-unranked})"
        bad=1
    fi
done < <(find vmm -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' -o -name '*.def' \) -print0 | sort -z |
         xargs -0 grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"')
# a file of an unranked folder with no include at all is still unranked
while IFS= read -r f; do
    folder_of "$f"; src=$FOLDER
    [ -n "${RANK[$src]+x}" ] || [ -n "${SEEN[$f]+x}" ] || {
        echo "$f: folder vmm/$src is not in the layer table of tools/check-layers.sh"
        bad=1
    }
done < <(find vmm -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' -o -name '*.def' \) | sort)
[ $bad = 0 ] && echo "check-layers: every include of vmm/ goes downward"
exit $bad
