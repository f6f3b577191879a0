#!/usr/bin/env bash
# evlbi send/recv against TCP (BBR and cubic), UDT (Debian's libudt through
# bench/peers/udt_file.cpp) and SRT file mode in the same run, medians of RUNS. Parts (PARTS):
#   loopback: 127.0.0.1, SIZE_MB per file; memory-to-memory (/dev/shm to /dev/shm) and
#             disk-to-disk (/var/tmp, through the page cache). evlbi is run per configuration
#             (LOOP_EVLBI_CONFIGS; the disk case adds --sync false and --sync true, so the final
#             fsync's cost is measured), UDT, TCP (iperf3; -F file mode for disk).
#   wan:      through `evlbi linkemu` between two namespaces this script creates: 1 Gb/s
#             bottleneck, 50 ms each way (RTT 100 ms), random loss WAN_LOSSES (seed 7), 12.5 MB
#             (1 BDP) drop-tail buffer, MTU 9000 for every tool. WAN_SIZE_MB file per tool:
#             evlbi; TCP BBR moving the same file to a verified copy (bench/peers/tcp_file.py:
#             BLAKE2b on both ends, the receiver's digest back on the connection; `bbr-file`);
#             TCP BBR / cubic memory to memory for WAN_SECS (iperf3, the issue's baseline;
#             `bbr`, `cubic`); UDT; SRT.
#   wan2:     two flows at once through the same emulated path (loss WAN2_LOSS): two evlbi
#             sessions (Jain's index of their rates), and evlbi beside TCP BBR (tcp_file.py).
#   small:    SMALL_FILES files of SMALL_MB each through the emulated path (loss WAN2_LOSS):
#             evlbi (one session, the directory); tar | TCP BBR | tar x (tcp_file.py --tar);
#             one TCP BBR connection per file, etransfer-style (tcp_file.py --per-file; on the
#             first PER_FILE_COUNT files only: ~10 round trips each).
# Gb/s is file bytes over the time to the verdict: evlbi's wall time from start to the last
# file BLAKE3-verified (its JSON also has the rate while data flowed, the handshake, the time
# from the last data datagram to the verdict and the fsync); tcp_file.py's wall time from
# connect to the compared digest; UDT the receiver's recvfile time; SRT the sender's wall time;
# iperf3's receiver figure. CPU is user+system of each side, % of one core. Every received file
# (and tree) is compared with its source (cmp / diff -r). The load average is recorded around
# every part (the machine may be shared).
#
# Usage (root for wan, wan2, small): bench/transfer.sh
#   env: RUNS=3 SIZE_MB=1000 WAN_SIZE_MB=1000 WAN_SECS=20 PARTS="loopback wan wan2 small"
#        WAN_LOSSES="0.1% 1%" WAN2_LOSS=0.1% SMALL_FILES=1000 SMALL_MB=1 PER_FILE_COUNT=100
#        WAN_TOOLS="evlbi bbr-file bbr" LOOP_TOOLS="evlbi udt tcp" LOOP_CASES="mem disk"
#        (further tools: evlbi-second: the next session to the receiver the evlbi row before it
#        measured, starting at the rate that one remembered (list it after evlbi); udt, srt,
#        etransfer-tcp, etransfer-udt — etransfer 1.1, JIVE's etd/etc,
#        built into the cache by scripts/build-etransfer.sh on first use)
#        LOOP_EVLBI_CONFIGS="--cc adaptive" EVLBI_WAN_ARGS="" (e.g. "--rate 1G" to cap)
#        OUT=bench/results/transfer.json EVLBI=target/release/evlbi
#        KEEP_JSON=dir: keep every evlbi send --json report there (part-case-run.json)
#        EVLBI_BEFORE=path/to/an/older/evlbi: tool "evlbi-before" runs the same evlbi cases with
#        it (bench/transfer_auth.sh uses this)
# Only namespaces evtr-<pid>-{a,b} (10.77.0.1/2) are created and removed on exit; only processes
# this script started are stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
RUNS=${RUNS:-3}
SIZE_MB=${SIZE_MB:-1000}
WAN_SIZE_MB=${WAN_SIZE_MB:-1000}
WAN_SECS=${WAN_SECS:-20}
WAN_LOSSES=${WAN_LOSSES:-0.1% 1%}
WAN2_LOSS=${WAN2_LOSS:-0.1%}
SMALL_FILES=${SMALL_FILES:-1000}
SMALL_MB=${SMALL_MB:-1}
PER_FILE_COUNT=${PER_FILE_COUNT:-100}
PARTS=${PARTS:-loopback wan wan2 small}
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
# etransfer (tools etransfer-tcp, etransfer-udt): built once into the cache; absent, its rows are not run.
scripts/build-etransfer.sh
ETR=$(scripts/etransfer-path || true)
TCPF="python3 bench/peers/tcp_file.py"
PIDS=()
EMU_PID=""
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

