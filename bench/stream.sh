#!/usr/bin/env bash
# evlbi stream benchmarks (issue 4), one run:
#  1. 4.096 Gb/s of 8000-byte VDIF frames for SECS s on 127.0.0.1, receiver writing files to disk
#     (chunks of 4 GB; closed chunks are deleted as the run goes so a 10-minute run fits the disk):
#     lost frames, departure gaps, sender and receiver CPU. jive5ab is not packaged for Debian, so
#     its figures are the ones quoted in the issue for the same configuration (udps, ipd 16 us).
#  2. Highest rate to the memory sink with loss < 1e-6: RATES swept for MAXSECS s each, one frame
#     per datagram and system call; then BURST_RATES with --burst 8 (8 frames per UDP GSO call,
#     received with UDP GRO).
#  3. ARQ through `evlbi linkemu` (root, MTU 9000 so a frame is one packet): 1 % random loss each way,
#     100 ms RTT, 300 ms latency, 512 Mb/s:
#     share of lost frames recovered and extra bandwidth.
#  4. Catch-up (root): the sender stopped for 200 ms mid-run, through linkemu paths of 1.25x and
#     2.3x the stream rate, catching up at 2x or 1.2x (or giving the time up, --max-lag 1ms).
#
#   bench/stream.sh    env: SECS=30 MAXSECS=20 RATES="4096M 5G 6G 7G 8G" ARQSECS=20 OUT=bench/results/stream.json
#                           PARTS="disk sweep arq catchup" DISK_DIR=(a directory under /tmp) DISK_RATE=4096M
#   SECS=600 PARTS=disk OUT=bench/results/stream_disk600.json bench/stream.sh   # the issue's 10-minute run
#   SECS=600 PARTS=disk DISK_DIR=/dev/shm/evlbi-bench OUT=… bench/stream.sh      # same, into tmpfs
# SEND_OPTS: extra `stream send` options for the disk run, e.g. "--burst 8 --spin 20us" (sleep
# most of each gap: a third of a core instead of a whole one). RECV_OPTS: extra `stream recv`
# options for it, e.g. "--direct" (O_DIRECT writes, past the page cache).
# PIN=1 (disk run, root): the sender alone on CPU 0; the receiver, its writer process and the
# kernel's unbound workqueues (page-cache writeback) on CPU 1 — a station keeps its sending core
# free the same way. Restored at exit.
# Before the disk run the script measures what the output file system sustains (dd of 4 GB with
# fdatasync) so the result can be read against it.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-30}
MAXSECS=${MAXSECS:-20}
RATES=${RATES:-4096M 5G 6G 7G 8G}
BURST_RATES=${BURST_RATES:-8G 10G 12G 14G}
OUT=${OUT:-bench/results/stream.json}
PARTS=${PARTS:-disk sweep arq catchup}
DISK_RATE=${DISK_RATE:-4096M}
read -r -a SEND_ARGS <<<"${SEND_OPTS:-}"
read -r -a RECV_ARGS <<<"${RECV_OPTS:-}"
has() { [[ " $PARTS " == *" $1 "* ]]; }
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || scripts/setup.sh --build
WORK=$(mktemp -d /tmp/evlbi-stream-bench.XXXXXX)
PIDS=()
NS_A="stb-$$-a"
NS_B="stb-$$-b"
RXDIR=${DISK_DIR:-$WORK/rx}
PIN=${PIN:-0}
WQMASK=/sys/devices/virtual/workqueue/cpumask
WQ0=$(cat "$WQMASK" 2>/dev/null || true)
TX_PIN=()
RX_PIN=()
if [[ $PIN == 1 ]]; then
    TX_PIN=(taskset -c 0)
    RX_PIN=(taskset -c 1)
