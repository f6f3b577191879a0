#!/usr/bin/env bash
# The main job, end to end on this machine: build evlbi, generate a two-station VDIF set
# (Effelsberg and Westerbork, 512 Mb/s each, a common sky signal delayed 1.5 us at Wb),
# inspect it, check the samplers, stream both stations over UDP through a path that loses 2 %
# of the datagrams (an emulated WAN between two network namespaces when run as root with TUN,
# else loss injected at the sender on 127.0.0.1), correlate what arrived, ship the
# recorded scans with the reliable transfer (BLAKE3-verified), measure the path with a short
# probe sweep, and write a JSON report of everything and an HTML page with the figures.
#
#   scripts/demo.sh [OUT_DIR]     (default out/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/demo}
scripts/setup.sh --build
mkdir -p "$out"
evlbi=target/release/evlbi

echo "== generating 2 stations x 4 s of 512 Mb/s 2-bit VDIF into $out"
$evlbi vdif gen --stations Ef,Wb --rate 512M --bits 2 --channels 8 --threads 1 --frame 8000 --seconds 4 \
    --delay Wb=1.5us --snr 0.01 --seed 42 --start 2026-01-01T00:00:00Z --out "$out" --json >"$out/gen.json"
$evlbi vdif inspect --json "$out/Ef.vdif" "$out/Wb.vdif" >"$out/inspect.json"
$evlbi vdif stats --json "$out/Ef.vdif" >"$out/stats-Ef.json"
$evlbi vdif stats --json "$out/Wb.vdif" >"$out/stats-Wb.json"

echo "== inspect"
$evlbi vdif inspect "$out/Wb.vdif"
echo "== sampler statistics"
$evlbi vdif stats "$out/Wb.vdif"

rm -rf "$out/rx"
if [ "$(id -u)" = 0 ] && [ -e /dev/net/tun ] && command -v ip >/dev/null; then
    path="evlbi linkemu between network namespaces: 2 % Bernoulli loss, 10 ms each way, MTU 9000"
    echo "== streaming both stations through $path (4 s at 2 x 512 Mb/s)"
    na="evdemo-$$-a" nb="evdemo-$$-b"
    state=$(mktemp -d)
    $evlbi linkemu --a "ns:$na" --b "ns:$nb" --loss 2% --seed 7 --delay 10ms --mtu 9000 \
        --quiet --state-dir "$state" &
    emu_pid=$!
    trap 'kill "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; rm -rf "$state"' EXIT
    for _ in $(seq 400); do ip -n "$nb" addr show 2>/dev/null | grep -q 10.77.0.2 && break; sleep 0.05; done
    ip netns exec "$nb" $evlbi stream recv --listen 10.77.0.2:46227 --out "$out/rx" --idle-timeout 3s -q \
        --export-json "$out/stream-recv.json" &
    rx_pid=$!
    trap 'kill "$rx_pid" "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; rm -rf "$state"' EXIT
    for _ in $(seq 200); do ip netns exec "$nb" ss -Hlun 2>/dev/null | grep -q ':46227 ' && break; sleep 0.05; done
    ip netns exec "$na" $evlbi stream send --to 10.77.0.2:46227 "$out/Ef.vdif" "$out/Wb.vdif" \
        --export-json "$out/stream-send.json"
    wait "$rx_pid"
    kill "$emu_pid"
    wait "$emu_pid" || true
    rm -rf "$state"
    trap - EXIT
else
    path="127.0.0.1 with 2 % of the datagrams dropped at the sender (--inject-loss; run as root for an emulated WAN)"
    echo "== streaming both stations over $path (4 s at 2 x 512 Mb/s)"
    port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    $evlbi stream recv --listen "127.0.0.1:$port" --out "$out/rx" --idle-timeout 3s -q --export-json "$out/stream-recv.json" &
    rx_pid=$!
    trap 'kill "$rx_pid" 2>/dev/null || true' EXIT
    sleep 0.3
    $evlbi stream send --to "127.0.0.1:$port" "$out/Ef.vdif" "$out/Wb.vdif" --inject-loss 2% --loss-seed 7 \
        --export-json "$out/stream-send.json"
    wait "$rx_pid"
    trap - EXIT
