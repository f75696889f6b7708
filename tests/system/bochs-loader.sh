#!/usr/bin/env bash
# The loader's VMX-side failure paths in Bochs (real VMX, so the loader gets
# past its CPU check and reaches vmm.elf), one case per run:
#
#   tests/system/bochs-loader.sh CASE [BUILD_DIR]
#
#   vmm-missing  no \ptvisor\vmm.elf: "ptvisor: \ptvisor\vmm.elf: Not Found -- booting natively"
#   vmm-corrupt  vmm.elf is not an ELF: "ptvisor: \ptvisor\vmm.elf: not an ELF file -- booting natively"
#   vmm-returns  vmm.elf is a tiny static PIE whose entry returns 1 + 2 through two
#                relocated pointers (tests/fuzz/seeds/fuzz_elf/static-pie.elf): proves
#                allocation, relocation, handoff, TSS fix-up and the System V call, and
#                the naming of the status: PTV_ENTRY_VMX_LOCKED_OFF (3)
#
# Both then boot natively: no guest on the image, so the loader reports that and
# returns (no hang).  Needs only the loader.  Exit 0 PASS, else FAIL.
set -u
case_=$1 build=${2:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
loader=$build/boot/BOOTX64.EFI
work=$build/test/bochs-loader/$case_
mkdir -p "$work"
[ -f "$loader" ] || { echo "missing $loader"; exit 1; }

files=("$loader=\\EFI\\BOOT\\BOOTX64.EFI" "boot/ptvisor.cfg=\\ptvisor\\ptvisor.cfg")
case $case_ in
vmm-missing) want='ptvisor: \ptvisor\vmm.elf: Not Found -- booting natively' ;;
vmm-corrupt)
    files+=("boot/ptvisor.cfg=\\ptvisor\\vmm.elf")
    want='ptvisor: \ptvisor\vmm.elf: not an ELF file -- booting natively' ;;
vmm-returns)
    files+=("tests/fuzz/seeds/fuzz_elf/static-pie.elf=\\ptvisor\\vmm.elf")
    want="ptvisor: VMM entry returned PTV_ENTRY_VMX_LOCKED_OFF (3), details on the VMM's serial log -- booting natively" ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
tools/mkesp.sh "$work/esp.img" 40 "${files[@]}" || exit 1
tests/system/bochs.sh "$work/esp.img" 40 "$work/serial.log" 120 'ptvisor: returning to the firmware'
tr -d '\r' <"$work/serial.log" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' >"$work/clean.log"
grep -a 'ptvisor' "$work/clean.log"
fails=0
for line in 'ptvisor: VMX available: CPUID.1:ECX[5]=1, IA32_FEATURE_CONTROL=0x0 (unlocked: the VMM locks it)' \
    "$want" 'ptvisor: guest \ptvisor\vmlinuz.efi: Not Found' \
    'ptvisor: returning to the firmware in 5 seconds'; do
    if grep -aqFx -- "$line" "$work/clean.log"; then echo "ok: '$line'"; else
        echo "FAIL: no line '$line'"; fails=$((fails + 1)); fi
done
if [ "$case_" = vmm-returns ]; then
    for text in 'ptvisor: TR was 0: firmware GDT copied to ' 'ptvisor: calling the VMM entry at '; do
        if grep -aqF -- "$text" "$work/clean.log"; then echo "ok: '$text'"; else
            echo "FAIL: no '$text'"; fails=$((fails + 1)); fi
    done
elif grep -aqF 'calling the VMM' "$work/clean.log"; then
    echo "FAIL: the loader called a VMM it should have refused"; fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] && { echo "PASS $case_"; exit 0; }
echo "FAIL $case_: $fails check(s)"
exit 1
