#!/usr/bin/env bash
# Throughput of `evlbi linkemu` with an infinite-rate, zero-delay link (the
# model's fixed cost) against its `--bare` TUN-to-TUN copy loop (the cost of
# the plumbing alone), measured with iperf3 TCP and UDP at MTU 1500 and 9000.
#
# Prints Gb/s for both, the ratio emulator/bare, and the emulator's CPU use
# (utime+stime from /proc/PID/stat over the iperf3 run, % of one core).
# Results also go to $OUT as JSON.
#
# Usage (root):  bench/linkemu_throughput.sh
#   EVLBI=path/to/evlbi  binary to test   [target/release/evlbi]
#   SECS=10              seconds per iperf3 run
#   RUNS=1               runs per case; the median is reported
#   OUT=file.json        results          [/tmp/linkemu_throughput.json]
#
# Only namespaces named lkbench-<pid>-{a,b} are created (and deleted on any
# exit); addresses are 10.77.0.1/2 inside them. Only processes this script
# started are stopped.
set -euo pipefail

EVLBI=${EVLBI:-target/release/evlbi}
SECS=${SECS:-10}
RUNS=${RUNS:-1}
OUT=${OUT:-/tmp/linkemu_throughput.json}
NS_A="lkbench-$$-a"
NS_B="lkbench-$$-b"
WORK=$(mktemp -d /tmp/linkemu-bench.XXXXXX)
EMU_PID=""
SRV_PID=""

if [[ $(id -u) -ne 0 ]]; then
    echo "needs root (network namespaces, TUN)" >&2
    exit 2
fi
if [[ ! -x $EVLBI ]]; then
    echo "no evlbi binary at $EVLBI (cargo build --release, or set EVLBI=)" >&2
    exit 2
fi
if ! command -v iperf3 >/dev/null; then
    echo "installing iperf3..." >&2
    apt-get install -y -qq iperf3 >/dev/null 2>&1 ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
fi

stop_pid() { # pid: TERM, then wait for it (only our own children get here)
    local pid=$1
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_pid "$SRV_PID"
    stop_pid "$EMU_PID"
    for ns in "$NS_A" "$NS_B"; do
        if ip netns list | grep -qx "$ns\( (id: [0-9]*)\)\?"; then
            ip netns delete "$ns" || true
        fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cpu_ticks() { # utime + stime of a pid, in clock ticks (fields 14, 15 after the comm)
    local stat
    stat=$(cat "/proc/$1/stat")
    stat=${stat##*) }
    awk '{print $12 + $13}' <<<"$stat"
}

# One iperf3 run through a fresh emulator. Prints "gbps cpu_percent".
run_case() { # mode(model|bare) mtu proto(tcp|udp)
    local mode=$1 mtu=$2 proto=$3 extra=()
    [[ $mode == bare ]] && extra+=(--bare)
    "$EVLBI" linkemu --a "ns:$NS_A" --b "ns:$NS_B" --mtu "$mtu" --quiet --json \
        --state-dir "$WORK/state" "${extra[@]}" >"$WORK/emu.json" 2>"$WORK/emu.log" &
    EMU_PID=$!
    for _ in $(seq 100); do
        ip -n "$NS_B" addr show dev lkemu-b 2>/dev/null | grep -q 10.77.0.2 && break
        sleep 0.05
    done
    ip netns exec "$NS_B" iperf3 -s -1 -B 10.77.0.2 >/dev/null 2>&1 &
    SRV_PID=$!
    sleep 0.5
    local args=(-c 10.77.0.2 -t "$SECS" -J)
    # UDP: unlimited send rate, datagrams that fill the MTU (IP 20 + UDP 8).
    [[ $proto == udp ]] && args+=(-u -b 0 -l $((mtu - 28)))
    local t0 c0 t1 c1
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$EMU_PID")
    ip netns exec "$NS_A" iperf3 "${args[@]}" >"$WORK/iperf.json" 2>>"$WORK/iperf.err" || true
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$EMU_PID")
    stop_pid "$SRV_PID"
    SRV_PID=""
    stop_pid "$EMU_PID"
    EMU_PID=""
    python3 - "$WORK/iperf.json" "$proto" "$c0" "$c1" "$t0" "$t1" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
path, proto, c0, c1, t0, t1, hz = sys.argv[1:]
try:
    end = json.load(open(path))["end"]
    # What the receiver got: TCP sum_received; UDP sum_received in iperf3 >= 3.12,
    # else the client's sum with its loss accounted for.
    if "sum_received" in end:
        bps = end["sum_received"]["bits_per_second"]
    else:
        s = end["sum"]
        bps = s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100)
except (OSError, KeyError, ValueError):
    bps = 0.0
cpu = (int(c1) - int(c0)) / int(hz) / max(float(t1) - float(t0), 1e-9) * 100
print(f"{bps / 1e9:.3f} {cpu:.0f}")
EOF
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "linkemu throughput: iperf3 ${SECS}s per run, ${RUNS} run(s) per case, $(nproc) cores"
printf '%-5s %-5s %10s %10s %7s %9s %9s\n' mtu proto "emu Gb/s" "bare Gb/s" ratio "emu CPU%" "bare CPU%"
results=()
for mtu in 1500 9000; do
    for proto in tcp udp; do
        declare -A gbps=() cpu=()
        for mode in model bare; do
            : >"$WORK/runs"
            for _ in $(seq "$RUNS"); do
                run_case "$mode" "$mtu" "$proto" >>"$WORK/runs"
            done
            gbps[$mode]=$(cut -d' ' -f1 "$WORK/runs" | median)
            cpu[$mode]=$(cut -d' ' -f2 "$WORK/runs" | median)
        done
        ratio=$(awk -v e="${gbps[model]}" -v b="${gbps[bare]}" 'BEGIN {printf "%.2f", (b > 0) ? e / b : 0}')
        printf '%-5s %-5s %10s %10s %7s %9s %9s\n' "$mtu" "$proto" "${gbps[model]}" "${gbps[bare]}" "$ratio" \
            "${cpu[model]}" "${cpu[bare]}"
        results+=("{\"mtu\":$mtu,\"proto\":\"$proto\",\"emulator_gbps\":${gbps[model]},\"bare_gbps\":${gbps[bare]},\"ratio\":$ratio,\"emulator_cpu_percent\":${cpu[model]},\"bare_cpu_percent\":${cpu[bare]}}")
        unset gbps cpu
    done
done
(
    IFS=,
    echo "{\"secs\":$SECS,\"runs\":$RUNS,\"cores\":$(nproc),\"results\":[${results[*]}]}"
) >"$OUT"
echo "results: $OUT"
