#!/usr/bin/env bash
# `evlbi probe client --tcp` against iperf3 (TCP) in the same run, alternating, medians of RUNS:
#
#   loopback: 127.0.0.1, one stream, SECS s, cubic, 128 KiB writes (iperf3's default) for both:
#             received rate, and CPU (user + system) of the sending and the receiving process, %
#             of one core over the client's wall time (/usr/bin/time), plus each tool's own CPU
#             figure (evlbi: /proc/self/stat over the data phase; iperf3: cpu_utilization_percent).
#   wan:      through `evlbi linkemu` between two namespaces this script creates: 1 Gb/s
#             bottleneck, 50 ms each way (RTT 100 ms), 0.1 % random loss (seed 7), 12.5 MB (1 BDP)
#             drop-tail buffer, MTU 1500, 64 MB socket buffers; cubic and bbr, WAN_SECS s each,
#             evlbi and iperf3. Beside each: the Mathis bound (MSS/RTT)·√(3/2)/√p for the
#             configured path (MSS 1448 B, RTT 100 ms, p = 0.001: 4.49 Mb/s) and evlbi's own
#             check from the RTT and retransmit rate it measured.
#
# Usage (root for wan): bench/probe_tcp.sh
#   env: RUNS=3 SECS=10 WAN_SECS=30 PARTS="loopback wan" OUT=bench/results/probe_tcp.json
#        EVLBI=target/release/evlbi
# Only namespaces ptcp-<pid>-{a,b} (10.77.0.1/2) are created and removed on exit; only processes
# this script started are stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
RUNS=${RUNS:-3}
SECS=${SECS:-10}
WAN_SECS=${WAN_SECS:-30}
PARTS=${PARTS:-loopback wan}
OUT=${OUT:-bench/results/probe_tcp.json}
EVLBI=$(realpath "${EVLBI:-target/release/evlbi}")
NS_A="ptcp-$$-a"
NS_B="ptcp-$$-b"
[[ -x $EVLBI ]] || { echo "build evlbi first (cargo build --release -p evlbi) or set EVLBI" >&2; exit 1; }
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
WORK=$(mktemp -d /tmp/probe-tcp-bench.XXXXXX)
PIDS=()
EMU_PID=""
cleanup() {
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    stop_pid "$EMU_PID"
    for ns in "$NS_A" "$NS_B"; do ip netns list | grep -q "^$ns\b" && ip netns delete "$ns" || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ROWS=$WORK/rows.jsonl
: >"$ROWS"
port=21000

# What else runs here: load average and other compilers (the machine is shared).
others() { ps -eo comm= | grep -cE '^(rustc|cargo|cc1|cc1plus|ld|clang)' || true; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
OTHERS0=$(others)
START=$(date -u +%FT%TZ)

run_evlbi() { # part cc run host "ra" "rb" secs
    local part=$1 cc=$2 run=$3 host=$4 ra=$5 rb=$6 secs=$7
    port=$((port + 1))
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/srv.time" "$EVLBI" probe server --bind "$host" --port "$port" --once \
        >/dev/null 2>"$WORK/srv.log" &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.5
    timeout $((secs + 150)) $ra /usr/bin/time -f "%e %U %S" -o "$WORK/cli.time" "$EVLBI" probe client "$host:$port" \
        --tcp --duration "${secs}s" --cc "$cc" --json -q >"$WORK/r.json" 2>"$WORK/cli.log" || true
    wait "$srv" || true
    python3 - "$WORK/r.json" "$WORK/cli.time" "$WORK/srv.time" "$part" "$cc" "$run" >>"$ROWS" <<'PY'
import json, sys
path, ct, st, part, cc, run = sys.argv[1:]
def cpu(t, wall):
    e, u, s = map(float, open(t).read().split()[-3:])
    return (u + s) / wall * 100 if wall > 0 else 0
try:
    r = json.load(open(path)); wall = float(open(ct).read().split()[-3])
    m = r.get("mathis") or {}
    row = dict(part=part, tool="evlbi", cc=r["cc"], run=int(run), ok=not r["partial"],
               bps=r["received_rate_bps"] or 0, retransmits=r["retransmits"],
               rtt_ms=(m.get("rtt_s") or 0) * 1e3, loss=m.get("loss"), mathis_measured_bps=m.get("bound_bps"),
               cpu_tx=cpu(ct, wall), cpu_rx=cpu(st, wall),
               own_cpu_tx=r["host"]["sender"]["process"]["user_pct"] + r["host"]["sender"]["process"]["system_pct"],
               own_cpu_rx=r["host"]["receiver"]["process"]["user_pct"] + r["host"]["receiver"]["process"]["system_pct"])
except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
    row = dict(part=part, tool="evlbi", cc=cc, run=int(run), ok=False, bps=0, error=str(e))
print(json.dumps(row))
PY
}

run_iperf3() { # part cc run host "ra" "rb" secs
    local part=$1 cc=$2 run=$3 host=$4 ra=$5 rb=$6 secs=$7
    port=$((port + 1))
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/srv.time" iperf3 -s -1 -B "$host" -p "$port" >/dev/null 2>&1 &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.5
    timeout $((secs + 60)) $ra /usr/bin/time -f "%e %U %S" -o "$WORK/cli.time" iperf3 -c "$host" -p "$port" \
        -t "$secs" -C "$cc" -J >"$WORK/i.json" 2>/dev/null || true
    wait "$srv" || true
    python3 - "$WORK/i.json" "$WORK/cli.time" "$WORK/srv.time" "$part" "$cc" "$run" >>"$ROWS" <<'PY'
import json, sys
path, ct, st, part, cc, run = sys.argv[1:]
def cpu(t, wall):
    e, u, s = map(float, open(t).read().split()[-3:])
    return (u + s) / wall * 100 if wall > 0 else 0
try:
    d = json.load(open(path)); e = d["end"]; wall = float(open(ct).read().split()[-3])
    c = e.get("cpu_utilization_percent", {})
    row = dict(part=part, tool="iperf3", cc=cc, run=int(run), ok=True,
               bps=e["sum_received"]["bits_per_second"], retransmits=e["sum_sent"].get("retransmits", 0),
               rtt_ms=e["streams"][0]["sender"].get("mean_rtt", 0) / 1e3,
               cpu_tx=cpu(ct, wall), cpu_rx=cpu(st, wall),
               own_cpu_tx=c.get("host_total", 0), own_cpu_rx=c.get("remote_total", 0))
except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
    row = dict(part=part, tool="iperf3", cc=cc, run=int(run), ok=False, bps=0, error=str(e))
print(json.dumps(row))
PY
}

if [[ " $PARTS " == *" loopback "* ]]; then
    for run in $(seq "$RUNS"); do
        echo "loopback run $run/$RUNS" >&2
        run_evlbi loopback cubic "$run" 127.0.0.1 "" "" "$SECS"
        run_iperf3 loopback cubic "$run" 127.0.0.1 "" "" "$SECS"
    done
fi

if [[ " $PARTS " == *" wan "* ]]; then
    [[ $(id -u) -eq 0 ]] || { echo "the wan part needs root (namespaces, TUN)" >&2; exit 2; }
    RA="ip netns exec $NS_A"
    RB="ip netns exec $NS_B"
    for run in $(seq "$RUNS"); do
        for cc in cubic bbr; do
            for tool in evlbi iperf3; do
                echo "wan run $run/$RUNS: $tool $cc" >&2
                linkemu_start --rate 1G --delay 50ms --loss 0.1% --buffer 12500000B --seed 7
                "run_$tool" wan "$cc" "$run" 10.77.0.2 "$RA" "$RB" "$WAN_SECS"
                stop_pid "$EMU_PID"
                EMU_PID=""
            done
        done
    done
fi

LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
OTHERS1=$(others)
mkdir -p "$(dirname "$OUT")"
python3 - "$ROWS" "$OUT" "$RUNS" "$SECS" "$WAN_SECS" "$START" "$LOAD0" "$LOAD1" "$OTHERS0" "$OTHERS1" <<'PY'
import json, math, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, runs, secs, wan_secs, start, load0, load1, o0, o1 = sys.argv[2:]
med = lambda rs, k: statistics.median(r.get(k) or 0 for r in rs) if rs else 0
groups = {}
for r in rows:
    groups.setdefault((r["part"], r["cc"], r["tool"]), []).append(r)
summary = []
for (part, cc, tool), rs in sorted(groups.items()):
    good = [r for r in rs if r["ok"]]
    summary.append(dict(part=part, cc=cc, tool=tool, runs=len(rs), ok=len(good), gbps=med(good, "bps") / 1e9,
                        all_gbps=[round(r["bps"] / 1e9, 4) for r in rs],
                        cpu_tx=med(good, "cpu_tx"), cpu_rx=med(good, "cpu_rx"),
                        own_cpu_tx=med(good, "own_cpu_tx"), own_cpu_rx=med(good, "own_cpu_rx"),
                        retransmits=med(good, "retransmits"), rtt_ms=med(good, "rtt_ms"),
                        mathis_measured_mbps=(med([r for r in good if r.get("mathis_measured_bps")], "mathis_measured_bps") / 1e6) or None))
mathis_cfg = 8 * 1448 / 0.1 * math.sqrt(1.5) / math.sqrt(0.001)
json.dump(dict(start=start, runs=int(runs), secs=int(secs), wan_secs=int(wan_secs), load_before=load0, load_after=load1,
               other_compilers_before=int(o0), other_compilers_after=int(o1), mathis_configured_bps=mathis_cfg,
               rows=rows, summary=summary), open(out, "w"), indent=1)
print(f"started {start}; {runs} runs; load average before {load0}, after {load1}; "
      f"compiler processes of others before/after: {o0}/{o1}\n")
lo = [s for s in summary if s["part"] == "loopback"]
if lo:
    print(f"Loopback, 1 stream, cubic, {secs} s (medians):\n")
    print("| tool | runs ok | Gb/s (median) | all runs Gb/s | CPU % send / recv (time) | CPU % send / recv (own figure) | retransmits |")
    print("|---|---|---|---|---|---|---|")
    for s in lo:
        print(f'| {s["tool"]} | {s["ok"]}/{s["runs"]} | {s["gbps"]:.2f} | {" ".join(f"{g:.2f}" for g in s["all_gbps"])} | '
              f'{s["cpu_tx"]:.0f} / {s["cpu_rx"]:.0f} | {s["own_cpu_tx"]:.0f} / {s["own_cpu_rx"]:.0f} | {s["retransmits"]:.0f} |')
    e = next((s for s in lo if s["tool"] == "evlbi"), None); i = next((s for s in lo if s["tool"] == "iperf3"), None)
    if e and i and i["gbps"] > 0:
        print(f'\nevlbi / iperf3 rate: {e["gbps"] / i["gbps"]:.3f}; CPU send {e["cpu_tx"]:.0f} vs {i["cpu_tx"]:.0f}, '
              f'receive {e["cpu_rx"]:.0f} vs {i["cpu_rx"]:.0f} (% of one core)')
wan = [s for s in summary if s["part"] == "wan"]
if wan:
    print(f"\nThrough linkemu: 1 Gb/s, RTT 100 ms, 0.1 % loss, 12.5 MB buffer, {wan_secs} s (medians); "
          f"Mathis bound for the configured path {mathis_cfg / 1e6:.2f} Mb/s:\n")
    print("| cc | tool | runs ok | Mb/s (median) | all runs Mb/s | retransmits | mean RTT ms | Mathis bound, measured RTT and p (Mb/s) | achieved / configured bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sorted(wan, key=lambda s: (s["cc"], s["tool"])):
        mm = f'{s["mathis_measured_mbps"]:.2f}' if s["mathis_measured_mbps"] else "-"
        print(f'| {s["cc"]} | {s["tool"]} | {s["ok"]}/{s["runs"]} | {s["gbps"] * 1e3:.1f} | '
              f'{" ".join(f"{g * 1e3:.1f}" for g in s["all_gbps"])} | {s["retransmits"]:.0f} | {s["rtt_ms"]:.1f} | {mm} | '
              f'{s["gbps"] * 1e9 / mathis_cfg:.2f} |')
PY
