#!/usr/bin/env bash
# `record = on` into a stream already flowing, as the Field System starts every scan: what each
# recorder loses at the start of a scan. evlbi serve and jive5ab 3.1.0 in the same run, each
# recording RUNS scans of SCAN s of a two-board backend (`evlbi stream send --generate`, udps
# framing, each board from its own port, never stopping) into 4 directories under /dev/shm, with
# BUSY busy loops beside (CI's busy two cores). Per scan: `evlbi?` total and loss, and the host's
# UDP receive-buffer drops (/proc/net/snmp RcvbufErrors) while it recorded.
#
#   bench/record_start.sh      env: RUNS=3 SCAN=3 (s) RATE=512 (Mb/s) BUSY=0 SOCKBUF=32000000
#                                   JIVE5AB=path EVLBI=path
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
RUNS=${RUNS:-3}
SCAN=${SCAN:-3}
RATE=${RATE:-512}
BUSY=${BUSY:-0}
SOCKBUF=${SOCKBUF:-32000000}
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || { echo "no $EVLBI (cargo build --release -p evlbi)" >&2; exit 1; }
J5=${JIVE5AB:-$(scripts/jive5ab-path || true)}
D=$(mktemp -d /dev/shm/record-start.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do stop_pid "$p"; done; rm -rf "$D"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$BUSY"); do
    sh -c 'while :; do :; done' &
    PIDS+=($!)
done
drops() { awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' /proc/net/snmp; }

# One daemon ($1: evlbi or jive5ab): RUNS scans, a line each.
scans() {
    local who=$1 dir="$D/$1" ctl data daemon sender
    mkdir -p "$dir"/disk{0,1,2,3}
    ctl=$(port SOCK_STREAM)
    data=$(port SOCK_DGRAM)
    if [[ $who == jive5ab ]]; then
        (cd "$dir" && exec "$J5" -m 1 -p "$ctl" -*) >"$dir/daemon.log" 2>&1 &
    else
        "$EVLBI" serve --root "$dir" --vsi "127.0.0.1:$ctl" >"$dir/daemon.log" 2>&1 &
    fi
    daemon=$!
    PIDS+=("$daemon")
    vsi "$ctl" "mode = VDIF_8000-$RATE-16-2 ;" "net_protocol = udpsnor : $SOCKBUF : 256000000 : 4 ;" \
        "net_port = $data ;" "set_disks = $dir/disk0 : $dir/disk1 : $dir/disk2 : $dir/disk3 ;" >/dev/null
    "$EVLBI" stream send --generate --stations Ef --rate "${RATE}M" --channels 16 --threads 4 --senders 2 \
        --seq-format jive5ab --to "127.0.0.1:$data" --loop --duration 1h -q >/dev/null 2>&1 &
    sender=$!
    PIDS+=("$sender")
    sleep 1
    for r in $(seq "$RUNS"); do
        local d0 d1 reply
        d0=$(drops)
        vsi "$ctl" "record = on : rs_${who}_$r ;" >/dev/null
        sleep "$SCAN"
        vsi "$ctl" "record = off ;" >/dev/null
        reply=$(vsi "$ctl" "evlbi? ;")
        d1=$(drops)
        echo "$who scan $r: ${reply#*→ } host drops $((d1 - d0))"
    done
    stop_pid "$sender"
    stop_pid "$daemon"
}

echo "# record = on into a flowing ${RATE} Mb/s stream (4 threads, 2 boards), ${SCAN} s scans over 4 disks, $BUSY busy loop(s)"
scans evlbi
if [[ -n $J5 ]]; then scans jive5ab; else echo "jive5ab: skipped (no jive5ab: scripts/setup.sh builds it)"; fi