fi
cleanup() {
    [[ $PIN == 1 && -n $WQ0 ]] && echo "$WQ0" >"$WQMASK" 2>/dev/null || true
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    for ns in "$NS_A" "$NS_B"; do ip netns list 2>/dev/null | grep -q "^$ns\b" && ip netns delete "$ns" || true; done
    rm -rf "$WORK" "$RXDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"

echo "== input: 2 s of 4.096 Gb/s (16 channels, 2 bit, 8000-byte frames, 64000 frames/s)"
"$EVLBI" vdif gen --stations Ef --rate 4096M --channels 16 --frame 8000 --seconds 2 --out "$WORK/in" -q \
    --start 2026-11-23T12:00:00Z >/dev/null
IN="$WORK/in/Ef.vdif"

port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

DISK_OK=0
if has disk; then
echo "== 1. $DISK_RATE to files in $RXDIR for ${SECS} s"
mkdir -p "$RXDIR"
echo "   the file system first: dd 4 GB with fdatasync, then 4 GB with O_DIRECT"
dd_mbps() { dd if=/dev/zero of="$RXDIR/dd.test" bs=1M count=4000 "$@" 2>&1 | awk '/copied/ {print $(NF-1) * ($NF == "GB/s" ? 1000 : 1)}'; rm -f "$RXDIR/dd.test"; }
DD_MBPS=$(dd_mbps conv=fdatasync)
DD_DIRECT_MBPS=$(dd_mbps oflag=direct || echo 0)
echo "   dd: $DD_MBPS MB/s through the page cache, ${DD_DIRECT_MBPS:-0} MB/s direct"
P=$(port)
[[ $PIN == 1 ]] && { echo 2 >"$WQMASK" || echo "   (could not move the unbound workqueues)"; }
"${RX_PIN[@]}" "$EVLBI" stream recv --listen "127.0.0.1:$P" --out "$RXDIR" --chunk 4G --idle-timeout 2s --interval 10s "${RECV_ARGS[@]}" \
    --export-json "$WORK/disk-recv.json" 2>"$WORK/disk-recv.log" &
RX=$!
PIDS+=("$RX")
( while kill -0 "$RX" 2>/dev/null; do
      # "|| true": set -e and pipefail are inherited, and an ls that finds no file yet would end
      # this loop for good (it did: a 10-minute run filled memory).
      ls -1t "$RXDIR"/*.vdif 2>/dev/null | tail -n +3 | xargs -r rm -f || true
      sleep 2
  done ) &
PIDS+=("$!")
# The receiver allocates its write buffer before it binds (gigabytes take seconds): start the
# sender once it listens, or the first seconds go to a closed port.
for _ in $(seq 600); do grep -q "listening on" "$WORK/disk-recv.log" 2>/dev/null && break; sleep 0.1; done
"${TX_PIN[@]}" "$EVLBI" stream send --to "127.0.0.1:$P" "$IN" --rate "$DISK_RATE" "${SEND_ARGS[@]}" --loop --duration "${SECS}s" --export-json "$WORK/disk-send.json" 2>/dev/null
wait "$RX" || true
[[ $PIN == 1 && -n $WQ0 ]] && echo "$WQ0" >"$WQMASK"
cp "$WORK/disk-recv.log" "${OUT%.json}.recv.log"
cp "$WORK/disk-send.json" "${OUT%.json}.send.json"; cp "$WORK/disk-recv.json" "${OUT%.json}.recv.json"
DISK_OK=1
fi

echo "== 2. memory sink, ${MAXSECS} s per rate: $RATES; with --burst 8: $BURST_RATES"
: >"$WORK/sweep"
has sweep || { RATES=""; BURST_RATES=""; }
for rb in $(for r in $RATES; do echo "$r:1"; done) $(for r in $BURST_RATES; do echo "$r:8"; done); do
    r=${rb%:*}
    b=${rb#*:}
    P=$(port)
    "$EVLBI" stream recv --listen "127.0.0.1:$P" --idle-timeout 2s -q --export-json "$WORK/mem-recv.json" 2>/dev/null &
    RX=$!
    PIDS+=("$RX")
    sleep 0.3
    "$EVLBI" stream send --to "127.0.0.1:$P" "$IN" --rate "$r" --burst "$b" --loop --duration "${MAXSECS}s" \
        --export-json "$WORK/mem-send.json" 2>/dev/null
    wait "$RX" || true
    python3 - "$r" "$WORK/mem-send.json" "$WORK/mem-recv.json" "$b" >>"$WORK/sweep" <<'PY'
import json, sys
def cpu_pct(c):  # a process CPU share: user_pct + system_pct (user + system before the one host schema)
    return c.get("user_pct", c.get("user", 0.0)) + c.get("system_pct", c.get("system", 0.0))
def gap_us(st, k):
    """A departure-gap statistic in µs: departure_gap_ns (a HistSummary) since the refactor,
    departure_gap in µs before it (so old binaries still run here)."""
    if "departure_gap_ns" in st:
        v = st["departure_gap_ns"].get(k)
        return None if v is None else v / 1e3
    return st["departure_gap"].get({"stdev": "stddev_us"}.get(k, k + "_us"))
s = json.load(open(sys.argv[2])); r = json.load(open(sys.argv[3]))
st = s["stations"][0]; sent = st["frames_sent"]
rs = r["stations"][0] if r["stations"] else {"window": {"written_valid": 0}}
got = rs["window"]["written_valid"]
print(json.dumps({"asked": sys.argv[1], "burst": int(sys.argv[4]), "sent_rate_bps": st["achieved_rate_bps"], "frames_sent": sent,
                  "frames_received": got, "loss": (sent - got) / sent if sent else 1.0,
                  "kernel_drops": r.get("socket_drops", r["udp"]["rcvbuf_errors"]), "sender_cpu": cpu_pct(s["cpu"]),
                  "receiver_cpu": cpu_pct(r["cpu"]), "slips": st["slips"],
                  "gap_p99_us": gap_us(st, "p99")}))
PY
done

echo "== 3. ARQ through linkemu: 512 Mb/s, 1 % loss each way, 100 ms RTT, 300 ms latency"
ARQ_OK=0
if [[ $(id -u) -eq 0 ]] && has arq; then
    "$EVLBI" vdif gen --stations Ef --rate 512M --frame 8000 --seconds 2 --out "$WORK/in512" -q \
        --start 2026-11-23T12:00:00Z >/dev/null
    "$EVLBI" linkemu --a "ns:$NS_A" --b "ns:$NS_B" --quiet --json --state-dir "$WORK/state" \
        --rate 2G --delay 50ms --loss 1% --seed 7 --mtu 9000 >"$WORK/emu.json" 2>"$WORK/emu.log" &
    EMU=$!
    PIDS+=("$EMU")
    for _ in $(seq 100); do ip -n "$NS_B" addr show dev lkemu-b 2>/dev/null | grep -q 10.77.0.2 && break; sleep 0.05; done
    ip netns exec "$NS_B" "$EVLBI" stream recv --listen 10.77.0.2:46227 --arq --latency 300ms --idle-timeout 2s -q \
        --export-json "$WORK/arq-recv.json" 2>/dev/null &
    RX=$!
    PIDS+=("$RX")
    sleep 0.3
    ip netns exec "$NS_A" "$EVLBI" stream send --to 10.77.0.2:46227 "$WORK/in512/Ef.vdif" --loop --duration "${ARQSECS:-20}s" \
        --arq-latency 300ms --export-json "$WORK/arq-send.json" 2>/dev/null
    wait "$RX" || true
    kill -TERM "$EMU" 2>/dev/null || true
    wait "$EMU" 2>/dev/null || true
    ARQ_OK=1
fi

# 4. Catching up through a tight path: 512 Mb/s through linkemu at 640 Mb/s (1.25x, buffer one
# RTT of 20 ms) and at 1.2 Gb/s; the sender is stopped for 200 ms 3 s into an 8 s run and catches
# up at --catch-up times the rate (or, with --max-lag 1ms, gives the time up as before).
: >"$WORK/catchup"
if [[ $(id -u) -eq 0 ]] && has catchup; then
    echo "== 4. catch-up after a 200 ms hold through a 640 Mb/s and a 1.2 Gb/s path"
    [[ -f $WORK/in512/Ef.vdif ]] || "$EVLBI" vdif gen --stations Ef --rate 512M --frame 8000 --seconds 2 --out "$WORK/in512" -q \
        --start 2026-11-23T12:00:00Z >/dev/null
    for case in "640M 2 1s" "640M 1.2 1s" "640M 2 1ms" "1200M 2 1s"; do
        read -r path cu lag <<<"$case"
        "$EVLBI" linkemu --a "ns:$NS_A" --b "ns:$NS_B" --quiet --json --state-dir "$WORK/state" \
            --rate "$path" --delay 10ms --mtu 9000 >"$WORK/cu-emu.json" 2>/dev/null &
        EMU=$!
        PIDS+=("$EMU")
        for _ in $(seq 100); do ip -n "$NS_B" addr show dev lkemu-b 2>/dev/null | grep -q 10.77.0.2 && break; sleep 0.05; done
        ip netns exec "$NS_B" "$EVLBI" stream recv --listen 10.77.0.2:46227 --idle-timeout 2s -q \
            --export-json "$WORK/cu-recv.json" 2>/dev/null &
        RX=$!
        PIDS+=("$RX")
        sleep 0.3
        ip netns exec "$NS_A" "$EVLBI" stream send --to 10.77.0.2:46227 "$WORK/in512/Ef.vdif" --loop --duration 8s \
            --max-lag "$lag" --catch-up "$cu" --export-json "$WORK/cu-send.json" 2>/dev/null &
        TX=$!
        sleep 3
        TXP=$(pgrep -P "$TX" -f "stream send" || echo "$TX") # ip netns exec may exec or fork
        kill -STOP "$TXP"; sleep 0.2; kill -CONT "$TXP"
        wait "$TX" || true
        wait "$RX" || true
        kill -TERM "$EMU" 2>/dev/null || true
        wait "$EMU" 2>/dev/null || true
        python3 - "$path" "$cu" "$lag" "$WORK/cu-send.json" "$WORK/cu-recv.json" >>"$WORK/catchup" <<'PY'
import json, sys
s = json.load(open(sys.argv[4])); r = json.load(open(sys.argv[5]))
st = s["stations"][0]; win = r["stations"][0]["window"]
print(json.dumps({"path": sys.argv[1], "catch_up": float(sys.argv[2]), "max_lag": sys.argv[3], "frames_due": 64000,
                  "frames_sent": st["frames_sent"], "slips": st["slips"], "given_up_s": st.get("slipped_s", 0),
                  "written_valid": win["written_valid"], "filled": win["written_filled"]}))
PY
    done
fi

python3 - "$WORK" "$SECS" "$MAXSECS" "$ARQ_OK" "$OUT" "$DISK_OK" "${DD_MBPS:-0}" "$RXDIR" "$DISK_RATE" "${DD_DIRECT_MBPS:-0}" <<'PY'
import json, os, sys
def cpu_pct(c):  # a process CPU share: user_pct + system_pct (user + system before the one host schema)
    return c.get("user_pct", c.get("user", 0.0)) + c.get("system_pct", c.get("system", 0.0))
def gap_us(st, k):
    """A departure-gap statistic in µs: departure_gap_ns (a HistSummary) since the refactor,
    departure_gap in µs before it (so old binaries still run here)."""
    if "departure_gap_ns" in st:
        v = st["departure_gap_ns"].get(k)
        return None if v is None else v / 1e3
    return st["departure_gap"].get({"stdev": "stddev_us"}.get(k, k + "_us"))
w, secs, maxsecs, arq_ok, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
disk_ok, dd_mbps, rxdir, disk_rate = sys.argv[6] == "1", float(sys.argv[7]), sys.argv[8], sys.argv[9]
dd_direct_mbps = float(sys.argv[10] or 0)
j = lambda n: json.load(open(os.path.join(w, n)))
res = {"jive5ab_quoted": {"rate_bps": 3.98e9, "sender_cpu_pct": 111, "receiver_cpu_pct": 28, "gap_stddev_us": 9.7,
                          "highest_bps": 7.9e9, "highest_loss": 8.5e-5}}
if disk_ok:
    ds, dr = j("disk-send.json"), j("disk-recv.json")
    st, rs = ds["stations"][0], dr["stations"][0]
    lost = st["frames_sent"] - rs["window"]["written_valid"]
    disk = {"seconds": float(secs), "asked": disk_rate, "send_opts": os.environ.get("SEND_OPTS", ""), "recv_opts": os.environ.get("RECV_OPTS", ""), "direct_io": dr.get("direct_io", False),
            "dir": rxdir, "pinned": os.environ.get("PIN") == "1", "dd_fdatasync_mbps": dd_mbps, "dd_direct_mbps": dd_direct_mbps,
            "frames_sent": st["frames_sent"], "frames_written_valid": rs["window"]["written_valid"],
            "frames_filled": rs["window"]["written_filled"], "lost_frames": lost, "achieved_rate_bps": st["achieved_rate_bps"],
            # What the asked rate writes: frames (header included) per second × frame length.
            "file_rate_mbps": st["rate_bps"] / 8 * rs["frame_len"] / (rs["frame_len"] - 32) / 1e6,
            "spacing_us": st["spacing_us"], "slipped_s": st.get("slipped_s"),
            "gap": {k: gap_us(st, k) for k in ("p50", "p99", "stdev")}, "slips": st["slips"], "sender_cpu_pct": cpu_pct(ds["cpu"]),
            "receiver_cpu_pct": cpu_pct(dr["cpu"]), "kernel_drops": dr.get("socket_drops", dr["udp"]["rcvbuf_errors"]),
            "writer_cpu_pct": cpu_pct(dr["writer_cpu"]) if dr.get("writer_cpu") else None,
            "writer_stall_s": dr.get("writer_stall_s"), "writer_stalls": dr.get("writer_stalls"),
            "stopped_by": dr["stopped_by"]}
    res["disk"] = disk
    g = disk["gap"]
    print(f"\n| {disk_rate}, 8000 B frames, {secs} s to files in {rxdir}{' (direct I/O)' if disk['direct_io'] else ''} (dd {dd_mbps:.0f} MB/s, direct {dd_direct_mbps:.0f} MB/s; the stream needs {disk['file_rate_mbps']:.0f} MB/s) | evlbi | jive5ab (quoted) |\n|---|---|---|")
    print(f"| achieved data rate | {disk['achieved_rate_bps']/1e9:.4f} Gb/s | 3.98 Gb/s |")
    print(f"| lost frames | {lost} of {disk['frames_sent']} ({lost/max(disk['frames_sent'],1):.2e}; kernel drops {disk['kernel_drops']}) | — |")
    print(f"| receiver waited for the writer | {disk['writer_stall_s']:.2f} s in {disk['writer_stalls']} stalls | — |")
    print(f"| departure gap p50 / p99 / σ | {g['p50']:.2f} / {g['p99']:.2f} / {g['stdev']:.2f} µs (nominal {disk['spacing_us']:.3f}) | σ 9.7 µs |")
    print(f"| sender fell > --max-lag behind | {disk['slips']} times, {disk['slipped_s'] or 0:.3f} s given up | — |")
    print(f"| sender CPU | {disk['sender_cpu_pct']:.0f} % | 111 % |\n| receiver CPU | {disk['receiver_cpu_pct']:.0f} % | 28 % |")
    if disk["writer_cpu_pct"] is not None:
        print(f"| file-writer process CPU (beside the receiver's) | {disk['writer_cpu_pct']:.0f} % | — |")
sweep = [json.loads(l) for l in open(os.path.join(w, "sweep"))]
if sweep:
    lossless = [p for p in sweep if p["loss"] < 1e-6 and p["frames_sent"] >= 1e6]
    best = max(lossless, key=lambda p: p["sent_rate_bps"]) if lossless else None
    res.update({"memory_sweep": sweep, "highest_lossless_bps": best["sent_rate_bps"] if best else None,
                "highest_lossless_burst": best["burst"] if best else None,
                "highest_lossless_one_per_call_bps": max((p["sent_rate_bps"] for p in lossless if p["burst"] == 1), default=None)})
    print("\n| asked | burst | sent Gb/s | frames | loss | kernel drops | sender CPU | receiver CPU | gap p99 µs | slips |\n|---|---|---|---|---|---|---|---|---|---|")
    for p in sweep:
        print(f"| {p['asked']} | {p['burst']} | {p['sent_rate_bps']/1e9:.3f} | {p['frames_sent']} | {p['loss']:.2e} | {p['kernel_drops']} | {p['sender_cpu']:.0f} % | {p['receiver_cpu']:.0f} % | {p['gap_p99_us']:.2f} | {p['slips']} |")
    print(f"\nhighest rate with loss < 1e-6 (≥ 1e6 frames): {res['highest_lossless_bps']/1e9:.2f} Gb/s with --burst {res['highest_lossless_burst']}" if best else "\nno rate met loss < 1e-6")
if arq_ok:
    a_s, a_r = j("arq-send.json"), j("arq-recv.json")
    q = a_r["stations"][0]["arq"]
    sent_bytes = a_s["stations"][0]["bytes_sent"]
    a = res["arq"] = {"missing": q["missing_seen"], "recovered": q["recovered"],
                      "recovered_share": q["recovered"] / q["missing_seen"] if q["missing_seen"] else None,
                      "filled": a_r["stations"][0]["window"]["written_filled"],
                      "extra_bandwidth": a_s["arq"]["resent_bytes"] / sent_bytes if sent_bytes else None,
                      "srtt_s": q["srtt_s"], "naks": a_r["naks_sent"]}
    print(f"ARQ 1 %/100 ms RTT/300 ms: {a['recovered']} of {a['missing']} lost frames recovered ({100*a['recovered_share']:.2f} %), "
          f"{a['filled']} written invalid, extra bandwidth {100*a['extra_bandwidth']:.2f} %, srtt {a['srtt_s']}")
cu = [json.loads(l) for l in open(os.path.join(w, "catchup"))]
if cu:
    res["catch_up"] = cu
    print("\n| path | --catch-up | --max-lag | frames sent of 64000 due | time given up | lost on the path (filled) |\n|---|---|---|---|---|---|")
    for c in cu:
        print(f"| {c['path']} | {c['catch_up']} | {c['max_lag']} | {c['frames_sent']} | {c['given_up_s']:.3f} s | {c['filled']} |")
json.dump(res, open(out, "w"), indent=1)
PY
echo "results: $OUT"
