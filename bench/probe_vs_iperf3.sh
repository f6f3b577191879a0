#!/usr/bin/env bash
# Paced 4.096 Gb/s with 8192-byte payloads on 127.0.0.1 (one datagram per 16 us), evlbi probe
# against iperf3 -u asked for the same rate and size, alternating, RUNS times each, SECS s per
# run. Prints medians: achieved receive rate, loss, sender CPU (user+sys, % of one core), and
# for evlbi the departure-gap p50/p99 it measures itself; iperf3 reports only its RFC 3550
# jitter. Results as JSON in $OUT.
#
#   bench/probe_vs_iperf3.sh        env: RUNS=3 SECS=5 OUT=bench/results/probe_vs_iperf3.json
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SECS=${SECS:-5}
OUT=${OUT:-bench/results/probe_vs_iperf3.json}
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || scripts/setup.sh --build
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
count=$((SECS * 62500))
mkdir -p "$(dirname "$OUT")"

run_evlbi() { # prints JSON line
    "$EVLBI" probe server --bind 127.0.0.1 --port 15399 --once 2>/dev/null &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.3
    /usr/bin/time -f "%U %S %e" -o "$WORK/time" "$EVLBI" probe client 127.0.0.1:15399 --size 8192 --spacing 16us \
        --count "$count" --json -q >"$WORK/probe.json"
    wait "$srv" || true
    python3 - "$WORK/probe.json" "$WORK/time" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); u, s, e = map(float, open(sys.argv[2]).read().split()[-3:])
rx, tx = r["receiver"], r["sender"]
print(json.dumps({"tool": "evlbi", "rate_bps": rx["user_rate_bps"], "loss": rx["loss_fraction"], "cpu_pct": (u + s) / e * 100,
                  "gap_p50_us": tx["departure_gap_ns"]["p50"] / 1e3, "gap_p99_us": tx["departure_gap_ns"]["p99"] / 1e3,
                  "interarrival_p99_us": rx["inter_arrival_ns"]["p99"] / 1e3}))
EOF
}

run_iperf3() {
    iperf3 -s -1 -B 127.0.0.1 -p 15398 >/dev/null 2>&1 &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.3
    iperf3 -c 127.0.0.1 -p 15398 -u -b 4.096G -l 8192 -t "$SECS" -J >"$WORK/iperf.json" || true
    wait "$srv" || true
    python3 - "$WORK/iperf.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); end = d["end"]; s = end.get("sum_received", end["sum"])
print(json.dumps({"tool": "iperf3", "rate_bps": s["bits_per_second"], "loss": end["sum"].get("lost_percent", 0) / 100,
                  "cpu_pct": end["cpu_utilization_percent"]["host_total"], "jitter_ms": end["sum"].get("jitter_ms")}))
EOF
}

: >"$WORK/all"
for _ in $(seq "$RUNS"); do
    run_evlbi >>"$WORK/all"
    run_iperf3 >>"$WORK/all"
done
python3 - "$WORK/all" "$OUT" "$RUNS" "$SECS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda tool, k: statistics.median(r[k] for r in rows if r["tool"] == tool and r.get(k) is not None)
print(f"4.096 Gb/s, 8192 B, 127.0.0.1, {sys.argv[3]} runs x {sys.argv[4]} s (medians)\n")
print("| tool | received Gb/s | loss | sender CPU % | departure gap p50 / p99 us | receiver timing |")
print("|---|---|---|---|---|---|")
print(f"| evlbi probe | {med('evlbi','rate_bps')/1e9:.3f} | {med('evlbi','loss'):.2e} | {med('evlbi','cpu_pct'):.0f} | "
      f"{med('evlbi','gap_p50_us'):.2f} / {med('evlbi','gap_p99_us'):.2f} | inter-arrival p99 {med('evlbi','interarrival_p99_us'):.1f} us |")
print(f"| iperf3 -u | {med('iperf3','rate_bps')/1e9:.3f} | {med('iperf3','loss'):.2e} | {med('iperf3','cpu_pct'):.0f} | not measured | RFC 3550 jitter {med('iperf3','jitter_ms')*1e3:.1f} us |")
json.dump({"runs": rows}, open(sys.argv[2], "w"), indent=1)
EOF
