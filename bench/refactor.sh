#!/usr/bin/env bash
# Whether the architecture refactor left evlbi's figures alone: probe, stream and transfer on
# 127.0.0.1 with the evlbi of BEFORE_REF (default d870270, the last commit before the refactor)
# and the current one, in the same run, interleaved (before, after, before, after, … RUNS times
# per case). Builds
# BEFORE_REF into target/before through a temporary git worktree (as bench/transfer_auth.sh does)
# and the current tree into target/release; both binaries are copied aside at the start so a
# build running beside the benchmark cannot swap one mid-run.
#
#   probe:    one UDP probe trial of PROBE_SECS at PROBE_RATE of PROBE_SIZE-byte datagrams
#             (evlbi probe server --once / probe client --json): received rate, loss, the sender's
#             departure gap p50/p99, sender and receiver CPU (user+sys from /usr/bin/time over the
#             client's wall time, % of one core; the server idles before and after the trial).
#   stream:   stream send of 1 s of 8000-byte VDIF frames (in /dev/shm, looped) at STREAM_RATE
#             for STREAM_SECS to a stream recv memory sink: sent rate, frames lost (sent minus
#             written valid), slips, departure gap p50/p99, sender and receiver CPU (both over the
#             sender's wall time, from /usr/bin/time).
#   transfer: bench/transfer.sh's loopback memory-to-memory case (/dev/shm to /dev/shm, SIZE_MB,
#             each TRANSFER_CONFIGS configuration) with tools "evlbi-before evlbi": Gb/s to the
#             BLAKE3 verdict, data-round Gb/s, sender and receiver CPU; every file is cmp'd.
#             transfer.sh's first run is a warm-up, left out of the figures (kept in OUT): it
#             follows the source file's creation and copy, whose writeback lands on whichever
#             binary goes first.
# Per case and metric: the median of each binary, after/before, and each binary's min–max over
# the runs (the noise to judge the ratio against); "overlap" says whether the two ranges meet.
# Where the two binaries' result JSON differ in field names (a rename would read as a missing
# metric), the fields only one of them has are listed. All runs go to OUT.
#
# Usage: bench/refactor.sh
#   env: RUNS=5 CASES="probe stream transfer" (empty: only build) BEFORE_REF=d870270 OUT=bench/results/refactor.json
#        PROBE_RATE=4096M PROBE_SIZE=8192 PROBE_SECS=5 STREAM_RATE=2048M STREAM_SECS=10
#        SIZE_MB=1000 TRANSFER_CONFIGS="--cc adaptive" (';'-separated, as LOOP_EVLBI_CONFIGS)
#        EVLBI_BEFORE=path (an already built "before" evlbi: no worktree, no build)
#        EVLBI=path (the "after" evlbi as it is; without it target/release/evlbi is built first)
# Only 127.0.0.1 is used; only processes this script started are stopped, by PID; every wait is
# bounded (timeout). No root needed except what bench/transfer.sh installs if its peers are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
CASES=${CASES-probe stream transfer}
BEFORE_REF=${BEFORE_REF:-d870270}
OUT=${OUT:-bench/results/refactor.json}
PROBE_RATE=${PROBE_RATE:-4096M}
PROBE_SIZE=${PROBE_SIZE:-8192}
PROBE_SECS=${PROBE_SECS:-5}
STREAM_RATE=${STREAM_RATE:-2048M}
STREAM_SECS=${STREAM_SECS:-10}
SIZE_MB=${SIZE_MB:-1000}
TRANSFER_CONFIGS=${TRANSFER_CONFIGS:---cc adaptive}
has() { [[ " $CASES " == *" $1 "* ]]; }

