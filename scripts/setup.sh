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
    # fonts-dejavu-core for the text of PNG figures (evlbi report); chromium for the test that
    # renders the report page headless.
    missing=()
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    [[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
    if ((${#missing[@]})); then
        if [[ $(id -u) -eq 0 ]]; then
            say "installing ${missing[*]}"
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2
        else
            say "missing Debian packages: ${missing[*]} (run as root or install them)"
        fi
    fi
    # Python venv with baseband, the independent VDIF implementation we cross-check against.
    if ! .venv/bin/python -c 'import baseband, pytest' >/dev/null 2>&1; then
        say "creating .venv with baseband and pytest"
        python3 -m venv .venv
        .venv/bin/pip install -q --disable-pip-version-check -r tests/crosscheck/requirements.txt >&2
    fi
fi

say "building target/release/evlbi"
cargo build --release --locked -q -p evlbi
