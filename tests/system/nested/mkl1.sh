#!/usr/bin/env bash
# Build the nested-KVM vehicle's L1 disk: Debian's kernel (the guest image's own) booted by
# OVMF from startup.nsh, with an initramfs that holds KVM's modules from the same kernel
# package, Debian's QEMU and every library `ldd` names, OVMF, busybox, and ptvisor's image.
#
#   tests/system/nested/mkl1.sh OUT.img KERNEL.deb VMLINUZ PTVISOR.img [TIMEOUT_S [ATTACK.img]]
#
# OUT.img: an ESP (tools/mkesp.sh) Bochs boots; OUT.img.cyl holds its cylinder count.
# TIMEOUT_S (default 600) is what L1 gives the nested QEMU (on L1's clock); L1_CMDLINE adds to
# L1's kernel command line.  ATTACK.img (ptvisor with attack.efi as its guest) goes in as
# /nested/attack.img: l1-init runs it before the Linux image.  L1_INIT: L1's /init (default
# tests/system/nested/l1-init); L1_BARE: one more image, /nested/bare.img (make bench-nested:
# the guest without ptvisor).
# Everything comes from Debian packages: linux-image-amd64 (.deb, never installed),
# qemu-system-x86, ovmf, busybox-static, bash, util-linux (flock: tests/system/emu-slot.sh).
set -eu
out=$1 deb=$2 vmlinuz=$3 ptv=$4 timeout=${5:-600} atk=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
die() { echo "mkl1: $*" >&2; exit 1; }
[ -f "$deb" ] || die "$deb missing (the guest kernel's .deb: make guest-image fetches it)"
[ -f "$vmlinuz" ] || die "$vmlinuz missing"
[ -f "$ptv" ] || die "$ptv missing (ptvisor's image did not build)"
[ -z "$atk" ] || [ -f "$atk" ] || die "$atk missing (ptvisor's attack image did not build)"
[ -z "${L1_BARE:-}" ] || [ -f "$L1_BARE" ] || die "$L1_BARE missing (the bare image did not build)"
for f in /usr/bin/qemu-system-x86_64 /usr/share/qemu/kvmvapic.bin /usr/share/OVMF/OVMF_CODE_4M.fd \
    /usr/share/OVMF/OVMF_VARS_4M.fd /bin/busybox /bin/bash /usr/bin/flock; do
    [ -e "$f" ] || die "$f missing (apt-get install qemu-system-x86 ovmf busybox-static bash util-linux)"
done
root="$out.root"
rm -rf "$root"
mkdir -p "$root"/{bin,usr/bin,dev,proc,sys,tmp,lib/modules,nested/tests/system}
ln -s ../tmp "$root/var/tmp" 2>/dev/null || { mkdir -p "$root/var" && ln -s ../tmp "$root/var/tmp"; } # QEMU snapshot=on
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do
    case $a in busybox | bash | flock) ;; *) ln -sf busybox "$root/bin/$a" ;; esac
done
ln -s ../../bin/busybox "$root/usr/bin/env"
# host programs and their libraries, at the paths the dynamic loader looks in
for p in /usr/bin/qemu-system-x86_64 /bin/bash /usr/bin/flock; do
    install -D -m 0755 "$p" "$root$p"
    ldd "$p" | awk '/=> \//{ print $3 } /^\t\/.*ld-linux/{ print $1 }' | while read -r lib; do
        [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
    done
done
# /bin/bash is the real bash (qemu.sh's #!/usr/bin/env bash), not busybox
install -D -m 0644 /usr/share/qemu/kvmvapic.bin "$root/usr/share/qemu/kvmvapic.bin"
install -D -m 0644 /usr/share/OVMF/OVMF_CODE_4M.fd "$root/usr/share/OVMF/OVMF_CODE_4M.fd"
install -D -m 0644 /usr/share/OVMF/OVMF_VARS_4M.fd "$root/usr/share/OVMF/OVMF_VARS_4M.fd"
# KVM from the same kernel package (not installed: only these three files are taken)
mods="$out.mods"
rm -rf "$mods" && mkdir -p "$mods"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$mods" --wildcards \
    './lib/modules/*/kernel/arch/x86/kvm/kvm.ko*' './lib/modules/*/kernel/arch/x86/kvm/kvm-intel.ko*' \
    './lib/modules/*/kernel/virt/lib/irqbypass.ko*'
for m in kvm kvm-intel irqbypass; do
    f=$(find "$mods" -name "$m.ko*" | head -n 1)
    [ -n "$f" ] || die "$m.ko not in $deb"
    case $f in
    *.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$f" >"$root/lib/modules/$m.ko" ;;
    *) cp "$f" "$root/lib/modules/$m.ko" ;;
    esac
done
rm -rf "$mods"
cp "$top/tests/system/qemu.sh" "$top/tests/system/emu-slot.sh" "$root/nested/tests/system/"
cp --sparse=always "$ptv" "$root/nested/ptvisor.img"
[ -z "$atk" ] || cp --sparse=always "$atk" "$root/nested/attack.img"
[ -z "${L1_BARE:-}" ] || cp --sparse=always "$L1_BARE" "$root/nested/bare.img"
install -m 0755 "${L1_INIT:-$here/l1-init}" "$root/init"
find "$root" -exec touch -h -d @0 {} +
initrd="$out.initrd"
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort |
    cpio --quiet -o -H newc --owner=0:0 --reproducible) | gzip -6 -n >"$initrd"
unpacked=$(du -sm --apparent-size "$root" | cut -f1)
rm -rf "$root"
nsh="$out.nsh"
# lapic=notscdeadline: L1's timer in the APIC's one-shot mode.  With Bochs 3.0's TSC-deadline
# timer the nested OVMF never got past its TPM probe (25 minutes, EPT-misconfig exits at
# 0xfed40000 on and on); without it ptvisor launches ~4 minutes in (measured).
printf 'fs0:\\vmlinuz.efi initrd=\\initrd.img console=ttyS0,115200 quiet loglevel=1 panic=-1 lapic=notscdeadline nested.timeout=%s%s\r\n' \
    "$timeout" "${L1_CMDLINE:+ $L1_CMDLINE}" >"$nsh"
size=$(($(stat -c %s "$vmlinuz") + $(stat -c %s "$initrd")))
cyl=$((size / 516096 + 8))
"$top/tools/mkesp.sh" "$out" "$cyl" "$vmlinuz=\\vmlinuz.efi" "$initrd=\\initrd.img" "$nsh=\\startup.nsh"
echo "$cyl" >"$out.cyl"
rm -f "$nsh"
echo "mkl1: $out: L1 kernel + initramfs $(($(stat -c %s "$initrd") >> 20)) MiB (${unpacked} MiB unpacked: QEMU, OVMF, KVM modules, ptvisor image${atk:+s})"
rm -f "$initrd"