row() { # part case tool run bytes secs cpu_tx cpu_rx ok [extra-json]
    printf '{"part":"%s","case":"%s","tool":"%s","run":%s,"bytes":%s,"secs":%s,"cpu_tx":%s,"cpu_rx":%s,"ok":%s%s}\n' \
        "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10:-}" >>"$ROWS"
}
load() { awk '{print $1}' /proc/loadavg; }
bytes_of() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# /usr/bin/time writes "Command exited with non-zero status N" above its numbers when the command
# fails: read only its last line.
cpu_pct() { tail -n1 "$1" | awk '{ if ($1 > 0) printf "%.0f", ($2 + $3) / $1 * 100; else print 0 }'; }
# CPU of a receiver whose wall time includes waiting for the sender: over the sender's wall time.
cpu_over() { tail -n1 "$1" | awk -v w="$2" '{ if (w > 0) printf "%.0f", ($2 + $3) / w * 100; else print 0 }'; }

# The figures of an evlbi send --json report, as extra row fields.
evlbi_extra() {
    python3 -c '
import json,sys
try:
    r=json.load(open(sys.argv[1])); d=r.get("data") or {}; f=r["files"]
    tails=[x["tail_s"] for x in f if x.get("tail_s") is not None]
    st=r.get("start") or {}
    syncs=[x["sync_s"] for x in f if x.get("sync_s") is not None]
    print(",\"goodput_rounds_bps\":%s,\"retransmitted\":%d,\"loss_seen\":%g,\"handshake_s\":%g,\"tail_s\":%s,\"rtt_min_s\":%s,\"sync_s\":%s,\"yields\":%d,\"verified\":%d,\"start_bps\":%s" % (
        d.get("goodput_bps") or 0, r["retransmitted_bytes"], d.get("loss_seen", 0), r["handshake_s"],
        max(tails) if tails else "null", (d.get("rtt_min_us") or 0) / 1e6, sum(syncs) if syncs else "null",
        d.get("cc_events", {}).get("yields", 0), sum(1 for x in f if x["verified"]),
        st.get("rate_bps") if st.get("used") else "null"))
except Exception:
    print("")' "$1"
}

# part case run src dstdir host "ra" "rb" extra...: one evlbi send of src (a file or a directory).
run_evlbi() {
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
    local ok=false xdg
    # evlbi send remembers each receiver's path rate: every row starts from nothing unless it
    # names a --state-dir (the wan part's evlbi-second row).
    xdg=$(mktemp -d "$WORK/xdg.XXXXXX")
    if XDG_STATE_HOME=$xdg timeout 600 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" "$bin" send "$src" "$host:$port" -q --json "$@" \
        >"$WORK/tx.json" 2>"$WORK/tx.log"; then
        if [[ -d $src ]]; then
            diff -rq "$src" "$dst/$(basename "$src")" >/dev/null && ok=true
        else
            cmp -s "$src" "$dst/$(basename "$src")" && ok=true
        fi
    fi
    wait "$rx" || true
    if [[ -n ${KEEP_JSON:-} ]]; then
        mkdir -p "$KEEP_JSON" && cp "$WORK/tx.json" "$KEEP_JSON/$part-$case-$run.json"
    fi
    local wall
    wall=$(tail -n1 "$WORK/tx.time" | awk '{print $1}')
    row "$part" "$case" "${EVLBI_NAME:-evlbi} $*" "$run" "$(bytes_of "$src")" "$wall" \
        "$(cpu_pct "$WORK/tx.time")" "$(cpu_over "$WORK/rx.time" "$wall")" "$ok" "$(evlbi_extra "$WORK/tx.json")"
}

