#!/usr/bin/env bash
# A DiFX NETWORK datastream fed live, evlbi vs jive5ab, in the same run, into the same mpifxcorr
# (scripts/build-difx.sh) and the same two-station job (tests/difx/difxjob.py). On 127.0.0.1:
#
#   backends: evlbi stream send of each station's file (udps framing: jive5ab's net2mem takes
#             udps), at the station's rate, one frame per datagram
#     → relay per station: (a) evlbi stream relay --to tcp:PORT   (a TCP datastream)
#                          (b) evlbi stream relay --seq-format jive5ab (UDP: PSN + frame, 8040 B)
#                          (c) jive5ab net2mem + mem2net, udps, mtu 9000 (UDP: 8040-byte datagrams)
#     → mpifxcorr, its job starting while the stations flow (JOB_AT s into the files, 2 s long)
#
# Per run and case: frames the relays took in, frames they delivered (evlbi's report; jive5ab's
# mem2net? counts are not per frame: its evlbi? total is the input), relay CPU (utime + stime,
# /proc, both relays) per frame taken in, and what mpifxcorr made of it: its visibility records
# and mean cross weight against the same job read as FILE datastreams (bit-identical records).
#
#   bench/difx_network.sh   env: RUNS=3 SECS=16 JOB_AT=6 RATE=64M (per station; mpifxcorr on a
#                                2-core host correlates 2 × 64 Mb/s faster than real time)
#                                OUT=bench/results/difx_network.json CASES="evlbi-tcp evlbi-udp jive5ab"
#                                KEEP=1 (keep the work directory: jobs, logs, visibilities)
# Without mpifxcorr nothing runs (said); without jive5ab its case is skipped (said).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
RUNS=${RUNS:-3}
SECS=${SECS:-16}
JOB_AT=${JOB_AT:-6}
RATE=${RATE:-64M}
OUT=${OUT:-bench/results/difx_network.json}
EVLBI=${EVLBI:-target/release/evlbi}
DIFX=$(scripts/difx-path || true)
J5=$(scripts/jive5ab-path || true)
[[ -x $EVLBI ]] || scripts/setup.sh --build
if [[ -z $DIFX ]] || ! command -v mpirun >/dev/null; then
    echo "SKIPPED: no mpifxcorr (scripts/build-difx.sh) or no mpirun: nothing to measure"
    exit 0
