#!/usr/bin/env bash
# guest:user-files: the host side of putting your own programs into the guest, without a boot.
#
#   tests/system/user-files-host.sh OUTDIR PTT SERIAL_VIEW
#
#   - guest/user-files.sh on a dynamic program with a library of its own (found through its
#     $ORIGIN RUNPATH): the files it copies are exactly what ldd lists (and the program), at the
#     same paths; the library's directory is in the guest's LD_LIBRARY_PATH; the same for a
#     program with many libraries (perf)
#   - its one-line errors: a path that does not exist, a library that cannot be found, a 32-bit
#     ELF file, a file that would replace one of the image's own (guest/mkinitrd.sh)
#   - tools/elf-bases.sh on a dump directory made here: a library whose pages are among the
#     snapshots is placed at its base, a PIE program at its own, a fixed-address one as it is
#   - tools/serial-view.c drops frame lines and keeps everything else, prompt included
set -u
mkdir -p "$1" && out=$(cd "$1" && pwd) ptt=$2 view=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out" && mkdir -p "$out"
fail=0
ok() { echo "  ok   $*"; }
bad() { echo "  FAIL $*"; fail=1; }
cc=${CC:-cc}

# ---- a program and a library of its own
p=$out/prog
mkdir -p "$p/lib"
printf 'int demo_add(int a, int b) { return a + b; }\n' >"$p/demo.c"
printf '#include <stdio.h>\nint demo_add(int, int);\nint main(void) { printf("%%d\\n", demo_add(1, 2)); return 0; }\n' >"$p/main.c"
$cc -shared -fPIC -o "$p/lib/libdemo.so" "$p/demo.c" &&
    $cc -o "$p/app" "$p/main.c" -L"$p/lib" -ldemo -Wl,-rpath,'$ORIGIN/lib' &&
    $cc -o "$p/app-norpath" "$p/main.c" -L"$p/lib" -ldemo || { echo "user-files: cannot build the test programs"; exit 1; }
[ "$("$p/app")" = 3 ] || bad "the test program does not run on the host"

# same_as_ldd NAME PROGRAM [MORE-SPECS]: the manifest's host files == ldd's (real paths)
same_as_ldd() {
    local name=$1 prog=$2 root
    root=$out/root-$name
    shift 2
    if ! "$here/guest/user-files.sh" "$root" "$root.map" "$prog" "$@" 2>"$root.err"; then
        bad "$name: user-files.sh failed: $(cat "$root.err")"
        return
    fi
    ldd "$prog" | grep -o '/[^ ]*' | xargs -r -n1 readlink -f | sort -u >"$root.ldd"
    readlink -f "$prog" >>"$root.ldd"
    sort -u -o "$root.ldd" "$root.ldd"
    cut -f2 "$root.map" | sort -u >"$root.got"
    if cmp -s "$root.ldd" "$root.got"; then
        ok "$name: the files copied are ldd's $(($(wc -l <"$root.ldd") - 1)) libraries and loader, and the program"
    else
        bad "$name: files copied differ from ldd: $(diff "$root.ldd" "$root.got" | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
    fi
    # at the paths ld.so will look for them: the interpreter's own path, each library's where found
    local interp
    interp=$(readelf -lW "$prog" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]$/\1/p')
    if [ -n "$interp" ] && ! cmp -s "$root$interp" "$interp"; then
        bad "$name: the loader is not at $interp in the guest tree"
    fi
}
same_as_ldd app "$p/app"
if [ -f "$out/root-app/root/app" ] && grep -qx "export LD_LIBRARY_PATH=$p/lib" "$out/root-app/etc/ptvisor/env" &&
    cmp -s "$out/root-app$p/lib/libdemo.so" "$p/lib/libdemo.so"; then
    ok "app: program at /root/app, its own library at $p/lib/libdemo.so, that directory in LD_LIBRARY_PATH"
else
    bad "app: /root/app, $p/lib/libdemo.so or LD_LIBRARY_PATH missing ($(cat "$out/root-app/etc/ptvisor/env" 2>/dev/null))"
fi
command -v perf >/dev/null && same_as_ldd perf "$(readlink -f "$(command -v perf)")"
# HOST:/GUEST-PATH and a directory
mkdir -p "$p/data/sub" && echo x >"$p/data/sub/f.txt"
if "$here/guest/user-files.sh" "$out/root-spec" "$out/root-spec.map" "$p/app:/opt/app" "$p/data" 2>"$out/spec.err" &&
    [ -x "$out/root-spec/opt/app" ] && [ -f "$out/root-spec/root/data/sub/f.txt" ]; then
    ok "HOST:/GUEST-PATH puts a file there; a directory is copied whole under /root"
