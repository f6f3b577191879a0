#!/usr/bin/env bash
# A correlator input host, evlbi vs jive5ab, in the same run (issue 35). On 127.0.0.1:
#
#   backend (evlbi stream send --generate --start now: a real-time backend, frames leave at their
#            own VDIF time; udps framing, 8032-byte frames, BURST per call; at nice -10 and with
#            --late-frames send: a backend is another host, and one starved here that skipped
#            frames would make gaps evlbi fills for the reader — more work on the same 2 cores —
#            and jumps its 2 ms live window holds back; sent late, the ages' floor moves instead)
#     → input host: (a) evlbi serve, net2sfxc = open : SOCK    (b) jive5ab 3.1.0, the same statements
#     → SFXC's own mk5:// reader (sfxc-mk5-harness, scripts/build-sfxc.sh), reading as fast as
#       it can, reporting each valid frame's age when read (its clock less the frame's VDIF time)
#
# Per run: frames sent, frames SFXC's reader got valid (delivered), lost = sent − delivered, the
# input host's CPU per delivered frame (utime + stime of the daemon from /proc over the run), the
# age at the reader (its clock less the frame's VDIF time); the added latency is that age less
# the run's smallest (the path's floor and the backend's own offset from its clock: a backend
# on a loaded host sends up to its catch-up bound late), p50/p99.
# RUNS runs of each, alternating; medians and the CPU ratio evlbi/jive5ab.
#
#   bench/sfxc_vs_jive5ab.sh    env: SECS=20 RUNS=3 RATE=4096M BURST=8
#                                    OUT=bench/results/sfxc_vs_jive5ab.json
#                                    JIVE5AB=(default: what scripts/jive5ab-path finds)
#                                    PERF=1: also the daemon's instructions per delivered frame
#                                    (perf stat over the same span as the CPU figure; less noisy
#                                    than CPU time on a loaded host)
#                                    PERF_RECORD=DIR: perf record -g of each daemon over that
#                                    span, to DIR/WHO.N.data (PERF_RECORD_ARGS: other than -g)
#                                    SCHED=1: where each daemon thread was off the CPU over that
#                                    span (system-wide sched_switch; bench/tools/offcpu.py), and
#                                    the host's steal time: says whether a loss was the host
#                                    (steal), a thread waiting for a core (R), a fault or reclaim (D)
# Without jive5ab the evlbi runs still go and the peer is reported as skipped; without the
# harness nothing can read the socket and the bench says so and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
SECS=${SECS:-20}
RUNS=${RUNS:-3}
RATE=${RATE:-4096M}
BURST=${BURST:-8}
OUT=${OUT:-bench/results/sfxc_vs_jive5ab.json}
EVLBI=${EVLBI:-target/release/evlbi}
J5=${JIVE5AB:-$(scripts/jive5ab-path || true)}
if [[ -n $J5 && ! -x $J5 ]]; then
    echo "no jive5ab at $J5: its runs are skipped" >&2
    J5=
fi
H=$(scripts/sfxc-path || true)
[[ -x $EVLBI ]] || scripts/setup.sh --build
if [[ -z $H ]]; then
    echo "skipped: no SFXC reader harness (scripts/build-sfxc.sh)" >&2
    exit 0
