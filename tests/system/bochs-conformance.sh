#!/usr/bin/env bash
# In-guest conformance tests under the VMM in Bochs (real VMX + EPT), one boot:
# loader -> VMM blue-pills OVMF -> conformance.efi (tests/guest/) runs as the
# guest, prints its PASS/FAIL lines and SUMMARY, then forces a triple fault the
# VMM must report with a dump.
#
#   tests/system/bochs-conformance.sh BUILD_DIR
#
# The verdict comes from tests/guest/check-conformance-log.sh: every report line
# PASS, the SUMMARY agrees and says 0 unexpected failures, and after it the VMM
# printed a line matching `triple fault` and finished its crash dump (no hang).
# Exit 77 (SKIP) only when the loader or the VMM has not been built.
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
TIMEOUT=${TIMEOUT:-180}
# Stop Bochs at the end of the VMM's crash dump, or early when the run cannot get
# there (VMM panic, guest returned to the loader); check-conformance-log.sh judges.
STOP_RE='crash dump complete|VMM halted|ptvisor: guest .* returned'

. "$here/tests/system/guest-boot.sh"
guest_boot "$build" conformance "$here/tests/guest/conformance.cfg" \
    "$build/tests/guest/conformance.efi" "$TIMEOUT" "$STOP_RE" || exit $?

"$here/tests/guest/check-conformance-log.sh" "$serial"