else
    bad "HOST:/GUEST-PATH or a directory: $(cat "$out/spec.err")"
fi

# ---- one-line errors
# expect_error NAME REGEX COMMAND...: exit 1 and one line matching REGEX on stderr
expect_error() {
    local name=$1 re=$2 rc
    shift 2
    "$@" >"$out/err.out" 2>"$out/err.txt"
    rc=$?
    if [ $rc != 0 ] && [ "$(wc -l <"$out/err.txt")" = 1 ] && grep -qE "$re" "$out/err.txt"; then
        ok "$name: $(cat "$out/err.txt")"
    else
        bad "$name: exit $rc, stderr: $(head -n 3 "$out/err.txt" | tr '\n' '|')"
    fi
}
expect_error "a path that does not exist" "^guest files: $p/nothing: no such file or directory$" \
    "$here/guest/user-files.sh" "$out/r1" "$out/r1.map" "$p/nothing"
expect_error "a library that is not found" "^guest files: $p/app-norpath needs libdemo\\.so, which is not on this host" \
    env -u LD_LIBRARY_PATH "$here/guest/user-files.sh" "$out/r2" "$out/r2.map" "$p/app-norpath"
# a 32-bit ELF header is enough to be refused
printf '\177ELF\001\001\001\000\000\000\000\000\000\000\000\000\002\000\003\000\001\000\000\000' >"$p/elf32"
head -c 64 /dev/zero >>"$p/elf32"
expect_error "a 32-bit ELF file" "^guest files: $p/elf32: a 32-bit ELF file" \
    "$here/guest/user-files.sh" "$out/r3" "$out/r3.map" "$p/elf32"
"$here/guest/user-files.sh" "$out/r4" "$out/r4.map" "$p/app:/bin/sh" 2>/dev/null
: >"$out/init"
expect_error "a file in the place of one of the image's own" '^mkinitrd: /bin/sh is the guest.s own' \
    env EXTRA_ROOT="$out/r4" "$here/guest/mkinitrd.sh" "$out/r4.img" "$out/init" "$p/app"

# ---- elf-bases: a dump directory whose snapshots hold two pages of libc and one of the program
d=$out/dump
mkdir -p "$d/snap"
libc=$(ldd "$p/app" | sed -n 's/.*libc\.so\.6 => \([^ ]*\).*/\1/p')
lbias=$((0x7f1234000000)) pbias=$((0x555555554000))
# the first page of each one's executable segment, at its address
first_x() { # FILE -> "FILE-OFFSET VADDR" of the first page of its first executable PT_LOAD
    readelf -lW "$1" | awk '$1 == "LOAD" { f = ""; for (i = 7; i < NF; i++) f = f $i; if (f ~ /E/) { print $2, $3; exit } }'
}
read -r loff lva <<<"$(first_x "$libc")"
read -r poff pva <<<"$(first_x "$p/app")"
dd if="$libc" of="$d/snap/a.bin" bs=4096 skip=$(((loff + 4096) / 4096)) count=2 status=none
dd if="$p/app" of="$d/snap/b.bin" bs=4096 skip=$((poff / 4096)) count=1 status=none
printf '0x%x 8192 0x1000 snap/a.bin\n0x%x 4096 0x1000 snap/b.bin\n' \
    $((lbias + (lva & ~4095) + 4096)) $((pbias + (pva & ~4095))) >"$d/snapshots"
$cc -O1 -no-pie -o "$p/fixed" "$p/main.c" -L"$p/lib" -ldemo 2>/dev/null
got=$("$here/tools/elf-bases.sh" "$d" "$libc" "$p/app" "$p/lib/libdemo.so" "$p/fixed" | sort)
want=$(printf '%s\n' "$libc@$(printf %x $lbias)" "$p/app@$(printf %x $pbias)" "$p/fixed" | sort)
if [ "$got" = "$want" ]; then
    ok "elf-bases: libc and a PIE program placed by their code pages, a fixed-address program as it is, an absent library left out"
else
    bad "elf-bases: got '$(echo $got)', want '$(echo $want)'"
fi

# ---- serial-view
printf 'boot line\r\n@PTV1 B 1 0 1/1 x\r\n@PTV1 D 1 0 y\r\n@PTV2 kept\r\nguest:~# ' | "$view" >"$out/view.out"
if [ "$(cat "$out/view.out")" = "$(printf 'boot line\r\n@PTV2 kept\r\nguest:~# ')" ]; then
    ok "serial-view: frame lines dropped, other lines and an open prompt line kept"
else
    bad "serial-view: $(od -c "$out/view.out" | head -n 3)"
fi
[ -x "$ptt" ] || bad "no ptvisor-trace at $ptt"
exit $fail