run_udt() { # part case run src dstdir host "ra" "rb" mss
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8 mss=$9
    port=$((port + 1))
    rm -rf "$dst" && mkdir -p "$dst"
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" timeout 300 "$WORK/udt_file" recv "$port" "$dst/f" \
        >"$WORK/rx.json" 2>"$WORK/rx.log" &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.3
    timeout 300 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" "$WORK/udt_file" send "$host" "$port" "$src" "$mss" \
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
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" timeout 300 srt-file-transmit -q "srt://:$port" "file://$dst/" \
        >/dev/null 2>&1 &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.5
    timeout 300 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" srt-file-transmit -q "file://$src" \
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

# part case run src dstdir host "ra" "rb" proto(tcp|udt): etransfer 1.1, JIVE's own disk-to-disk
# tool (scripts/build-etransfer.sh): `etd` in the receiving namespace, `etc` pushing the file to it.
# Time: etc's wall time (connect to the last byte acknowledged by etd). Its TCP data channel runs
# the receiving namespace's default congestion control (recorded in the row as "cc"); UDT its own.
run_etransfer() {
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8 proto=$9
    if [[ -z $ETR ]]; then
        echo "SKIPPED: etransfer-$proto (scripts/build-etransfer.sh could not build etransfer)" >&2
        return
    fi
    local cport=$((port + 1)) dport=$((port + 2))
    port=$((port + 2))
    rm -rf "$dst" && mkdir -p "$dst"
    local mss=()
    [[ $proto == udt ]] && mss=(--udt-mss 8972)
    # etd refuses to run in the foreground with root's rights (it asserts they were dropped): as
    # nobody, into a directory nobody may write. `ip netns exec` and setpriv exec, so $! is etd's
    # own PID: its CPU is read from /proc before it is stopped.
    chown nobody "$dst"
    chmod a+x "$(dirname "$dst")"
    $rb setpriv --reuid=nobody --regid=nogroup --clear-groups "$ETR/etd" -f -m -1 "${mss[@]}" \
        --command "tcp://$host:$cport" --data "$proto://$host:$dport" >/dev/null 2>"$WORK/rx.log" &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.5
    timeout 900 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" "$ETR/etc" -s -m -1 "${mss[@]}" --overwrite \
        "$src" "tcp://$host#$cport:$dst/" >/dev/null 2>"$WORK/tx.log" || true
    local wall rx_cpu
    wall=$(tail -n1 "$WORK/tx.time" | awk '{print $1}')
    rx_cpu=$(awk -v t="$(getconf CLK_TCK)" -v w="$wall" '{ if (w > 0) printf "%.0f", ($14 + $15) / t / w * 100; else print 0 }' \
        "/proc/$rx/stat" 2>/dev/null || echo 0)
    stop_pid "$rx"
    local ok=false
    cmp -s "$src" "$dst/$(basename "$src")" && ok=true
    local cc
    cc=$([[ $proto == tcp ]] && $ra sysctl -n net.ipv4.tcp_congestion_control || echo udt)
    row "$part" "$case" "etransfer-$proto" "$run" "$(stat -c %s "$src")" "$wall" "$(cpu_pct "$WORK/tx.time")" \
        "${rx_cpu:-0}" "$ok" ",\"cc\":\"$cc\""
}

# part case run src dst host "ra" "rb" mode(file|tar|per-file) [name]: TCP BBR to a verified copy.
run_tcpfile() {
    local part=$1 case=$2 run=$3 src=$4 dst=$5 host=$6 ra=$7 rb=$8 mode=$9 name=${10:-bbr-file}
    port=$((port + 1))
    rm -rf "$dst" && mkdir -p "$dst"
    local flag=() out=$dst/f
    case $mode in
    tar) flag=(--tar); out=$dst ;;
    per-file) flag=(--per-file); out=$dst ;;
    esac
    $rb /usr/bin/time -f "%e %U %S" -o "$WORK/rx.time" timeout 900 $TCPF recv "$port" "$out" "${flag[@]}" \
        >/dev/null 2>"$WORK/rx.log" &
    local rx=$!
    PIDS+=("$rx")
    sleep 0.5
    timeout 900 $ra /usr/bin/time -f "%e %U %S" -o "$WORK/tx.time" $TCPF send "$host" "$port" "$src" "${flag[@]}" \
        >"$WORK/tcpf.json" 2>"$WORK/tx.log" || true
    wait "$rx" || true
    local ok=false secs bytes
    secs=$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["seconds"])
