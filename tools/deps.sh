#!/usr/bin/env bash
# Debian packages ptvisor needs to build and test.
#   tools/deps.sh check-or-install   install what is missing when root, else print the apt-get line
#   tools/deps.sh list               print the package list
set -u
PKGS="build-essential gnu-efi nasm clang libclang-rt-14-dev ovmf bochs bochs-term bochsbios qemu-system-x86
gpgv debian-archive-keyring patch mtools dosfstools fdisk libipt-dev libzydis-dev liblz4-dev libelf-dev linux-perf busybox-static libcmocka-dev cpio xz-utils zstd valgrind tmux"
missing=()
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
case "${1:-check-or-install}" in
list) echo $PKGS; exit 0 ;;
esac
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    exit $?
fi
echo "deps: missing Debian packages. Run as root:"
echo "  apt-get update && apt-get install -y ${missing[*]}"
exit 1
