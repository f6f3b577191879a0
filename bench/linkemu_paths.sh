#!/usr/bin/env bash
# The seeds' long fat path through `evlbi linkemu`: TCP baselines and delay accuracy.
#
# 1. TCP cubic and bbr (iperf3 -C, one stream, SECS s) through a 1 Gb/s bottleneck with 100 ms
#    RTT (50 ms each way), a 1-BDP drop-tail buffer (12.5 MB) and random loss 0, 0.01 %, 0.1 %,
#    1 %, printed beside the Mathis bound (MSS/RTT)*sqrt(3/2)/sqrt(p), MSS 1448 B, capped at 1 Gb/s.
# 2. Delay accuracy: ping RTT distribution (500 pings, 10 ms apart) with --delay 50ms, idle and
#    while iperf3 UDP loads the link: 0.9 Gb/s into 1.2 Gb/s at MTU 1500, and as much as iperf3
#    sends (aiming at 4 Gb/s) into 5 Gb/s at MTU 9000. Error of mean and p99 against 100 ms.
#    RTTs come from a UDP echo timed in nanoseconds (ping prints whole ms above 100 ms).
#
# Usage (root): bench/linkemu_paths.sh
#   env: SECS=30 per TCP run, TCP_LOSSES="0 0.0001 0.001 0.01" ("" skips TCP), EVLBI=target/release/evlbi
# Only namespaces lkpath-<pid>-{a,b} are created (10.77.0.1/2 inside) and removed on any exit;
# only processes this script started are stopped. Results: Markdown on stdout, JSON in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
EVLBI=${EVLBI:-target/release/evlbi}
SECS=${SECS:-30}
OUT=${OUT:-bench/results/linkemu_paths.json}
NS_A="lkpath-$$-a"
NS_B="lkpath-$$-b"
WORK=$(mktemp -d /tmp/linkemu-paths.XXXXXX)
EMU_PID=""
SRV_PID=""
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces, TUN)" >&2; exit 2; }
[[ -x $EVLBI ]] || scripts/setup.sh --build
command -v iperf3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
command -v ping >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iputils-ping >/dev/null; }

