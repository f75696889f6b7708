#!/usr/bin/env bash
# Extract the libtest report lines (libtest.h) from a serial log: firmware
# terminal escape sequences and CRs removed, one PASS/FAIL/SKIP/INFO/SUMMARY
# line per output line, anything else dropped.
#   tests/guest/parse-report.sh SERIAL_LOG
set -u
sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$1" |
    grep -aoE '(PASS|FAIL|SKIP|INFO|SUMMARY): .*$'
