#!/usr/bin/env bash
# evlbi probe against its peers: iperf3 -u, iperf 2 (-u) and sockperf, on 127.0.0.1 and across a
# veth pair between two network namespaces this script creates (evlbi-bench-a/-b, 10.77.0.1/24 and
# 10.77.0.2/24, MTU 9000) and deletes again. Needs root (namespaces) and installs the peer tools
# with apt if missing.
#
# 1. 4.096 Gb/s of 8192-byte payloads, RUNS runs per tool, alternating, SECS s each: received
#    rate, loss, sender CPU (user+sys of the sending process over its wall time, % of one core,
#    from /usr/bin/time), and evlbi's own departure-gap p50/p99 (the peers do not measure it).
# 2. Highest rate with loss < 1e-6, 8192 B, evlbi vs iperf3: binary search on the asked rate
#    between 1 and 16 Gb/s, ITERS steps of SEARCH_SECS s each. A step passes when the loss is
#    below 1e-6 (with < 1e6 datagrams per step that means none lost) AND the receiver got at least
#    90 % of the asked rate (a sender that cannot keep up loses nothing but does not pass either).
#    Reported: the highest passing asked rate and what was received there.
# 3. The same search in packets/s for 1472-byte payloads (50 k to 1 M/s), evlbi vs iperf3 vs
#    sockperf.
# 4. The host's own timing floor at the same spacing (`evlbi probe host-jitter`, the pacer with
#    nothing to send) per path, printed beside the senders' departure gaps.
#
# Every tool gets the same socket buffers: PEER_BUF bytes (default 64 MiB) through iperf3/iperf -w
# and sockperf --buffer-size, with net.core.rmem_max/wmem_max raised to it for the run (restored
# at exit) so the peers' plain setsockopt is not capped; evlbi's server asks for the same size.
# PEER_BUF=default leaves the peers at their defaults (the first published run). Each search is
# repeated SEARCH_REPEATS times and the median of the highest passing rates is reported.
#
# Tool "evlbi_b8" is evlbi with --burst 8 (8 datagrams per UDP GSO call every 8 spacings).
# PARTS="fixed floor search" selects the parts; SEARCH_8192 / SEARCH_1472 the tools searched.
#
#   bench/probe.sh     env: RUNS=3 SECS=3 ITERS=6 SEARCH_SECS=2 SEARCH_REPEATS=3 PEER_BUF=67108864
#                           PATHS="lo veth" OUT=bench/results/probe.json PARTS="fixed floor search"
#                           SEARCH_8192="evlbi iperf3" SEARCH_1472="evlbi iperf3 sockperf"
#   PARTS=search SEARCH_8192="evlbi_b8 iperf3" SEARCH_1472="evlbi_b8 iperf3 sockperf" OUT=bench/results/probe_burst.json bench/probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SECS=${SECS:-3}
ITERS=${ITERS:-6}
SEARCH_SECS=${SEARCH_SECS:-2}
SEARCH_REPEATS=${SEARCH_REPEATS:-3}
PEER_BUF=${PEER_BUF:-67108864}
PARTS=${PARTS:-fixed floor search}
has() { [[ " $PARTS " == *" $1 "* ]]; }
PATHS=${PATHS:-lo veth}
OUT=${OUT:-bench/results/probe.json}
EVLBI=$(realpath "${EVLBI:-target/release/evlbi}")
[[ -x $EVLBI ]] || { echo "build evlbi first (cargo build --release -p evlbi) or set EVLBI" >&2; exit 1; }
need() { command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need iperf3 iperf3
need iperf iperf
need sockperf sockperf || true
command -v sockperf >/dev/null && HAVE_SOCKPERF=1 || HAVE_SOCKPERF=0
WORK=$(mktemp -d)
NSA=evlbi-bench-a
NSB=evlbi-bench-b
PIDS=()
RMEM0=$(sysctl -n net.core.rmem_max)
WMEM0=$(sysctl -n net.core.wmem_max)
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    sysctl -qw net.core.rmem_max="$RMEM0" net.core.wmem_max="$WMEM0" || true
    ip netns del $NSA 2>/dev/null || true
    ip netns del $NSB 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$(dirname "$OUT")"
if [[ $PEER_BUF == default ]]; then
    I3W=(); I2W=(); SPB=()
else
    sysctl -qw net.core.rmem_max="$PEER_BUF" net.core.wmem_max="$PEER_BUF"
    I3W=(-w "$PEER_BUF"); I2W=(-w "$PEER_BUF"); SPB=(--buffer-size "$PEER_BUF")
fi

setup_veth() {
    ip netns add $NSA
    ip netns add $NSB
    ip link add evlbi-bench-va netns $NSA type veth peer name evlbi-bench-vb netns $NSB
    ip -n $NSA addr add 10.77.0.1/24 dev evlbi-bench-va
    ip -n $NSB addr add 10.77.0.2/24 dev evlbi-bench-vb
    for n in $NSA:evlbi-bench-va $NSB:evlbi-bench-vb; do
        ip -n "${n%%:*}" link set "${n#*:}" mtu 9000 up
        ip -n "${n%%:*}" link set lo up
    done
}

# Per path: how to run the client (C) and server (S) side, and the server address.
use_path() {
    PATH_NAME=$1
    if [[ $1 == lo ]]; then C=(); S=(); IP=127.0.0.1; else C=(ip netns exec $NSA); S=(ip netns exec $NSB); IP=10.77.0.2; fi
}

bg_server() { # command... ; sets SRV
    "${S[@]}" "$@" >"$WORK/srv.log" 2>&1 &
    SRV=$!
    PIDS+=("$SRV")
    sleep 0.3
}
stop_server() { kill -INT "$SRV" 2>/dev/null || true; for _ in $(seq 20); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.1; done; kill -9 "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; }
timed() { "${C[@]}" /usr/bin/time -f "%U %S %e" -o "$WORK/time" "$@"; }
cpu() { python3 -c 'import sys; u,s,e=map(float,open(sys.argv[1]).read().split()[-3:]); print((u+s)/max(e,1e-9)*100)' "$WORK/time"; }

# Each run_* SIZE RATE_BPS SECS prints one JSON line.
run_evlbi_b8() { BURST=8 TOOL=evlbi_b8 run_evlbi "$@"; }
run_evlbi() {
    local size=$1 rate=$2 secs=$3 count
    count=$(python3 -c "print(max(1, int($rate * $secs / ($size * 8))))")
    bg_server "$EVLBI" probe server --bind "$IP" --port 15399 --once
    timed "$EVLBI" probe client "$IP:15399" --size "$size" --rate "$rate" --count "$count" --burst "${BURST:-1}" --json -q >"$WORK/r.json" || true
    stop_server
    python3 - "$WORK/r.json" "$(cpu)" "$PATH_NAME" "$size" "$rate" "${TOOL:-evlbi}" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1])); rx, tx = r["receiver"], r["sender"]
    out = {"rate_bps": rx["user_rate_bps"] or 0, "loss": rx["loss_fraction"] or 0,
           "gap_p50_us": tx["departure_gap_ns"]["p50"] / 1e3, "gap_p99_us": tx["departure_gap_ns"]["p99"] / 1e3,
           "interarrival_p99_us": (rx["inter_arrival_ns"]["p99"] or 0) / 1e3,
           "pps": (rx["user_rate_bps"] or 0) / (8 * int(sys.argv[4]))}
