#!/usr/bin/env bash
# Boot a disk image in Bochs + OVMF (2 MiB build) with real VMX + EPT.
#
#   tests/system/bochs.sh IMG CYLINDERS SERIAL_LOG TIMEOUT_S [STOP_REGEX] [CPU_MODEL]
#
# Serial (COM1) goes to SERIAL_LOG.  Bochs is stopped with SIGINT (clean) when
# STOP_REGEX appears on the serial log, or after TIMEOUT_S.  Exit status: 0 if
# STOP_REGEX was seen (or none was given), 124 on timeout.  Bochs' own log is
# SERIAL_LOG.bochs.  CPUS (environment, default 1) sets Bochs' `cpu: count=`, MEGS (default 512)
# its memory, BOCHS_ERROR (default report) what Bochs does with its error-level events (ignore:
# not logged; nested KVM makes ~10^6 of them, RDMSR of the DEBUGCTL Bochs lacks).
set -u
. "$(dirname "$0")/emu-slot.sh"
img=$1 cyl=$2 serial=$3 timeout=$4 stop=${5:-} model=${6:-corei7_skylake_x} cpus=${CPUS:-1}
dir=$(dirname "$serial")
mkdir -p "$dir"
fw="$dir/ovmf2m.fd"
if [ ! -f "$fw" ]; then
    cat /usr/share/OVMF/OVMF_VARS.fd /usr/share/OVMF/OVMF_CODE.fd >"$fw"
    [ "$(stat -c %s "$fw")" = 2097152 ] || { echo "bochs.sh: OVMF 2 MiB build not found"; exit 2; }
fi
# Which Bochs: BOCHS=3 (default) is Bochs 3.0 built from Debian's source by tools/bochs-build.sh
# (once, cached): it delivers the monitor trap flag and a guest's INIT-SIPI-SIPI under VMX,
# which Debian 12's Bochs 2.7 does not (TEST-VEHICLES.md). BOCHS=2.7 runs Debian 12's own
# /usr/bin/bochs, for comparison; BOCHS=/path/to/bochs any other build.
here=$(cd "$(dirname "$0")/../.." && pwd)
case "${BOCHS:-3}" in
2.7 | system) bochs=/usr/bin/bochs why="Debian 12's Bochs 2.7 (BOCHS=2.7: no MTF, INIT re-delivered)" ;;
3 | 3.0) bochs=$("$here/tools/bochs-build.sh") || { echo "bochs.sh: Bochs 3.0 could not be built (above); BOCHS=2.7 runs Debian 12's"; exit 2; }
    why="Bochs 3.0 from Debian's source ($bochs)" ;;
*) bochs=$BOCHS why="BOCHS=$BOCHS" ;;
esac
[ -x "$bochs" ] || { echo "bochs.sh: $bochs is not an executable Bochs"; exit 2; }
# Debian's 2.7 is built with its debugger (run it with -rc: continue, quit) and has no nogui;
# the 3.0 build has no debugger (it would cost speed on every instruction): there SIGINT is a
# Bochs panic, and `panic: action=fatal` makes it quit cleanly (logs flushed, files closed).
if "$bochs" --help 2>&1 | grep -q -- '-rc filename'; then dbg=1; else dbg=; fi
echo "bochs.sh: $why, $cpus CPU(s), model $model"
# SERIAL_SEND_ON=REGEX SERIAL_SEND=BYTES (printf %b escapes): the serial port becomes a socket
# (Bochs listens, this script reads it into the log) so that BYTES can be sent to the guest
# once REGEX appears in the log -- a host typing on the serial line.
# SERIAL_IN=FIFO: the same socket, and what is written into FIFO goes to the guest as typed
# (make shell: tools/shell.sh writes the user's keys there).
com="mode=file, dev=$serial"
if [ -n "${SERIAL_SEND_ON:-}${SERIAL_IN:-}" ]; then
    port=$((20000 + $$ % 20000))
    com="mode=socket-server, dev=127.0.0.1:$port"
fi
# The microcode revision the CPU reports (IA32_BIOS_SIGN_ID[63:32]): Bochs implements no such MSR
# and reads 0, which Linux takes for pre-2018 microcode and, on bare metal only, disables the
# TSC-deadline timer of the Skylake-X it emulates (erratum; ptvisor's VMM hides that timer where
# the same rule holds, vmm/emul/guest_policy.c).  0x2007006 is a released Skylake-X stepping 4
# revision, so the guest keeps the timer bare and under the VMM alike (docs/ARCHITECTURE.md
# section 2.4, the 2-CPU boot figure).  BOCHS_UCODE=0 shows the erratum path.  Writes are ignored
# (the write of 0 before reading it, SDM Vol. 3A 10.11.7, leaves it).
printf '0x08b 0 %08x 00000000 00000000 00000000 ffffffff ffffffff\n' "$((${BOCHS_UCODE:-0x2007006}))" \
    >"$serial.msrs"
rc="$serial.bochsrc"
cat >"$rc" <<RC
megs: ${MEGS:-512}
romimage: file=$fw, address=0xffe00000
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
cpu: model=$model, count=$cpus, ips=${BOCHS_IPS:-50000000}, reset_on_triple_fault=0, msrs="$serial.msrs"
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=disk, path=$img, mode=flat, cylinders=$cyl, heads=16, spt=63
boot: disk
clock: sync=none, time0=local
com1: enabled=1, $com
$([ -n "$dbg" ] && echo 'display_library: rfb, options="timeout=0"' || echo 'display_library: nogui')
log: $serial.bochs
$([ -n "$dbg" ] && echo 'panic: action=report' || echo 'panic: action=fatal')
error: action=${BOCHS_ERROR:-report}
port_e9_hack: enabled=1
RC
printf 'c\nquit\n' >"$serial.cont"
rm -f "$img.lock" "$serial"
: >"$serial"
"$bochs" -q -f "$rc" ${dbg:+-rc "$serial.cont"} </dev/null >"$serial.stdout" 2>&1 &
pid=$!
sent=
if [ -n "${SERIAL_SEND_ON:-}${SERIAL_IN:-}" ]; then
    for _ in $(seq 1 60); do # Bochs waits for its one client before it runs
        { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null && break
        sleep 0.5
    done
    if ! { true >&3; } 2>/dev/null; then
        echo "bochs.sh: no connection to Bochs' serial socket on port $port"
        kill -KILL $pid 2>/dev/null
        exit 2
    fi
    cat <&3 >>"$serial" &
    reader=$!
    if [ -n "${SERIAL_IN:-}" ]; then
        cat "$SERIAL_IN" >&3 &
        writer=$!
    fi
fi
deadline=$(( $(date +%s) + timeout ))
result=124
while kill -0 $pid 2>/dev/null; do
    if [ -n "$stop" ] && grep -aqE "$stop" "$serial" 2>/dev/null; then result=0; break; fi
    if [ -n "${SERIAL_SEND_ON:-}" ] && [ -z "$sent" ] && grep -aqE "$SERIAL_SEND_ON" "$serial"; then
        printf '%b' "$SERIAL_SEND" >&3
        sent=1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then break; fi
    sleep 1
done
if kill -0 $pid 2>/dev/null; then
    kill -INT $pid 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 $pid 2>/dev/null || break; sleep 1; done
    kill -KILL $pid 2>/dev/null
fi
wait $pid 2>/dev/null
if [ -n "${reader:-}" ]; then
    sleep 0.5
    kill $reader ${writer:-} 2>/dev/null
    exec 3>&-
fi
rm -f "$img.lock"
if [ -z "$stop" ]; then result=0; elif grep -aqE "$stop" "$serial"; then result=0; fi
exit $result
