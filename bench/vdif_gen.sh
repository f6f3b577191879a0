#!/usr/bin/env bash
# How fast does `evlbi vdif gen` write 2-bit VDIF, against the ceiling of the same disk?
# In one run, alternating, RUNS times each: `dd if=/dev/zero` writing the same number of bytes
# in 4 MiB blocks (the disk/page-cache ceiling), and evlbi generating the issue's 2-station
# 512 Mb/s set. Files are deleted between runs so every run writes new blocks. Prints medians
# and the ratio gen/dd as a Markdown table.
#
#   bench/vdif_gen.sh [DIR] [RUNS] [SECONDS]     defaults: target/bench-gen 5 10
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-gen}
runs=${2:-5}
secs=${3:-10}
scripts/setup.sh --build
evlbi=$PWD/target/release/evlbi
mkdir -p "$dir"
bytes=$((2 * secs * 8000 * 8032)) # 2 stations x secs x 8000 frames/s x 8032 B
blocks=$((bytes / 4194304))

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

dd_rates=()
gen_rates=()
settle() { # deleted files and dirty pages are flushed before each timed run
    rm -f "$dir"/*.vdif "$dir/dd.bin"
    sync
    sleep 1
}

for i in $(seq "$runs"); do
    settle
    t0=$(now)
    dd if=/dev/zero of="$dir/dd.bin" bs=4M count="$blocks" status=none
    t1=$(now)
    dd_rates+=("$(echo "$blocks * 4194304 / ($t1 - $t0) / 1000000000" | bc -l)")
    settle
    t0=$(now)
    "$evlbi" vdif gen --stations Ef,Wb --rate 512M --bits 2 --channels 8 --threads 1 --frame 8000 \
        --seconds "$secs" --delay Wb=1.5us --snr 0.01 --tone 1.2MHz --seed "$i" --out "$dir" -q >/dev/null
    t1=$(now)
    gen_rates+=("$(echo "$bytes / ($t1 - $t0) / 1000000000" | bc -l)")
done
rm -f "$dir"/*.vdif
dd_med=$(printf '%s\n' "${dd_rates[@]}" | median)
gen_med=$(printf '%s\n' "${gen_rates[@]}" | median)
fmt() { printf '%.2f' "$1"; }
echo "| what | runs | median GB/s | all runs GB/s |"
echo "|---|---|---|---|"
echo "| dd if=/dev/zero bs=4M ($(fmt "$(echo "$blocks*4194304/1000000000" | bc -l)") GB) | $runs | $(fmt "$dd_med") | $(for r in "${dd_rates[@]}"; do printf '%s ' "$(fmt "$r")"; done)|"
echo "| evlbi vdif gen, 2 stations x ${secs} s x 512 Mb/s ($(fmt "$(echo "$bytes/1000000000" | bc -l)") GB) | $runs | $(fmt "$gen_med") | $(for r in "${gen_rates[@]}"; do printf '%s ' "$(fmt "$r")"; done)|"
echo
echo "gen/dd ratio (medians): $(fmt "$(echo "$gen_med / $dd_med" | bc -l)")   target: gen >= 1.0 GB/s"
