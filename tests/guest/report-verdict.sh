# Sourced by the serial-log verdicts of the in-guest suites (check-attack-log.sh,
# check-smp-log.sh): the common part of reading libtest's report lines.
#
#   report_read SERIAL NAME     $report (report lines), $clean (serial log without
#                               escapes / CRs); prints "== report lines of NAME"
#   report_counts MARKER_RE     p, f, s (PASS / FAIL / SKIP lines), n (lines matching
#                               MARKER_RE, e.g. '^INFO: check [0-9]*:'); fails when the
#                               SUMMARY is missing (naming the marker the boot ended in,
#                               with the VMM's last lines), disagrees with the lines,
#                               or FAIL lines exist
# The caller defines fail() and status, and prints $report itself (filtered or not).
report_read() {
    report=$(mktemp) clean=$(mktemp)
    trap 'rm -f "$report" "$clean"' EXIT
    "$(dirname "${BASH_SOURCE[0]}")/parse-report.sh" "$1" >"$report"
    sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\r//g' "$1" >"$clean"
    echo "== report lines of $2"
}

report_counts() {
    local marker=$1 summary last
    p=$(grep -c '^PASS: ' "$report"); f=$(grep -c '^FAIL: ' "$report"); s=$(grep -c '^SKIP: ' "$report")
    n=$(grep -c "$marker" "$report")
    summary=$(grep '^SUMMARY: ' "$report" | tail -n 1)
    if [ -z "$summary" ]; then
        last=$(grep "$marker" "$report" | tail -n 1)
        fail "no SUMMARY line: the boot ended during '${last#INFO: }'; the VMM's last lines:"
        grep -aE '^\[cpu[0-9]+ ' "$clean" | tail -n 15 | sed 's/^/    /'
    elif [ "$summary" != "SUMMARY: $((p + f)) tests, $f unexpected failures, $s skipped" ]; then
        fail "'$summary' disagrees with the $p PASS / $f FAIL / $s SKIP lines seen"
    fi
    [ "$f" = 0 ] || fail "$f check(s) failed inside the guest (FAIL lines above)"
}
