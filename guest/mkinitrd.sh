#!/usr/bin/env bash
# Build the guest initramfs: busybox-static, /init, ptv-probe; cpio newc + gzip.
#
#   [EXTRA_BINS="FILE..."] guest/mkinitrd.sh OUT.img INIT PTV_PROBE [BUSYBOX]
#
# EXTRA_BINS go to /bin under their own names (ptvisor-ctl, the traced workload).
# EXTRA_ROOT=DIR: a tree merged into the root as it is (the user's files: guest/user-files.sh);
# a path that the image has already is refused.
#
# No root needed: the archive has no device nodes (/init mounts devtmpfs).
# File times are fixed, so the same inputs give the same bytes.
set -eu
out=$1 init=$2 probe=$3 busybox=${4:-/bin/busybox}
[ -x "$busybox" ] || { echo "mkinitrd: $busybox missing (apt-get install busybox-static)" >&2; exit 1; }
! readelf -l "$busybox" 2>/dev/null | grep -q 'INTERP' ||
    { echo "mkinitrd: $busybox is not static (need busybox-static)" >&2; exit 1; }
root="$out.root"
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp}
cp "$busybox" "$root/bin/busybox"
for applet in sh mount umount echo cat grep sleep poweroff uname dmesg ls; do
    ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$init" "$root/init"
install -m 0755 "$probe" "$root/bin/ptv-probe"
for f in ${EXTRA_BINS:-}; do
    install -m 0755 "$f" "$root/bin/$(basename "$f")"
done
if [ -n "${EXTRA_ROOT:-}" ]; then
    while IFS= read -r -d '' f; do
        rel=${f#"$EXTRA_ROOT"}
        if [ -e "$root$rel" ] || [ -L "$root$rel" ]; then
            [ -d "$f" ] && [ -d "$root$rel" ] && ! [ -L "$root$rel" ] && continue
            echo "mkinitrd: $rel is the guest's own (busybox, /init, ptvisor-ctl): put yours elsewhere" >&2
            rm -rf "$root"
            exit 1
        fi
    done < <(find "$EXTRA_ROOT" -mindepth 1 -print0)
    cp -a "$EXTRA_ROOT"/. "$root"/
fi
find "$root" -exec touch -h -d @0 {} +
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
    cpio --quiet -o -H newc --owner=0:0 --reproducible) | gzip -9 -n >"$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$root"
