# Sourced by the in-guest test runners (bochs-conformance.sh, bochs-attacks.sh):
# one Bochs boot of loader + VMM + an EFI test program as the guest.
#
#   guest_boot BUILD NAME CFG EFI TIMEOUT STOP_RE
#
# The image is built in a private run directory (two `make test` in one build
# tree must not share a serial log); $serial is the run's serial log, copied
# with Bochs' own log to BUILD/test/bochs-NAME/ when the calling script exits.
# Returns 77 (SKIP) when the loader, the VMM or the program is not built.
guest_boot() {
    local build=$1 name=$2 cfg=$3 efi=$4 timeout=$5 stop=$6
    local here base out img cyl start
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    for f in "$build/boot/BOOTX64.EFI" "$build/vmm/vmm.elf" "$efi"; do
        [ -f "$f" ] || { echo "$f not built yet"; return 77; }
    done
    base=$build/test/bochs-$name
    mkdir -p "$base"
    out=$(mktemp -d "$base/run.XXXXXX")
    img=$out/$name.img serial=$out/serial.log
    # shellcheck disable=SC2064 # expand now: the paths of this run
    trap "for f in '$serial' '$serial.bochs'; do [ -f \"\$f\" ] && cp \"\$f\" '$base/'; done; rm -rf '$out'" EXIT
    LOADER=$build/boot/BOOTX64.EFI VMM=$build/vmm/vmm.elf CYL=40 \
        "$here/tools/mkimage.sh" "$img" "$cfg" "$efi" - || { echo "FAIL: cannot build the image"; return 1; }
    cyl=$(( $(stat -c %s "$img") / 516096 ))
    echo "== Bochs: loader + VMM + $(basename "$efi") (timeout ${timeout} s)"
    start=$(date +%s)
    "$here/tests/system/bochs.sh" "$img" "$cyl" "$serial" "$timeout" "$stop" ${BOCHS_MODEL:-}
    echo "   bochs.sh exit $? after $(( $(date +%s) - start )) s; serial log: $base/serial.log"
}