except Exception: print(0)' "$WORK/tcpf.json")
    bytes=$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["bytes"] if json.load(open(sys.argv[1]))["ok"] else 0)
except Exception: print(0)' "$WORK/tcpf.json")
    case $mode in
    file) cmp -s "$src" "$out" && ok=true ;;
    *) diff -rq "$src" "$out" >/dev/null && ok=true ;;
    esac
    # Count file bytes (tar's stream is a little larger than the files).
    [[ $mode == file ]] || bytes=$(bytes_of "$out")
    row "$part" "$case" "$name" "$run" "$bytes" "$secs" "$(cpu_pct "$WORK/tx.time")" \
        "$(cpu_over "$WORK/rx.time" "$secs")" "$ok"
}

emu_start() { # loss
    linkemu_start --mtu 9000 --rate 1G --delay 50ms --loss "$1" --buffer 12500000B --seed 7
}
emu_stop() { stop_pid "$EMU_PID"; EMU_PID=""; }
RA="ip netns exec $NS_A"
RB="ip netns exec $NS_B"
LOADS=$WORK/loads.jsonl
: >"$LOADS"
note_load() { printf '{"part":"%s","when":"%s","load1":%s,"time":"%s"}\n' "$1" "$2" "$(load)" "$(date -u +%FT%TZ)" >>"$LOADS"; }

part_loopback() {
    head -c "${SIZE_MB}000000" /dev/urandom >"$SHM/scan.bin"
    cp "$SHM/scan.bin" "$WORK/scan.bin"
    for run in $(seq "$RUNS"); do
        echo "loopback run $run/$RUNS (load $(load))" >&2
        for c in ${LOOP_CASES:-mem disk}; do
            if [[ $c == mem ]]; then src=$SHM/scan.bin dst=$SHM/dst; else src=$WORK/scan.bin dst=$WORK/dst; fi
            for tool in ${LOOP_TOOLS:-evlbi udt tcp}; do
                case $tool in
                evlbi | evlbi-before)
                    bin=$EVLBI
                    [[ $tool == evlbi-before ]] && bin=${EVLBI_BEFORE:?EVLBI_BEFORE is not set}
                    IFS=';' read -r -a configs <<<"${LOOP_EVLBI_CONFIGS:---cc adaptive}"
                    for args in "${configs[@]}"; do
                        if [[ $c == disk && $tool == evlbi ]]; then
                            for sync in false true; do
                                # shellcheck disable=SC2086
                                EVLBI_BIN=$bin EVLBI_NAME=$tool run_evlbi loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" $args --sync $sync
                            done
                        else
                            # shellcheck disable=SC2086
                            EVLBI_BIN=$bin EVLBI_NAME=$tool run_evlbi loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" $args
                        fi
                    done
                    ;;
                udt) run_udt loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" 9000 ;;
                srt) run_srt loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" ;;
                etransfer-tcp | etransfer-udt)
                    run_etransfer loopback "$c" "$run" "$src" "$dst" 127.0.0.1 "" "" "${tool#etransfer-}"
                    ;;
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
}

part_wan() {
    head -c "${WAN_SIZE_MB}000000" /dev/urandom >"$SHM/scan.bin"
    for loss in $WAN_LOSSES; do
        local case="1G-100ms-$loss"
        for run in $(seq "$RUNS"); do
            echo "wan $loss run $run/$RUNS (load $(load))" >&2
            for tool in ${WAN_TOOLS:-evlbi bbr-file bbr}; do
                emu_start "$loss"
                case $tool in
                evlbi)
                    # A first session to this receiver: nothing remembered (its own state dir).
                    rm -rf "$WORK/state" && mkdir -p "$WORK/state"
                    run_evlbi wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" --cc adaptive \
                        --state-dir "$WORK/state" ${EVLBI_WAN_ARGS:-}
                    ;;
                evlbi-second)
                    # The next session to the same receiver: starts at the rate the evlbi row
                    # just before it remembered (careful resume).
                    EVLBI_NAME=evlbi-second run_evlbi wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" \
                        --cc adaptive --state-dir "$WORK/state" ${EVLBI_WAN_ARGS:-}
                    ;;
                evlbi-before)
                    EVLBI_BIN=${EVLBI_BEFORE:?EVLBI_BEFORE is not set} EVLBI_NAME=evlbi-before \
                        run_evlbi wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" --cc adaptive ${EVLBI_WAN_ARGS:-}
                    ;;
                bbr-file) run_tcpfile wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" file ;;
                cubic | bbr) run_tcp wan "$case" "$run" 10.77.0.2 "$RA" "$RB" "-t $WAN_SECS" "$tool" ;;
                udt) run_udt wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" 8972 ;;
                srt) run_srt wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" ;;
                etransfer-tcp | etransfer-udt)
                    run_etransfer wan "$case" "$run" "$SHM/scan.bin" "$SHM/dst" 10.77.0.2 "$RA" "$RB" "${tool#etransfer-}"
                    ;;
                esac
                emu_stop
                rm -rf "$SHM/dst"
            done
        done
    done
}

