#!/usr/bin/env bash
# Several stations into several correlator input hosts, end to end on this machine (issue 35,
# part 3): 3 stations (Ef, Wb, Jb: a backend `evlbi stream send` of each station's file into the
# station's `evlbi serve`, which relays it with net2net in jive5ab's udps framing) -> an
# `evlbi linkemu` WAN (1 % loss, 10 ms each way) between network namespaces -> 2 correlator
# input hosts, each one `evlbi serve`: host 1 serves Ef and Wb at once (runtime = Ef, runtime =
# Wb: one data port and one net2sfxc socket each), host 2 serves Jb -> SFXC's own mk5:// reader
# (the harness scripts/build-sfxc.sh builds from SFXC's sources) on each socket. It prints what
# each reader got, what linkemu dropped and what each host's evlbi? says.
# (DiFX's input host is not part of it yet: both input hosts feed SFXC readers.)
#
#   scripts/demo_correlator.sh [OUT_DIR]     (default out/demo_correlator; needs root and TUN)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/demo_correlator}
if [ "$(id -u)" != 0 ] || [ ! -e /dev/net/tun ] || ! command -v ip >/dev/null; then
    echo "demo_correlator: needs root, /dev/net/tun and iproute2 (network namespaces and linkemu)" >&2
    exit 2
fi
harness=$(scripts/sfxc-path) || {
    echo "demo_correlator: SFXC's mk5:// reader harness is not built (scripts/build-sfxc.sh)" >&2
    exit 2
}
cargo build --release -q -p evlbi
evlbi=$PWD/target/release/evlbi
rm -rf "$out"
mkdir -p "$out/host1" "$out/host2" "$out/Ef" "$out/Wb" "$out/Jb"
out=$(cd "$out" && pwd)

mode=VDIF_8000-128-4-2 # 128 Mb/s, 4 channels of 2 bits, 8000-byte frames: 2000 frames/s
echo "== 3 stations x 2 s of 128 Mb/s VDIF into $out"
$evlbi vdif gen --stations Ef,Wb,Jb --rate 128M --bits 2 --channels 4 --frame 8000 --seconds 2 \
    --start 2025-06-01T00:00:00Z -q --out "$out"

na="evcor-$$-a" nb="evcor-$$-b"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
echo "== WAN: evlbi linkemu, 1 % loss, 10 ms each way, MTU 9000 (stations in $na, input hosts in $nb)"
$evlbi linkemu --a "ns:$na" --b "ns:$nb" --loss 1% --seed 35 --delay 10ms --mtu 9000 --quiet --json \
    --state-dir "$out" >"$out/linkemu.json" &
emu_pid=$!
pids+=("$emu_pid")
for _ in $(seq 400); do ip -n "$nb" addr show 2>/dev/null | grep -q 10.77.0.2 && break; sleep 0.05; done

# serve NS VSI_PORT METRICS_PORT ROOT: an `evlbi serve` in namespace NS.
serve() {
    ip netns exec "$1" "$evlbi" serve --vsi "127.0.0.1:$2" --metrics "127.0.0.1:$3" --root "$4" \
        2>"$4/serve.log" &
    pids+=("$!")
    for _ in $(seq 200); do ip netns exec "$1" ss -Hltn 2>/dev/null | grep -q ":$2 " && return; sleep 0.05; done
    echo "evlbi serve in $1 did not open port $2" >&2
    exit 1
}
# vsi NS PORT LINE: one request line to a serve's control port (one connection), its reply.
vsi() {
    ip netns exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0; printf "%s\n" "$1" >&3; read -r -t 10 l <&3; echo "$l"' "$2" "$3"
}
udps="mode = $mode ; net_protocol = udps ; mtu = 9000"

echo "== input hosts: host 1 serves Ef and Wb (two runtimes), host 2 serves Jb"
serve "$nb" 2620 9101 "$out/host1"
serve "$nb" 2621 9102 "$out/host2"
vsi "$nb" 2620 "runtime = Ef ; $udps ; net_port = 46001 ; net2sfxc = open : $out/host1/Ef.sock ;"
vsi "$nb" 2620 "runtime = Wb ; $udps ; net_port = 46002 ; net2sfxc = open : $out/host1/Wb.sock ;"
vsi "$nb" 2621 "$udps ; net_port = 46003 ; net2sfxc = open : $out/host2/Jb.sock ;"
echo "== stations: each serve relays its data port to its input host (net2net, udps)"
for i in 1 2 3; do
    st=$(echo Ef Wb Jb | cut -d' ' -f$i)
    serve "$na" 262$i 910$((i + 2)) "$out/$st"
    vsi "$na" 262$i "$udps ; net_port = 4500$i ; net2net = connect : 10.77.0.2 : 4600$i : udps ; net2net = on ;"
done

echo "== SFXC's mk5:// reader on each socket"
declare -A sock=([Ef]=host1/Ef.sock [Wb]=host1/Wb.sock [Jb]=host2/Jb.sock)
for st in Ef Wb Jb; do
    "$harness" "mk5://$out/${sock[$st]}/${st}001:0" --threads 0 --payload 8000 --sample-rate 16000000 \
        --bits 2 --channels 4 --seconds 60 --frames 5000 --raw "$out/$st.raw" >"$out/reader-$st.out" 2>/dev/null &
    pids+=("$!")
    eval "reader_$st=$!"
done
sleep 0.5
echo "== backends: 3 stations send 2 s each, at once"
senders=()
for i in 1 2 3; do
    st=$(echo Ef Wb Jb | cut -d' ' -f$i)
    ip netns exec "$na" "$evlbi" stream send --to "127.0.0.1:4500$i" --seq-format jive5ab --max-lag 1h \
        --json -q "$out/$st.vdif" >"$out/send-$st.json" &
    senders+=("$!")
done
wait "${senders[@]}"
for st in Ef Wb Jb; do eval "wait \$reader_$st"; done

echo "== what each correlator reader got (5000 frames read: the station's 4000, then the fill that keeps SFXC fed)"
python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
for st in ("Ef", "Wb", "Jb"):
    raw = open(f"{out}/{st}.raw", "rb").read()
    want = open(f"{out}/{st}.vdif", "rb").read()
    n = len(want) // 8032
    got = [raw[i * 8032:(i + 1) * 8032] for i in range(len(raw) // 8032)]
    same = sum(1 for i in range(n) if got[i] == want[i * 8032:(i + 1) * 8032])
    invalid = sum(1 for i in range(n) if got[i][3] & 0x80)
    rep = json.loads([l for l in open(f"{out}/reader-{st}.out") if l.startswith("{")][-1])
    gaps = sum(t["gaps"] for t in rep["threads"])
    print(f"{st}: {same} of {n} frames byte-exact, {invalid} lost ones invalid in place, "
          f"{same + invalid} in order (SFXC's reader: {rep['frames']} frames, {gaps} gaps)")
EOF
echo "== each input host's evlbi? (per runtime on host 1)"
for q in "2620:runtime = Ef ; evlbi? ;" "2620:runtime = Wb ; evlbi? ;" "2621:evlbi? ;"; do
    vsi "$nb" "${q%%:*}" "${q#*:}"
done
echo "== host 1's metrics, labelled by runtime"
ip netns exec "$nb" curl -s http://127.0.0.1:9101/metrics | grep -E '^evlbi_serve_transfer|^evlbi_live_frames_sent_total'
kill "$emu_pid"
wait "$emu_pid" || true
echo "== linkemu dropped $(jq '.a_to_b.model.dropped_loss.packets' "$out/linkemu.json") datagrams from the stations to the input hosts"
