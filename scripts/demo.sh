#!/usr/bin/env bash
# The main job, end to end on this machine: build evlbi, generate a two-station VDIF set
# (Effelsberg and Westerbork, 512 Mb/s each, a common sky signal delayed 1.5 us at Wb),
# inspect it, check the samplers, and write a JSON report of everything.
#
#   scripts/demo.sh [OUT_DIR]     (default out/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/demo}
scripts/setup.sh --build
mkdir -p "$out"
evlbi=target/release/evlbi

echo "== generating 2 stations x 4 s of 512 Mb/s 2-bit VDIF into $out"
$evlbi vdif gen --stations Ef,Wb --rate 512M --bits 2 --channels 8 --threads 1 --frame 8000 --seconds 4 \
    --delay Wb=1.5us --snr 0.01 --tone 1.2MHz --seed 42 --start 2026-01-01T00:00:00Z --out "$out" --json >"$out/gen.json"
$evlbi vdif inspect --json "$out/Ef.vdif" "$out/Wb.vdif" >"$out/inspect.json"
$evlbi vdif stats --json "$out/Ef.vdif" >"$out/stats-Ef.json"
$evlbi vdif stats --json "$out/Wb.vdif" >"$out/stats-Wb.json"

echo "== inspect"
$evlbi vdif inspect "$out/Wb.vdif"
echo "== sampler statistics"
$evlbi vdif stats "$out/Wb.vdif"

# One report, assembled from the JSON each command wrote (JSON is the source of truth).
{
    printf '{"generated":'
    cat "$out/gen.json"
    printf ',"inspect":'
    cat "$out/inspect.json"
    printf ',"stats":{"Ef":'
    cat "$out/stats-Ef.json"
    printf ',"Wb":'
    cat "$out/stats-Wb.json"
    printf '}}\n'
} >"$out/report.json"
rm "$out/gen.json" "$out/inspect.json" "$out/stats-Ef.json" "$out/stats-Wb.json"
echo "== report written to $out/report.json"
