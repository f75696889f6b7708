#!/usr/bin/env bash
# The software tracer under the VMM in Bochs (real VMX, EPT, MTF),
# one boot: loader -> VMM -> trace.efi (tests/guest/trace*.c) as the guest.
#
#   tests/system/bochs-trace.sh BUILD_DIR
#
# Verdict: tests/guest/check-trace-log.sh (every in-guest check PASS, and the
# host decode of the printed trace, build/host/trace_check on libipt, equals the
# guest's own single-step reference instruction by instruction).  Exit 77 (SKIP)
# only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-90}
# trace.efi ends with a triple fault: the crash dump is the last thing in the log
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned'
export CPUS=1
# a host on the other end of the serial line asks for a dump (ESC [9788~) when trace.efi waits
export SERIAL_SEND_ON='TRACE-WAIT-INPUT' SERIAL_SEND='\033[9788~'

. "$here/tests/system/guest-boot.sh"
# Ice Lake client: a second CPU model besides the Skylake-X of the other steps. (Bochs 3.0
# panics in OVMF with tigerlake and sapphire_rapids: "PAE: asked to set dirty on paging leaf
# entry with R/W bit clear"; Bochs 2.7 never delivers MTF on any model.)
export BOCHS_MODEL=${BOCHS_MODEL:-corei7_icelake_u}
guest_boot "$build" trace "$here/tests/guest/trace.cfg" "$build/tests/guest/trace.efi" \
    "$TIMEOUT" "$STOP_RE" || exit $?
sleep 1 # let Bochs flush the lines after the stop mark
"$here/tests/guest/check-trace-log.sh" "$serial"
