#!/usr/bin/env bash
# What per-datagram authentication costs evlbi send/recv: every UDP datagram carries a 16-byte
# BLAKE3 tag under a per-round key and every control line an HMAC. Builds the evlbi of
# BEFORE_REF (default 4a842e9, the last commit without it) into target/before, then runs
# bench/transfer.sh with both binaries in the same run, interleaved: loopback memory-to-memory
# (three evlbi configurations) and through `evlbi linkemu` 1 Gb/s, 50 ms each way, 0.1 % loss
# (root). Prints each case's median Gb/s and CPU and the now/before ratio.
#
# Usage: bench/transfer_auth.sh     env: BEFORE_REF RUNS=3 SIZE_MB=1000 WAN_SIZE_MB=500
#        PARTS="loopback wan" OUT=bench/results/transfer_auth.json
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE_REF=${BEFORE_REF:-4a842e9}
tree=$(mktemp -d /var/tmp/evlbi-before.XXXXXX)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT
git worktree add --detach -q "$tree" "$BEFORE_REF"
echo "building evlbi at $BEFORE_REF into target/before (once; later runs are incremental)" >&2
cargo build --release --locked -q -p evlbi --manifest-path "$tree/Cargo.toml" --target-dir "$PWD/target/before"
[[ -x target/release/evlbi ]] || scripts/setup.sh --build
EVLBI_BEFORE=$PWD/target/before/release/evlbi \
    LOOP_TOOLS=${LOOP_TOOLS:-"evlbi-before evlbi"} LOOP_CASES=${LOOP_CASES:-mem} \
    WAN_TOOLS=${WAN_TOOLS:-"evlbi-before evlbi"} \
    OUT=${OUT:-bench/results/transfer_auth.json} \
    bench/transfer.sh