except Exception as e:
    out = {"rate_bps": 0, "loss": 1, "error": str(e)}
out.update(tool=sys.argv[6], path=sys.argv[3], size=int(sys.argv[4]), asked_bps=float(sys.argv[5]), cpu_pct=float(sys.argv[2]))
print(json.dumps(out))
EOF
}

run_iperf3() {
    local size=$1 rate=$2 secs=$3
    bg_server iperf3 -s -1 -B "$IP" -p 15398
    timed iperf3 -c "$IP" -p 15398 -u -b "$rate" -l "$size" -t "$secs" "${I3W[@]}" -J >"$WORK/i3.json" || true
    stop_server
    python3 - "$WORK/i3.json" "$(cpu)" "$PATH_NAME" "$size" "$rate" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1])); end = d["end"]; s = end["sum"]
    out = {"rate_bps": s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100), "loss": s.get("lost_percent", 0) / 100,
           "jitter_us": s.get("jitter_ms", 0) * 1e3}
    out["pps"] = out["rate_bps"] / (8 * int(sys.argv[4]))
except Exception as e:
    out = {"rate_bps": 0, "loss": 1, "error": str(e)}
out.update(tool="iperf3", path=sys.argv[3], size=int(sys.argv[4]), asked_bps=float(sys.argv[5]), cpu_pct=float(sys.argv[2]))
print(json.dumps(out))
EOF
}

