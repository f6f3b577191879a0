#!/usr/bin/env bash
# Cores per rate (issue 37 item 2): what a station relay and a recorder need at the VGOS and EHT
# rates, from CPU per frame measured on this host in one session, evlbi and jive5ab alternating.
#
#   1. bench/relay_vs_jive5ab.sh at RATE (SECS, RUNS): relay µs CPU per frame, evlbi and jive5ab
#      (net2mem + mem2net), one input port; then evlbi's relay of a 2-thread backend on 1 input
#      port and on PORTS ports (one board each: --senders PORTS), RUNS runs each.
#   2. bench/recv_vs_jive5ab.sh at RATE: recorder µs CPU per frame into DIR (evlbi: receiver +
#      writer, and its receiver thread alone; jive5ab net2file).
#   3. evlbi stream recv --listen ×PORTS --out DIR from a backend of PORTS boards (one per port):
#      the multi-port recorder's µs per frame (receiver and writer, /proc).
# Then cores = frames/s × µs per frame / 10^6 at each of RATES (Mb/s), frames/s = rate /
# (8 × FRAME) (8032-byte frames: 8000 bytes of data and the 32-byte header, as the issue counts
# them). evlbi reads all its input ports in one thread, so its relay and its receiver each top out
# at one core: the table says where ("one thread's ceiling", in Gb/s); jive5ab's record reads each
# port in a thread of its own (net2vbs.cc, multifdreader), its net2net takes one port.
#
#   bench/cores_per_rate.sh   env: SECS=10 RUNS=3 RATE=4096M RATES="8192 16384 32768 65536"
#                                  FRAME=8032 PORTS=2 DIR=/dev/shm OUT=bench/results/cores_per_rate.json
# µs per frame is the one figure carried across rates: it assumes the cost per frame does not grow
# with the rate (true while no queue overflows; a loaded host's is higher — uptime is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
SECS=${SECS:-10}
RUNS=${RUNS:-3}
RATE=${RATE:-4096M}
RATES=${RATES:-8192 16384 32768 65536}
FRAME=${FRAME:-8032}
PORTS=${PORTS:-2}
DIR=${DIR:-/dev/shm}
OUT=${OUT:-bench/results/cores_per_rate.json}
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || scripts/setup.sh --build
WORK=$(mktemp -d /tmp/evlbi-cores.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
export EVLBI SECS RUNS RATE DIR

echo "== $(uptime)"
echo "== 1. relay at $RATE: evlbi and jive5ab, then evlbi on 1 and $PORTS input ports"
SWEEP=$RATE SWEEP_SECS=$SECS SWEEP_RUNS=$RUNS SWEEP_PORTS="1 $PORTS" SWEEP_J5=0 OUT=$WORK/relay.json \
    bench/relay_vs_jive5ab.sh >"$WORK/relay.log" 2>&1 || { tail -20 "$WORK/relay.log"; exit 1; }
grep -E '^(evlbi|jive5ab): median|CPU per frame evlbi/jive5ab \(medians\)' "$WORK/relay.log" || true
echo "== $(uptime)"
echo "== 2. recorder at $RATE into $DIR: evlbi and jive5ab"
OUT=$WORK/recv.json bench/recv_vs_jive5ab.sh >"$WORK/recv.log" 2>&1 || { tail -20 "$WORK/recv.log"; exit 1; }
grep -iE 'median|ratio' "$WORK/recv.log" | head -6 || true
echo "== $(uptime)"
echo "== 3. evlbi recorder on $PORTS ports at $RATE into $DIR, $RUNS runs"
fps=$(python3 -c "import sys; r=sys.argv[1]; m={'M':1e6,'G':1e9}; print(int(float(r[:-1])*m[r[-1]]/8/8000/$PORTS))" "$RATE")
for r in $(seq "$RUNS"); do
    out="$DIR/evlbi-cores.$$"
    rm -rf "$out"
    listen=()
    to=()
    for ((i = 0; i < PORTS; i++)); do
        p=$(port SOCK_DGRAM)
        listen+=(--listen "127.0.0.1:$p")
        to+=(--to "127.0.0.1:$p")
    done
    "$EVLBI" stream recv "${listen[@]}" --seq-format jive5ab --fps "$fps" --threads "$PORTS" --out "$out" \
        --idle-timeout 60s -q --export-json "$WORK/mrecv.json" 2>"$WORK/mrecv.log" &
    RX=$!
    PIDS+=("$RX")
    for _ in $(seq 300); do grep -q "listening on" "$WORK/mrecv.log" 2>/dev/null && break; sleep 0.1; done
    ( while kill -0 "$RX" 2>/dev/null; do n=$(cpu_ticks_all "$RX"); [[ $n != 0 ]] && echo "$n" >"$WORK/mcpu"; sleep 0.1; done ) &
    PIDS+=("$!")
    "$EVLBI" stream send "${to[@]}" --generate --stations Ef --threads "$PORTS" --senders "$PORTS" \
        --channels 16 --frame 8000 --rate "$RATE" --seconds 1 --seq-format jive5ab --burst 8 --loop \
        --duration "${SECS}s" --start now --export-json "$WORK/msend.json" 2>/dev/null
    sleep 2
    kill -INT "$RX" 2>/dev/null || true
    wait "$RX" 2>/dev/null || true
    python3 - "$WORK/msend.json" "$WORK/mrecv.json" "$WORK/mcpu" "$r" "$(cut -d' ' -f1 /proc/loadavg)" >>"$WORK/mrows" <<'PY'
import json, os, sys
s, rx = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ticks = int(open(sys.argv[3]).read().split()[0]) if os.path.exists(sys.argv[3]) else 0
sent = sum(st["frames_sent"] for st in s["stations"])
got = sum(st["window"]["written_valid"] for st in rx["stations"]) if rx.get("stations") else 0
cpu = ticks / os.sysconf("SC_CLK_TCK")
row = {"run": int(sys.argv[4]), "frames_sent": sent, "recorded": got, "lost": sent - got, "cpu_s": cpu,
       "us_per_frame": cpu * 1e6 / got if got else None, "load1": float(sys.argv[5])}
print(json.dumps(row))
print(f"run {row['run']}: {sent} sent, {got} recorded, {row['lost']} lost, {cpu:.2f} s CPU, "
      f"{row['us_per_frame'] or 0:.2f} µs/frame, load {row['load1']}", file=sys.stderr)
PY
    rm -rf "$out"
done
echo "== $(uptime)"

python3 - "$WORK/relay.json" "$WORK/recv.json" "$WORK/mrows" "$OUT" "$RATES" "$FRAME" "$PORTS" "$RATE" "$(cat /proc/loadavg)" <<'PY'
import json, statistics, sys
relay, recv = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
mrows = [json.loads(l) for l in open(sys.argv[3]) if l.startswith("{")]
out, rates, frame, ports, rate, load = sys.argv[4], [int(r) for r in sys.argv[5].split()], int(sys.argv[6]), int(sys.argv[7]), sys.argv[8], sys.argv[9]
med = lambda xs: statistics.median(xs) if xs else None

def sweep_us(inputs):
    xs = [r["relay_cpu_s"] * 1e6 / r["relay_in"] for r in relay["runs"]
          if r["label"] == "sweep" and r["case"] == "evlbi" and r["inputs"] == inputs and r.get("relay_in")]
    return med(xs)

rm, vm = relay["medians"], recv["medians"]
us = {
    "relay, 1 port": {"evlbi": rm.get("evlbi", {}).get("cpu_us_per_frame"), "jive5ab": rm.get("jive5ab", {}).get("cpu_us_per_frame")},
    "relay, 2 threads on 1 port": {"evlbi": sweep_us(1), "jive5ab": None},
    f"relay, {ports} ports": {"evlbi": sweep_us(ports), "jive5ab": None},
    "recorder, 1 port": {"evlbi": vm.get("evlbi", {}).get("cpu_us_per_frame"), "jive5ab": vm.get("jive5ab", {}).get("cpu_us_per_frame")},
    "recorder's receiver thread, 1 port": {"evlbi": vm.get("evlbi", {}).get("receiver_cpu_us_per_frame"), "jive5ab": None},
    f"recorder, {ports} ports": {"evlbi": med([r["us_per_frame"] for r in mrows if r["us_per_frame"]]), "jive5ab": None},
}
fps = {r: r * 1e6 / (8 * frame) for r in rates}
table = []
for case, tools in us.items():
    for tool, u in tools.items():
        if u is None:
            continue
        # evlbi's relay and its receiver are one thread each, whatever the ports: the rate at
        # which that thread needs a whole core is as far as it goes.
        one = tool == "evlbi" and (case.startswith("relay") or "receiver thread" in case)
        row = {"case": case, "tool": tool, "us_per_frame": round(u, 3),
               "cores": {str(r): round(fps[r] * u / 1e6, 2) for r in rates},
               "one_thread_ceiling_gbps": round(8 * frame * 1e6 / u / 1e9, 1) if one else None}
        table.append(row)
hdr = "| case | tool | µs CPU/frame at " + rate + " | " + " | ".join(f"cores at {r/1000:g} Gb/s" for r in rates) + " | one thread's ceiling |"
print()
print(f"frames/s = rate / (8 x {frame} B): " + ", ".join(f"{r/1000:g} Gb/s {fps[r]:.0f}" for r in rates))
print(hdr)
print("|" + "---|" * (4 + len(rates)))
for t in table:
    print(f"| {t['case']} | {t['tool']} | {t['us_per_frame']:.2f} | " + " | ".join(f"{t['cores'][str(r)]:.2f}" for r in rates)
          + (f" | {t['one_thread_ceiling_gbps']} Gb/s |" if t["one_thread_ceiling_gbps"] else " | - |"))
print(f"multi-port recorder runs: " + "; ".join(f"{r['lost']} lost of {r['frames_sent']}" for r in mrows))
json.dump({"rate_measured": rate, "frame_bytes": frame, "ports": ports, "rates_mbps": rates,
           "frames_per_second": fps, "table": table, "multiport_recorder_runs": mrows,
           "relay": {"medians": rm, "cpu_ratio_evlbi_over_jive5ab": relay.get("cpu_ratio_evlbi_over_jive5ab")},
           "recorder": {"medians": vm, "ratio_evlbi_over_jive5ab": recv.get("ratio_evlbi_over_jive5ab")},
           "loadavg_at_end": load}, open(out, "w"), indent=1)
print(f"results: {out}")
PY
