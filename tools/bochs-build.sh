#!/usr/bin/env bash
# Build Bochs 3.0 from Debian's own source package, once, into a cache.
#
#   tools/bochs-build.sh            build (or reuse) and print the path of the bochs binary
#   tools/bochs-build.sh --path     print the cached binary's path if it exists (exit 1 if not)
#   tools/bochs-build.sh --report   build (or reuse) and say which Bochs the Bochs steps run and why
#                                   (the `bochs:build` step of `make test`; SKIP under BOCHS=2.7)
#
# Why: Debian 12's Bochs 2.7 never delivers the monitor trap flag and re-delivers INIT to a VMX
# guest at every VM entry (TEST-VEHICLES.md); Bochs >= 2.8 fixes both. Debian 13 (trixie) ships
# bochs 3.0+dfsg-1, whose binaries need a newer libc, but whose source builds with Debian 12's
# toolchain and no extra -dev package.
#
# Where it comes from: the Debian mirror in this system's own apt configuration (the first
# `deb.debian.org`-style URI of /etc/apt/sources.list{,.d}), fetched with apt's own helper.
# The chain of trust: trixie's InRelease is checked with gpgv against Debian 12's archive keyring;
# the SHA-256 of main/source/Sources.xz comes from it; the SHA-256 of the two tarballs comes from
# that Sources index (and must also equal the ones pinned below). Nothing else is contacted.
#
# The cache: $PTV_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/ptvisor) /bochs-<version>-<key>,
# where <key> hashes the tarballs' SHA-256, the configure line and the patches (tools/bochs-patches),
# so a change of any builds anew and an unchanged one is reused (CI on a fresh machine builds it once per run).
set -eu
VERSION=3.0+dfsg-1
UPSTREAM=3.0+dfsg
SUITE=trixie
ORIG_SHA=78f6c73d4a6472d5130a87ab9dc306d02c7c71ed8e25b3a8ef642e2a7acd282b
DEB_SHA=c68fe1162aa485249467ec93707ccbf5d039b00d12815899fc2c819ec16d00df
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# Debian's own configure flags (debian/rules) minus the GUI toolkits (sdl2, x11, wx, term: they
# need -dev packages), plugins, pcidev, the debugger and the instrumentation hooks (both cost
# speed on every instruction) and the sound / NIC / USB devices no test boots with. Kept: VMX
# level 2 (EPT, VPID, unrestricted guest, MTF, preemption timer), x86-64, SMP, AVX / EVEX / AMX,
# CET, protection keys, rfb and nogui displays. (No idle hack: it needs the X11 or term GUI.)
# No show-ips: its SIGALRM handler writes the "ips =" log line through stdio every second, and
# one that lands while Bochs itself is writing to its log deadlocks it on the FILE lock (seen:
# two Bochs steps at once stuck in futex_wait, single-threaded, mid-boot).
CONFIGURE="--with-nogui --with-rfb --disable-docbook --disable-debugger --disable-plugins
 --enable-3dnow --enable-a20-pin --enable-all-optimizations --enable-amx --enable-avx
 --enable-cdrom --enable-cet --enable-cpu-level=6 --enable-disasm --enable-evex --enable-fpu
 --enable-pci --enable-repeat-speedups --enable-memtype
 --enable-protection-keys --enable-smp --enable-svm --enable-uintr --enable-vmx=2 --enable-x86-64
 --disable-show-ips"