fi
WORK=$(mktemp -d /tmp/evlbi-difx-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"
TCK=$(getconf CLK_TCK)
JOB=tests/difx/difxjob.py
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
mbps=$(python3 -c "r='$RATE'; m={'K':1e3,'M':1e6,'G':1e9}; print(int(float(r[:-1])*m[r[-1]]/1e6) if r[-1] in m else int(float(r)/1e6))")
FPS=$((mbps * 1000000 / 64000))
job_args=(--seconds 2 --channels 2 --bandwidth-mhz $((mbps / 8)) --nchan 128)
start_at=$(printf '2026-11-23T12:00:%02dZ' "$JOB_AT")

"$EVLBI" vdif gen --stations Ef,Wb --rate "$RATE" --bits 2 --channels 2 --frame 8000 --delay Wb=1.5us \
    --snr 0.03 --seed 7 --seconds "$SECS" -q --start 2026-11-23T12:00:00Z --out "$WORK/data" >/dev/null
# The reference: the job's 2 s cut out of the files, read as FILE datastreams.
for s in Ef Wb; do
    dd if="$WORK/data/$s.vdif" of="$WORK/data/$s.job.vdif" bs=8032 skip=$((JOB_AT * FPS)) count=$((2 * FPS)) status=none
done
python3 "$JOB" job --dir "$WORK/file" --name file --start "$start_at" "${job_args[@]}" \
    --station "Ef=FILE:$WORK/data/Ef.job.vdif" --station "Wb=FILE:$WORK/data/Wb.job.vdif" >/dev/null
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$DIFX/bin/mpifxcorr" "$WORK/file/file.input" >"$WORK/file.log" 2>&1

# one CASE RUN: one run, one JSON row appended to $WORK/rows.
one() {
    local case=$1 run=$2 d="$WORK/$1.$2" kind=UDP
    mkdir -p "$d"
    [[ $case == evlbi-tcp ]] && kind=TCP
    local ports=() ins=() relays=() i
    for i in 0 1; do
        if [[ $kind == TCP ]]; then ports+=("$(port SOCK_STREAM)"); else ports+=("$(port SOCK_DGRAM)"); fi
        ins+=("$(port SOCK_DGRAM)")
    done
    python3 "$JOB" job --dir "$d" --name job --start "$start_at" "${job_args[@]}" \
        --station "Ef=$kind:${ports[0]}" --station "Wb=$kind:${ports[1]}" >/dev/null
    local stations=(Ef Wb)
    for i in 0 1; do
        case $case in
        evlbi-tcp | evlbi-udp)
            local to=(--to "tcp:127.0.0.1:${ports[$i]}")
            [[ $case == evlbi-udp ]] && to=(--to "127.0.0.1:${ports[$i]}" --seq-format jive5ab)
            "$EVLBI" stream relay --listen "127.0.0.1:${ins[$i]}" --seq-format-in jive5ab --fps "$FPS" "${to[@]}" \
                --idle-timeout 60s -q --export-json "$d/relay$i.json" 2>"$d/relay$i.log" &
            ;;
        jive5ab)
            local cp
            cp=$(port SOCK_STREAM)
            "$J5" -m 0 -* -p "$cp" >"$d/j5$i.log" 2>&1 &
            echo "$cp" >"$d/j5$i.port"
            ;;
        esac
        relays+=("$!")
        PIDS+=("$!")
    done
    if [[ $case == jive5ab ]]; then
        for i in 0 1; do
            vsi "$(cat "$d/j5$i.port")" "net_protocol=udps:32M:1M:32;" "mtu=9000;" "mode=VDIF_8000-$mbps-2-2;" \
                "net_port=${ins[$i]};" "net2mem=open;" "runtime=tx;" "net_protocol=udps:32M:1M:32;" "mtu=9000;" \
                "mode=VDIF_8000-$mbps-2-2;" "net_port=${ports[$i]};" "mem2net=connect:127.0.0.1;" "mem2net=on;" \
                >"$d/j5$i.vsi"
        done
    fi
    sleep 0.5
    local t0=() s
    for i in 0 1; do t0+=("$(ticks "${relays[$i]}")"); done
    local senders=()
    for i in 0 1; do
        s=${stations[$i]}
        "$EVLBI" stream send --seq-format jive5ab --max-lag 1h -q --to "127.0.0.1:${ins[$i]}" "$WORK/data/$s.vdif" \
            --export-json "$d/send$i.json" 2>"$d/send$i.log" &
        senders+=("$!")
        PIDS+=("$!")
    done
    # The job starts while the stations flow (it takes a few seconds to come up, under JOB_AT).
    sleep 1
    local rc=0
    timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 "$DIFX/bin/mpifxcorr" "$d/job.input" \
        >"$d/mpifxcorr.log" 2>&1 || rc=$?
    for p in "${senders[@]}"; do wait "$p" 2>/dev/null || true; done
    sleep 1
    local cpu=0
    for i in 0 1; do cpu=$((cpu + $(ticks "${relays[$i]}") - ${t0[$i]})); done
    if [[ $case == jive5ab ]]; then
        for i in 0 1; do vsi "$(cat "$d/j5$i.port")" "evlbi?;" "runtime=tx;" "mem2net?;" "mem2net=disconnect;" "runtime=0;" "net2mem=close;" >>"$d/j5$i.vsi"; done
    fi
    for p in "${relays[@]}"; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    python3 "$JOB" vis "$d/job.difx" --bandwidth-mhz $((mbps / 8)) --compare "$WORK/file/file.difx" >"$d/vis.json" 2>"$d/vis.err" || true
    python3 - "$case" "$run" "$d" "$cpu" "$TCK" "$rc" >>"$WORK/rows" <<'PY'
import json, os, re, sys
case, run, d, cpu, tck, rc = sys.argv[1:7]
row = {"case": case, "run": int(run), "mpifxcorr_rc": int(rc), "relay_cpu_s": int(cpu) / float(tck)}
row["frames_sent"] = sum(sum(s["frames_sent"] for s in json.load(open(f"{d}/send{i}.json"))["stations"]) for i in (0, 1))
if case.startswith("evlbi"):
    rl = [json.load(open(f"{d}/relay{i}.json")) for i in (0, 1)]
    row["relay_in"] = sum(st["frames_in"] for r in rl for st in r["stations"])
    row["relay_out"] = sum((r.get("live_out") or {}).get("frames_sent", 0) if case == "evlbi-tcp"
                           else sum(o["frames_sent"] for o in r["output"]) for r in rl)
