#!/usr/bin/env bash
# Bounded fuzzing of every parser with cargo fuzz (libFuzzer). No nightly toolchain is
# available here, so stable rustc runs with RUSTC_BOOTSTRAP=1; if the address sanitizer is
# missing, we fall back to `-s none`. The committed corpus (fuzz/corpus) seeds each run and is
# not modified: new inputs go to a scratch copy.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "[fuzz] installing cargo-fuzz" >&2
    cargo install -q --locked cargo-fuzz >&2
fi
sanitizer=()
if ! cargo fuzz build -O vdif_header >/dev/null 2>&1; then
    echo "[fuzz] address sanitizer unavailable: building with -s none" >&2
    sanitizer=(-s none)
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
failed_count=0
targets=$(cargo fuzz list)
for t in $targets; do
    cp -r "fuzz/corpus/$t" "$scratch/$t"
    if cargo fuzz run "${sanitizer[@]}" -O "$t" "$scratch/$t" -- -max_total_time="$secs" -max_len=20000 >"$scratch/$t.log" 2>&1; then
        echo "fuzz $t: ok ($(grep -o 'Done [0-9]* runs' "$scratch/$t.log"))"
    else
        echo "fuzz $t: FAILED — crash input kept in fuzz/artifacts/$t"; tail -40 "$scratch/$t.log"
        failed=1
        failed_count=$((failed_count + 1))
    fi
done
n=$(echo $targets | wc -w)
echo "fuzz: $((n - failed_count)) passed, $failed_count failed"
exit $failed
