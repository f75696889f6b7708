#!/usr/bin/env bash
# Refuse a vmm.elf the loader could not load safely: W+X segments, relocations
# other than R_X86_64_RELATIVE, or an interpreter.
set -eu
elf=$1
if readelf -lW "$elf" | awk '$1=="LOAD" && $7 ~ /W/ && $7 ~ /E/ {bad=1} END {exit !bad}'; then
    echo "check-vmm-elf: $elf has a writable and executable segment" >&2; exit 1
fi
other=$(readelf -rW "$elf" | awk '/R_X86_64_/ && $3 != "R_X86_64_RELATIVE" {print $3}' | sort -u)
if [ -n "$other" ]; then
    echo "check-vmm-elf: $elf needs relocations the loader does not apply: $other" >&2; exit 1
fi
if readelf -lW "$elf" | grep -q INTERP; then
    echo "check-vmm-elf: $elf has an interpreter" >&2; exit 1
fi
