#!/usr/bin/env bash
# Print the closing line of `make test` and fail if any step failed.
set -u
f="$1/verdicts"
[ -f "$f" ] || { echo "no test step ran"; echo "0 passed, 1 failed"; exit 1; }
p=$(grep -c '^PASS ' "$f"); x=$(grep -c '^FAIL ' "$f"); s=$(grep -c '^SKIP ' "$f")
echo
grep '^FAIL ' "$f" | sed 's/^/  /'
grep '^SKIP ' "$f" | sed 's/^/  /'
echo "$p passed, $x failed, $s skipped"
[ "$x" -eq 0 ]