cache=${PTV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ptvisor}
# tools/bochs-patches/*.patch: fixes of Bochs bugs the tests met, applied in name order (each
# says what it fixes and how it was found); their bytes are part of the cache key
here=$(cd "$(dirname "$0")" && pwd)
patches=$(ls "$here"/bochs-patches/*.patch 2>/dev/null | LC_ALL=C sort || true)
key=$( { printf '%s\n' "$ORIG_SHA" "$DEB_SHA" $CONFIGURE; [ -z "$patches" ] || cat $patches; } |
    sha256sum | cut -c1-12)
prefix="$cache/bochs-$VERSION-$key"
bin="$prefix/bin/bochs"

if [ "${1:-}" = --path ]; then
    [ -x "$bin" ] && [ -f "$prefix/.complete" ] && { echo "$bin"; exit 0; }
    exit 1
fi
if [ "${1:-}" = --report ]; then
    case "${BOCHS:-3}" in
    3 | 3.0) ;;
    *) echo "BOCHS=$BOCHS: the Bochs steps run that Bochs, not $VERSION (no MTF, INIT re-delivered in 2.7)"
       exit 77 ;;
    esac
    if [ -f "$prefix/.complete" ]; then
        echo "bochs $VERSION: cached at $bin (built $(stat -c %y "$prefix/.complete" | cut -d. -f1))"
    else
        t0=$(date +%s)
        "$0" >/dev/null || exit 1
        echo "bochs $VERSION: built from Debian's source in $(( $(date +%s) - t0 )) s: $bin"
    fi
    echo "every Bochs step runs it: it delivers MTF and a guest's INIT-SIPI-SIPI under VMX (Debian 12's 2.7 does not)"
    exit 0
fi
mkdir -p "$cache"
exec 8>"$cache/.bochs-build.lock"
flock 8 # two Bochs steps at once: one builds, the other waits and reuses
if [ -x "$bin" ] && [ -f "$prefix/.complete" ]; then
    echo "$bin"
    exit 0
fi

say() { echo "bochs-build: $*" >&2; }
die() { say "$*"; exit 1; }

mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '/^URIs:/ {print $2}' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" || $1 == "deb-src" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f"
    done
}
MIRROR=$(mirror | grep -E '/debian/?$' | grep -v security | head -1)
MIRROR=${MIRROR%/}
[ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt (sources.list / *.sources): cannot fetch bochs $VERSION"
command -v gpgv >/dev/null || die "gpgv missing (Debian package gpgv)"
[ -z "$patches" ] || command -v patch >/dev/null || die "patch missing (Debian package patch)"
[ -f "$KEYRING" ] || die "$KEYRING missing (Debian package debian-archive-keyring)"

work="$cache/bochs-src-$VERSION"
mkdir -p "$work"
fetch() { # URL FILE [SHA256]
    local url=$1 out=$2 sha=${3:-}
    [ -n "$sha" ] && [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --status && return 0
    rm -f "$out"
    say "fetching $url"
    if ! /usr/lib/apt/apt-helper download-file "$url" "$out" ${sha:+SHA256:$sha} >"$out.log" 2>&1; then
        die "download failed: $url ($(grep -aE 'Err|E:|404|Hash' "$out.log" | head -1))"
    fi
    [ -z "$sha" ] || echo "$sha  $out" | sha256sum -c --status || die "SHA-256 mismatch: $url"
}

cd "$work"
fetch "$MIRROR/dists/$SUITE/InRelease" InRelease
gpgv --keyring "$KEYRING" InRelease >gpgv.log 2>&1 ||
    die "$SUITE InRelease does not verify against $KEYRING: $(tail -1 gpgv.log)"
src_sha=$(awk '/^SHA256:/ {s=1; next} /^[A-Za-z]/ {s=0} s && $3 == "main/source/Sources.xz" {print $1}' InRelease)
[ -n "$src_sha" ] || die "$SUITE InRelease names no main/source/Sources.xz"
fetch "$MIRROR/dists/$SUITE/main/source/Sources.xz" Sources.xz "$src_sha"
xz -dc Sources.xz | awk -v v="$VERSION" '
    /^Package: / {p = ($2 == "bochs")} p && /^Version: / {ok = ($2 == v)}
    /^$/ {if (p && ok) {print blk; exit} blk = ""; p = ok = 0; next} {blk = blk $0 "\n"}' >bochs.stanza
[ -s bochs.stanza ] || die "$SUITE's Sources lists no bochs $VERSION (it lists: $(xz -dc Sources.xz | awk '/^Package: bochs$/ {p=1} p && /^Version:/ {print $2; p=0}' | tr '\n' ' '))"
dir=$(awk '/^Directory:/ {print $2}' bochs.stanza)
idx_sha() { awk -v f="$1" '/^Checksums-Sha256:/ {s=1; next} /^[A-Za-z]/ {s=0} s && $3 == f {print $1}' bochs.stanza; }
orig=bochs_$UPSTREAM.orig.tar.xz
deb=bochs_$VERSION.debian.tar.xz
[ "$(idx_sha $orig)" = "$ORIG_SHA" ] || die "$orig: Sources index says $(idx_sha $orig), pinned $ORIG_SHA"
[ "$(idx_sha $deb)" = "$DEB_SHA" ] || die "$deb: Sources index says $(idx_sha $deb), pinned $DEB_SHA"
fetch "$MIRROR/$dir/$orig" "$orig" "$ORIG_SHA"
fetch "$MIRROR/$dir/$deb" "$deb" "$DEB_SHA"

say "building bochs $VERSION into $prefix (once; a minute or a few)"
start=$(date +%s)
rm -rf src && mkdir src && tar -C src --strip-components=1 -xJf "$orig"
tar -C src -xJf "$deb" # debian/ is kept for reference (rules' flags); its patches touch
                        # only paths, docs and GUI defaults, none of which this build uses
for p in $patches; do
    patch -d src -p1 --forward --batch <"$p" >>patch.log 2>&1 || die "patch $(basename "$p") failed: $(tail -2 patch.log)"
done
(cd src && ./configure --prefix="$prefix" $CONFIGURE >configure.log 2>&1) ||
    die "configure failed: $(tail -3 src/configure.log)"
make -C src -j"$(nproc)" >build.log 2>&1 || die "build failed: $(tail -5 build.log)"
rm -rf "$prefix"
make -C src install >install.log 2>&1 || die "install failed: $(tail -3 install.log)"
touch "$prefix/.complete"
say "built in $(( $(date +%s) - start )) s"
echo "$bin"