run_iperf2() {
    local size=$1 rate=$2 secs=$3
    bg_server iperf -s -u -B "$IP" -p 15397 "${I2W[@]}"
    timed iperf -c "$IP" -p 15397 -u -b "$rate" -l "$size" -t "$secs" "${I2W[@]}" >"$WORK/i2.txt" 2>&1 || true
    for _ in $(seq 30); do grep -q "Lost/Total" "$WORK/srv.log" && grep -qE '[0-9]+/ *[0-9]+ ' "$WORK/srv.log" && break; sleep 0.1; done
    stop_server
    python3 - "$WORK/srv.log" "$(cpu)" "$PATH_NAME" "$size" "$rate" <<'EOF'
import json, re, sys
# Server report: "[  1] 0.0000-3.0002 sec  ...  0.004 ms 12/187504 (0.0064%)". The received rate is
# computed from the datagram counts and the interval, not iperf 2's own bandwidth column.
txt = open(sys.argv[1]).read(); size = int(sys.argv[4])
m = re.findall(r"([0-9.]+)-\s*([0-9.]+) sec.*?([0-9.]+) ms\s+(\d+)/\s*(\d+)", txt)
if m:
    a, b, jit, lost, total = m[-1]; lost, total = int(lost), int(total); span = float(b) - float(a)
    out = {"rate_bps": (total - lost) * size * 8 / span if span > 0 else 0, "loss": lost / total if total else 1,
           "jitter_us": float(jit) * 1e3}
    out["pps"] = out["rate_bps"] / (8 * size)
else:
    out = {"rate_bps": 0, "loss": 1, "error": "no server report"}
out.update(tool="iperf2", path=sys.argv[3], size=size, asked_bps=float(sys.argv[5]), cpu_pct=float(sys.argv[2]))
print(json.dumps(out))
EOF
}

run_sockperf() {
    local size=$1 rate=$2 secs=$3 mps
    mps=$(python3 -c "print(max(1, int($rate / ($size * 8))))")
    bg_server sockperf sr -i "$IP" -p 15396 "${SPB[@]}"
    timed sockperf tp -i "$IP" -p 15396 -m "$size" -t "$secs" --mps "$mps" "${SPB[@]}" >"$WORK/sp.txt" 2>&1 || true
    sleep 0.2
    stop_server
    python3 - "$WORK/sp.txt" "$WORK/srv.log" "$(cpu)" "$PATH_NAME" "$size" "$rate" "$secs" <<'EOF'
import json, re, sys
# Loss = messages the client says it sent minus those the server says it handled (the server
# also counts sockperf's few warm-up messages, so a tiny negative difference reads as 0).
c = open(sys.argv[1]).read(); s = open(sys.argv[2]).read(); size = int(sys.argv[5]); secs = float(sys.argv[7])
sent = re.search(r"Total of (\d+) messages sent in ([0-9.]+) sec", c); got = re.search(r"Total (\d+) messages received", s)
if sent and got:
    n, t, r = int(sent.group(1)), float(sent.group(2)), int(got.group(1))
    lost = max(0, n - r)
    out = {"rate_bps": min(r, n) * size * 8 / t, "loss": lost / n if n else 1, "sent": n, "received": r}
    out["pps"] = out["rate_bps"] / (8 * size)
else:
    out = {"rate_bps": 0, "loss": 1, "error": "no sockperf totals"}
out.update(tool="sockperf", path=sys.argv[4], size=size, asked_bps=float(sys.argv[6]), cpu_pct=float(sys.argv[3]))
print(json.dumps(out))
EOF
}

