#!/usr/bin/env bash
# evlbi send/recv against TCP (iperf3), UDT (Debian's libudt through bench/peers/udt_file.cpp)
# and SRT file mode (srt-file-transmit) in the same run, medians of RUNS:
#   loopback: 127.0.0.1, memory-to-memory (/dev/shm to /dev/shm) and disk-to-disk (/var/tmp;
#             through the page cache, not fsync'd), SIZE_MB per file;
#   wan:      through `evlbi linkemu` between two namespaces this script creates: 1 Gb/s
#             bottleneck, 50 ms each way (RTT 100 ms), 0.1 % random loss (seed 7), 12.5 MB
#             (1 BDP) drop-tail buffer, MTU 9000 for every tool; WAN_SIZE_MB per file, TCP
#             iperf3 for WAN_SECS (cubic cannot move a large file at 0.1 % loss in bounded time).
# Gb/s is file bytes over the time to the verdict: evlbi's wall time from start to BLAKE3 verified
# (its JSON also has the goodput of the data rounds alone), the receiver's time for UDT, the
# sender's wall time for SRT, iperf3's receiver figure for TCP. CPU is user+system of each side,
# % of one core. Every received file is compared with the source (cmp).
#
# Usage (root for wan): bench/transfer.sh
#   env: RUNS=3 SIZE_MB=1000 WAN_SIZE_MB=500 WAN_SECS=20 PARTS="loopback wan"
#        WAN_TOOLS="evlbi cubic bbr udt srt" LOOP_TOOLS="evlbi udt srt tcp" LOOP_CASES="mem disk"
#        LOOP_EVLBI_CONFIGS="--cc adaptive;--cc adaptive --chunk 60000;--cc fixed --rate 5G --chunk 32768"
#        EVLBI_WAN_ARGS="" (e.g. "--rate 1G" to cap)
#        OUT=bench/results/transfer.json EVLBI=target/release/evlbi
#        EVLBI_BEFORE=path/to/an/older/evlbi: tool "evlbi-before" runs the same evlbi cases with
#        it (bench/transfer_auth.sh uses this to price the per-datagram authentication)
# Only namespaces evtr-<pid>-{a,b} (10.77.0.1/2) are created and removed on exit; only processes
# this script started are stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SIZE_MB=${SIZE_MB:-1000}
WAN_SIZE_MB=${WAN_SIZE_MB:-500}
WAN_SECS=${WAN_SECS:-20}
PARTS=${PARTS:-loopback wan}
OUT=${OUT:-bench/results/transfer.json}
EVLBI=${EVLBI:-target/release/evlbi}
NS_A="evtr-$$-a"
NS_B="evtr-$$-b"
[[ -x $EVLBI ]] || scripts/setup.sh --build
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v srt-file-transmit >/dev/null || need+=(srt-tools)
[[ -e /usr/include/udt/udt.h ]] || need+=(libudt-dev)
command -v g++ >/dev/null || need+=(g++)
if ((${#need[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
WORK=$(mktemp -d /var/tmp/evlbi-transfer-bench.XXXXXX)
SHM=$(mktemp -d /dev/shm/evlbi-transfer-bench.XXXXXX)
g++ -O2 -o "$WORK/udt_file" bench/peers/udt_file.cpp -ludt -lpthread
PIDS=()
EMU_PID=""
stop_pid() { [[ -n ${1:-} ]] || return 0; kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
cleanup() {
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    stop_pid "$EMU_PID"
    for ns in "$NS_A" "$NS_B"; do ip netns list | grep -q "^$ns\b" && ip netns delete "$ns" || true; done
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ROWS=$WORK/rows.jsonl
: >"$ROWS"
port=20000

# time_of FILE: "wall user sys" written by /usr/bin/time -f "%e %U %S"
row() { # part case tool run bytes secs cpu_tx cpu_rx ok [extra-json]
    printf '{"part":"%s","case":"%s","tool":"%s","run":%s,"bytes":%s,"secs":%s,"cpu_tx":%s,"cpu_rx":%s,"ok":%s%s}\n' \
        "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10:-}" >>"$ROWS"
}
# /usr/bin/time writes "Command exited with non-zero status N" above its numbers when the command
# fails: read only its last line.
cpu_pct() { tail -n1 "$1" | awk '{ if ($1 > 0) printf "%.0f", ($2 + $3) / $1 * 100; else print 0 }'; }
# CPU of a receiver whose wall time includes waiting for the sender: over the sender's wall time.
cpu_over() { tail -n1 "$1" | awk -v w="$2" '{ if (w > 0) printf "%.0f", ($2 + $3) / w * 100; else print 0 }'; }

run_evlbi() { # part case run src dstdir host "ra" "rb" extra...
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8
    shift 8
    port=$((port + 1))
    rm -rf "$dst" && mkdir -p "$dst"
    local bin=${EVLBI_BIN:-$EVLBI}
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" "$bin" recv --listen "$host:$port" --root "$dst" --once \
        >/dev/null 2>"$WORK/rx.log" &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.3
    local ok=false
    if timeout 300 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" "$bin" send "$src" "$host:$port" -q --json "$@" \
        >"$WORK/tx.json" 2>"$WORK/tx.log"; then
        cmp -s "$src" "$dst/$(basename "$src")" && ok=true
    fi
    wait "$rx" || true
    local wall
    wall=$(tail -n1 "$WORK/tx.time" | awk '{print $1}')
    local extra
    extra=$(python3 -c '
import json,sys
try:
    r=json.load(open(sys.argv[1])); x=r["files"][0]["rounds"]
    print(",\"goodput_rounds_bps\":%s,\"retransmitted\":%d,\"loss_seen\":%g" % (r["goodput_bps"] or 0, r["retransmitted_bytes"], max(y["loss_seen"] for y in x)))
except Exception:
    print("")' "$WORK/tx.json")
    row "$part" "$case" "${EVLBI_NAME:-evlbi} $*" "$run" "$(stat -c %s "$src")" "$wall" "$(cpu_pct "$WORK/tx.time")" \
        "$(cpu_over "$WORK/rx.time" "$wall")" "$ok" "$extra"
}

run_udt() { # part case run src dstdir host "ra" "rb" mss
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8 mss=$9
    port=$((port + 1))
    rm -rf "$dst" && mkdir -p "$dst"
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" timeout 120 "$WORK/udt_file" recv "$port" "$dst/f" \
        >"$WORK/rx.json" 2>"$WORK/rx.log" &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.3
    timeout 120 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" "$WORK/udt_file" send "$host" "$port" "$src" "$mss" \
        >/dev/null 2>"$WORK/tx.log" || true
    wait "$rx" || true
    local ok=false secs
    cmp -s "$src" "$dst/f" && ok=true
    secs=$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["seconds"])
except Exception: print(0)' "$WORK/rx.json")
    row "$part" "$case" "udt" "$run" "$(stat -c %s "$src")" "$secs" "$(cpu_pct "$WORK/tx.time")" \
        "$(cpu_over "$WORK/rx.time" "$secs")" "$ok"
}

run_srt() { # part case run src dstdir host "ra" "rb"
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8
    port=$((port + 1))
    rm -rf "$dst" && mkdir -p "$dst"
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" timeout 150 srt-file-transmit -q "srt://:$port" "file://$dst/" \
        >/dev/null 2>&1 &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.5
    timeout 120 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" srt-file-transmit -q "file://$src" \
        "srt://$host:$port" >/dev/null 2>&1 || true
    sleep 1
    stop_pid "$rx"
    local ok=false wall
    cmp -s "$src" "$dst/$(basename "$src")" && ok=true
    wall=$(awk '{print $1}' "$WORK/tx.time" 2>/dev/null || echo 0)
    row "$part" "$case" "srt" "$run" "$(stat -c %s "$src")" "$wall" "$(cpu_pct "$WORK/tx.time")" \
        "$(cpu_over "$WORK/rx.time" "$wall")" "$ok"
}

run_tcp() { # part case run host "ra" "rb" seconds_or_bytes cc [src dst]
    local part=$1 case=$2 run=$3 host=$4 ra=$5 rb=$6 amount=$7 cc=$8 src=${9:-} dst=${10:-}
    port=$((port + 1))
    local sf=() cf=()
    if [[ -n $src ]]; then sf=(-F "$dst/f"); cf=(-F "$src"); rm -rf "$dst" && mkdir -p "$dst"; fi
    $rb iperf3 -s -1 -B "$host" -p "$port" "${sf[@]}" >/dev/null 2>&1 &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.5
    $ra iperf3 -c "$host" -p "$port" -C "$cc" $amount -J "${cf[@]}" >"$WORK/tcp.json" 2>/dev/null || true
    wait "$srv" || true
    python3 - "$WORK/tcp.json" "$part" "$case" "tcp $cc" "$run" >>"$ROWS" <<'PY'
import json, sys
path, part, case, tool, run = sys.argv[1:]
try:
    e = json.load(open(path))["end"]
    r = e["sum_received"]; cpu = e.get("cpu_utilization_percent", {})
    row = dict(part=part, case=case, tool=tool, run=int(run), bytes=r["bytes"], secs=r["seconds"],
               cpu_tx=round(cpu.get("host_total", 0)), cpu_rx=round(cpu.get("remote_total", 0)), ok=True,
               retransmitted=e["sum_sent"].get("retransmits", 0))
except (OSError, KeyError, ValueError):
    row = dict(part=part, case=case, tool=tool, run=int(run), bytes=0, secs=0, cpu_tx=0, cpu_rx=0, ok=False)
print(json.dumps(row))
PY
}

if [[ " $PARTS " == *" loopback "* ]]; then
    head -c "${SIZE_MB}000000" /dev/urandom >"$SHM/scan.bin"
    cp "$SHM/scan.bin" "$WORK/scan.bin"
    for run in $(seq "$RUNS"); do
        echo "loopback run $run/$RUNS" >&2
        for c in ${LOOP_CASES:-mem disk}; do
            if [[ $c == mem ]]; then src=$SHM/scan.bin dst=$SHM/dst; else src=$WORK/scan.bin dst=$WORK/dst; fi
            for tool in ${LOOP_TOOLS:-evlbi udt srt tcp}; do
                case $tool in
                evlbi | evlbi-before)
                    bin=$EVLBI
                    [[ $tool == evlbi-before ]] && bin=${EVLBI_BEFORE:?EVLBI_BEFORE is not set}
                    IFS=';' read -r -a configs <<<"${LOOP_EVLBI_CONFIGS:---cc adaptive;--cc adaptive --chunk 60000;--cc fixed --rate 5G --chunk 32768}"
                    for args in "${configs[@]}"; do
                        # shellcheck disable=SC2086
                        EVLBI_BIN=$bin EVLBI_NAME=$tool run_evlbi loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" $args
                    done
                    ;;
                udt) run_udt loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" 9000 ;;
                srt) run_srt loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" ;;
                tcp)
                    if [[ $c == mem ]]; then
                        run_tcp loopback "$c" "$run" 127.0.0.1 "" "" "-n ${SIZE_MB}000000" cubic
                    else
                        run_tcp loopback "$c" "$run" 127.0.0.1 "" "" "-n ${SIZE_MB}000000" cubic "$src" "$dst"
                    fi
                    ;;
                esac
            done
            rm -rf "$SHM/dst" "$WORK/dst"
        done
    done
    rm -f "$SHM/scan.bin" "$WORK/scan.bin"
fi

if [[ " $PARTS " == *" wan "* ]]; then
    [[ $(id -u) -eq 0 ]] || { echo "the wan part needs root (namespaces, TUN)" >&2; exit 2; }
    head -c "${WAN_SIZE_MB}000000" /dev/urandom >"$SHM/scan.bin"
    RA="ip netns exec $NS_A"
    RB="ip netns exec $NS_B"
    for run in $(seq "$RUNS"); do
        echo "wan run $run/$RUNS" >&2
        for tool in ${WAN_TOOLS:-evlbi cubic bbr udt srt}; do
            "$EVLBI" linkemu --a "ns:$NS_A" --b "ns:$NS_B" --quiet --json --state-dir "$WORK/state" --mtu 9000 \
                --rate 1G --delay 50ms --loss 0.1% --buffer 12500000B --seed 7 >"$WORK/emu.json" 2>"$WORK/emu.log" &
            EMU_PID=$!
            for _ in $(seq 100); do
                ip -n "$NS_B" addr show dev lkemu-b 2>/dev/null | grep -q 10.77.0.2 && break
                sleep 0.05
            done
            for ns in "$NS_A" "$NS_B"; do
                ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864" \
                    net.ipv4.tcp_wmem="4096 131072 67108864"
            done
            case $tool in
            evlbi) run_evlbi wan 1G-100ms-0.1% "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" --cc adaptive ${EVLBI_WAN_ARGS:-} ;;
            evlbi-before)
                EVLBI_BIN=${EVLBI_BEFORE:?EVLBI_BEFORE is not set} EVLBI_NAME=evlbi-before \
                    run_evlbi wan 1G-100ms-0.1% "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" --cc adaptive ${EVLBI_WAN_ARGS:-}
                ;;
            cubic | bbr) run_tcp wan 1G-100ms-0.1% "$run" 10.77.0.2 "$RA" "$RB" "-t $WAN_SECS" "$tool" ;;
            udt) run_udt wan 1G-100ms-0.1% "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" 8972 ;;
            srt) run_srt wan 1G-100ms-0.1% "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" ;;
            esac
            stop_pid "$EMU_PID"
            EMU_PID=""
            rm -rf "$SHM/dst"
        done
    done