# Two flows at once: two evlbi sessions; evlbi beside TCP BBR. One row per flow.
part_wan2() {
    head -c "${WAN_SIZE_MB}000000" /dev/urandom >"$SHM/a.bin"
    head -c "${WAN_SIZE_MB}000000" /dev/urandom >"$SHM/b.bin"
    for run in $(seq "$RUNS"); do
        echo "wan2 run $run/$RUNS (load $(load))" >&2
        for pair in "evlbi evlbi" "evlbi bbr-file"; do
            emu_start "$WAN2_LOSS"
            local second=${pair#* }
            # Each flow in its own subshell with its own scratch files; rows are appended at the end.
            (WORK=$WORK/f1 && mkdir -p "$WORK" && ROWS=$WORK/rows &&
                run_evlbi wan2 "$pair" "$run" "$SHM/a.bin" "$SHM/d1" 10.77.0.2 "$RA" "$RB" --cc adaptive) &
            local f1=$!
            if [[ $second == evlbi ]]; then
                (port=$((port + 500)) && WORK=$WORK/f2 && mkdir -p "$WORK" && ROWS=$WORK/rows &&
                    run_evlbi wan2 "$pair" "$run" "$SHM/b.bin" "$SHM/d2" 10.77.0.2 "$RA" "$RB" --cc adaptive) &
            else
                (port=$((port + 500)) && WORK=$WORK/f2 && mkdir -p "$WORK" && ROWS=$WORK/rows &&
                    run_tcpfile wan2 "$pair" "$run" "$SHM/b.bin" "$SHM/d2" 10.77.0.2 "$RA" "$RB" file bbr-file) &
            fi
            local f2=$!
            wait "$f1" "$f2" || true
            cat "$WORK/f1/rows" "$WORK/f2/rows" >>"$ROWS" 2>/dev/null || true
            rm -rf "$WORK/f1" "$WORK/f2" "$SHM/d1" "$SHM/d2"
            port=$((port + 1000))
            emu_stop
        done
    done
    rm -f "$SHM/a.bin" "$SHM/b.bin"
}

part_small() {
    local tree=$SHM/small/batch
    mkdir -p "$tree"
    for i in $(seq -w 1 "$SMALL_FILES"); do head -c "${SMALL_MB}000000" /dev/urandom >"$tree/f$i.bin"; done
    local few=$SHM/few/batch
    mkdir -p "$few"
    find "$tree" -type f | sort | head -n "$PER_FILE_COUNT" | xargs -I{} cp {} "$few/"
    local case="${SMALL_FILES}x${SMALL_MB}MB-1G-100ms-$WAN2_LOSS"
    for run in $(seq "$RUNS"); do
        echo "small run $run/$RUNS (load $(load))" >&2
        for tool in ${SMALL_TOOLS:-evlbi tar-bbr per-file-bbr}; do
            emu_start "$WAN2_LOSS"
            case $tool in
            evlbi) run_evlbi small "$case" "$run" "$tree" "$SHM/dst" 10.77.0.2 "$RA" "$RB" --cc adaptive ;;
            tar-bbr) run_tcpfile small "$case" "$run" "$tree" "$SHM/dst" 10.77.0.2 "$RA" "$RB" tar tar-bbr ;;
            per-file-bbr) run_tcpfile small "${PER_FILE_COUNT}x${SMALL_MB}MB-1G-100ms-$WAN2_LOSS" "$run" "$few" "$SHM/dst" 10.77.0.2 "$RA" "$RB" per-file per-file-bbr ;;
            esac
            emu_stop
            rm -rf "$SHM/dst"
        done
    done
    rm -rf "$SHM/small" "$SHM/few"
}

