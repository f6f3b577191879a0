#!/usr/bin/env bash
# Builds DiFX's software correlator mpifxcorr (and only what it links) from the tarball in
# ../shared/peers (or $EVLBI_PEERS) into ${EVLBI_CACHE:-~/.cache/evlbi}/difx-<commit>/, once:
# the DiFX tests (crates/cli/tests/difx_cli.rs) and bench/difx_network.sh find it with
# scripts/difx-path. Idempotent; says "skipped" (exit 0) when it cannot be built, and those tests
# then print SKIPPED. Called by scripts/setup.sh.
#
# It builds the libraries mpifxcorr links (difxmessage, vdifio, codifio, mark5access, …), each
# installed before the next is configured (their configure scripts call
# PKG_CHECK_MODULES without a fallback), only their library directories, and only the mpifxcorr
# program: about 4 minutes on 2 cores. FFTW instead of Intel IPP (--disable-ipp); Debian's
# OpenMPI.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[difx]\033[0m %s\n' "$*" >&2; }

cache=${EVLBI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evlbi}
tarball=$(ls "${EVLBI_PEERS:-../shared/peers}"/difx-*.tar.gz 2>/dev/null | head -n 1 || true)
if [[ -z $tarball ]]; then
    if built=$(scripts/difx-path 2>/dev/null); then
        say "no tarball in ${EVLBI_PEERS:-../shared/peers}; using the build already made: $built"
    else
        say "skipped: no difx-*.tar.gz in ${EVLBI_PEERS:-../shared/peers}: the DiFX tests will be skipped"
    fi
    exit 0
fi
# difx-902730147-subset.tar.gz -> difx-902730147
name=$(basename "$tarball" .tar.gz)
name=${name%-subset}
prefix=$cache/$name
if [[ -x $prefix/bin/mpifxcorr ]]; then
    exit 0
fi

# Debian packages: the autotools (the tarball has no generated configure scripts), the MPI C++
# compiler and runner, FFTW (double and single precision; mpifxcorr without IPP wants both).
pkgs=(autoconf automake libtool pkg-config make g++ libfftw3-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        say "installing ${missing[*]}"
        if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${missing[@]}") >&2; then
            say "skipped: could not install ${missing[*]}: the DiFX tests will be skipped"
            exit 0
        fi
    else
        say "skipped: missing Debian packages ${missing[*]} (run as root or install them): the DiFX tests will be skipped"
        exit 0
    fi
fi

say "building mpifxcorr of $name into $prefix (once; about 4 minutes on 2 cores)"
log=$prefix/build.log
rm -rf "$prefix" && mkdir -p "$prefix/src"
tar xzf "$tarball" -C "$prefix/src"
src=$(find "$prefix/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
jobs=$(nproc)

# lib DIR SUBDIR...: configure a library, build and install its library directories, then its
# headers and .pc files (the top directory's install-data), not its utilities, examples or docs.
lib() {
    local dir=$1 sub
    shift
    (cd "$src/libraries/$dir" && autoreconf -fi && ./configure --prefix="$prefix" --disable-static &&
        for sub in "$@"; do make -j"$jobs" -C "$sub" install || exit 1; done && make install-data-am)
}
if (lib difxmessage difxmessage mark5ipc && lib vdifio src && lib codifio src &&
    lib mark5access mark5access &&
    cd "$src/mpifxcorr" && autoreconf -fi &&
    CXX=mpicxx LDFLAGS="-Wl,--disable-new-dtags,-rpath,$prefix/lib" \
        ./configure --prefix="$prefix" --disable-ipp &&
    make -j"$jobs" -C src mpifxcorr) >"$log.tmp" 2>&1; then
    mkdir -p "$prefix/bin"
    cp "$src/mpifxcorr/src/mpifxcorr" "$prefix/bin/mpifxcorr.tmp"
    mv "$log.tmp" "$log"
    rm -rf "$prefix/src"
    # Last, so an interrupted build is never taken for a finished one.
    mv "$prefix/bin/mpifxcorr.tmp" "$prefix/bin/mpifxcorr"
    say "built $prefix/bin/mpifxcorr"
else
    mv "$log.tmp" "$log"
    say "skipped: the DiFX build failed (log: $log): the DiFX tests will be skipped"
fi
