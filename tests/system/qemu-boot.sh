#!/usr/bin/env bash
# QEMU TCG + OVMF checks of the loader (boot/), one case per run:
#
#   tests/system/qemu-boot.sh CASE [BUILD_DIR]
#
#   no-vmx      default config: the exact no-VMX line, then Linux boots natively to its marker
#   bad-config  bad config lines: reported with their line numbers, the boot still reaches the marker
#   vmm-off     vmm = off: said so, the guest is started without a VMX check
#   no-config   no \ptvisor\ptvisor.cfg: one line saying so, the built-in defaults apply
#   no-kernel   no \ptvisor\vmlinuz.efi: the clear error line, then the loader returns (no hang)
#   bad-kernel  \ptvisor\vmlinuz.efi is not a PE image: an error line naming the guest and
#               the firmware's status, then the loader returns (no hang)
#   no-vmm-elf  vmm = on, no vmm.elf, no VMX: the no-VMX line comes first, vmm.elf is never read
#   halt        on_no_vmx = halt: says so and stops; the guest never starts
#
# QEMU TCG has no VMX for any -cpu model (docs/TEST-VEHICLES.md), which is what
# these cases need.  Exit 0 PASS, 77 SKIP (reason on the last line), else FAIL.
set -u
case_=$1 build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

loader=$build/boot/BOOTX64.EFI
kernel=$build/guest/vmlinuz.efi
initrd=$build/guest/initrd.img
vmm=$build/vmm/vmm.elf
work=$build/test/qemu-boot/$case_
mkdir -p "$work"
log=$work/serial.log
marker=PTVISOR-GUEST-READY
no_vmx='ptvisor: no VMX: CPUID.1:ECX[5]=0 (VMX disabled in firmware setup, or an emulator without VMX) -- booting natively'

[ -f "$loader" ] || { echo "missing $loader (make $loader)"; exit 1; }
need_guest() {
    if [ ! -f "$kernel" ] || [ ! -f "$initrd" ]; then
        echo "SKIP: no guest image ($kernel, $initrd): run make guest-image"
        exit 77
    fi
}

# mkesp CONFIG_FILE [with-kernel] [with-vmm]
mkesp() {
    local cfg=$1 files=("$loader=\\EFI\\BOOT\\BOOTX64.EFI" "$cfg=\\ptvisor\\ptvisor.cfg")
    shift
    for w in "$@"; do
        case $w in
        with-kernel) files+=("$kernel=\\ptvisor\\vmlinuz.efi" "$initrd=\\ptvisor\\initrd.img") ;;
        with-vmm) [ -f "$vmm" ] && files+=("$vmm=\\ptvisor\\vmm.elf") ;;
        esac
    done
    tools/mkesp.sh "$work/esp.img" 64 "${files[@]}" || exit 1
}

# boot TIMEOUT STOP_REGEX -> the serial log, cleaned of CRs and ANSI escapes, in $work/clean.log
boot() {
    local rc=0
    tests/system/qemu.sh "$work/esp.img" "$log" "$1" "$2" || rc=$?
    tr -d '\r' <"$log" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' >"$work/clean.log"
    echo "---- ptvisor lines of the serial log ($log) ----"
    grep -a 'ptvisor' "$work/clean.log" || true
    echo "----"
    return $rc
}

fails=0
has_line() { # the exact line appears
    if grep -aqFx -- "$1" "$work/clean.log"; then echo "ok: line '$1'"; else
        echo "FAIL: no line '$1'"; fails=$((fails + 1)); fi
}
has_text() { # the text appears somewhere (the kernel's own output has no line structure we own)
    if grep -aqF -- "$1" "$work/clean.log"; then echo "ok: text '$1'"; else
        echo "FAIL: no '$1'"; fails=$((fails + 1)); fi
}
lacks() {
    if grep -aqF -- "$1" "$work/clean.log"; then echo "FAIL: unexpected '$1'"; fails=$((fails + 1));
    else echo "ok: no '$1'"; fi
}
before() { # line $1 comes before text $2
    local a b
    a=$(grep -anFx -- "$1" "$work/clean.log" | head -n1 | cut -d: -f1)
    b=$(grep -anF -- "$2" "$work/clean.log" | head -n1 | cut -d: -f1)
    if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then echo "ok: '$1' before '$2'"; else
        echo "FAIL: '$1' not before '$2'"; fails=$((fails + 1)); fi
}

cfg=$work/ptvisor.cfg
case $case_ in
no-vmx)
    need_guest
    cp boot/ptvisor.cfg "$cfg"
    mkesp "$cfg" with-kernel with-vmm
    boot 90 "$marker"
    has_line "$no_vmx"
    has_line 'ptvisor: starting guest \ptvisor\vmlinuz.efi: initrd=\ptvisor\initrd.img console=ttyS0,115200 earlyprintk=serial,ttyS0,115200 panic=-1'
    before "$no_vmx" "$marker"
    has_text "$marker"
    ;;
