#!/usr/bin/env bash
# Build a ptvisor boot image (MBR + FAT16 ESP) from a config and a guest.
#
#   tools/mkimage.sh OUT.img CFG GUEST [INITRD|-] [SRC=\\DEST ...]
#
# Layout (docs/ARCHITECTURE.md §1):
#   \EFI\BOOT\BOOTX64.EFI   $LOADER   (default build/boot/BOOTX64.EFI)
#   \ptvisor\ptvisor.cfg    CFG
#   \ptvisor\vmm.elf        $VMM      (default build/vmm/vmm.elf)
#   GUEST                   at the path CFG's `guest =` names (default \ptvisor\vmlinuz.efi)
#   INITRD                  at the path of `initrd=` in CFG's `cmdline =` (default \ptvisor\initrd.img)
# GUEST may be any EFI program (tests/guest/ conformance programs) and INITRD "-" for none.
# Extra SRC=\DEST files are copied as they are.
#
# The size is CYL cylinders of 16 heads x 63 sectors (516096 bytes) so Bochs can
# use the image directly; CYL defaults to what the files need plus 8 MiB, at
# least 40.  Bochs callers derive it back: cylinders = size / 516096.
set -eu
[ $# -ge 3 ] || { sed -n '2,18p' "$0"; exit 2; }
out=$1 cfg=$2 guest=$3 initrd=${4:--}
shift $(($# >= 4 ? 4 : 3))
here=$(cd "$(dirname "$0")/.." && pwd)
loader=${LOADER:-$here/build/boot/BOOTX64.EFI}
vmm=${VMM:-$here/build/vmm/vmm.elf}
for f in "$loader" "$vmm" "$cfg" "$guest"; do
    [ -f "$f" ] || { echo "mkimage: missing $f" >&2; exit 1; }
done
[ "$initrd" = - ] || [ -f "$initrd" ] || { echo "mkimage: missing $initrd" >&2; exit 1; }

# Where the loader will look: read `guest =` and cmdline's initrd= from the config.
cfg_value() {
    sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\(.*[^[:space:]]\)[[:space:]]*\$/\1/p" "$cfg" |
        tail -n 1
}
guest_dst=$(cfg_value guest)
guest_dst=${guest_dst:-'\ptvisor\vmlinuz.efi'}
initrd_dst=$(cfg_value cmdline | tr ' ' '\n' | sed -n 's/^initrd=//p' | head -n 1)
initrd_dst=${initrd_dst:-'\ptvisor\initrd.img'}

files=("$loader=\\EFI\\BOOT\\BOOTX64.EFI" "$cfg=\\ptvisor\\ptvisor.cfg" "$vmm=\\ptvisor\\vmm.elf"
       "$guest=$guest_dst")
[ "$initrd" = - ] || files+=("$initrd=$initrd_dst")
files+=("$@")

cyl_bytes=$((16 * 63 * 512))
if [ -z "${CYL:-}" ]; then
    need=$((9 * 1024 * 1024))
    for spec in "${files[@]}"; do
        need=$((need + $(stat -c %s "${spec%%=*}") + 4096))
    done
    CYL=$(((need + cyl_bytes - 1) / cyl_bytes))
    [ "$CYL" -ge 40 ] || CYL=40
fi
mkdir -p "$(dirname "$out")"
"$here/tools/mkesp.sh" "$out" "$CYL" "${files[@]}"
echo "mkimage: $out ($CYL cylinders, $((CYL * cyl_bytes / 1048576)) MiB): cfg $cfg, guest $guest -> $guest_dst"
