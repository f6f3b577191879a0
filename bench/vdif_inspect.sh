#!/usr/bin/env bash
# `evlbi vdif inspect|stats|dump` on a file of zeros (issue 20) or of random bytes (CONTENT=random):
# time and peak memory against the read ceiling of the same file, in the same run. A file of GB
# gigabytes is written once (real blocks, not a sparse file), then RUNS times, alternating: `dd
# of=/dev/null bs=1M` (what reading the file costs: page cache or disk) and `evlbi vdif inspect`,
# `stats` and `dump --headers-only` under /usr/bin/time (wall seconds, peak RSS). evlbi exits 1
# ("not VDIF"); that is the expected answer and is checked. Prints medians, GB/s, the ratio
# inspect/dd, and writes JSON.
#
#   bench/vdif_inspect.sh     env: GB=2 RUNS=5 CONTENT=zeros|random DIR=target/bench-inspect
#                                  OUT=bench/results/vdif_inspect.json (…_random.json for random)
#                                  BASELINE=(an older evlbi binary, measured beside, optional)
# Targets (issue 20): inspect < 64 MB peak RSS and >= 1 GB/s.
set -euo pipefail
cd "$(dirname "$0")/.."
GB=${GB:-2}
RUNS=${RUNS:-5}
DIR=${DIR:-target/bench-inspect}
CONTENT=${CONTENT:-zeros}
case $CONTENT in
zeros) OUT=${OUT:-bench/results/vdif_inspect.json} ;;
random) OUT=${OUT:-bench/results/vdif_inspect_random.json} ;;
*) echo "CONTENT is zeros or random" >&2; exit 2 ;;
esac
EVLBI=${EVLBI:-target/release/evlbi}
TIME=/usr/bin/time
[[ -x $TIME ]] || { echo "needs GNU time at $TIME (Debian package: time)" >&2; exit 2; }
[[ -x $EVLBI ]] || scripts/setup.sh --build
mkdir -p "$DIR" "$(dirname "$OUT")"
FILE="$DIR/$CONTENT.bin"
BYTES=$((GB * 1000 * 1000 * 1000))
trap 'rm -f "$FILE"' EXIT
echo "== load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== writing $GB GB of $CONTENT to $FILE"
src=/dev/zero
[[ $CONTENT == random ]] && src=/dev/urandom
dd if=$src of="$FILE" bs=1000000 count=$((GB * 1000)) iflag=fullblock status=none
sync

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# run_evlbi BIN ARGS...: prints "seconds peak_rss_kib" and checks the exit code and message.
run_evlbi() {
    local bin=$1 log
    shift
    log=$(mktemp)
    set +e
    "$TIME" -f "%e %M" -o "$log.t" "$bin" vdif "$@" "$FILE" >/dev/null 2>"$log"
    local rc=$?
    set -e
    if [[ $rc -ne 1 ]] || ! grep -q "not VDIF\|no VDIF frame" "$log"; then
        echo "unexpected: $bin vdif $* exited $rc: $(head -c 300 "$log")" >&2
        exit 1
    fi
    tail -1 "$log.t"
    rm -f "$log" "$log.t"
}

declare -A secs rss
for i in $(seq "$RUNS"); do
    t0=$(now)
    dd if="$FILE" of=/dev/null bs=1M status=none
    t1=$(now)
    secs[dd]+="$(echo "$t1 - $t0" | bc -l) "
    for cmd in inspect stats dump; do
        args=("$cmd")
        [[ $cmd == dump ]] && args+=(--headers-only)
        read -r s m < <(run_evlbi "$EVLBI" "${args[@]}")
        secs[$cmd]+="$s "
        rss[$cmd]+="$m "
    done
    echo "run $i: dd $(echo "${secs[dd]}" | awk '{print $NF}') s, inspect $(echo "${secs[inspect]}" | awk '{print $NF}') s"
done
base=""
if [[ -n ${BASELINE:-} ]]; then
    # As many runs as of the build measured, each beside one of its own.
    for i in $(seq "$RUNS"); do
        read -r bs bm < <(run_evlbi "$BASELINE" inspect)
        read -r s m < <(run_evlbi "$EVLBI" inspect)
        base+="$bs "
        secs[inspect]+="$s "
        rss[inspect]+="$m "
        echo "baseline run $i: $BASELINE inspect $bs s, $EVLBI inspect $s s"
    done
fi

med() { printf '%s\n' $1 | median; }
max() { printf '%s\n' $1 | sort -g | tail -1; }
gbps() { echo "$BYTES / $1 / 1000000000" | bc -l; }
fmt() { printf '%.2f' "$1"; }
dd_s=$(med "${secs[dd]}")
echo
echo "| what | runs | median s | GB/s | peak RSS MB (max of runs) | all runs s |"
echo "|---|---|---|---|---|---|"
echo "| dd if=$CONTENT of=/dev/null bs=1M ($GB GB) | $RUNS | $(fmt "$dd_s") | $(fmt "$(gbps "$dd_s")") | – | ${secs[dd]}|"
for cmd in inspect stats dump; do
    s=$(med "${secs[$cmd]}")
    echo "| evlbi vdif $cmd$([[ $cmd == dump ]] && echo ' --headers-only') | $RUNS | $(fmt "$s") | $(fmt "$(gbps "$s")") | $(fmt "$(echo "$(max "${rss[$cmd]}") / 1024" | bc -l)") | ${secs[$cmd]}|"
done
if [[ -n $base ]]; then
    bs=$(med "$base")
    echo "| baseline $BASELINE vdif inspect | $RUNS | $(fmt "$bs") | $(fmt "$(gbps "$bs")") | – | $base|"
fi
ins_s=$(med "${secs[inspect]}")
ins_rss=$(max "${rss[inspect]}")
echo
echo "inspect/dd time ratio (medians): $(fmt "$(echo "$ins_s / $dd_s" | bc -l)")   inspect: $(fmt "$(gbps "$ins_s")") GB/s, peak $(fmt "$(echo "$ins_rss / 1024" | bc -l)") MB   targets: >= 1 GB/s, < 64 MB"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT" "$GB" "$RUNS" "${secs[dd]}" "${secs[inspect]}" "${rss[inspect]}" "${secs[stats]}" "${rss[stats]}" \
    "${secs[dump]}" "${rss[dump]}" "$base" "$(cut -d' ' -f1-3 /proc/loadavg)" "$CONTENT" <<'PY'
import json, statistics, sys
out, gb, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
f = lambda s: [float(x) for x in s.split()]
dd, base, load = f(sys.argv[4]), sys.argv[11].split(), sys.argv[12]
res = {"bytes": gb * 10**9, "content": sys.argv[13], "runs": runs, "load_average_end": load,
       "dd_read_s": dd, "dd_read_median_s": statistics.median(dd)}
for k, (s, m) in zip(["inspect", "stats", "dump_headers_only"],
                     [(sys.argv[5], sys.argv[6]), (sys.argv[7], sys.argv[8]), (sys.argv[9], sys.argv[10])]):
    secs, rss = f(s), [int(x) for x in m.split()]
    res[k] = {"seconds": secs, "median_s": statistics.median(secs),
              "gb_per_s_median": gb / statistics.median(secs), "peak_rss_kib": rss, "peak_rss_kib_max": max(rss)}
res["inspect_over_dd"] = res["inspect"]["median_s"] / res["dd_read_median_s"]
if base:
    b = [float(x) for x in base]
    res["baseline_inspect"] = {"seconds": b, "median_s": statistics.median(b), "gb_per_s_median": gb / statistics.median(b)}
json.dump(res, open(out, "w"), indent=2)
print("wrote", out)
PY
