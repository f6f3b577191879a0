#!/usr/bin/env bash
# Builds what the SFXC interop tests use from the SFXC tarball in ../shared/peers (or
# $EVLBI_PEERS), into a cache outside the checkout (${EVLBI_CACHE:-~/.cache/evlbi}/sfxc-<ver>/):
#
#   bin/sfxc-mk5-harness   SFXC's own mk5:// reader (data_reader_mk5.cc, the reader factory),
#                          VDIF and Mark5B readers (vdif_reader.cc, mark5b_reader.cc) compiled with our main and a stub
#                          (tests/peers/sfxc/): it opens mk5://... exactly as SFXC's input node
#                          does and reports what SFXC's VDIF reader made of the stream.
#
# Idempotent: the sources are extracted once, the harness is rebuilt when tests/peers/sfxc/
# changes. Says "skipped" (exit 0) when the tarball or g++ is missing; scripts/sfxc-path then
# prints nothing and the tests that need it print SKIPPED.
#
#   scripts/build-sfxc.sh          build (or check) the harness
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[sfxc]\033[0m %s\n' "$*" >&2; }

cache=${EVLBI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evlbi}
tarball=$(ls "${EVLBI_PEERS:-../shared/peers}"/sfxc-*.tar.gz 2>/dev/null | head -n 1 || true)
if [[ -z $tarball ]]; then
    if built=$(scripts/sfxc-path 2>/dev/null) && [[ -n $built ]]; then
        say "no tarball in ${EVLBI_PEERS:-../shared/peers}; using the build already made: $built"
    else
        say "skipped: no sfxc-*.tar.gz in ${EVLBI_PEERS:-../shared/peers}: the SFXC tests will be skipped"
    fi
    exit 0
fi
if ! command -v g++ >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing g++"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++) >&2
    else
        say "skipped: g++ missing (run as root or install it): the SFXC tests will be skipped"
        exit 0
    fi
fi

name=$(basename "$tarball" .tar.gz)
dir=$cache/$name
src=$dir/src/$name/sfxc
if [[ ! -f $src/src/data_reader_mk5.cc ]]; then
    say "extracting $name into $dir/src"
    rm -rf "$dir/src" && mkdir -p "$dir/src"
    tar xzf "$tarball" -C "$dir/src"
    # g++ 12 refuses data_writer_socket.cc's comparison of the function `socket` with 0 where the
    # member `m_socket` is meant (a full SFXC build needs it; the harness does not compile it).
    sed -i 's/if (socket <= 0) return 0;/if (m_socket <= 0) return 0;/' "$src/src/data_writer_socket.cc"
fi

# The harness: rebuilt when our sources or the compiler change.
ours=tests/peers/sfxc
stamp=$( (cat "$ours"/*.cc; g++ --version | head -n 1) | sha256sum | cut -c1-16)
bin=$dir/bin/sfxc-mk5-harness
if [[ -x $bin && -f $dir/bin/harness.stamp && $(cat "$dir/bin/harness.stamp") == "$stamp" ]]; then
    say "harness up to date: $bin"
    exit 0
fi
say "building $bin from SFXC's reader sources (under a minute)"
build=$dir/harness-build
rm -rf "$build" && mkdir -p "$build/inc" "$dir/bin"
# SFXC's types.h includes "../config.h", which its configure writes; the reader needs nothing of it.
: >"$build/config.h"
sfxc_sources=(
    src/data_reader.cc src/data_reader_blocking.cc src/data_reader_factory.cc src/data_reader_file.cc
    src/data_reader_mk5.cc src/vdif_reader.cc src/mark5b_reader.cc src/input_data_format_reader.cc src/correlator_time.cc
    src/utils.cc lib/common/src/exception_common.cc lib/common/src/backtrace.cc lib/common/src/demangler.cc
    lib/common/src/mutex.cc lib/common/src/raiimutex.cc lib/common/src/condition.cc
)
includes=(-I"$build/inc" -I"$src/include" -I"$src/lib/common/src" -I"$src/lib/containers/src"
    -I"$src/lib/vex_parser/vex_parser/include" -I"$src/lib/jsoncpp/include")
objects=()
for f in "${sfxc_sources[@]}" "$PWD/$ours/stubs.cc" "$PWD/$ours/harness.cc"; do
    [[ $f == /* ]] || f=$src/$f
    o=$build/$(basename "$f" .cc).o
    if ! g++ -O2 -g -w -std=gnu++11 "${includes[@]}" -c "$f" -o "$o" 2>>"$build/build.log"; then
        say "skipped: compiling $f failed (log: $build/build.log): the SFXC tests will be skipped"
        exit 0
    fi
    objects+=("$o")
done
if ! g++ -o "$bin.tmp" "${objects[@]}" -lpthread 2>>"$build/build.log"; then
    say "skipped: linking the harness failed (log: $build/build.log): the SFXC tests will be skipped"
    exit 0
fi
mv "$bin.tmp" "$bin"
echo "$stamp" >"$dir/bin/harness.stamp"
say "built $bin"