# search TOOL SIZE LO_BPS HI_BPS REP: binary search on the asked rate; prints one JSON line.
search() {
    local tool=$1 size=$2 lo=$3 hi=$4 rep=$5 best="" mid line
    for _ in $(seq "$ITERS"); do
        mid=$(python3 -c "print(int(($lo + $hi) / 2))")
        line=$("run_$tool" "$size" "$mid" "$SEARCH_SECS")
        echo "$line" >>"$WORK/search_steps"
        if python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["loss"] < 1e-6 and r["rate_bps"] >= 0.9 * r["asked_bps"] else 1)' "$line"; then
            lo=$mid; best=$line
        else
            hi=$mid
        fi
    done
    python3 -c 'import json,sys; b=json.loads(sys.argv[4]) if sys.argv[4] else None; print(json.dumps({"search": sys.argv[1], "size": int(sys.argv[2]), "path": sys.argv[3], "rep": int(sys.argv[5]), "best": b}))' "$tool" "$size" "$PATH_NAME" "$best" "$rep"
}

# host_jitter SPACING: the pacer with nothing to send, on the client side of the path.
host_jitter() {
    "${C[@]}" "$EVLBI" probe host-jitter --spacing "$1" --duration "${SECS}s" --json -q |
        python3 -c 'import json,sys; r=json.load(sys.stdin); g=r["releases"]["departure_gap_ns"]; print(json.dumps({"path": sys.argv[1], "spacing_ns": r["spacing_ns"], "gap_p50_us": g["p50"]/1e3, "gap_p99_us": g["p99"]/1e3, "interruptions_per_s": r["interruptions_per_second"], "interrupted_share": r["interrupted_share"], "nivcsw": r["involuntary_context_switches"]}))' "$PATH_NAME"
}

: >"$WORK/all"
: >"$WORK/search"
: >"$WORK/search_steps"
: >"$WORK/floor"
START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for p in $PATHS; do
    [[ $p == veth ]] && setup_veth
    use_path "$p"
    if has fixed; then
        echo "== $p: 4.096 Gb/s, 8192 B, $RUNS runs x $SECS s" >&2
        for _ in $(seq "$RUNS"); do
            for t in evlbi iperf3 iperf2 $([[ $HAVE_SOCKPERF == 1 ]] && echo sockperf); do
                "run_$t" 8192 4096000000 "$SECS" >>"$WORK/all"
            done
        done
    fi
    if has floor; then
        echo "== $p: host timing floor at 16 us" >&2
        host_jitter 16us >>"$WORK/floor"
    fi
    has search || continue
    for rep in $(seq "$SEARCH_REPEATS"); do
        echo "== $p: rate search, 8192 B ($rep/$SEARCH_REPEATS)" >&2
        for t in ${SEARCH_8192:-evlbi iperf3}; do search "$t" 8192 1000000000 16000000000 "$rep" >>"$WORK/search"; done
        echo "== $p: packet-rate search, 1472 B ($rep/$SEARCH_REPEATS)" >&2
        for t in ${SEARCH_1472:-evlbi iperf3 $([[ $HAVE_SOCKPERF == 1 ]] && echo sockperf)}; do
            [[ $t == sockperf && $HAVE_SOCKPERF != 1 ]] && continue
            search "$t" 1472 $((50000 * 1472 * 8)) $((1000000 * 1472 * 8)) "$rep" >>"$WORK/search"
        done
    done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$WORK/all" "$WORK/search" "$WORK/search_steps" "$OUT" "$RUNS" "$SECS" "$ITERS" "$SEARCH_SECS" "$(( $(date +%s) - START ))" "$LOAD0" "$LOAD1" "$HAVE_SOCKPERF" "$WORK/floor" "$PEER_BUF" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