fi

echo "== correlating: sent files, then received files (lost frames arrive flagged invalid)"
$evlbi vdif correlate "$out/Ef.vdif" "$out/Wb.vdif" --json >"$out/corr-sent.json"
$evlbi vdif correlate "$out/rx"/Ef_*.vdif "$out/rx"/Wb_*.vdif --json >"$out/corr-recv.json"
python3 - "$out" <<'PY'
import json, sys
o = sys.argv[1]
s, r = json.load(open(f"{o}/corr-sent.json")), json.load(open(f"{o}/corr-recv.json"))
st = {x["station"]: x for x in json.load(open(f"{o}/stream-recv.json"))["stations"]}
f = [st[n]["loss_fraction"] for n in ("Ef", "Wb")]
expect = ((1 - f[0]) * (1 - f[1])) ** 0.5
print(f"fringe S/N sent {s['snr']:.1f}, received {r['snr']:.1f}: ratio {r['snr'] / s['snr']:.4f}; "
      f"sqrt((1-f_Ef)(1-f_Wb)) = {expect:.4f} with f_Ef = {f[0]:.4f}, f_Wb = {f[1]:.4f}")
PY

echo "== shipping the recorded scans with evlbi send/recv (reliable, BLAKE3-verified)"
tport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rm -rf "$out/shipped"
mkdir -p "$out/shipped"
$evlbi recv --listen "127.0.0.1:$tport" --root "$out/shipped" --once 2>"$out/recv.log" &
rx_pid=$!
trap 'kill "$rx_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "control on" "$out/recv.log" 2>/dev/null && break; sleep 0.05; done
$evlbi send "$out/Ef.vdif" "$out/Wb.vdif" "127.0.0.1:$tport/exp" -q --export-json "$out/transfer.json"
wait "$rx_pid"
trap - EXIT
cmp "$out/Ef.vdif" "$out/shipped/exp/Ef.vdif" && cmp "$out/Wb.vdif" "$out/shipped/exp/Wb.vdif"
rm -rf "$out/shipped" "$out/recv.log"

echo "== probe sweep of the loopback path: 2 sizes x 4 spacings, 20000 datagrams per point"
pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$evlbi probe server --bind 127.0.0.1 --port "$pport" --sessions 8 2>"$out/probe.log" &
srv_pid=$!
trap 'kill "$srv_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "control on" "$out/probe.log" 2>/dev/null && break; sleep 0.05; done
$evlbi probe client "127.0.0.1:$pport" --count 20000 --sweep 'sizes=1472,8192 spacings=5us..20us:5us' \
    --export-json "$out/sweep.json" --csv "$out/sweep.csv" -q
wait "$srv_pid"
trap - EXIT
rm -f "$out/probe.log"

# One report, assembled from the JSON each command wrote (JSON is the source of truth).
{
    printf '{"path":"%s","generated":' "$path"
    cat "$out/gen.json"
    printf ',"inspect":'
    cat "$out/inspect.json"
    printf ',"stats":{"Ef":'
    cat "$out/stats-Ef.json"
    printf ',"Wb":'
    cat "$out/stats-Wb.json"
    printf '},"stream":{"send":'
    cat "$out/stream-send.json"
    printf ',"recv":'
    cat "$out/stream-recv.json"
    printf '},"correlate":{"sent":'
    cat "$out/corr-sent.json"
    printf ',"received":'
    cat "$out/corr-recv.json"
    printf '}}\n'
} >"$out/report.json"
rm "$out/gen.json" "$out/inspect.json" "$out/stats-Ef.json" "$out/stats-Wb.json" "$out/stream-send.json" \
    "$out/stream-recv.json" "$out/corr-sent.json" "$out/corr-recv.json"
echo "== report written to $out/report.json"
$evlbi report "$out/report.json" "$out/transfer.json" "$out/sweep.json" -o "$out/report.html"
echo "== open $out/report.html (figures in $out/report_files/)"