fi
WORK=$(mktemp -d /tmp/evlbi-sfxc-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"
TCK=$(getconf CLK_TCK)
MBPS=$(python3 -c "r='$RATE'; m={'K':1e3,'M':1e6,'G':1e9}; v=float(r[:-1])*m[r[-1]] if r[-1] in m else float(r); print(int(v/1e6))")
MODE="VDIF_8000-$MBPS-16-2"
SAMPLE_RATE=$((MBPS * 1000000 / 32))
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# run WHO N: one input host job; appends a JSON line to $WORK/runs.jsonl.
run() {
    local who=$1 n=$2 port ctl mport sock daemon reader t0 t1 sent
    port=$(port SOCK_DGRAM)
    ctl=$(port SOCK_STREAM)
    mport=$(port SOCK_STREAM)
    echo '{}' >"$WORK/$who.status.json"
    sock=$WORK/$who.sock
    if [[ $who == jive5ab ]]; then
        "$J5" -m 0 -p "$ctl" >"$WORK/$who.log" 2>&1 &
    else
        "$EVLBI" serve --vsi "127.0.0.1:$ctl" --root "$WORK" --interval 500ms --metrics "127.0.0.1:$mport" >"$WORK/$who.log" 2>&1 &
    fi
    daemon=$!
    PIDS+=("$daemon")
    vsi "$ctl" "mode = $MODE ;" "net_protocol = udps : 67108864 ;" "net_port = $port ;" "mtu = 9000 ;" \
        "net2sfxc = open : $sock ;" >"$WORK/$who.vsi"
    for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
    "$H" "mk5://$sock/EF001:0" --threads 0 --payload 8000 --sample-rate "$SAMPLE_RATE" --bits 2 \
        --channels 16 --seconds $((SECS + 60)) --frames 1000000000 --age >"$WORK/reader.json" 2>/dev/null &
    reader=$!
    PIDS+=("$reader")
    sleep 0.5
    local perf_pid=""
    if [[ -n ${PERF:-} ]]; then
        perf stat -x, -e task-clock,instructions -p "$daemon" -o "$WORK/$who.perf" &
        perf_pid=$!
    fi
    local rec_pid=""
    if [[ -n ${PERF_RECORD:-} ]]; then
        mkdir -p "$PERF_RECORD"
        perf record -q ${PERF_RECORD_ARGS:--g} -p "$daemon" -o "$PERF_RECORD/$who.$n.data" 2>/dev/null &
        rec_pid=$!
    fi
    local sched_pid="" steal0
    steal0=$(awk '/^cpu /{ print $9 }' /proc/stat)
    if [[ -n ${SCHED:-} ]]; then
        perf record -q -a -e sched:sched_switch -o "$WORK/$who.sched" 2>/dev/null &
        sched_pid=$!
    fi
    t0=$(ticks "$daemon")
    nice -n -10 "$EVLBI" stream send --generate --stations Ef --rate "$RATE" --channels 16 --frame 8000 --seq-format jive5ab \
        --to "127.0.0.1:$port" --start now --late-frames send --duration "${SECS}s" --burst "$BURST" \
        --json -q >"$WORK/send.json" 2>/dev/null
    # The input host's window and queues drain (evlbi fills silences only after 1 s).
    sleep 0.5
    t1=$(ticks "$daemon")
    for p in $perf_pid $rec_pid $sched_pid; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    echo "{\"steal_ms\": $(( ($(awk '/^cpu /{ print $9 }' /proc/stat) - steal0) * 1000 / TCK ))}" >"$WORK/$who.host"
    if [[ -n $sched_pid ]]; then
        python3 bench/tools/offcpu.py "$WORK/$who.sched" $(ls "/proc/$daemon/task") >"$WORK/$who.offcpu" || echo '{}' >"$WORK/$who.offcpu"
    else
        echo '{}' >"$WORK/$who.offcpu"
    fi
    local evlbi_age=null
    if [[ $who == jive5ab ]]; then
        vsi "$ctl" "net2sfxc = close ;" >>"$WORK/$who.vsi"
    else
        vsi "$ctl" "evlbi? ;" "net2sfxc? ;" >>"$WORK/$who.vsi"
        curl -s -m 5 "http://127.0.0.1:$mport/status.json" >"$WORK/$who.status.json" || echo '{}' >"$WORK/$who.status.json"
        grep -E "evlbi\?|net2sfxc\?" "$WORK/$who.vsi" | sed 's/^/  /' >&2
        vsi "$ctl" "net2sfxc = close ;" >>"$WORK/$who.vsi"
    fi
    wait "$reader" 2>/dev/null || true
    stop_pid "$daemon"
    sent=$(python3 -c "import json; print(json.load(open('$WORK/send.json'))['stations'][0]['frames_sent'])")
    python3 - "$who" "$n" "$sent" "$t0" "$t1" "$TCK" "$WORK/reader.json" "$WORK/$who.log" "$WORK/$who.status.json" "$WORK/$who.perf" "$WORK/$who.host" "$WORK/$who.offcpu" >>"$WORK/runs.jsonl" <<'PY'
import json, sys
who, n, sent, t0, t1, tck, reader, log, status, perf, host, offcpu = sys.argv[1:]
lines = [l for l in open(reader) if l.startswith("{")]
r = json.loads(lines[-1]) if lines else {"frames": 0, "invalid": 0}
valid = r["frames"] - r["invalid"]
cpu_s = (int(t1) - int(t0)) / int(tck)
out = {"who": who, "run": int(n), "sent": int(sent), "delivered": valid,
       "lost": int(sent) - valid, "invalid_frames": r["invalid"],
       "cpu_s": cpu_s, "cpu_us_per_frame": cpu_s * 1e6 / valid if valid else None,
       "age_us": r.get("age_us"), "reader": r,
       "host_steal_ms": json.load(open(host)).get("steal_ms"), "off_cpu": json.load(open(offcpu))}
# perf stat -x, lines: value,unit,event,...
try:
    for l in open(perf):
        f = l.strip().split(",")
        if len(f) > 2 and f[2].startswith("instructions") and valid and f[0].isdigit():
            out["instructions_per_frame"] = int(f[0]) / valid
except OSError:
    pass
# evlbi: where the lost frames went (its daemon's /status.json at the end of the run).
try:
    st = next(x["status"] for x in json.load(open(status)).get("sources", []) if x["kind"] == "stream_recv")
    w = st["stations"][0]["window"] if st["stations"] else {}
    out["where"] = {"datagrams": st["datagrams"]["datagrams"], "kernel_drops": st["kernel_drops"],
                    "out_of_range": w.get("out_of_range"), "late": w.get("late"),
                    "filled": w.get("written_filled"),
                    "dropped_slow_reader": sum(l["dropped_slow_reader"] for l in st["live"]),
                    "queued_peak_bytes": max((l["queued_peak_bytes"] for l in st["live"]), default=0)}
except (OSError, ValueError, StopIteration, KeyError, IndexError):
    pass
print(json.dumps(out))
PY
}

: >"$WORK/runs.jsonl"
for n in $(seq "$RUNS"); do
    for who in evlbi jive5ab; do
        if [[ $who == jive5ab && -z $J5 ]]; then continue; fi
        echo "run $n: $who at $RATE for ${SECS}s" >&2
        run "$who" "$n"
        tail -n 1 "$WORK/runs.jsonl" | python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"  sent {r['sent']} delivered {r['delivered']} lost {r['lost']} cpu {r['cpu_us_per_frame'] and round(r['cpu_us_per_frame'],2)} us/frame instr {r.get('instructions_per_frame') and round(r['instructions_per_frame'])}/frame age {r['age_us']} where {r.get('where')} steal {r['host_steal_ms']} ms\"); [print(f'  {k}: off {v[\"longest_off\"]} on {v[\"longest_on\"]} total {v[\"off_ms\"]}') for k, v in r['off_cpu'].items()]" >&2
    done
done

python3 - "$WORK/runs.jsonl" "$OUT" "$RATE" "$SECS" "${J5:-}" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
out, rate, secs, j5 = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
def med(who, f):
    v = [f(r) for r in runs if r["who"] == who and f(r) is not None]
    return statistics.median(v) if v else None
summary = {}
for who in ["evlbi", "jive5ab"]:
    if not any(r["who"] == who for r in runs):
        summary[who] = "skipped: no jive5ab (scripts/jive5ab-path)"
        continue
    summary[who] = {
        "runs": sum(r["who"] == who for r in runs),
        "lost_median": med(who, lambda r: r["lost"]),
        "lost_each": [r["lost"] for r in runs if r["who"] == who],
        "delivered_median": med(who, lambda r: r["delivered"]),
        "cpu_us_per_frame_median": med(who, lambda r: r["cpu_us_per_frame"]),
        "cpu_us_per_frame_each": [r["cpu_us_per_frame"] for r in runs if r["who"] == who],
        "instructions_per_frame_median": med(who, lambda r: r.get("instructions_per_frame")),
        "added_latency_p50_us_median": med(who, lambda r: r["age_us"] and r["age_us"]["p50"] - r["age_us"]["min"]),
        "added_latency_p99_us_median": med(who, lambda r: r["age_us"] and r["age_us"]["p99"] - r["age_us"]["min"]),
    }
e, j = summary["evlbi"], summary["jive5ab"]
if isinstance(j, dict) and e["cpu_us_per_frame_median"] and j["cpu_us_per_frame_median"]:
    summary["cpu_ratio_evlbi_over_jive5ab"] = e["cpu_us_per_frame_median"] / j["cpu_us_per_frame_median"]
    if e["instructions_per_frame_median"] and j["instructions_per_frame_median"]:
        summary["instructions_ratio_evlbi_over_jive5ab"] = (
            e["instructions_per_frame_median"] / j["instructions_per_frame_median"])
res = {"rate": rate, "seconds": int(secs), "jive5ab": j5 or None, "summary": summary, "runs": runs}
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
echo "wrote $OUT" >&2