searches = [json.loads(l) for l in open(sys.argv[2])]
steps = [json.loads(l) for l in open(sys.argv[3])]
runs, secs, iters, ssecs, took, load0, load1, have_sp = sys.argv[5:13]
floors = [json.loads(l) for l in open(sys.argv[13])]
peer_buf = sys.argv[14]
print(f"{runs} runs x {secs} s per tool and path (medians); searches {iters} steps x {ssecs} s; took {took} s; "
      f"load average before {load0}, after {load1}; peer socket buffers {peer_buf}" + ("" if have_sp == "1" else "; sockperf not installable"))
for path in sorted({r["path"] for r in rows + searches}, key=lambda p: p != "lo"):
    where = '127.0.0.1' if path == 'lo' else 'veth between two namespaces, MTU 9000'
    if any(r["path"] == path for r in rows) or any(f["path"] == path for f in floors):
        print(f"\n4.096 Gb/s, 8192 B, {where}\n")
        print("| tool | received Gb/s | loss | sender CPU % | departure gap p50 / p99 us | receiver timing |")
        print("|---|---|---|---|---|---|")
    else:
        print(f"\n{where}")
    for tool in ["evlbi", "iperf3", "iperf2", "sockperf"]:
        rs = [r for r in rows if r["path"] == path and r["tool"] == tool]
        if not rs:
            continue
        med = lambda k: statistics.median(r[k] for r in rs if r.get(k) is not None)
        gap = f"{med('gap_p50_us'):.2f} / {med('gap_p99_us'):.2f}" if tool == "evlbi" else "not measured"
        timing = (f"inter-arrival p99 {med('interarrival_p99_us'):.1f} us" if tool == "evlbi"
                  else f"jitter {med('jitter_us'):.1f} us" if any("jitter_us" in r for r in rs) else "-")
        print(f"| {tool} | {med('rate_bps')/1e9:.3f} | {med('loss'):.2e} | {med('cpu_pct'):.0f} | {gap} | {timing} |")
    for f in (f for f in floors if f["path"] == path):
        print(f"| host floor (pacer, nothing sent) | - | - | 100 | {f['gap_p50_us']:.2f} / {f['gap_p99_us']:.2f} | "
              f"{f['interruptions_per_s']:.0f} interruptions/s, {100*f['interrupted_share']:.2f} % of the time |")
    print(f"\nHighest rate with loss < 1e-6 and >= 90 % of the asked rate received ({path}), "
          f"median over repeats (a repeat where nothing passed counts as 0):\n")
    print("| size | tool | repeats passing | median highest passing asked rate | each repeat (asked Gb/s) | received there (median) | packets/s received | sender CPU % |")
    print("|---|---|---|---|---|---|---|---|")
    for (tool, size) in sorted({(s["search"], s["size"]) for s in searches if s["path"] == path}, key=lambda k: (-k[1], not k[0].startswith("evlbi"), k[0])):
        reps = [s["best"] for s in searches if s["path"] == path and s["search"] == tool and s["size"] == size]
        asked = [b["asked_bps"] if b else 0.0 for b in reps]
        passed = [b for b in reps if b]
        each = ", ".join(f"{a/1e9:.3f}" if a else "none" for a in asked)
        if not passed:
            print(f"| {size} | {tool} | 0/{len(reps)} | none passed | {each} | - | - | - |")
            continue
        m = statistics.median(asked)
        rx = statistics.median(b["rate_bps"] for b in passed)
        pps = statistics.median(b["pps"] for b in passed)
        cpu = statistics.median(b["cpu_pct"] for b in passed)
        print(f"| {size} | {tool} | {len(passed)}/{len(reps)} | {m/1e9:.3f} Gb/s ({m/8/size/1e3:.0f} k/s) | {each} | "
              f"{rx/1e9:.3f} Gb/s | {pps/1e3:.0f} k/s | {cpu:.0f} |")
json.dump({"runs": rows, "searches": searches, "search_steps": steps, "host_floor": floors, "peer_buf": peer_buf},
          open(sys.argv[4], "w"), indent=1)
EOF
