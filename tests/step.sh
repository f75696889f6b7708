#!/usr/bin/env bash
# Run one test step and record its verdict.
#   tests/step.sh RESULTS_DIR NAME COMMAND [ARGS...]
# Exit 0 -> PASS; exit 77 -> SKIP (the command printed the reason as its
# last line); anything else -> FAIL.  The full output goes to RESULTS_DIR/NAME.log
# and, on failure, its tail is shown.  Always exits 0 so `make -k` goes on.
set -u
dir=$1 name=$2; shift 2
mkdir -p "$dir"
log="$dir/$(echo "$name" | tr '/:' '__').log"
start=$(date +%s)
"$@" >"$log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
case $rc in
0)  verdict=PASS ;;
77) verdict=SKIP ;;
*)  verdict=FAIL ;;
esac
reason=""
[ "$verdict" = SKIP ] && reason=" ($(tail -n 1 "$log"))"
printf '%s %s%s\n' "$verdict" "$name" "$reason" >>"$dir/verdicts"
printf '  %-4s %-40s %4ss%s\n' "$verdict" "$name" "$secs" "$reason"
if [ "$verdict" = FAIL ]; then
    echo "---- last lines of $log ----"
    tail -n 40 "$log"
    echo "----"
fi
exit 0