cleanup() {
    stop_pid "$SRV_PID"
    stop_pid "$EMU_PID"
    for ns in "$NS_A" "$NS_B"; do ip netns list | grep -q "^$ns\b" && ip netns delete "$ns" || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stop_emu() { stop_pid "$SRV_PID"; SRV_PID=""; stop_pid "$EMU_PID"; EMU_PID=""; }
start_server() {
    ip netns exec "$NS_B" iperf3 -s -1 -B 10.77.0.2 >/dev/null 2>&1 &
    SRV_PID=$!
    sleep 0.5
}

mkdir -p "$(dirname "$OUT")"
echo "## TCP through 1 Gb/s, 100 ms RTT, 12.5 MB buffer (iperf3 ${SECS} s, 1 stream) — $(date -u +%F)"
echo
echo "| cc | loss | achieved Mb/s | retransmits | mean RTT ms | Mathis bound Mb/s | achieved / bound |"
echo "|---|---|---|---|---|---|---|"
tcp_json=()
for loss in ${TCP_LOSSES:-0 0.0001 0.001 0.01}; do
    for cc in cubic bbr; do
        linkemu_start --rate 1G --delay 50ms --loss "$loss" --buffer 12500000B --seed 7
        start_server
        ip netns exec "$NS_A" iperf3 -c 10.77.0.2 -C "$cc" -t "$SECS" -J >"$WORK/tcp.json" 2>/dev/null || true
        stop_emu
        row=$(python3 - "$WORK/tcp.json" "$cc" "$loss" <<'EOF'
import json, math, sys
path, cc, loss = sys.argv[1], sys.argv[2], float(sys.argv[3])
try:
    d = json.load(open(path)); end = d["end"]
    bps = end["sum_received"]["bits_per_second"]; rtx = end["sum_sent"].get("retransmits", 0)
    rtt = end["streams"][0]["sender"].get("mean_rtt", 0) / 1000
except (OSError, KeyError, ValueError, IndexError):
    bps, rtx, rtt = 0.0, 0, 0.0
bound = 1e9 if loss == 0 else min(1e9, 1448 * 8 / 0.1 * math.sqrt(1.5) / math.sqrt(loss))
print(f"| {cc} | {loss*100:g} % | {bps/1e6:.1f} | {rtx} | {rtt:.1f} | {bound/1e6:.1f} | {bps/bound:.2f} |")
print(json.dumps({"cc": cc, "loss": loss, "bps": bps, "retransmits": rtx, "mean_rtt_ms": rtt, "mathis_bps": bound}))
EOF
)
        head -1 <<<"$row"
        tcp_json+=("$(tail -1 <<<"$row")")
    done
done

echo
echo "## Delay accuracy, --delay 50ms (set RTT 100 ms), 500 pings 10 ms apart"
echo
echo "| load | link | MTU | load achieved Mb/s | min | mean | p50 | p99 | max | mean err | p99 err |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
delay_json=()
ECHO_SERVER='
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.77.0.2", 7777)); s.settimeout(20)
while True:
    try:
        d, a = s.recvfrom(64)
    except socket.timeout:
        break
    s.sendto(d, a)
'
ECHO_CLIENT='
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
for i in range(500):
    t0 = time.perf_counter_ns(); s.sendto(i.to_bytes(8, "little"), ("10.77.0.2", 7777))
    try:
        while True:
            d = s.recv(64)
            if int.from_bytes(d, "little") == i:
                break
        print((time.perf_counter_ns() - t0) / 1e6)
    except socket.timeout:
        pass
    time.sleep(0.01)
'
delay_case() { # label rate mtu udp_rate(0 = idle) datagram
    local label=$1 rate=$2 mtu=$3 udp=$4 len=$5 load_pid=""
    linkemu_start --rate "$rate" --delay 50ms --mtu "$mtu" --buffer 4MB --seed 7
    if [[ $udp != 0 ]]; then
        start_server
        ip netns exec "$NS_A" iperf3 -c 10.77.0.2 -u -b "$udp" -l "$len" -t 8 -J >"$WORK/udp.json" 2>/dev/null &
        load_pid=$!
        sleep 1
    else
        echo '{}' >"$WORK/udp.json"
    fi
    # A UDP echo with nanosecond timestamps (ping prints whole ms above 100 ms).
    ip netns exec "$NS_B" timeout 30 python3 -c "$ECHO_SERVER" &
    local echo_pid=$!
    sleep 0.3
    ip netns exec "$NS_A" timeout 30 python3 -c "$ECHO_CLIENT" >"$WORK/ping.txt" || true
    stop_pid "$echo_pid"
    [[ -n $load_pid ]] && { wait "$load_pid" 2>/dev/null || true; }
    stop_emu
    row=$(python3 - "$WORK/ping.txt" "$WORK/udp.json" "$label" "$rate" "$mtu" <<'EOF'
import json, re, sys
ping, udp, label, rate, mtu = sys.argv[1:]
rtts = sorted(float(x) for x in open(ping).read().split())
try:
    end = json.load(open(udp))["end"]; s = end.get("sum_received", end.get("sum", {}))
    load = s.get("bits_per_second", 0) / 1e6
except (OSError, ValueError, KeyError):
    load = 0
if not rtts:
    print(f"| {label} | {rate} | {mtu} | {load:.0f} | no replies |||||||"); print("{}"); sys.exit()
q = lambda p: rtts[min(len(rtts) - 1, int(p * len(rtts)))]
mean = sum(rtts) / len(rtts)
print(f"| {label} | {rate} | {mtu} | {load:.0f} | {rtts[0]:.2f} | {mean:.2f} | {q(.5):.2f} | {q(.99):.2f} | {rtts[-1]:.2f} | {mean-100:+.2f} ms | {q(.99)-100:+.2f} ms |")
print(json.dumps({"label": label, "rate": rate, "mtu": int(mtu), "load_mbps": load, "n": len(rtts), "min": rtts[0], "mean": mean, "p50": q(.5), "p99": q(.99), "max": rtts[-1]}))
EOF
)
    head -1 <<<"$row"
    delay_json+=("$(tail -1 <<<"$row")")
}
delay_case idle 1G 1500 0 1472
delay_case "UDP 0.9 Gb/s" 1.2G 1500 900M 1472
delay_case "UDP 4 Gb/s (asked)" 5G 9000 4G 8000

printf '{"date":"%s","secs":%s,"tcp":[%s],"delay":[%s]}\n' "$(date -u +%FT%TZ)" "$SECS" \
    "$(IFS=,; echo "${tcp_json[*]}")" "$(IFS=,; echo "${delay_json[*]}")" >"$OUT"
echo
echo "JSON: $OUT"