else:
    totals = [re.search(r"!evlbi\? 0 : total : (\d+) : loss : (\d+)", open(f"{d}/j5{i}.vsi").read()) for i in (0, 1)]
    row["relay_in"] = sum(int(m.group(1)) for m in totals if m)
    row["relay_out"] = None
try:
    v = json.load(open(f"{d}/vis.json"))
    c = v.get("compare", {})
    row.update({"records": v["records"], "mean_cross_weight": v["mean_cross_weight"],
                "identical_to_file": c.get("bit_identical"), "file_records": (c.get("records") or [0, 0])[1],
                "snr": (v.get("fringe", {}).get("258") or {}).get("snr")})
except Exception as e:
    row["records"] = 0
    row["vis_error"] = open(f"{d}/vis.err").read().strip()[-200:] or str(e)
row["cpu_us_per_frame"] = 1e6 * row["relay_cpu_s"] / max(row["relay_in"], 1)
print(json.dumps(row))
PY
    tail -1 "$WORK/rows"
}

: >"$WORK/rows"
read -r -a cases <<<"${CASES:-evlbi-tcp evlbi-udp jive5ab}"
if [[ -z $J5 && " ${cases[*]} " == *" jive5ab "* ]]; then
    echo "SKIPPED: jive5ab (scripts/jive5ab-path found none): evlbi alone"
    read -r -a cases <<<"${cases[*]/jive5ab/}"
fi
echo "== $RATE per station, ${SECS} s files, job ${JOB_AT}-$((JOB_AT + 2)) s started 1 s into the stream; cases: ${cases[*]}; $RUNS run(s)"
for r in $(seq "$RUNS"); do
    for c in "${cases[@]}"; do
        echo "== run $r: $c"
        one "$c" "$r"
    done
done
python3 - "$WORK/rows" "$OUT" "$RATE" "$(cat /proc/loadavg)" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, rate, load = sys.argv[2], sys.argv[3], sys.argv[4]
print(f"\n{rate} per station, 2 stations\n")
print("| case | run | frames sent | relays took in | delivered | mpifxcorr records | identical to FILE | mean weight | S/N | relay CPU µs/frame |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    snr = f"{r['snr']:.1f}" if r.get("snr") else "-"
    w = f"{r['mean_cross_weight']:.3f}" if "mean_cross_weight" in r else "-"
    print(f"| {r['case']} | {r['run']} | {r['frames_sent']} | {r['relay_in']} | {r['relay_out'] if r['relay_out'] is not None else '-'} | "
          f"{r['records']} | {r.get('identical_to_file', '-')}/{r.get('file_records', '-')} | {w} | {snr} | {r['cpu_us_per_frame']:.2f} |")
med = {}
for case in sorted({r["case"] for r in rows}):
    rr = [r for r in rows if r["case"] == case]
    med[case] = {"runs": len(rr), "cpu_us_per_frame": statistics.median(r["cpu_us_per_frame"] for r in rr),
                 "runs_identical_to_file": sum(r.get("identical_to_file") == r.get("file_records") and r.get("records") == r.get("file_records") for r in rr)}
    print(f"{case}: CPU per frame (median) {med[case]['cpu_us_per_frame']:.2f} µs; runs whose job equals the FILE job bit for bit: {med[case]['runs_identical_to_file']} of {len(rr)}")
for e in ("evlbi-tcp", "evlbi-udp"):
    if e in med and "jive5ab" in med:
        med[f"{e}_over_jive5ab"] = med[e]["cpu_us_per_frame"] / med["jive5ab"]["cpu_us_per_frame"]
        print(f"CPU per frame {e}/jive5ab: {med[f'{e}_over_jive5ab']:.2f}")
json.dump({"rate_per_station": rate, "loadavg_at_end": load, "runs": rows, "medians": med}, open(out, "w"), indent=1)
print(f"\nwritten to {out}")
PY