fi

mkdir -p "$(dirname "$OUT")"
python3 - "$ROWS" "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    r["gbps"] = r["bytes"] * 8 / r["secs"] / 1e9 if r["secs"] else 0.0
    groups.setdefault((r["part"], r["case"], r["tool"]), []).append(r)
summary = []
for (part, case, tool), rs in groups.items():
    med = lambda k: statistics.median(x.get(k, 0) or 0 for x in rs)
    summary.append(dict(part=part, case=case, tool=tool, runs=len(rs), ok=sum(x["ok"] for x in rs),
                        gbps=med("gbps"), cpu_tx=med("cpu_tx"), cpu_rx=med("cpu_rx"),
                        goodput_rounds_gbps=med("goodput_rounds_bps") / 1e9 if any("goodput_rounds_bps" in x for x in rs) else None,
                        retransmitted=med("retransmitted")))
json.dump(dict(rows=rows, summary=summary), open(sys.argv[2], "w"), indent=1)
print("| part | case | tool | runs ok | Gb/s (median) | data-round Gb/s | CPU % send / recv | retransmitted |")
print("|---|---|---|---|---|---|---|---|")
for s in summary:
    g = "-" if s["goodput_rounds_gbps"] is None else f'{s["goodput_rounds_gbps"]:.3f}'
    print(f'| {s["part"]} | {s["case"]} | {s["tool"]} | {s["ok"]}/{s["runs"]} | {s["gbps"]:.3f} | {g} | {s["cpu_tx"]:.0f} / {s["cpu_rx"]:.0f} | {s["retransmitted"]:.0f} |')