bad-config)
    need_guest
    { printf '# a config with mistakes\n\nserail_port = 0x3f8\npt_buffer = 3000\n'
      printf 'vmm_pool 16M\npt_mode = system\npt_mode = off\n'
      grep -v '^serial_port\|^pt_buffer\|^vmm_pool\|^pt_mode' boot/ptvisor.cfg; } >"$cfg"
    mkesp "$cfg" with-kernel
    boot 90 "$marker"
    has_line "ptvisor: ptvisor.cfg:3: unknown key 'serail_port'"
    has_line "ptvisor: ptvisor.cfg:4: pt_buffer: not a power of two >= 4K: '3000'"
    has_line "ptvisor: ptvisor.cfg:5: missing '=' (expected 'key = value'): 'vmm_pool 16M'"
    has_line "ptvisor: ptvisor.cfg:7: duplicate key 'pt_mode' (first on line 6), ignored"
    has_line 'ptvisor: ptvisor.cfg: 4 bad line(s) skipped, their keys keep the defaults'
    has_line 'ptvisor: config: vmm=on pt_mode=system pt_buffer=4M vmm_pool=32M serial=0x3f8,115200 log_level=info on_no_vmx=boot guest=\ptvisor\vmlinuz.efi'
    has_line "$no_vmx"
    has_text "$marker"
    ;;
vmm-off)
    need_guest
    sed 's/^vmm = on/vmm = off/' boot/ptvisor.cfg >"$cfg"
    mkesp "$cfg" with-kernel
    boot 60 'ptvisor: starting guest'
    has_line 'ptvisor: vmm = off in ptvisor.cfg -- booting natively'
    lacks 'no VMX'
    has_text 'ptvisor: starting guest \ptvisor\vmlinuz.efi'
    ;;
no-config)
    tools/mkesp.sh "$work/esp.img" 64 "$loader=\\EFI\\BOOT\\BOOTX64.EFI" || exit 1
    boot 60 'ptvisor: returning to the firmware' || true
    has_line 'ptvisor: \ptvisor\ptvisor.cfg: Not Found -- using the built-in defaults'
    has_line 'ptvisor: config: vmm=on pt_mode=auto pt_buffer=4M vmm_pool=32M serial=0x3f8,115200 log_level=info on_no_vmx=boot guest=\ptvisor\vmlinuz.efi'
    has_line "$no_vmx"
    has_line 'ptvisor: guest \ptvisor\vmlinuz.efi: Not Found'
    ;;
no-kernel)
    cp boot/ptvisor.cfg "$cfg"
    mkesp "$cfg"
    boot 60 'ptvisor: returning to the firmware' || true
    has_line 'ptvisor: guest \ptvisor\vmlinuz.efi: Not Found'
    has_line 'ptvisor: returning to the firmware in 5 seconds'
    ;;
bad-kernel)
    cp boot/ptvisor.cfg "$cfg"
    head -c 65536 /dev/zero | tr '\0' 'Z' >"$work/garbage.efi"
    tools/mkesp.sh "$work/esp.img" 64 "$loader=\\EFI\\BOOT\\BOOTX64.EFI" \
        "$cfg=\\ptvisor\\ptvisor.cfg" "$work/garbage.efi=\\ptvisor\\vmlinuz.efi" || exit 1
    boot 60 'ptvisor: returning to the firmware' || true
    has_text 'ptvisor: guest \ptvisor\vmlinuz.efi: '
    lacks 'vmlinuz.efi: Not Found'
    lacks 'starting guest'
    has_line 'ptvisor: returning to the firmware in 5 seconds'
    ;;
no-vmm-elf)
    cp boot/ptvisor.cfg "$cfg"
    mkesp "$cfg"
    boot 60 'ptvisor: guest ' || true
    has_line "$no_vmx"
    lacks 'vmm.elf'
    before "$no_vmx" 'ptvisor: guest \ptvisor\vmlinuz.efi: Not Found'
    ;;
halt)
    need_guest
    sed 's/^on_no_vmx = boot/on_no_vmx = halt/' boot/ptvisor.cfg >"$cfg"
    mkesp "$cfg" with-kernel
    # the guest must never start: run until the timeout, a few seconds past the halt line
    if boot 20 'ptvisor: starting guest|ptvisor: guest '; then
        echo "FAIL: the loader went on after on_no_vmx = halt"
        fails=$((fails + 1))
    fi
    has_line 'ptvisor: no VMX: CPUID.1:ECX[5]=0 (VMX disabled in firmware setup, or an emulator without VMX) -- on_no_vmx = halt: stopping here'
    has_line 'ptvisor: halted (on_no_vmx = halt); power off or reset the machine'
    lacks 'starting guest'
    ;;
*)
    echo "unknown case $case_"
    exit 2
    ;;
esac
[ "$fails" -eq 0 ] && { echo "PASS $case_"; exit 0; }
echo "FAIL $case_: $fails check(s)"
exit 1