WORK=$(mktemp -d /var/tmp/evlbi-refactor-bench.XXXXXX)
SHM=$(mktemp -d /dev/shm/evlbi-refactor-bench.XXXXXX)
tree=""
BG="" # the one background process of ours still running (cleared once waited for: no stale PIDs)
stop_pid() { [[ -n ${1:-} ]] || return 0; kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
cleanup() {
    stop_pid "$BG"
    [[ -n $tree ]] && { git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"; }
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The two binaries.
before_commit="$(git rev-parse --short "$BEFORE_REF")"
[[ -n ${EVLBI_BEFORE:-} ]] && before_commit="given as EVLBI_BEFORE (BEFORE_REF $before_commit not built)"
if [[ -z ${EVLBI_BEFORE:-} ]]; then
    tree=$(mktemp -d /var/tmp/evlbi-before.XXXXXX)
    git worktree add --detach -q "$tree" "$BEFORE_REF"
    echo "building evlbi at $BEFORE_REF into target/before (later runs are incremental)" >&2
    cargo build --release --locked -q -p evlbi --manifest-path "$tree/Cargo.toml" --target-dir "$PWD/target/before"
    git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"
    tree=""
    EVLBI_BEFORE=target/before/release/evlbi
fi
after_commit="$(git rev-parse --short HEAD)"
git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || after_commit="$after_commit with uncommitted changes"
[[ -n ${EVLBI:-} ]] && after_commit="given as EVLBI (tree at $after_commit)"
if [[ -z ${EVLBI:-} ]]; then
    echo "building the current tree into target/release" >&2
    cargo build --release -q -p evlbi
    EVLBI=target/release/evlbi
fi
for b in "$EVLBI_BEFORE" "$EVLBI"; do [[ -x $b ]] || { echo "not an executable: $b" >&2; exit 1; }; done
cp "$EVLBI_BEFORE" "$WORK/evlbi-before"
cp "$EVLBI" "$WORK/evlbi-after"
BIN_before=$WORK/evlbi-before
BIN_after=$WORK/evlbi-after
SHA_before=$(sha256sum "$BIN_before" | cut -c1-12)
SHA_after=$(sha256sum "$BIN_after" | cut -c1-12)
[[ $SHA_before == "$SHA_after" ]] && echo "warning: the before and after binaries are the same file (sha256 $SHA_after)" >&2
echo "before: $EVLBI_BEFORE ($before_commit)   after: $EVLBI ($after_commit)" >&2

# stream recv's JSON summary file: --json FILE before the flags were unified, --export-json FILE
# after (where --json FILE stays as a hidden old spelling).
recv_json_flag() { if "$1" stream recv --help 2>/dev/null | grep -q -- '--export-json'; then echo --export-json; else echo --json; fi; }
RECV_JSON_before=$(recv_json_flag "$BIN_before")
RECV_JSON_after=$(recv_json_flag "$BIN_after")

free_port() { python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_STREAM if sys.argv[1]=="tcp" else socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' "$1"; }
# wait_listen tcp|udp PORT PID: until something listens on 127.0.0.1:PORT (at most 10 s) or PID ends.
wait_listen() {
    local flag=-Hltn
    [[ $1 == udp ]] && flag=-Hlun
    for _ in $(seq 200); do
        [[ -n $(ss $flag "sport = :$2" 2>/dev/null) ]] && return 0
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
bits() { python3 -c 'import sys; v=sys.argv[1]; m={"K":1e3,"M":1e6,"G":1e9,"T":1e12}; print(int(float(v[:-1])*m[v[-1].upper()]) if v[-1].upper() in m else int(float(v)))' "$1"; }

ROWS=$WORK/rows.jsonl
: >"$ROWS"
mkdir -p "$WORK/raw"
START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
awk -v n="$(nproc)" '$1 > n / 2 { printf "warning: load average %s on %d CPUs: other work competes; figures will be noisy\n", $1, n }' /proc/loadavg >&2

# probe_run WHICH RUN: one trial, one JSON row.
probe_run() {
    local which=$1 run=$2 bin port srv rc=0
    bin=BIN_$which
    bin=${!bin}
    port=$(free_port tcp)
    local count limit=$((PROBE_SECS * 4 + 30))
    count=$(python3 -c "print(max(1, int($(bits "$PROBE_RATE") * $PROBE_SECS / ($PROBE_SIZE * 8))))")
    rm -f "$WORK"/p.*
    timeout -k 5 "$limit" /usr/bin/time -f "%e %U %S" -o "$WORK/p.srv.time" \
        "$bin" probe server --bind 127.0.0.1 --port "$port" --once >/dev/null 2>"$WORK/p.srv.log" &
    srv=$!
    BG=$srv
    wait_listen tcp "$port" "$srv" || echo "probe server ($which) not listening on $port" >&2
    timeout -k 5 "$limit" /usr/bin/time -f "%e %U %S" -o "$WORK/p.cli.time" \
        "$bin" probe client "127.0.0.1:$port" --size "$PROBE_SIZE" --rate "$PROBE_RATE" --count "$count" --json -q \
        >"$WORK/p.json" 2>"$WORK/p.cli.log" || rc=$?
    wait "$srv" || true
    BG=""
    [[ -s $WORK/raw/probe.$which.json ]] || cp "$WORK/p.json" "$WORK/raw/probe.$which.json" 2>/dev/null || true
    python3 - "$WORK" "$which" "$run" "$rc" >>"$ROWS" <<'PY'
import json, sys
w, which, run, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def times(n):
    try: e, u, s = map(float, open(f"{w}/{n}").read().split()[-3:]); return e, u + s
    except Exception: return None, None
def get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d: return None
        d = d[k]
    return d
row = {"case": "probe", "bin": which, "run": run, "exit": rc}
try:
    r = json.load(open(f"{w}/p.json"))
    rate, gap50, gap99 = get(r, "receiver", "user_rate_bps"), get(r, "sender", "departure_gap_ns", "p50"), get(r, "sender", "departure_gap_ns", "p99")
    ia99 = get(r, "receiver", "inter_arrival_ns", "p99")
    row.update(rate_gbps=None if rate is None else rate / 1e9, loss=get(r, "receiver", "loss_fraction"),
               gap_p50_us=None if gap50 is None else gap50 / 1e3, gap_p99_us=None if gap99 is None else gap99 / 1e3,
               late_packets=get(r, "sender", "late_packets"),
               interarrival_p99_us=None if ia99 is None else ia99 / 1e3, partial=bool(r.get("partial", False)))
    row["ok"] = rate is not None and not row["partial"]
except Exception as e:
    row.update(ok=False, error=f"{type(e).__name__}: {e}")
cw, ccpu = times("p.cli.time"); _, scpu = times("p.srv.time")
if cw:
    row.update(wall_s=cw, cpu_tx=ccpu / cw * 100, cpu_rx=None if scpu is None else scpu / cw * 100)
print(json.dumps(row))
PY
}

# stream_run WHICH RUN: one stream send -> stream recv (memory sink), one JSON row.
stream_run() {
    local which=$1 run=$2 bin flag port rx rc=0 limit=$((STREAM_SECS * 2 + 30))
    bin=BIN_$which
    bin=${!bin}
    flag=RECV_JSON_$which
    flag=${!flag}
    port=$(free_port udp)
    rm -f "$WORK"/s.*
    timeout -k 5 "$limit" /usr/bin/time -f "%e %U %S" -o "$WORK/s.rx.time" \
        "$bin" stream recv --listen "127.0.0.1:$port" --idle-timeout 2s -q "$flag" "$WORK/s.recv.json" \
        >/dev/null 2>"$WORK/s.rx.log" &
    rx=$!
    BG=$rx
    wait_listen udp "$port" "$rx" || echo "stream recv ($which) not listening on $port" >&2
    timeout -k 5 "$limit" /usr/bin/time -f "%e %U %S" -o "$WORK/s.tx.time" \
        "$bin" stream send --to "127.0.0.1:$port" "$SHM/in/Ef.vdif" --rate "$STREAM_RATE" --loop \
        --duration "${STREAM_SECS}s" --json >"$WORK/s.send.json" 2>"$WORK/s.tx.log" || rc=$?
    wait "$rx" || true
    BG=""
    [[ -s $WORK/raw/stream_send.$which.json ]] || cp "$WORK/s.send.json" "$WORK/raw/stream_send.$which.json" 2>/dev/null || true
    [[ -s $WORK/raw/stream_recv.$which.json ]] || cp "$WORK/s.recv.json" "$WORK/raw/stream_recv.$which.json" 2>/dev/null || true
    python3 - "$WORK" "$which" "$run" "$rc" >>"$ROWS" <<'PY'
import json, sys
w, which, run, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def times(n):
    try: e, u, s = map(float, open(f"{w}/{n}").read().split()[-3:]); return e, u + s
    except Exception: return None, None
def get(d, *path):
    for k in path:
        if isinstance(d, list):
            if not d: return None
            d = d[k] if isinstance(k, int) and k < len(d) else None
        elif isinstance(d, dict) and k in d: d = d[k]
        else: return None
    return d
def ns_us(v):
    return None if v is None else v / 1e3
row = {"case": "stream", "bin": which, "run": run, "exit": rc}
try:
    s = json.load(open(f"{w}/s.send.json")); r = json.load(open(f"{w}/s.recv.json"))
    sent, got = get(s, "stations", 0, "frames_sent"), get(r, "stations", 0, "window", "written_valid")
    rate, rxr = get(s, "stations", 0, "achieved_rate_bps"), get(r, "received_rate_bps")
    row.update(rate_gbps=None if rate is None else rate / 1e9, rx_rate_gbps=None if rxr is None else rxr / 1e9,
               frames_sent=sent, frames_lost=None if None in (sent, got) else sent - got,
               loss=None if None in (sent, got) or not sent else (sent - got) / sent,
               socket_drops=r.get("socket_drops", get(r, "udp", "rcvbuf_errors")),
               slips=get(s, "stations", 0, "slips"), slipped_s=get(s, "stations", 0, "slipped_s"),
               # departure_gap (µs) before the refactor, departure_gap_ns (a HistSummary) after it.
               gap_p50_us=get(s, "stations", 0, "departure_gap", "p50_us") or ns_us(get(s, "stations", 0, "departure_gap_ns", "p50")),
               gap_p99_us=get(s, "stations", 0, "departure_gap", "p99_us") or ns_us(get(s, "stations", 0, "departure_gap_ns", "p99")),
               # cpu.user before the one host schema, cpu.user_pct after it.
               cpu_tx_reported=None if get(s, "cpu") is None else s["cpu"].get("user_pct", s["cpu"].get("user", 0.0)) + s["cpu"].get("system_pct", s["cpu"].get("system", 0.0)),
               cpu_rx_reported=None if get(r, "cpu") is None else r["cpu"].get("user_pct", r["cpu"].get("user", 0.0)) + r["cpu"].get("system_pct", r["cpu"].get("system", 0.0)))
    row["ok"] = rc == 0 and sent is not None and got is not None
except Exception as e:
    row.update(ok=False, error=f"{type(e).__name__}: {e}")
tw, tcpu = times("s.tx.time"); _, rcpu = times("s.rx.time")
if tw:
    row.update(wall_s=tw, cpu_tx=tcpu / tw * 100, cpu_rx=None if rcpu is None else rcpu / tw * 100)
print(json.dumps(row))
PY
}

if has probe; then
    for run in $(seq "$RUNS"); do
        for which in before after; do
            echo "probe run $run/$RUNS: $which ($PROBE_RATE, $PROBE_SIZE B, $PROBE_SECS s)" >&2
            probe_run "$which" "$run"
        done
    done
fi

if has stream; then
    mkdir -p "$SHM/in"
    "$BIN_after" vdif gen --stations Ef --rate 2048M --channels 16 --frame 8000 --seconds 1 --out "$SHM/in" -q \
        --start 2026-11-23T12:00:00Z >/dev/null || { echo "vdif gen failed with $EVLBI" >&2; exit 1; }
    for run in $(seq "$RUNS"); do
        for which in before after; do
            echo "stream run $run/$RUNS: $which ($STREAM_RATE, $STREAM_SECS s)" >&2
            stream_run "$which" "$run"
        done
    done
    rm -rf "$SHM/in"
fi

if has transfer; then
    # transfer.sh runs per run: evlbi-before then evlbi, each configuration. Its receiver waits
    # unbounded for a sender that failed, so the whole call is bounded here.
    n_cfg=$(awk -F';' '{print NF}' <<<"$TRANSFER_CONFIGS")
    limit=$(((60 + SIZE_MB / 25) * (RUNS + 1) * 2 * n_cfg + 180))
    echo "transfer: bench/transfer.sh, 1 warm-up + $RUNS runs, $SIZE_MB MB memory to memory (at most $limit s)" >&2
    if ! EVLBI=$BIN_after EVLBI_BEFORE=$BIN_before PARTS=loopback LOOP_CASES=mem LOOP_TOOLS="evlbi-before evlbi" \
        LOOP_EVLBI_CONFIGS="$TRANSFER_CONFIGS" RUNS=$((RUNS + 1)) SIZE_MB=$SIZE_MB OUT=$WORK/transfer.json \
        timeout -k 15 "$limit" bench/transfer.sh >"$WORK/transfer.log" 2>&1; then
        echo "bench/transfer.sh failed; its output:" >&2
        tail -20 "$WORK/transfer.log" >&2
    fi
    [[ -s $WORK/transfer.json ]] && python3 - "$WORK/transfer.json" >>"$ROWS" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    tool = r["tool"]
    which = "before" if tool.startswith("evlbi-before") else "after"
    cfg = tool.split(" ", 1)[1] if " " in tool else ""
    g = r.get("goodput_rounds_bps")
    print(json.dumps({"case": "transfer", "config": cfg, "bin": which, "run": r["run"] - 1, "ok": bool(r["ok"]),
                      "warmup": r["run"] == 1,
                      "bytes": r["bytes"], "wall_s": r["secs"], "rate_gbps": r["gbps"],
                      "data_round_gbps": None if g is None else g / 1e9, "retransmitted": r.get("retransmitted"),
                      "cpu_tx": r["cpu_tx"], "cpu_rx": r["cpu_rx"]}))
PY
fi

LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$(dirname "$OUT")"
python3 - "$ROWS" "$OUT" "$WORK/raw" <<PY
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = {"runs": int("$RUNS"), "cases": "$CASES".split(), "took_s": $(date +%s) - $START,
        "load_before": "$LOAD0", "load_after": "$LOAD1",
        "before": {"ref": "$BEFORE_REF", "commit": "$before_commit", "bin": "$EVLBI_BEFORE", "sha256_12": "$SHA_before"},
        "after": {"commit": "$after_commit", "bin": "$EVLBI", "sha256_12": "$SHA_after"},
        "probe": {"rate": "$PROBE_RATE", "size": int("$PROBE_SIZE"), "secs": float("$PROBE_SECS")},
        "stream": {"rate": "$STREAM_RATE", "secs": float("$STREAM_SECS"), "frame": 8000, "sink": "memory"},
        "transfer": {"size_mb": int("$SIZE_MB"), "configs": "$TRANSFER_CONFIGS".split(";"), "from_to": "/dev/shm"}}
METRICS = {
    "probe": [("rate_gbps", "received Gb/s", "{:.3f}"), ("loss", "loss", "{:.2e}"), ("gap_p50_us", "departure gap p50 us", "{:.2f}"),
              ("gap_p99_us", "departure gap p99 us", "{:.2f}"), ("cpu_tx", "sender CPU %", "{:.0f}"), ("cpu_rx", "receiver CPU %", "{:.0f}")],
    "stream": [("rate_gbps", "sent Gb/s", "{:.3f}"), ("frames_lost", "frames lost", "{:.0f}"), ("slips", "slips", "{:.0f}"),
               ("gap_p50_us", "departure gap p50 us", "{:.2f}"), ("gap_p99_us", "departure gap p99 us", "{:.2f}"),
               ("cpu_tx", "sender CPU %", "{:.0f}"), ("cpu_rx", "receiver CPU %", "{:.0f}")],
    "transfer": [("rate_gbps", "Gb/s to verified", "{:.3f}"), ("data_round_gbps", "data-round Gb/s", "{:.3f}"),
                 ("cpu_tx", "sender CPU %", "{:.0f}"), ("cpu_rx", "receiver CPU %", "{:.0f}")],
}
def label(case, cfg):
    return case + (f" {cfg}" if cfg else "")
groups = {}
for r in rows:
    if r.get("warmup"):
        continue
    groups.setdefault((r["case"], r.get("config", "")), []).append(r)
summary = []
print(f"{meta['runs']} runs per binary, interleaved; before {meta['before']['commit']} ({meta['before']['bin']}), "
      f"after {meta['after']['commit']} ({meta['after']['bin']}); took {meta['took_s']} s; "
      f"load average before {meta['load_before']}, after {meta['load_after']}")
print(f"probe {meta['probe']['rate']} x {meta['probe']['size']} B for {meta['probe']['secs']:g} s; stream {meta['stream']['rate']} of "
      f"8000 B frames for {meta['stream']['secs']:g} s to a memory sink; transfer {meta['transfer']['size_mb']} MB /dev/shm to /dev/shm\n")
print("| case | metric | runs ok b / a | before median | after median | after / before | before min–max | after min–max | overlap |")
print("|---|---|---|---|---|---|---|---|---|")
for (case, cfg), rs in groups.items():
    ok = {w: [r for r in rs if r["bin"] == w and r.get("ok")] for w in ("before", "after")}
    n = {w: len([r for r in rs if r["bin"] == w]) for w in ("before", "after")}
    for key, name, fmt in METRICS.get(case, []):
        vals = {w: [r[key] for r in ok[w] if r.get(key) is not None] for w in ok}
        s = {"case": case, "config": cfg, "metric": key, "ok_before": len(ok["before"]), "ok_after": len(ok["after"])}
        cells = []
        for w in ("before", "after"):
            v = vals[w]
            s[w] = {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} if v else None
        b, a = s["before"], s["after"]
        s["ratio"] = a["median"] / b["median"] if a and b and b["median"] else None
        s["overlap"] = bool(a and b and a["min"] <= b["max"] and b["min"] <= a["max"])
        summary.append(s)
        f = lambda x: fmt.format(x)
        med = lambda x: f(x["median"]) if x else "missing"
        rng = lambda x: f"{f(x['min'])}–{f(x['max'])}" if x else "-"
        ratio = f"{s['ratio']:.3f}" if s["ratio"] is not None else "-"
        print(f"| {label(case, cfg)} | {name} | {len(ok['before'])}/{n['before']} / {len(ok['after'])}/{n['after']} | {med(b)} | {med(a)} | "
              f"{ratio} | {rng(b)} | {rng(a)} | {'yes' if s['overlap'] else 'no'} |")
# The first run's result JSON of each binary: fields only one of them has (renamed or new).
def paths(o, p=""):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from paths(v, f"{p}.{k}")
    elif isinstance(o, list):
        if o and not any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in o):
            for x in o:
                yield from paths(x, p + "[]")
        else:
            yield p + "[]"
    else:
        yield p
fields = {}
raw = sys.argv[3]
for kind in ("probe", "stream_send", "stream_recv"):
    try:
        keys = {w: set(paths(json.load(open(os.path.join(raw, f"{kind}.{w}.json"))))) for w in ("before", "after")}
    except Exception:
        continue
    only_b, only_a = sorted(keys["before"] - keys["after"]), sorted(keys["after"] - keys["before"])
    fields[kind] = {"only_before": only_b, "only_after": only_a}
    if only_b or only_a:
        print(f"\n{kind} JSON fields only in before: {', '.join(only_b) or '-'}; only in after: {', '.join(only_a) or '-'}")
if fields and not any(v["only_before"] or v["only_after"] for v in fields.values()):
    print(f"\nresult JSON field names identical in both binaries ({', '.join(fields)})")
for case in meta["cases"]:
    if not any(r["case"] == case for r in rows):
        print(f"no {case} results" + (" (bench/transfer.sh failed, see above)" if case == "transfer" else ""))
failed = [r for r in rows if not r.get("ok") and not r.get("warmup")]
for r in failed:
    print(f"failed: {r['case']} {r.get('config', '')} {r['bin']} run {r['run']}: {r.get('error', 'exit %s' % r.get('exit'))}")
json.dump({"meta": meta, "rows": rows, "summary": summary, "json_fields": fields}, open(sys.argv[2], "w"), indent=1)
print(f"\nall runs: {sys.argv[2]}")
PY