for s in summary:
    if s["tool"].startswith("evlbi-before"):
        now = [x for x in summary if (x["part"], x["case"]) == (s["part"], s["case"]) and x["tool"] == "evlbi" + s["tool"][len("evlbi-before"):]]
        if now and s["gbps"] > 0:
            print(f'{s["part"]} {s["case"]} {now[0]["tool"]}: now / before = {now[0]["gbps"] / s["gbps"]:.3f} '
                  f'({now[0]["gbps"]:.3f} vs {s["gbps"]:.3f} Gb/s; CPU send {now[0]["cpu_tx"]:.0f} vs {s["cpu_tx"]:.0f} %, recv {now[0]["cpu_rx"]:.0f} vs {s["cpu_rx"]:.0f} %)')
for part, case in sorted({(s["part"], s["case"]) for s in summary}):
    ev = [s for s in summary if (s["part"], s["case"]) == (part, case) and s["tool"].startswith("evlbi") and not s["tool"].startswith("evlbi-before")]
    best = max((s["gbps"] for s in ev), default=0)
    for s in summary:
        if (s["part"], s["case"]) == (part, case) and not s["tool"].startswith("evlbi") and s["gbps"] > 0:
            print(f'{part} {case}: best evlbi / {s["tool"]} = {best / s["gbps"]:.2f}')
PY
