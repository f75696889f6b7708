# Sourced by the log-checking scripts: check DESCRIPTION EXTENDED-REGEX looks for a line of
# $serial (CRs dropped) and says "ok" or "FAIL", setting fail=1 on a miss.
fail=0
check() { # check DESCRIPTION extended-regex
    if tr -d '\r' <"$serial" | grep -aqE -- "$2"; then
        echo "  ok   $1"
    else
        echo "  FAIL $1: no line matching '$2'"
        fail=1
    fi
}
