#!/usr/bin/env bash
# The Field System's FlexBuff session against jive5ab 3.1.0 and evlbi serve in the same run (issue
# 27): bench/fs_session.sh for each, RUNS times alternating, with VDIF flowing as from a DBBC3
# (evlbi stream send --generate, udpsnor framing, THREADS threads). Per run: requests the FS would
# log (rc not 0/1, no reply, decoder errors), frames recorded (bytes in the recordings / 8032),
# the frames sent over the session, and the daemon's CPU over the session (its threads and its
# reaped writer processes) per recorded frame. Prints the rows, the medians and evlbi/jive5ab.
#
#   bench/fs_session_cpu.sh     env: RATE=4096 (Mb/s) SCAN=20 (s) THREADS=2 CHANNELS=16 RUNS=3
#                                    OUT=bench/results/fs_session_cpu.json
# Needs /dev/shm with room for 3 scans (4.096 Gb/s x 20 s x 3 = 31 GB: lower SCAN or RATE when
# /dev/shm is small). Without jive5ab the evlbi runs still happen and the peer is reported skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-4096}
SCAN=${SCAN:-20}
THREADS=${THREADS:-2}
CHANNELS=${CHANNELS:-16}
RUNS=${RUNS:-3}
OUT=${OUT:-bench/results/fs_session_cpu.json}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
daemons=(evlbi)
scripts/jive5ab-path >/dev/null && daemons=(jive5ab evlbi) || echo "jive5ab: skipped (no build; scripts/setup.sh makes one)"
rows=()
for run in $(seq "$RUNS"); do
    for d in "${daemons[@]}"; do
        log="$WORK/$d.$run.log"
        RATE=$RATE SCAN=$SCAN THREADS=$THREADS CHANNELS=$CHANNELS JSON="$WORK/$d.$run.json" \
            bench/fs_session.sh "$d" >"$log" 2>&1 || { echo "$d run $run failed:"; tail -20 "$log"; exit 1; }
        row=$(python3 - "$d" "$run" "$log" "$WORK/$d.$run.json" <<'PY'
import json, re, sys
d, run, log, recs = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read(), json.load(open(sys.argv[4]))
m = re.search(r"# daemon cpu_s ([0-9.]+) recorded_bytes (\d+)", log)
cpu, nbytes = float(m.group(1)), int(m.group(2))
complaints = [r for r in recs if (r["rc"] not in (0, 1) and not r["nocheck"]) or r["error"] or r["fs"]]
frames = nbytes // 8032
# The last scan's loss as the daemon itself counts it (evlbi?, asked after scan 3 by the
# station procedures; jive5ab's and evlbi's counters alike): total and lost datagrams.
ev = [r["reply"] for r in recs if r["request"].strip().startswith("evlbi?") and r["reply"]]
m = re.search(r"total : (\d+) : loss : (\d+)", ev[-1]) if ev else None
total, lost = (int(m.group(1)), int(m.group(2))) if m else (None, None)
print(json.dumps({"daemon": d, "run": run, "cpu_s": cpu, "frames_recorded": frames,
                  "last_scan_evlbi_total": total, "last_scan_evlbi_loss": lost,
                  "cpu_us_per_frame": round(cpu * 1e6 / frames, 3) if frames else None,
                  "fs_would_log": len(complaints),
                  "refused": sorted({r["request"].strip() for r in complaints})}))
PY
)
        echo "$row"
        rows+=("$row")
    done
done
python3 - "$OUT" "$RATE" "$SCAN" "$THREADS" "$CHANNELS" "${rows[@]}" <<'PY'
import json, statistics, sys
out, rate, scan, threads, channels = sys.argv[1:6]
rows = [json.loads(r) for r in sys.argv[6:]]
med = {}
for d in ("jive5ab", "evlbi"):
    rs = [r for r in rows if r["daemon"] == d and r["cpu_us_per_frame"]]
    if rs:
        med[d] = {k: statistics.median(r[k] for r in rs) for k in ("cpu_us_per_frame", "frames_recorded", "fs_would_log", "cpu_s")}
        med[d]["last_scan_evlbi_loss_max"] = max((r["last_scan_evlbi_loss"] or 0) for r in rs)
        print(f"{d:8} median: {med[d]['cpu_us_per_frame']:.2f} us CPU per recorded frame, "
              f"{med[d]['frames_recorded']:.0f} frames recorded, {med[d]['fs_would_log']:.0f} FS complaints, "
              f"last scan's evlbi? loss at most {med[d]['last_scan_evlbi_loss_max']}")
if "jive5ab" in med and "evlbi" in med:
    print(f"evlbi/jive5ab CPU per frame: {med['evlbi']['cpu_us_per_frame'] / med['jive5ab']['cpu_us_per_frame']:.2f}")
json.dump({"rate_mbps": int(rate), "scan_s": int(scan), "threads": int(threads), "channels": int(channels),
           "runs": rows, "medians": med}, open(out, "w"), indent=1)
PY
