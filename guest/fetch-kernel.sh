#!/usr/bin/env bash
# Fetch Debian's current amd64 kernel and take its EFI-stub image as the guest.
#
#   guest/fetch-kernel.sh DL_DIR OUT_VMLINUZ
#
# linux-image-amd64 is a metapackage: resolve the real linux-image-<abi>-amd64
# it depends on, `apt-get download` it into DL_DIR (kept there: a second run
# reuses it), unpack it with dpkg-deb -x (never installed on the host) and copy
# boot/vmlinuz-* to OUT_VMLINUZ.  KERNEL_DEB=/path/x.deb skips the download.
set -eu
dl=$1 out=$2
mkdir -p "$dl"
deb=${KERNEL_DEB:-}
if [ -z "$deb" ]; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
          sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
    if [ -z "$pkg" ]; then
        echo "fetch-kernel: cannot resolve linux-image-amd64 (run apt-get update?)" >&2
        exit 1
    fi
    deb=$(ls "$dl"/"${pkg}"_*_amd64.deb 2>/dev/null | tail -n 1 || true)
    if [ -z "$deb" ]; then
        echo "fetch-kernel: apt-get download $pkg"
        (cd "$dl" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
        deb=$(ls "$dl"/"${pkg}"_*_amd64.deb 2>/dev/null | tail -n 1 || true)
        [ -n "$deb" ] || { echo "fetch-kernel: download of $pkg failed" >&2; exit 1; }
    fi
fi
x="$dl/x"
rm -rf "$x"
mkdir -p "$x"
# Only boot/ is needed (the same files `dpkg-deb -x` would give, without 400 MB of modules).
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$x" --wildcards './boot/*'

k=$(ls "$x"/boot/vmlinuz-* | head -n 1)
[ -f "$k" ] || { echo "fetch-kernel: no boot/vmlinuz-* in $deb" >&2; exit 1; }
cfg=$(ls "$x"/boot/config-* | head -n 1)
# What the initramfs path relies on must be built in (=y), not modules.
for opt in BLK_DEV_INITRD RD_GZIP DEVTMPFS PROC_FS SYSFS SERIAL_8250 SERIAL_8250_CONSOLE \
           EFI_STUB BINFMT_ELF BINFMT_SCRIPT; do
    grep -qx "CONFIG_$opt=y" "$cfg" || { echo "fetch-kernel: CONFIG_$opt is not =y in $cfg" >&2; exit 1; }
done
cp "$cfg" "$(dirname "$out")/kernel.config"
cp "$k" "$out.tmp"
mv "$out.tmp" "$out"
echo "fetch-kernel: $(basename "$deb") -> $out ($(stat -c %s "$out") bytes)"
