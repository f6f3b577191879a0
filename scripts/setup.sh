#!/usr/bin/env bash
# Idempotent set-up for evlbi: checks the Rust toolchain, installs the Debian packages the
# tests use (when root and missing), makes the Python venv with baseband for the cross-checks,
# and builds the release binary at target/release/evlbi.
#
#   scripts/setup.sh            everything
#   scripts/setup.sh --build    only the release build (what the demo needs)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
    say "cargo not found: install Rust >= 1.87 (https://rustup.rs), then run this again"
    exit 1
fi

if [[ "${1:-}" != "--build" ]]; then
    # Debian packages: python3-venv for the cross-check venv; iproute2 for namespace tests;
    # fonts-dejavu-core for the text of PNG figures (evlbi report); chromium for the tests that
    # render the report page and the --metrics live page headless; prometheus for the test that
    # scrapes --metrics with a real Prometheus server (installed, never started as a service;
    # its promtool checks contrib/'s alert rules); strace for the test that holds a traced
    # `evlbi serve` session against the systemd unit's system-call filter.
    missing=()
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    [[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    if ((${#missing[@]})); then
        if [[ $(id -u) -eq 0 ]]; then
            say "installing ${missing[*]}"
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2
        else
            say "missing Debian packages: ${missing[*]} (run as root or install them)"
        fi
    fi
    # Prometheus only as a program for the test (it starts its own on 127.0.0.1): without the
    # node exporter it recommends, and where systemd started the packaged service, stopped again.
    if [[ ! -x /usr/bin/prometheus ]]; then
        if [[ $(id -u) -eq 0 ]]; then
            say "installing prometheus"
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) >&2
            if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
                systemctl disable --now prometheus >&2 || true
            fi
        else
            say "missing Debian package: prometheus (run as root or install it)"
        fi
    fi
    # Python venv with baseband, the independent VDIF implementation we cross-check against.
    if ! .venv/bin/python -c 'import baseband, pytest' >/dev/null 2>&1; then
        say "creating .venv with baseband and pytest"
        python3 -m venv .venv
        .venv/bin/pip install -q --disable-pip-version-check -r tests/crosscheck/requirements.txt >&2
    fi
fi

# jive5ab 3.1.0, the incumbent recorder, for the interop tests and the benches: built once from
# the tarball in ../shared/peers (or $EVLBI_PEERS) into a cache outside the checkout, so a fresh
# clone reuses it. Tests and benches find it with scripts/jive5ab-path. Skipped (and said so) when
# the tarball, cmake or g++ is missing; the tests that need it then report "skipped".
if [[ "${1:-}" != "--build" ]]; then
    j5_cache=${EVLBI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/evlbi}
    j5_tar=$(ls "${EVLBI_PEERS:-../shared/peers}"/jive5ab-*.tar.gz 2>/dev/null | head -n 1 || true)
    if [[ -z $j5_tar ]] && j5_built=$(scripts/jive5ab-path 2>/dev/null) && [[ -n $j5_built ]]; then
        say "jive5ab: no tarball in ${EVLBI_PEERS:-../shared/peers}; using the build already made: $j5_built"
    elif [[ -z $j5_tar ]]; then
        say "jive5ab: no tarball in ${EVLBI_PEERS:-../shared/peers}: interop tests will be skipped"
    elif ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
        say "jive5ab: cmake or g++ missing: interop tests will be skipped"
    else
        j5_name=$(basename "$j5_tar" .tar.gz)
        j5_dir=$j5_cache/$j5_name
        if [[ ! -x $j5_dir/bin/jive5ab ]]; then
            say "building $j5_name into $j5_dir (once; about 6 minutes on 2 cores)"
            rm -rf "$j5_dir/src" && mkdir -p "$j5_dir/src"
            tar xzf "$j5_tar" -C "$j5_dir/src"
            j5_src=$(find "$j5_dir/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
            if (cd "$j5_src" && mkdir -p build && cd build &&
                cmake -DSSAPI_ROOT=nossapi -DCMAKE_BUILD_TYPE=Release .. >"$j5_dir/build.log" 2>&1 &&
                make -j"$(nproc)" >>"$j5_dir/build.log" 2>&1); then
                mkdir -p "$j5_dir/bin" && cp "$j5_src/build/src/jive5ab" "$j5_dir/bin/jive5ab.tmp" &&
                    mv "$j5_dir/bin/jive5ab.tmp" "$j5_dir/bin/jive5ab"
                rm -rf "$j5_src/build"
            else
                say "jive5ab build failed (log: $j5_dir/build.log): interop tests will be skipped"
            fi
        fi
    fi
fi

# SFXC's mk5:// reader as a harness for the net2sfxc tests (scripts/build-sfxc.sh; cached like jive5ab).
[[ "${1:-}" == "--build" ]] || scripts/build-sfxc.sh
# DiFX's mpifxcorr for the DiFX tests (crates/cli/tests/difx_cli.rs): built once into the cache
# by its own script, which says "skipped" when it cannot be built.
[[ "${1:-}" == "--build" ]] || scripts/build-difx.sh

# cargo's own progress is shown: a first build takes about 4 minutes on 2 cores, and a line
# that says "building" and then nothing for that long looks hung.
say "building target/release/evlbi (about 4 minutes the first time on 2 cores; cargo's progress below)"
cargo build --release --locked -p evlbi