for p in $PARTS; do
    case $p in
    loopback | wan | wan2 | small) ;;
    *) echo "unknown part $p" >&2; exit 2 ;;
    esac
    if [[ $p != loopback && $(id -u) -ne 0 ]]; then echo "the $p part needs root (namespaces, TUN)" >&2; exit 2; fi
    note_load "$p" start
    "part_$p"
    note_load "$p" end
done

mkdir -p "$(dirname "$OUT")"
python3 - "$ROWS" "$LOADS" "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loads = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
groups = {}
for r in rows:
    r["gbps"] = r["bytes"] * 8 / r["secs"] / 1e9 if r["secs"] else 0.0
    groups.setdefault((r["part"], r["case"], r["tool"]), []).append(r)
def med(rs, k):
    v = [x[k] for x in rs if x.get(k) is not None]
    return statistics.median(v) if v else None
summary = []
for (part, case, tool), rs in groups.items():
    g = sorted(x["gbps"] for x in rs)
    summary.append(dict(part=part, case=case, tool=tool, runs=len(rs), ok=sum(x["ok"] for x in rs),
                        gbps=med(rs, "gbps"), gbps_min=g[0], gbps_max=g[-1], cpu_tx=med(rs, "cpu_tx"),
                        cpu_rx=med(rs, "cpu_rx"),
                        goodput_rounds_gbps=(med(rs, "goodput_rounds_bps") or 0) / 1e9 if any("goodput_rounds_bps" in x for x in rs) else None,
                        retransmitted=med(rs, "retransmitted"), handshake_s=med(rs, "handshake_s"),
                        tail_s=med(rs, "tail_s"), rtt_min_s=med(rs, "rtt_min_s"), sync_s=med(rs, "sync_s")))
json.dump(dict(rows=rows, summary=summary, loads=loads), open(sys.argv[3], "w"), indent=1)
f = lambda v, p=3: "-" if v is None else f"{v:.{p}f}"
print("| part | case | tool | runs ok | Gb/s median (min-max) | while data flowed | CPU % send / recv | handshake s | last data to verdict ms | fsync s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in summary:
    tail = None if s["tail_s"] is None else s["tail_s"] * 1e3
    print(f'| {s["part"]} | {s["case"]} | {s["tool"]} | {s["ok"]}/{s["runs"]} | {s["gbps"]:.3f} ({s["gbps_min"]:.3f}-{s["gbps_max"]:.3f}) | '
          f'{f(s["goodput_rounds_gbps"])} | {f(s["cpu_tx"], 0)} / {f(s["cpu_rx"], 0)} | {f(s["handshake_s"])} | {f(tail, 1)} | {f(s["sync_s"])} |')
for part, case in sorted({(s["part"], s["case"]) for s in summary if s["part"] in ("loopback", "wan", "small")}):
    ev = [s for s in summary if (s["part"], s["case"]) == (part, case) and s["tool"].startswith("evlbi") and not s["tool"].startswith("evlbi-before")]
    for e in ev:
        for s in summary:
            if (s["part"], s["case"]) == (part, case) and not s["tool"].startswith("evlbi") and s["gbps"]:
                print(f'{part} {case}: {e["tool"]} / {s["tool"]} = {e["gbps"] / s["gbps"]:.2f}')
# Two flows: per run, the two rates and Jain's index.
by_run = {}
for r in rows:
    if r["part"] == "wan2":
        by_run.setdefault((r["case"], r["run"]), []).append(r)
for (case, run), rs in sorted(by_run.items()):
    x = [r["gbps"] for r in rs]
    jain = sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else 0
    print(f'wan2 {case} run {run}: ' + " + ".join(f'{r["tool"]} {r["gbps"]:.3f}' for r in rs) + f' Gb/s, Jain {jain:.3f}')
for l in loads:
    print(f'load average {l["load1"]} at the {l["when"]} of {l["part"]} ({l["time"]})')
PY
