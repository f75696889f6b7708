#!/usr/bin/env bash
# Where one VM exit's VMM instructions go, per exit kind and per function: one boot of
# exitcost-trace.efi (tests/guest/exitcost.c built with EXITCOST_TRACE) under the VMM in Debian's
# Bochs 2.7, whose debugger traces every instruction.  The guest runs CPUID, VMCALL VERSION,
# RDMSR IA32_APIC_BASE and IN from the UART's LCR once each after a magic breakpoint
# (XCHG BX, BX); the debugger then traces STEPS instructions, guest and VMM alike.
#
#   tools/exit-profile.sh BUILD_DIR [OUT_DIR]     (make exit-profile)
#
# Prints, per exit: the guest instruction that exited, the VMM instructions from the exit to the
# VMRESUME (the same count as bench-exits' "VMM instructions per exit", VMRESUME included), how
# many are VMREAD/VMWRITE/RDMSR/WRMSR, and the count per function of vmm.debug.elf in the order
# they ran.  The VMM's load address is found from its first instruction after an exit, which is
# vmx_exit_stub's.  Exit 1 when the trace has no exit (a boot that did not reach the guest).
# INLINE=1 adds, per exit, the count per innermost source function (inlined ones included, from
# vmm.debug.elf's DWARF through addr2line): where vmx_loop's instructions go.
set -u
build=${1:?usage: tools/exit-profile.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/exit-profile}
here=$(cd "$(dirname "$0")/.." && pwd)
efi=$build/tests/guest/exitcost-trace.efi
elf=$build/vmm/vmm.debug.elf
for f in "$build/boot/BOOTX64.EFI" "$build/vmm/vmm.elf" "$elf" "$efi"; do
    [ -f "$f" ] || { echo "exit-profile: $f not built"; exit 77; }
done
[ -x /usr/bin/bochs ] && /usr/bin/bochs --help 2>&1 | grep -q -- '-rc filename' ||
    { echo "exit-profile: needs Debian's Bochs (/usr/bin/bochs, built with its debugger)"; exit 77; }
mkdir -p "$out"
. "$here/tests/system/emu-slot.sh"
LOADER=$build/boot/BOOTX64.EFI VMM=$build/vmm/vmm.elf CYL=40 \
    "$here/tools/mkimage.sh" "$out/x.img" "$here/tests/guest/exitcost.cfg" "$efi" - >/dev/null || exit 1
cyl=$(($(stat -c %s "$out/x.img") / 516096))
[ -f "$out/ovmf2m.fd" ] || cat /usr/share/OVMF/OVMF_VARS.fd /usr/share/OVMF/OVMF_CODE.fd >"$out/ovmf2m.fd"
# the microcode revision as tests/system/bochs.sh gives it
printf '0x08b 0 %08x 00000000 00000000 00000000 ffffffff ffffffff\n' $((0x2007006)) >"$out/msrs"
cat >"$out/bochsrc" <<RC
megs: 512
romimage: file=$out/ovmf2m.fd, address=0xffe00000
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
cpu: model=corei7_skylake_x, count=1, ips=50000000, reset_on_triple_fault=0, msrs="$out/msrs"
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=disk, path=$out/x.img, mode=flat, cylinders=$cyl, heads=16, spt=63
boot: disk
clock: sync=none, time0=local
com1: enabled=1, mode=file, dev=$out/serial.log
display_library: rfb, options="timeout=0"
log: $out/bochs.log
panic: action=report
error: action=report
magic_break: enabled=1
RC
printf 'c\ntrace on\ns %s\nquit\n' "${STEPS:-3000}" >"$out/cmds"
rm -f "$out/x.img.lock"
timeout "${TIMEOUT:-300}" /usr/bin/bochs -q -f "$out/bochsrc" -rc "$out/cmds" </dev/null >"$out/trace.txt" 2>&1
# one line per traced instruction: "(0).[tick] [phys] SEL:LINEAR (unk. ctxt): insn ; bytes"
nm -n "$elf" | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' >"$out/syms"
awk -v syms="$out/syms" '
function hex(s,   i, c, v) { v = 0; s = tolower(s)
    for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
    return v }
function fn(off,   lo, hi, mid) { lo = 1; hi = n
    if (off < addr[1]) return "?"
    while (lo < hi) { mid = int((lo + hi + 1) / 2); if (addr[mid] <= off) lo = mid; else hi = mid - 1 }
    return name[lo] }
function flush(   i) {
    if (!len) return
    nexit++
    printf "exit %d after guest \"%s\": %d VMM instructions, %d VMREAD/VMWRITE/RDMSR/WRMSR\n", nexit, why, len, nvm
    for (i = 1; i <= nf; i++) printf "  %5d %s\n", cnt[order[i]], order[i]
    for (i = 1; i <= nf; i++) delete cnt[order[i]]
    len = 0; nvm = 0; nf = 0 }
BEGIN { while ((getline l < syms) > 0) { split(l, a, " "); n++; addr[n] = hex(a[1]); name[n] = a[2]
            if (a[2] == "vmx_exit_stub") stub = addr[n] } }
/^\(0\)\.\[/ {
    if (!match($0, /\] [0-9a-f]+:[0-9a-f]+ \(unk\. ctxt\): /)) next
    split(substr($0, RSTART + 2, RLENGTH - 2), p, /[: ]/)
    sel = p[1]; lin = hex(p[2])
    insn = substr($0, RSTART + RLENGTH); sub(/ *;.*/, "", insn)
    if (sel != "0008") { flush(); last = insn; next }       # the guest runs in other selectors
    if (!len) { why = last; if (base == "") base = lin - stub }
    len++
    if (insn ~ /^(vmread|vmwrite|rdmsr|wrmsr)/) nvm++
    f = fn(lin - base)
    if (offs != "") printf "%d %x\n", nexit + 1, lin - base > offs
    if (!(f in cnt)) order[++nf] = f
    cnt[f]++ }
END { flush(); if (!nexit) { print "exit-profile: no VM exit in the trace"; exit 1 } }
' offs="$([ "${INLINE:-0}" = 1 ] && echo "$out/offsets")" "$out/trace.txt" || exit 1
[ "${INLINE:-0}" = 1 ] || exit 0
# innermost function of each instruction: addr2line -i prints the inline chain, innermost first
echo "per innermost source function (INLINE=1):"
cut -d' ' -f2 "$out/offsets" | sed 's/^/0x/' | addr2line -f -i -a -e "$elf" |
    awk '/^0x/ { getline f; print f }' | paste -d' ' "$out/offsets" - |
    awk '{ k = $1 " " $3; if (!(k in c)) o[++n] = k; c[k]++ }
         END { for (i = 1; i <= n; i++) { split(o[i], a, " ")
                   if (a[1] != last) { printf "exit %s\n", a[1]; last = a[1] }
                   printf "  %5d %s\n", c[o[i]], a[2] } }'
