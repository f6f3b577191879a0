#!/usr/bin/env bash
# etransfer (JIVE's `etd` daemon + `etc` client, disk-to-disk over TCP and UDT), the transfer peer
# of bench/transfer.sh: built once from the tarball in ../shared/peers (or $EVLBI_PEERS) into the
# cache outside the checkout (as scripts/setup.sh does for jive5ab). Idempotent; says "skipped"
# when the tarball or g++ is missing. scripts/etransfer-path prints the directory of the binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
cache=${EVLBI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evlbi}
tarball=$(ls "${EVLBI_PEERS:-../shared/peers}"/etransfer-*.tar.gz 2>/dev/null | head -n 1 || true)
if [[ -z $tarball ]]; then
    if dir=$(scripts/etransfer-path 2>/dev/null); then
        say "etransfer: no tarball in ${EVLBI_PEERS:-../shared/peers}; using the build already made: $dir"
    else
        say "etransfer: no tarball in ${EVLBI_PEERS:-../shared/peers}: the etransfer bench tools will be skipped"
    fi
    exit 0
fi
if ! command -v g++ >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    say "etransfer: g++ or make missing: the etransfer bench tools will be skipped"
    exit 0
fi
name=$(basename "$tarball" .tar.gz)
dir=$cache/$name
[[ -x $dir/bin/etd && -x $dir/bin/etc ]] && exit 0
say "building $name into $dir (once; about 2 minutes of CPU)"
rm -rf "$dir/src" && mkdir -p "$dir/src"
tar xzf "$tarball" -C "$dir/src"
src=$(find "$dir/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
# Debian 12's g++ 12: its README's own fix (the headers disagree on _GNU_SOURCE otherwise).
sed -i 's/ -D_GNU_SOURCE -U_GNU_SOURCE//' "$src/Makefile"
if (cd "$src" && make -j"$(nproc)" >"$dir/build.log" 2>&1); then
    mkdir -p "$dir/bin"
    for b in etd etc; do
        cp "$src"/*-native-opt/"$b" "$dir/bin/$b.tmp" && mv "$dir/bin/$b.tmp" "$dir/bin/$b"
    done
    rm -rf "$src"
else
    say "etransfer build failed (log: $dir/build.log): the etransfer bench tools will be skipped"
fi
