#!/usr/bin/env bash
# The Field System's FlexBuff session (crates/cli/tests/data/fs_flexbuff_session.txt) against a
# freshly started recorder with VDIF flowing (issue 27): starts DAEMON (jive5ab or evlbi) on free
# ports with 4 disk directories in a temporary directory under /dev/shm (jive5ab records only off
# the root file system), streams `evlbi stream send --generate` at it (udpsnor framing, continuous
# like a DBBC3) and replays the session with bench/fs_session.py, which prints the transcript and
# a summary of what the FS would log. Everything it made is removed at the end.
#
#   bench/fs_session.sh jive5ab|evlbi   env: RATE=512 (Mb/s) CHANNELS=8 THREADS=2 SCAN=10 (s)
#                                            SCRIPT=crates/cli/tests/data/fs_flexbuff_session.txt
#                                            OUT=transcript file  JSON=records file  KEEP=1 (keep the
#                                            recordings)  JIVE5AB=path  EVLBI=path
# SCRIPT=crates/cli/tests/data/jive5ab_semantics_session.txt replays the jive5ab probes instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
DAEMON=${1:?usage: bench/fs_session.sh jive5ab|evlbi}
RATE=${RATE:-512}
CHANNELS=${CHANNELS:-8}
THREADS=${THREADS:-2}
SCAN=${SCAN:-10}
SCRIPT=${SCRIPT:-crates/cli/tests/data/fs_flexbuff_session.txt}
EVLBI=${EVLBI:-target/release/evlbi}
[[ -x $EVLBI ]] || { echo "no $EVLBI (cargo build --release -p evlbi)" >&2; exit 1; }
D=$(mktemp -d /dev/shm/fs-session.XXXXXX)
ROOTFS=$(mktemp -d /tmp/fs-session-rootfs.XXXXXX)
PID=
cleanup() { stop_pid "$PID"; [[ -n ${KEEP:-} ]] && echo "# kept $D" || rm -rf "$D"; rm -rf "$ROOTFS"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$D"/disk{0,1,2,3} "$D/out" "$ROOTFS/disk0"
CTL=$(port SOCK_STREAM)
DATA=$(port SOCK_DGRAM)
case $DAEMON in
    jive5ab)
        J5=${JIVE5AB:-$(scripts/jive5ab-path)} || { echo "skipped: no jive5ab (scripts/jive5ab-path)" >&2; exit 0; }
        # -* keeps root privileges (this runs as root; without it jive5ab drops to nobody);
        # its working directory is $D so a disk2file without a name lands there.
        (cd "$D" && exec "$J5" -m 1 -p "$CTL" -*) >"$D/daemon.log" 2>&1 &
        PID=$! ;;
    evlbi)
        "$EVLBI" serve --root "$D" --vsi "127.0.0.1:$CTL" >"$D/daemon.log" 2>&1 &
        PID=$! ;;
    *) echo "DAEMON: jive5ab or evlbi" >&2; exit 2 ;;
esac
for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $CTL), 0.2)" 2>/dev/null && break
    sleep 0.1
done
ARGS=(--set "mbps=$RATE" --set "channels=$CHANNELS" --set "scan_seconds=$SCAN" --set "data_port=$DATA"
      --set "disks=$D/disk0 : $D/disk1 : $D/disk2 : $D/disk3" --set "disks_glob=$D/disk*"
      --set "disks_regex=^$D/disk[0-3]\$" --set "disks_rootfs=$ROOTFS/disk0"
      --set "dest1=$D/out/ev9999_ef_no0001.m5a" --set "dest2=$D/out/ev9999_ef_no0002.m5a"
      --set "dest_check=$D/out/check.vdif" --set "net2file_path=$D/out/n2f.vdif" --set "d2f_dir=$D/out"
      --set plabel=probe_plain --set slabel=probe_streams)
CPU0=$(cpu_ticks_all "$PID")
python3 bench/fs_session.py "127.0.0.1:$CTL" --script "$SCRIPT" "${ARGS[@]}" ${OUT:+--out "$OUT"} ${JSON:+--json "$JSON"} \
    --data-cmd "$EVLBI stream send --generate --stations Ef --rate ${RATE}M --channels $CHANNELS --threads $THREADS --seq-format jive5ab --to 127.0.0.1:$DATA --loop --duration 1h"
# The daemon's CPU over the session (its threads, and its writer processes once reaped).
CPU1=$(cpu_ticks_all "$PID")
BYTES=$(find "$D" -path "$D/out" -prune -o -type f ! -name daemon.log -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
echo "# daemon cpu_s $(awk -v a="$CPU0" -v b="$CPU1" -v t="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b-a)/t}') recorded_bytes $BYTES"
echo "# recorded under $D:"
(cd "$D" && find . -path ./out -prune -o -type f ! -name daemon.log -printf '%p %s\n' | sort)
ls -l "$D/out"
