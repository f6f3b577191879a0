#!/usr/bin/env bash
# Receiver cost per frame, evlbi vs jive5ab, in the same run (issue 17): `evlbi stream send
# --seq-format jive5ab` (8000-byte data arrays, one frame per datagram, 4.096 Gb/s) on 127.0.0.1 to
#   (a) evlbi stream recv --seq-format jive5ab --fps 64000 --out DIR (files in tmpfs by default)
#   (b) jive5ab net2file (udps) into a file in the same DIR, driven over VSI-S on TCP
# RUNS times each, alternating. Measured per receiver: CPU seconds from /proc/PID/stat (utime +
# stime; for evlbi the receiver and its file-writer process, also shown apart), frames received
# (evlbi: written valid; jive5ab: file bytes / frame length), frames lost (sent − received).
# Prints the per-run rows, the medians and the ratio evlbi/jive5ab of CPU per received frame.
#
#   bench/recv_vs_jive5ab.sh    env: SECS=10 RUNS=3 DIR=/dev/shm RATE=4096M OUT=bench/results/recv_vs_jive5ab.json
#                                    JIVE5AB=(path; default: what scripts/jive5ab-path finds)
#                                    SEND_OPTS="" RECV_OPTS=""
#                                    SINK=file (or memory: evlbi stream recv without --out against
#                                    jive5ab net2mem, the receivers alone without a file write)
#                                    IDLE=5s (evlbi's --idle-timeout: the end of a run)
#                                    SETTLE=10 (seconds between a run's file removed and the next
#                                    receiver: both start cold, see below)
# Each row says the host's load (1-minute average) when the run ended and, for evlbi, which buffer
# took the output's stalls: none, the write buffer (its peak below its size), the socket buffer
# too (the writer held the receiver up), or neither (the socket overflowed: kernel drops). A run
# in which the receiver heard nothing (it stopped before the sender started) stops the bench
# with that message rather than measure nothing.
# Without a jive5ab binary the evlbi runs still happen and the peer is reported as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
SECS=${SECS:-10}
RUNS=${RUNS:-3}
RATE=${RATE:-4096M}
DIR=${DIR:-/dev/shm}
SINK=${SINK:-file}
IDLE=${IDLE:-5s}
SETTLE=${SETTLE:-10}
OUT=${OUT:-bench/results/recv_vs_jive5ab.json}
EVLBI=${EVLBI:-target/release/evlbi}
read -r -a SEND_ARGS <<<"${SEND_OPTS:-}"
read -r -a RECV_ARGS <<<"${RECV_OPTS:-}"
J5=$(scripts/jive5ab-path || true)
[[ -x $EVLBI ]] || scripts/setup.sh --build
WORK=$(mktemp -d /tmp/evlbi-recv-j5.XXXXXX)
OUTDIR=$(mktemp -d "$DIR/evlbi-recv-j5.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK" "$OUTDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"
FPS=$(python3 -c "r='$RATE'; m={'K':1e3,'M':1e6,'G':1e9}; v=float(r[:-1])*m[r[-1]] if r[-1] in m else float(r); print(int(v/64000))")
MBPS=$(python3 -c "print(int($FPS*64000/1e6))")

echo "== input: 2 s of $RATE (16 channels, 2 bit, 8000-byte data arrays, $FPS frames/s)"
"$EVLBI" vdif gen --stations Ef --rate "$RATE" --channels 16 --frame 8000 --seconds 2 --out "$WORK/in" -q \
    --start 2026-11-23T12:00:00Z >/dev/null
IN="$WORK/in/Ef.vdif"
# The host's 1-minute load average (other work on the 2 cores: the noise each figure carries).
load() { cut -d' ' -f1 /proc/loadavg; }
# utime + stime (+ cutime + cstime: reaped children) of a process, clock ticks; 0 when gone.
ticks() { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
send() {
    "$EVLBI" stream send --to "127.0.0.1:$1" --seq-format jive5ab "$IN" --rate "$RATE" --loop --duration "${SECS}s" \
        "${SEND_ARGS[@]}" --export-json "$2" 2>/dev/null
}

run_evlbi() { # $1 = run number
    local P RX
    P=$(port SOCK_DGRAM)
    rm -rf "${OUTDIR:?}"/*
    local out=(--out "$OUTDIR")
    [[ $SINK == memory ]] && out=()
    "$EVLBI" stream recv --listen "127.0.0.1:$P" --seq-format jive5ab --fps "$FPS" "${out[@]}" --idle-timeout "$IDLE" -q \
        "${RECV_ARGS[@]}" --export-json "$WORK/ev-recv.json" 2>"$WORK/ev-recv.log" &
    RX=$!
    PIDS+=("$RX")
    local T_RX0 T_RX1
    T_RX0=$(date +%s.%N)
    for _ in $(seq 600); do grep -q "listening on" "$WORK/ev-recv.log" 2>/dev/null && break; sleep 0.1; done
    # Sample both processes until the receiver exits: the writer's last figure before it is
    # reaped, and the receiver's own (its reaped children then hold the writer's).
    ( W=
      while kill -0 "$RX" 2>/dev/null; do
          [[ -n $W ]] || W=$(pgrep -P "$RX" | head -1 || true)
          a=$(awk '{ print $14 + $15, $16 + $17 }' "/proc/$RX/stat" 2>/dev/null || true)
          b=$( [[ -n $W ]] && ticks "$W" || echo 0)
          [[ -n $a ]] && echo "$a $b" >"$WORK/ev-ticks"
          sleep 0.1
      done ) &
    PIDS+=("$!")
    send "$P" "$WORK/ev-send.json"
    wait "$RX" || true
    T_RX1=$(date +%s.%N)
    sleep 0.2
    python3 - "$1" "$WORK/ev-send.json" "$WORK/ev-recv.json" "$WORK/ev-ticks" "$(getconf CLK_TCK)" "$(load)" \
        "$T_RX0" "$T_RX1" >>"$WORK/rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[2])); r = json.load(open(sys.argv[3]))
own, reaped, writer = (float(x) for x in open(sys.argv[4]).read().split())
tck = float(sys.argv[5])
# The writer process's CPU as the receiver reports it (its share of one core over the run, the
# child reaped at the end), in ticks: when the sampling missed its last figure.
wc = r.get("writer_cpu") or {}
reported = (wc.get("user_pct", 0) + wc.get("system_pct", 0)) / 100 * (float(sys.argv[8]) - float(sys.argv[7])) * tck
if writer == 0 and reaped == 0:
    reaped = reported
st = s["stations"][0]
if not r["stations"]:
    sys.exit(f"run {sys.argv[1]} invalid: evlbi's receiver heard nothing (stopped by {r['stopped_by']} after "
             f"{r['datagrams']['datagrams']} datagrams) while the sender sent {st['frames_sent']}: it stopped before "
             "the sender started (a slow start: raise IDLE)")
rs = r["stations"][0]; w = rs["window"]
writer = max(writer, reaped)
# Which buffer took the output's stalls.
size, peak = r.get("write_buffer") or 0, r.get("write_buffer_peak")
q, granted = r.get("socket_queue_peak"), r["rcvbuf"]["granted_rcv"]
if r["socket_drops"] > 0:
    absorbed = "neither: the socket overflowed"
elif r["writer_stalls"] > 0:
    absorbed = "write buffer, then socket buffer"
elif peak:
    absorbed = "write buffer"
else:
    absorbed = "none needed"
print(json.dumps({"rx": "evlbi", "run": int(sys.argv[1]), "frames_sent": st["frames_sent"], "sent_rate_bps": st["achieved_rate_bps"],
                  "sender_slips": st["slips"], "received": w["written_valid"], "lost": st["frames_sent"] - w["written_valid"],
                  "filled": w["written_filled"], "f": rs["loss_fraction"], "kernel_drops": r["socket_drops"],
                  "writer_stall_s": r["writer_stall_s"], "cpu_s": (own + writer) / tck, "receiver_cpu_s": own / tck,
                  "writer_cpu_s": writer / tck, "write_buffer": size, "write_buffer_peak": peak,
                  "socket_queue_peak": q, "rcvbuf_granted": granted, "absorbed_by": absorbed,
                  "load_1min": float(sys.argv[6])}))
PY
}

run_jive5ab() { # $1 = run number
    local P CP JP T0 T1
    P=$(port SOCK_DGRAM)
    CP=$(port SOCK_STREAM)
    rm -rf "${OUTDIR:?}"/*
    # -*: keep root's rights (no privilege drop); -m 0: errors only.
    "$J5" -m 0 -* -p "$CP" >"$WORK/j5.log" 2>&1 &
    JP=$!
    PIDS+=("$JP")
    # The same socket buffer evlbi asks for (64 MB); 8 MB work buffers, 32 of them.
    # mtu=9000: jive5ab sizes its datagrams from the MTU (1500 would cut 8040-byte ones).
    local open="net2file=open:$OUTDIR/j5.vdif,w;" close="net2file=close;" query="net2file?;"
    [[ $SINK == memory ]] && { open="net2mem=open;"; close="net2mem=close;"; query="net2mem?;"; }
    vsi "$CP" "net_protocol=udps:64M:8M:32;" "mtu=9000;" "mode=VDIF_8000-$MBPS-16-2;" "net_port=$P;" \
        "$open" >"$WORK/j5.vsi"
    T0=$(ticks "$JP")
    send "$P" "$WORK/j5-send.json"
    sleep 2 # what is queued is written
    T1=$(ticks "$JP")
    vsi "$CP" "evlbi?;" "$query" "$close" >>"$WORK/j5.vsi"
    kill "$JP" 2>/dev/null || true
    wait "$JP" 2>/dev/null || true
    python3 - "$1" "$WORK/j5-send.json" "$T0" "$T1" "$(getconf CLK_TCK)" "$WORK/j5.vsi" "$(load)" >>"$WORK/rows" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[2])); st = s["stations"][0]
t0, t1, tck = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
vsi = open(sys.argv[6]).read()
# Datagrams received: "evlbi?" total. (jive5ab writes invalid frames for missing ones, so its
# bytes written, from "net2file?" and kept in the JSON, are no count of frames received.)
ev = re.search(r"!evlbi\? 0 : total : (\d+) : loss : (\d+)", vsi)
nb = re.search(r"!net2file\?\s+0 : \w+ : (\d+)", vsi)
got = int(ev.group(1)) if ev else 0
print(json.dumps({"rx": "jive5ab", "run": int(sys.argv[1]), "frames_sent": st["frames_sent"], "sent_rate_bps": st["achieved_rate_bps"],
                  "sender_slips": st["slips"], "received": got, "lost": st["frames_sent"] - got, "cpu_s": (t1 - t0) / tck,
                  "jive5ab_loss": int(ev.group(2)) if ev else None, "bytes_written": int(nb.group(1)) if nb else None,
                  "load_1min": float(sys.argv[7])}))
PY
}

: >"$WORK/rows"
# Each receiver starts in the same state: the previous run's file removed SETTLE seconds before
# (on a VM with free page reporting its memory is then back with the host, and the first write to
# each page costs what it costs on a cold machine), and which of the two goes first alternates
# (the one right after the other's run would otherwise always get memory just freed).
settle() { rm -rf "${OUTDIR:?}"/*; sleep "$SETTLE"; }
for r in $(seq "$RUNS"); do
    order=(evlbi jive5ab)
    (( r % 2 == 0 )) && order=(jive5ab evlbi)
    for rx in "${order[@]}"; do
        [[ $rx == jive5ab && -z $J5 ]] && continue
        settle
        echo "== run $r of $RUNS: $rx (load $(load))"
        if [[ $rx == evlbi ]]; then run_evlbi "$r"; else run_jive5ab "$r"; fi
    done
done
[[ -n $J5 ]] || echo "== jive5ab not found (JIVE5AB=…): peer skipped"

python3 - "$WORK/rows" "$OUT" "$SECS" "$RATE" "$DIR" "${J5:-}" "$SINK" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, secs, rate, d, j5, sink = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
into = f"into {d}" if sink == "file" else "into memory (evlbi: no --out; jive5ab: net2mem)"
print(f"\n{rate}, 8000-byte frames (+32 header, +8 udps), one per datagram, {secs} s {into}; CPU from /proc/PID/stat\n")
print("| receiver | run | load | frames sent | received | lost | CPU s | µs CPU / frame | notes |\n|---|---|---|---|---|---|---|---|---|")
def buffers(r):
    peak = r.get("write_buffer_peak")
    wb = f"write buffer peak {peak / 1e6:.0f} of {r['write_buffer'] / 1e6:.0f} MB" if peak is not None else "write buffer: -"
    q = r.get("socket_queue_peak")
    sq = f", socket peak {q / 1e6:.1f} of {r['rcvbuf_granted'] / 1e6:.0f} MB" if q is not None else ""
    return f"{wb}{sq}: stalls absorbed by {r['absorbed_by']}"
for r in rows:
    per = 1e6 * r["cpu_s"] / max(r["received"], 1)
    note = (f"receiver {r['receiver_cpu_s']:.2f} s + writer {r['writer_cpu_s']:.2f} s; f = {r['f']:.2e}; writer stall {r['writer_stall_s']:.2f} s; {buffers(r)}"
            if r["rx"] == "evlbi" else f"jive5ab counts {r['jive5ab_loss']} lost")
    if r["sender_slips"]:
        note += f"; sender slipped {r['sender_slips']}x"
    print(f"| {r['rx']} | {r['run']} | {r['load_1min']:.1f} | {r['frames_sent']} | {r['received']} | {r['lost']} | {r['cpu_s']:.2f} | {per:.2f} | {note} |")
res = {"secs": float(secs), "rate": rate, "dir": d, "sink": sink, "jive5ab": j5 or None, "runs": rows}
med = {}
for rx in ("evlbi", "jive5ab"):
    rr = [r for r in rows if r["rx"] == rx]
    if not rr:
        continue
    m = med[rx] = {"cpu_us_per_frame": statistics.median(1e6 * r["cpu_s"] / max(r["received"], 1) for r in rr),
                   "lost_frames": statistics.median(r["lost"] for r in rr), "runs_without_loss": sum(r["lost"] == 0 for r in rr),
                   "runs": len(rr)}
    if rx == "evlbi":
        m["receiver_cpu_us_per_frame"] = statistics.median(1e6 * r["receiver_cpu_s"] / max(r["received"], 1) for r in rr)
        m["writer_cpu_us_per_frame"] = statistics.median(1e6 * r["writer_cpu_s"] / max(r["received"], 1) for r in rr)
    print(f"\n{rx}: median {m['cpu_us_per_frame']:.2f} µs CPU per received frame"
          + (f" (receiver {m['receiver_cpu_us_per_frame']:.2f} + writer {m['writer_cpu_us_per_frame']:.2f})" if rx == "evlbi" else "")
          + f", median lost {m['lost_frames']}, runs without loss {m['runs_without_loss']} of {m['runs']}")
res["medians"] = med
if "jive5ab" in med:
    res["ratio_evlbi_over_jive5ab"] = med["evlbi"]["cpu_us_per_frame"] / med["jive5ab"]["cpu_us_per_frame"]
    res["ratio_receiver_only_over_jive5ab"] = med["evlbi"]["receiver_cpu_us_per_frame"] / med["jive5ab"]["cpu_us_per_frame"]
    print(f"ratio evlbi/jive5ab, CPU per frame: {res['ratio_evlbi_over_jive5ab']:.2f} (evlbi's receiver process alone: {res['ratio_receiver_only_over_jive5ab']:.2f})")
else:
    print("jive5ab: skipped (no binary)")
json.dump(res, open(out, "w"), indent=1)
PY
echo "results: $OUT"
