#!/usr/bin/env bash
# Build a bootable disk image: MBR, one EFI System Partition (type 0xEF, FAT16)
# starting at 1 MiB.  The same image boots in QEMU+OVMF, Bochs+OVMF and, written
# with dd, from a USB stick.  No root needed (mtools).
#
#   tools/mkesp.sh OUT.img CYLINDERS SRC=\\DEST [SRC=\\DEST ...]
#
# The size is CYLINDERS x 16 heads x 63 sectors x 512 bytes, so Bochs can use the
# image as `ata0-master: type=disk, mode=flat, cylinders=CYLINDERS, heads=16, spt=63`.
set -eu
out=$1 cyl=$2; shift 2
sectors=$((cyl * 16 * 63))
tmp="$out.tmp"
rm -f "$tmp"
truncate -s $((sectors * 512)) "$tmp"
echo 'start=2048, type=ef' | sfdisk -q -X dos "$tmp" >/dev/null
mkfs.fat -F 16 -n PTVISOR --offset 2048 "$tmp" $(((sectors - 2048) / 2)) >/dev/null
img="$tmp@@1M"
export MTOOLS_SKIP_CHECK=1
for spec in "$@"; do
    src=${spec%%=*} dst=${spec#*=}
    [ -f "$src" ] || { echo "mkesp: missing $src" >&2; exit 1; }
    dst=${dst//\\//}
    d=$(dirname "$dst")
    path=""
    for part in $(echo "$d" | tr '/' ' '); do
        path="$path/$part"
        mmd -D s -i "$img" "::$path" 2>/dev/null || true # -D s: an existing one is no question on a terminal
    done
    mcopy -o -i "$img" "$src" "::$dst"
done
mv "$tmp" "$out"
