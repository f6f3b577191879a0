#!/usr/bin/env bash
# The station relay, evlbi vs jive5ab, in the same run (issue 17). On 127.0.0.1:
#
#   backend (evlbi stream send --generate --start now: a real-time backend, frames leave at their
#            own VDIF time; udps framing, 8032-byte frames, one per datagram)
#     → relay: (a) none — the backend straight to the recorder (the baseline latency)
#              (b) evlbi stream relay --seq-format-in jive5ab --seq-format jive5ab
#              (c) jive5ab net2mem (runtime 0) + mem2net (runtime "tx"), driven over VSI-S
#     → recorder: evlbi stream recv --seq-format jive5ab (memory sink), which reports data_age_ns:
#                 arrival less the frame's VDIF time = backend departure → recorder arrival
#
# RUNS times each case at RATE for SECS, alternating. Per run: frames sent, frames the relay took
# in, frames recorded, lost (sent − recorded), relay CPU (utime + stime of the relay process from
# /proc, all its threads), data age p50/p99; added latency = relay case − direct case (medians).
# Then the rate sweep: the highest rate (of SWEEP) the evlbi relay passes without losing a frame,
# with the backend's 2 threads on 1 input port and on 2 (one board each, --senders 2 --to P1 --to
# P2), and jive5ab net2mem+mem2net on 1 port (net2mem takes one).
#
#   bench/relay_vs_jive5ab.sh   env: SECS=60 RUNS=3 RATE=4096M SWEEP="4096M 6144M 8192M 10240M 12288M"
#                                    SWEEP_SECS=10 SWEEP_RUNS=1 SWEEP_PORTS="1 2" (evlbi's input ports;
#                                    jive5ab always 1) SWEEP_J5=1 (0: no jive5ab in the sweep)
#                                    BURST=8 (backend frames per GSO call: a 2-core host
#                                    cannot also spin a core per datagram for the backend)
#                                    FIRST_WAIT=60s DRAIN=2 (see "Run ends" below) LATE=skip (the backend's --late-frames)
#                                    RELAY_ARGS= (more options for evlbi stream relay, e.g. --burst 32)
#                                    OUT=bench/results/relay_vs_jive5ab.json
#                                    JIVE5AB=(default: what scripts/jive5ab-path finds)
# Without a jive5ab binary the evlbi cases still run and the peer is reported as skipped.
#
# Run ends: the relay and the recorder get --idle-timeout FIRST_WAIT, which (since issue 29)
# counts from their launch until the first datagram: long, because the backend generates its
# second of frames before it sends (> 3 s at 8 Gb/s on a busy host: with 3 s a relay or a
# recorder once stopped before anything came). The run ends on the bench's word instead: DRAIN
# seconds after the tool upstream has finished, SIGINT (the tools stop and still report).
# A run in which a tool took in nothing is reported as such and left out of medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
SECS=${SECS:-60}
RUNS=${RUNS:-3}
RATE=${RATE:-4096M}
SWEEP=${SWEEP-4096M 6144M 8192M 10240M 12288M}  # SWEEP= (empty): no sweep
SWEEP_SECS=${SWEEP_SECS:-10}
SWEEP_RUNS=${SWEEP_RUNS:-1}
SWEEP_PORTS=${SWEEP_PORTS:-1 2}
SWEEP_J5=${SWEEP_J5:-1}
# The backend keeps its frames at their VDIF time, as a backend does (--late-frames skip): a
# backend starved of CPU on this 2-core host then sends fewer frames (counted as skipped, not
# lost) instead of falling behind its own clock, which would add its growing lag to every
# frame's data age (at 8.192 Gb/s with `send` the age p50 was 0.36-0.71 s: the backend's slip,
# not the relay's). LATE=send restores the old behaviour.
LATE=${LATE:-skip}
BURST=${BURST:-8}
FIRST_WAIT=${FIRST_WAIT:-60s}
DRAIN=${DRAIN:-2}
read -r -a RELAY_ARGS <<<"${RELAY_ARGS:-}"
OUT=${OUT:-bench/results/relay_vs_jive5ab.json}
EVLBI=${EVLBI:-target/release/evlbi}
J5=$(scripts/jive5ab-path || true)
[[ -x $EVLBI ]] || scripts/setup.sh --build
WORK=$(mktemp -d /tmp/evlbi-relay-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$(dirname "$OUT")"
TCK=$(getconf CLK_TCK)

# Frames per second per thread of one station at rate $1 with $2 threads (8000-byte data arrays).
fps_of() { python3 -c "r='$1'; m={'K':1e3,'M':1e6,'G':1e9}; v=float(r[:-1])*m[r[-1]] if r[-1] in m else float(r); print(int(v/64000/$2))"; }
mbps_of() { python3 -c "r='$1'; m={'K':1e3,'M':1e6,'G':1e9}; v=float(r[:-1])*m[r[-1]] if r[-1] in m else float(r); print(int(v/1e6))"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Sample a process's CPU ticks into file $2 until it exits (its last figure before it goes).
watch_cpu() { ( while kill -0 "$1" 2>/dev/null; do t=$(ticks "$1"); [[ $t != 0 ]] && echo "$t" >"$2"; sleep 0.1; done ) & PIDS+=("$!"); }
wait_listening() { for _ in $(seq 300); do grep -q "listening on" "$1" 2>/dev/null && return; sleep 0.1; done; }
# End our child $1 DRAIN seconds after what fed it finished: SIGINT, then wait for its report.
drain_stop() { sleep "$DRAIN"; kill -INT "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }


# backend RATE SECS THREADS SENDERS PORT... : the real-time backend simulator.
backend() {
    local rate=$1 secs=$2 threads=$3 senders=$4
    shift 4
    local to=()
    for p in "$@"; do to+=(--to "127.0.0.1:$p"); done
    "$EVLBI" stream send "${to[@]}" --generate --stations Ef --threads "$threads" --senders "$senders" \
        --channels 16 --frame 8000 --rate "$rate" --seconds 1 --seq-format jive5ab --burst "$BURST" \
        --loop --duration "${secs}s" --start now --late-frames "$LATE" --export-json "$WORK/send.json" 2>"$WORK/send.log"
}

recorder() { # PORT FPS THREADS
    "$EVLBI" stream recv --listen "127.0.0.1:$1" --seq-format jive5ab --fps "$2" --threads "$3" --idle-timeout "$FIRST_WAIT" -q \
        --export-json "$WORK/recv.json" 2>"$WORK/recv.log" &
    RX=$!
    PIDS+=("$RX")
    wait_listening "$WORK/recv.log"
}

# one CASE RATE SECS THREADS INPUTS LABEL RUN: one run, one JSON row appended to $WORK/rows.
one() {
    local case=$1 rate=$2 secs=$3 threads=$4 inputs=$5 label=$6 run=${7:-1}
    local fps PRX RL CP i
    fps=$(fps_of "$rate" "$threads")
    rm -f "$WORK"/*.json "$WORK"/*.log "$WORK/cpu"
    PRX=$(port SOCK_DGRAM)
    recorder "$PRX" "$fps" "$threads"
    local inports=()
    for ((i = 0; i < inputs; i++)); do inports+=("$(port SOCK_DGRAM)"); done
    case $case in
    direct)
        backend "$rate" "$secs" "$threads" "$inputs" "$PRX"
        ;;
    evlbi)
        local listen=()
        for p in "${inports[@]}"; do listen+=(--listen "127.0.0.1:$p"); done
        "$EVLBI" stream relay "${listen[@]}" --seq-format-in jive5ab --fps "$fps" --threads "$threads" \
            --to "127.0.0.1:$PRX" --seq-format jive5ab --idle-timeout "$FIRST_WAIT" -q ${RELAY_ARGS[@]+"${RELAY_ARGS[@]}"} \
            --export-json "$WORK/relay.json" \
            2>"$WORK/relay.log" &
        RL=$!
        PIDS+=("$RL")
        wait_listening "$WORK/relay.log"
        watch_cpu "$RL" "$WORK/cpu"
        backend "$rate" "$secs" "$threads" "$inputs" "${inports[@]}"
        drain_stop "$RL"
        ;;
    jive5ab)
        local mbps T0 T1
        mbps=$(mbps_of "$rate")
        CP=$(port SOCK_STREAM)
        # -*: keep root's rights (no privilege drop); -m 0: errors only.
        "$J5" -m 0 -* -p "$CP" >"$WORK/j5.log" 2>&1 &
        RL=$!
        PIDS+=("$RL")
        # The socket buffer evlbi's relay asks for (64 MB), 1 MB blocks, 32 of them; mtu=9000 so
        # 8040-byte datagrams go whole. runtime "tx" reads the shared buffer and sends udps,
        # paced by the theoretical inter-packet delay jive5ab computes from the mode.
        vsi "$CP" "net_protocol=udps:64M:1M:32;" "mtu=9000;" "mode=VDIF_8000-$mbps-16-2;" \
            "net_port=${inports[0]};" "net2mem=open;" \
            "runtime=tx;" "net_protocol=udps:64M:1M:32;" "mtu=9000;" "mode=VDIF_8000-$mbps-16-2;" \
            "net_port=$PRX;" "mem2net=connect:127.0.0.1;" "mem2net=on;" >"$WORK/j5.vsi"
        T0=$(ticks "$RL")
        backend "$rate" "$secs" "$threads" 1 "${inports[0]}"
        sleep "$DRAIN"
        T1=$(ticks "$RL")
        echo $((T1 - T0)) >"$WORK/cpu"
        vsi "$CP" "evlbi?;" "runtime=tx;" "mem2net?;" "mem2net=disconnect;" "runtime=0;" "net2mem=close;" >>"$WORK/j5.vsi"
        kill "$RL" 2>/dev/null || true
        wait "$RL" 2>/dev/null || true
        ;;
    esac
    drain_stop "$RX"
    python3 - "$case" "$label" "$rate" "$secs" "$inputs" "$WORK" "$TCK" "$run" >>"$WORK/rows" <<'PY'
import json, os, re, sys
case, label, rate, secs, inputs, work, tck, run = sys.argv[1:9]
s = json.load(open(f"{work}/send.json")); r = json.load(open(f"{work}/recv.json"))
sent = sum(st["frames_sent"] for st in s["stations"])
got = sum(st["window"]["written_valid"] for st in r["stations"])
age = r.get("data_age_ns") or {}
row = {"case": case, "label": label, "run": int(run), "rate": rate, "secs": float(secs), "inputs": int(inputs),
       "frames_sent": sent, "backend_slips": sum(st["slips"] for st in s["stations"]),
       "backend_skipped_late": sum(st.get("skipped_late", 0) for st in s["stations"]),
       "backend_slipped_s": max((st.get("slipped_s", 0.0) for st in s["stations"]), default=0.0),
       # How late the backend's datagrams left after their VDIF time (p50 over its stations):
       # part of every frame's data age that no relay added.
       "backend_late_p50_us": max(((st.get("lateness_ns") or {}).get("p50") or 0) for st in s["stations"]) / 1e3,
       "recorded": got, "lost": sent - got, "recorder_kernel_drops": r["socket_drops"],
       "age_p50_us": (age.get("p50") or 0) / 1e3, "age_p99_us": (age.get("p99") or 0) / 1e3}
cpu = f"{work}/cpu"
if case != "direct" and os.path.exists(cpu):
    row["relay_cpu_s"] = float(open(cpu).read().split()[0]) / float(tck)
if case == "evlbi":
    rl = json.load(open(f"{work}/relay.json"))
    row["relay_in"] = sum(st["frames_in"] for st in rl["stations"])
    row["relay_kernel_drops"] = rl["socket_drops"]
    row["relay_overflow"] = sum(st["overflow_dropped"] for st in rl["stations"])
    q = [st["queue_delay_ns"] for st in rl["stations"]]
    row["relay_queue_p50_us"] = max((x.get("p50") or 0) for x in q) / 1e3 if q else None
    row["relay_queue_p99_us"] = max((x.get("p99") or 0) for x in q) / 1e3 if q else None
if case == "jive5ab":
    ev = re.search(r"!evlbi\? 0 : total : (\d+) : loss : (\d+)", open(f"{work}/j5.vsi").read())
    row["relay_in"] = int(ev.group(1)) if ev else 0
    row["jive5ab_loss"] = int(ev.group(2)) if ev else None
# A run where a tool took in nothing measured nothing: said so, never made a ratio or "lossless".
nothing = [who for who, n in (("the backend sent", sent), ("the relay took in", row.get("relay_in")),
                              ("the recorder recorded", got)) if n == 0]
if nothing:
    row["measured_nothing"] = ", ".join(f"{who} nothing" for who in nothing)
print(json.dumps(row))
PY
    tail -1 "$WORK/rows"
}

: >"$WORK/rows"
cases=(direct evlbi)
[[ -n $J5 ]] && cases+=(jive5ab)
FPS=$(fps_of "$RATE" 1)
echo "== $RATE for ${SECS}s, 8032-byte frames ($FPS frames/s), one per datagram; cases: ${cases[*]}; $RUNS runs each"
for r in $(seq "$RUNS"); do
    for c in "${cases[@]}"; do
        echo "== run $r: $c"
        one "$c" "$RATE" "$SECS" 1 1 main "$r"
    done
done
[[ -n $SWEEP ]] && echo "== sweep: ${SWEEP_SECS}s at each of $SWEEP, 2 VDIF threads, $SWEEP_RUNS run(s) each"
for rate in $SWEEP; do
    for r in $(seq "$SWEEP_RUNS"); do
        for ports in $SWEEP_PORTS; do
            echo "== $rate run $r: evlbi relay, $ports input port(s)"
            one evlbi "$rate" "$SWEEP_SECS" 2 "$ports" sweep "$r"
        done
        if [[ -n $J5 && $SWEEP_J5 != 0 ]]; then
            echo "== $rate run $r: jive5ab net2mem+mem2net, 1 input port"
            one jive5ab "$rate" "$SWEEP_SECS" 2 1 sweep "$r"
        fi
    done
done

python3 - "$WORK/rows" "$OUT" "${J5:-}" "$BURST" "$(cat /proc/loadavg)" "${RELAY_ARGS[*]+"${RELAY_ARGS[*]}"}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, j5, burst, load, relay_args = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
main = [r for r in rows if r["label"] == "main"]
res = {"jive5ab": j5 or None, "backend_burst": int(burst), "relay_args": relay_args, "loadavg_at_end": load,
       "runs": rows, "medians": {}}
measured = lambda r: "measured_nothing" not in r
per_frame = lambda r: 1e6 * r["relay_cpu_s"] / max(r["frames_sent"], 1)
if main:
    print(f"\n{main[0]['rate']} for {main[0]['secs']:.0f} s, one 8032-byte frame per datagram\n")
    print("| case | run | frames sent | relay took in | recorded | lost | relay CPU % of a core | µs CPU / frame | data age p50 µs | p99 µs | backend late p50 µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in main:
        cpu = r.get("relay_cpu_s")
        pct = f"{100 * cpu / r['secs']:.0f}" if cpu is not None else "-"
        per = f"{per_frame(r):.2f}" if cpu is not None and measured(r) else "-"
        lost = r["lost"] if measured(r) else f"measured nothing ({r['measured_nothing']})"
        print(f"| {r['case']} | {r['run']} | {r['frames_sent']} | {r.get('relay_in', '-')} | {r['recorded']} | {lost} | {pct} | {per} | {r['age_p50_us']:.0f} | {r['age_p99_us']:.0f} | {r.get('backend_late_p50_us', 0):.0f} |")
    for case in ("direct", "evlbi", "jive5ab"):
        every = [r for r in main if r["case"] == case]
        rr = [r for r in every if measured(r)]
        for r in every:
            if not measured(r):
                print(f"{case} run {r['run']} measured nothing ({r['measured_nothing']}): left out of medians and ratios")
        if not rr:
            continue
        m = {"runs": len(every), "runs_measured": len(rr), "runs_without_loss": sum(r["lost"] == 0 for r in rr),
             "lost": statistics.median(r["lost"] for r in rr),
             "age_p50_us": statistics.median(r["age_p50_us"] for r in rr),
             "age_p99_us": statistics.median(r["age_p99_us"] for r in rr),
             # data age less the backend's own lateness: what the path after the backend added
             "path_p50_us": statistics.median(r["age_p50_us"] - r.get("backend_late_p50_us", 0) for r in rr)}
        if case != "direct":
            m["cpu_pct"] = statistics.median(100 * r["relay_cpu_s"] / r["secs"] for r in rr)
            m["cpu_us_per_frame"] = statistics.median(per_frame(r) for r in rr)
        res["medians"][case] = m
    d = res["medians"].get("direct")
    print()
    for case in ("evlbi", "jive5ab"):
        m = res["medians"].get(case)
        if not m:
            continue
        if d:
            m["added_p50_us"] = m["age_p50_us"] - d["age_p50_us"]
            m["added_p99_us"] = m["age_p99_us"] - d["age_p99_us"]
            m["added_p50_less_backend_late_us"] = m["path_p50_us"] - d["path_p50_us"]
        print(f"{case}: median lost {m['lost']:.0f} (runs without loss {m['runs_without_loss']} of {m['runs']}, "
              f"{m['runs_measured']} measured), relay CPU {m['cpu_pct']:.0f} % of a core ({m['cpu_us_per_frame']:.2f} µs/frame), "
              f"added latency p50 {m.get('added_p50_us', float('nan')):.0f} µs, p99 {m.get('added_p99_us', float('nan')):.0f} µs "
              f"(p50 less the backend's own lateness {m.get('added_p50_less_backend_late_us', float('nan')):.0f} µs)")
    # The same run's pair: evlbi and jive5ab ran back to back on the same host state.
    pairs = []
    for run in sorted({r["run"] for r in main}):
        e = [r for r in main if r["case"] == "evlbi" and r["run"] == run and measured(r)]
        j = [r for r in main if r["case"] == "jive5ab" and r["run"] == run and measured(r)]
        if e and j:
            pairs.append({"run": run, "evlbi_us": per_frame(e[0]), "jive5ab_us": per_frame(j[0]),
                          "ratio": per_frame(e[0]) / per_frame(j[0])})
            print(f"run {run}: CPU per frame evlbi/jive5ab {pairs[-1]['ratio']:.2f} "
                  f"({pairs[-1]['evlbi_us']:.2f} / {pairs[-1]['jive5ab_us']:.2f} µs)")
        elif any(r["run"] == run and r["case"] in ("evlbi", "jive5ab") for r in main):
            print(f"run {run}: no ratio (a relay measured nothing or did not run)")
    res["per_run_ratio"] = pairs
    if "evlbi" in res["medians"] and "jive5ab" in res["medians"]:
        e, j = res["medians"]["evlbi"], res["medians"]["jive5ab"]
        res["cpu_ratio_evlbi_over_jive5ab"] = e["cpu_us_per_frame"] / j["cpu_us_per_frame"]
        print(f"CPU per frame evlbi/jive5ab (medians): {res['cpu_ratio_evlbi_over_jive5ab']:.2f}")
sweep = [r for r in rows if r["label"] == "sweep"]
if sweep:
    print("\n| relay | input ports | rate | run | frames sent | relay took in | recorded | lost | relay kernel drops | recorder kernel drops | backend slips | relay CPU % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sweep:
        cpu = r.get("relay_cpu_s")
        pct = f"{100 * cpu / r['secs']:.0f}" if cpu is not None else "-"
        lost = r["lost"] if measured(r) else f"measured nothing ({r['measured_nothing']})"
        print(f"| {r['case']} | {r['inputs']} | {r['rate']} | {r['run']} | {r['frames_sent']} | {r.get('relay_in', '-')} | {r['recorded']} | {lost} | "
              f"{r.get('relay_kernel_drops', '-')} | {r['recorder_kernel_drops']} | {r['backend_slips']} | {pct} |")
    best, tally = {}, {}
    for key in sorted({(r["case"], r["inputs"]) for r in sweep}):
        of_key = [r for r in sweep if (r["case"], r["inputs"]) == key]
        for rate in sorted({r["rate"] for r in of_key}, key=lambda x: float(x[:-1])):
            rr = [r for r in of_key if r["rate"] == rate]
            ok = sum(measured(r) and r["lost"] == 0 for r in rr)
            tally[f"{key[0]}_{key[1]}_ports_{rate}"] = {"runs": len(rr), "lossless": ok,
                                                        "measured": sum(map(measured, rr))}
            print(f"{key[0]} with {key[1]} input port(s) at {rate}: lossless in {ok} of {len(rr)} runs "
                  f"({sum(map(measured, rr))} measured something)")
        # Lossless at a rate = every run at that rate measured something and lost nothing.
        ok_rates = [float(rate[:-1]) for rate in {r["rate"] for r in of_key}
                    if all(measured(r) and r["lost"] == 0 for r in of_key if r["rate"] == rate)]
        best[f"{key[0]}_{key[1]}_ports_mbps"] = max(ok_rates, default=None)
        print(f"highest lossless rate (every run), {key[0]} with {key[1]} input port(s): "
              f"{max(ok_rates) if ok_rates else 'none'} Mb/s")
    res["highest_lossless"] = best
    res["sweep_lossless_runs"] = tally
json.dump(res, open(out, "w"), indent=1)
PY
echo "results: $OUT"
