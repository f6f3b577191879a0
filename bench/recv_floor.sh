#!/usr/bin/env bash
# The floor of a recorder on this host (issue 30): what receiving 8032-byte VDIF frames in jive5ab's
# udps framing at 4.096 Gb/s on 127.0.0.1 and putting them in a file costs at least, measured with
# minimal C receivers (bench/floor/rx.c) against evlbi's own sender — the ceiling against which
# evlbi's recorder and jive5ab (bench/recv_vs_jive5ab.sh, run it in the same session) are judged.
# Modes (rx.c): m receive only; a1 recvmmsg + memcpy into 1 MiB + write(), one thread; a2 the
# write() in a second thread; a3 recvmmsg scattering frames straight into the write buffer; b/c/d
# recvmmsg straight into the mmap'd output file (c: a thread pre-faults ahead with
# MADV_POPULATE_WRITE; d: a process does). Every run's file is checked frame by frame against the
# input (looped). CPU = the receiver's threads' (and d's helper process's) /proc schedstat time.
#
#   bench/recv_floor.sh     env: MODES="m a1 a3 c" RUNS=3 SECS=10 DIR=/dev/shm RATE=4096M OUT=bench/results/recv_floor.json
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
MODES=${MODES:-m a1 a3 c}
RUNS=${RUNS:-3}
SECS=${SECS:-10}
DIR=${DIR:-/dev/shm}
OUT=${OUT:-bench/results/recv_floor.json}
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || scripts/setup.sh --build
command -v gcc >/dev/null || { echo "recv_floor: gcc not found (apt install gcc)" >&2; exit 1; }
RATE=${RATE:-4096M}
WORK=$(mktemp -d /tmp/evlbi-floor.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
    rm -f "$DIR"/evlbi-floor-*.vdif
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"
gcc -O2 -o "$WORK/rx" bench/floor/rx.c -lpthread
gcc -O2 -o "$WORK/verify" bench/floor/verify.c
"$EVLBI" vdif gen --stations Ef --rate "$RATE" --channels 16 --frame 8000 --seconds 2 --out "$WORK/in" -q \
    --start 2026-11-23T12:00:00Z >/dev/null
: >"$WORK/rows"
for mode in $MODES; do
    for ((r = 1; r <= RUNS; r++)); do
        echo "== $mode, run $r of $RUNS"
        port=$(port SOCK_DGRAM)
        file="$DIR/evlbi-floor-$mode.vdif"
        rm -f "$file"
        NAP_US=${NAP_US:-1000} "$WORK/rx" "$mode" "$port" "$file" >"$WORK/rx.out" 2>"$WORK/rx.err" &
        RX=$!
        PIDS+=("$RX")
        for _ in $(seq 200); do grep -q ready "$WORK/rx.err" && break; sleep 0.05; done
        "$EVLBI" stream send --to "127.0.0.1:$port" --seq-format jive5ab "$WORK/in/Ef.vdif" --rate "$RATE" --loop \
            --duration "${SECS}s" --export-json "$WORK/send.json" >/dev/null 2>&1
        wait "$RX"
        "$WORK/verify" "$file" "$WORK/in/Ef.vdif" >"$WORK/verify.out"
        rm -f "$file"
        python3 - "$mode" "$r" "$WORK" >>"$WORK/rows" <<'PY'
import json, sys
mode, run, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = json.load(open(f"{work}/send.json"))["stations"][0]
row = json.loads(open(f"{work}/rx.out").read())
row.update(mode=mode, run=run, sent=s["frames_sent"], lost=s["frames_sent"] - row["received"],
           verify=json.loads(open(f"{work}/verify.out").read()))
print(json.dumps(row))
PY
        tail -1 "$WORK/rows"
    done
done
python3 - "$WORK/rows" "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# The file holds every frame received, in order, each equal to the input frame it names.
def whole(r):
    v = r["verify"]
    return v["gaps"] == 0 and v["content_mismatch"] == 0 and v["zero_frames"] == 0 and v["tail_bytes"] == 0 \
        and (r["mode"] == "m" or v["out_frames"] == r["received"])
out = {"rows": rows, "medians": {}}
print("\n| mode | runs | µs CPU / frame (median) | min–max | receiving thread | 2nd thread / process | lost (each run) | file whole |")
print("|---|---|---|---|---|---|---|---|")
for mode in dict.fromkeys(r["mode"] for r in rows):
    rr = [r for r in rows if r["mode"] == mode]
    us = [r["total_us"] for r in rr]
    ok = all(whole(r) for r in rr)
    m = statistics.median(us)
    out["medians"][mode] = {"us_per_frame": m, "rx_us": statistics.median(r["rx_us"] for r in rr),
                            "helper_us": statistics.median(r["helper_us"] for r in rr),
                            "lost": [r["lost"] for r in rr], "file_whole": ok}
    print(f"| {mode} | {len(rr)} | {m:.2f} | {min(us):.2f}–{max(us):.2f} | {out['medians'][mode]['rx_us']:.2f} | "
          f"{out['medians'][mode]['helper_us']:.2f} | {', '.join(str(r['lost']) for r in rr)} | {'yes' if ok else 'NO'} |")
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(f"results: {sys.argv[2]}")
PY
