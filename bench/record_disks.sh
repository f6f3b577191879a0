#!/usr/bin/env bash
# Multi-disk recording (issue 18): `evlbi stream send --seq-format jive5ab` (8000-byte data
# arrays, one frame per datagram) on 127.0.0.1 into `evlbi stream recv --format vbs` over 1, 2
# and 4 directories, in the same run as
#   - dd (oflag=direct, one per directory, in parallel) writing the same volume there: what the
#     directories take with no network and no receiver;
#   - jive5ab 3.1 `record=on` (its FlexBuff UDP recorder: vbs chunks over `set_disks=`, one
#     writer thread per directory, `record=nthread::N`), driven over VSI-S, when the binary is there.
# Per configuration: frames sent / recorded / lost, aggregate write rate, and CPU (receiver and
# writer processes from getrusage of the reaped tree; jive5ab and dd likewise), as µs per frame
# and as % of a core per Gb/s recorded. Then, for evlbi, the highest rate of RATES recorded
# without loss into each directory count. Finally one dd to DISK_DIR (the VM's real disk): what
# one disk allows, and how many such disks 4.096 Gb/s needs.
#
#   bench/record_disks.sh   env: SECS=5 RUNS=2 DIR=/dev/shm RATE=4096M RATES="4096M 6144M 8192M 10240M"
#                                DISKS="1 2 4" FORMAT=vbs BLOCK=128M SEND_OPTS="--burst 8"
#                                DISK_DIR=/var/tmp DISK_MB=2048 OUT=bench/results/record_disks.json
#                                JIVE5AB=(default: what scripts/jive5ab-path finds)
# DIR must be off the root file system for jive5ab (it records only on other mount points):
# /dev/shm (tmpfs) is. The machine is shared and noisy: the load average is recorded.
set -euo pipefail
cd "$(dirname "$0")/.."
EVLBI=${EVLBI:-target/release/evlbi}
J5=$(scripts/jive5ab-path || true)
[[ -x $EVLBI ]] || scripts/setup.sh --build
mkdir -p bench/results
exec python3 - "$EVLBI" "${J5:-}" <<'PY'
import json, os, re, resource, socket, statistics, subprocess, sys, tempfile, time, shutil

EVLBI, J5 = sys.argv[1], sys.argv[2] or None
SECS = float(os.environ.get("SECS", "5"))
DIR = os.environ.get("DIR", "/dev/shm")
RATE = os.environ.get("RATE", "4096M")
RATES = os.environ.get("RATES", "4096M 6144M 8192M 10240M").split()
DISKS = [int(x) for x in os.environ.get("DISKS", "1 2 4").split()]
FORMAT = os.environ.get("FORMAT", "vbs")
BLOCK = os.environ.get("BLOCK", "128M")
SEND_OPTS = os.environ.get("SEND_OPTS", "--burst 8").split()
DISK_DIR = os.environ.get("DISK_DIR", "/var/tmp")
DISK_MB = int(os.environ.get("DISK_MB", "2048"))
OUT = os.environ.get("OUT", "bench/results/record_disks.json")
FRAME, DATA = 8032, 8000
TCK = os.sysconf("SC_CLK_TCK")

def cpu_pct(c):  # a process CPU share: user_pct + system_pct (user + system before the one host schema)
    return c.get("user_pct", c.get("user", 0.0)) + c.get("system_pct", c.get("system", 0.0))


def mbps(r):
    m = {"K": 1e3, "M": 1e6, "G": 1e9}
    return float(r[:-1]) * m[r[-1]] if r[-1] in m else float(r)

def fps_of(rate):  # frames per second of 8000-byte data arrays, one thread
    return int(mbps(rate) / (DATA * 8))

def port(kind=socket.SOCK_DGRAM):
    s = socket.socket(socket.AF_INET, kind); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN); return r.ru_utime + r.ru_stime

work = tempfile.mkdtemp(prefix="evlbi-rec-bench.")
root = tempfile.mkdtemp(prefix="evlbi-rec-bench.", dir=DIR)
print(f"== input: 2 s of {RATE} (16 channels, 2 bit, 8000-byte data arrays); load average {os.getloadavg()}", flush=True)
subprocess.run([EVLBI, "vdif", "gen", "--stations", "Ef", "--rate", RATE, "--channels", "16", "--frame", "8000",
                "--seconds", "2", "--out", f"{work}/in", "-q", "--start", "2026-11-23T12:00:00Z"], check=True,
               stdout=subprocess.DEVNULL)
INPUT = f"{work}/in/Ef.vdif"
# Higher rates are sent from their own input (the rate comes from the file).
inputs = {RATE: INPUT}

def input_for(rate):
    if rate not in inputs:
        d = f"{work}/in-{rate}"
        subprocess.run([EVLBI, "vdif", "gen", "--stations", "Ef", "--rate", rate, "--channels", "16", "--frame", "8000",
                        "--seconds", "1", "--out", d, "-q", "--start", "2026-11-23T12:00:00Z"], check=True,
                       stdout=subprocess.DEVNULL)
        inputs[rate] = f"{d}/Ef.vdif"
    return inputs[rate]

def fresh_dirs(n):
    shutil.rmtree(f"{root}/rec", ignore_errors=True)
    ds = [f"{root}/rec/d{i}" for i in range(n)]
    for d in ds:
        os.makedirs(d)
    return ds

def send(p, rate, js):
    r = subprocess.run([EVLBI, "stream", "send", "--to", f"127.0.0.1:{p}", "--seq-format", "jive5ab", input_for(rate),
                        "--rate", rate, "--loop", "--duration", f"{SECS}s", "--export-json", js, *SEND_OPTS],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"stream send failed: {r.stderr}")

def run_evlbi(n, rate):
    ds = fresh_dirs(n)
    p = port()
    js, log = f"{work}/recv.json", f"{work}/recv.log"
    cpuf = f"{work}/recv-cpu.json"
    # The receiver runs under a wrapper that reports the rusage of its reaped tree (receiver and
    # the writer processes it reaped): exact, and nothing of the sender's.
    wrap = ["python3", "-c", "import json, resource, subprocess, sys; subprocess.run(sys.argv[2:]); "
            "r = resource.getrusage(resource.RUSAGE_CHILDREN); open(sys.argv[1], 'w').write(json.dumps(r.ru_utime + r.ru_stime))",
            cpuf]
    with open(log, "w") as lf:
        rx = subprocess.Popen(wrap + [EVLBI, "stream", "recv", "--listen", f"127.0.0.1:{p}", "--seq-format", "jive5ab",
                               "--fps", str(fps_of(rate)), "--format", FORMAT, "--disks", ",".join(ds), "--scan", "bench",
                               "--block", BLOCK, "--idle-timeout", "2s", "--duration", f"{SECS + 60}s", "-q",
                               "--export-json", js], stderr=lf)
        for _ in range(600):
            if "listening on" in open(log).read():
                break
            time.sleep(0.1)
        send(p, rate, f"{work}/send.json")
        rx.wait(timeout=120)
    s = json.load(open(f"{work}/send.json")); r = json.load(open(js))
    st = s["stations"][0]; w = r["stations"][0]["window"]; rec = r["recording"]
    share_rx = cpu_pct(r["cpu"])
    share_w = cpu_pct(r["writer_cpu"]) if r.get("writer_cpu") else 0.0
    recv_cpu = json.load(open(cpuf))
    writer_cpu = recv_cpu * share_w / (share_rx + share_w) if share_rx + share_w > 0 else 0.0
    nbytes = sum(d["bytes"] for d in rec["disks"])
    row = {"who": "evlbi", "disks": n, "rate": rate, "frames_sent": st["frames_sent"], "recorded": w["written_valid"],
           "lost": st["frames_sent"] - w["written_valid"], "kernel_drops": r["socket_drops"], "sender_slips": st["slips"],
           "writer_stall_s": r["writer_stall_s"], "bytes": nbytes, "duration_s": r["duration_s"],
           "write_gbps": nbytes * 8 / max(r["duration_s"], 1e-9) / 1e9, "cpu_s": recv_cpu, "writer_cpu_s": writer_cpu,
           "receiver_cpu_s": recv_cpu - writer_cpu, "direct_io": rec["direct_io"],
           "disk_blocks": [d["blocks"] for d in rec["disks"]], "disks_dropped": rec["disks_dropped"]}
    shutil.rmtree(f"{root}/rec", ignore_errors=True)
    return row

def vsi(cp, *cmds):
    for _ in range(100):
        try:
            s = socket.create_connection(("127.0.0.1", cp), timeout=30); break
        except OSError:
            time.sleep(0.1)
    f = s.makefile("rwb"); out = []
    for c in cmds:
        f.write((c + "\n").encode()); f.flush(); out.append(f.readline().decode().strip())
    s.close(); return out

def ticks(pid):
    try:
        v = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12]) + int(v[13]) + int(v[14])) / TCK
    except OSError:
        return 0.0

def run_jive5ab(n, rate):
    ds = fresh_dirs(n)
    p, cp = port(), port(socket.SOCK_STREAM)
    j = subprocess.Popen([J5, "-m", "0", "-*", "-p", str(cp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        mb = int(mbps(rate) / 1e6)
        r = vsi(cp, "net_protocol=udps:64M:" + BLOCK + ":4;", "mtu=9000;", f"mode=VDIF_8000-{mb}-16-2;", f"net_port={p};",
                "set_disks=" + ":".join(ds) + ";", f"record=nthread::{n};", "record=on:bench;")
        t0 = ticks(j.pid)
        send(p, rate, f"{work}/j5-send.json")
        time.sleep(2)
        t1 = ticks(j.pid)
        q = vsi(cp, "evlbi?;", "record?;", "record=off;")
        time.sleep(1)
    finally:
        j.terminate(); j.wait(timeout=20)
    s = json.load(open(f"{work}/j5-send.json")); st = s["stations"][0]
    ev = re.search(r"!evlbi\? 0 : total : (\d+) : loss : (\d+)", q[0])
    got = int(ev.group(1)) if ev else 0
    nbytes = sum(os.path.getsize(os.path.join(dp, f)) for d in ds for dp, _, fs in os.walk(d) for f in fs)
    # jive5ab writes fill frames for the ones lost: its bytes are received + filled.
    row = {"who": "jive5ab", "disks": n, "rate": rate, "frames_sent": st["frames_sent"], "recorded": got,
           "lost": st["frames_sent"] - got, "frames_in_files": nbytes // FRAME, "bytes": nbytes, "sender_slips": st["slips"],
           "write_gbps": nbytes * 8 / max(s["duration_s"], 1e-9) / 1e9, "duration_s": s["duration_s"], "cpu_s": t1 - t0,
           "vsi": r + q}
    shutil.rmtree(f"{root}/rec", ignore_errors=True)
    return row

def run_dd(n, nbytes):
    ds = fresh_dirs(n)
    count = max(int(nbytes / n / (1 << 20)), 1)
    c0 = children_cpu(); t0 = time.time()
    ps = [subprocess.Popen(["dd", "if=/dev/zero", f"of={d}/dd.bin", "bs=1M", f"count={count}", "oflag=direct"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for d in ds]
    for p in ps:
        p.wait()
    wall = time.time() - t0; cpu = children_cpu() - c0
    written = count * n * (1 << 20)
    shutil.rmtree(f"{root}/rec", ignore_errors=True)
    return {"who": "dd", "disks": n, "bytes": written, "duration_s": wall, "write_gbps": written * 8 / wall / 1e9, "cpu_s": cpu}

RUNS = int(os.environ.get("RUNS", "2"))
rows = []
for n in DISKS:
    for k in range(RUNS):
        print(f"== {n} director{'y' if n == 1 else 'ies'} at {RATE}, run {k + 1} of {RUNS}", flush=True)
        e = run_evlbi(n, RATE); rows.append(e)
        rows.append(run_dd(n, e["bytes"] or mbps(RATE) / 8 * SECS))
        if J5:
            rows.append(run_jive5ab(n, RATE))
# The highest rate recorded without loss: rates asked in turn until one loses frames; what
# counts is the rate achieved (a sender held up by the host's other load sends less than asked).
best = {}
for n in DISKS:
    best[n] = None
    for rate in RATES:
        print(f"== highest lossless rate, {n} director{'y' if n == 1 else 'ies'}: {rate}", flush=True)
        e = run_evlbi(n, rate); e["search"] = True; rows.append(e)
        if e["lost"] > 0:
            break
        if best[n] is None or e["write_gbps"] > best[n]["write_gbps"]:
            best[n] = {"asked": rate, "write_gbps": e["write_gbps"]}

disk = None
if DISK_DIR and os.path.isdir(DISK_DIR):
    d = tempfile.mkdtemp(prefix="evlbi-rec-disk.", dir=DISK_DIR)
    t0 = time.time()
    subprocess.run(["dd", "if=/dev/zero", f"of={d}/dd.bin", "bs=1M", f"count={DISK_MB}", "oflag=direct"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.time() - t0
    shutil.rmtree(d, ignore_errors=True)
    disk = {"dir": DISK_DIR, "mb": DISK_MB, "mb_per_s": DISK_MB * 1.048576 / wall}
    disk["disks_for_4096"] = -(-512 // int(disk["mb_per_s"])) if disk["mb_per_s"] >= 1 else None

def per_frame(r):
    return 1e6 * r["cpu_s"] / max(r.get("recorded", 0), 1)

def per_gbps(r):  # % of one core per Gb/s written
    g = r["bytes"] * 8 / 1e9
    return 100 * r["cpu_s"] / max(r["duration_s"], 1e-9) / max(g / max(r["duration_s"], 1e-9), 1e-9)

print(f"\n{RATE} of 8000-byte frames for {SECS} s into {FORMAT} over N directories of {DIR}; load average {os.getloadavg()}\n")
print("| who | dirs | rate | frames sent | recorded | lost | written Gb/s | CPU s | µs CPU/frame | % core per Gb/s | notes |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["who"] == "dd":
        print(f"| dd | {r['disks']} | — | — | — | — | {r['write_gbps']:.2f} | {r['cpu_s']:.2f} | — | {per_gbps(r):.1f} | oflag=direct, same volume |")
        continue
    note = ""
    if r["who"] == "evlbi":
        note = (f"writers {r['writer_cpu_s']:.2f} s ({per_gbps({**r, 'cpu_s': r['writer_cpu_s']}):.1f} %/Gb/s), "
                f"blocks per dir {r['disk_blocks']}, stall {r['writer_stall_s']:.2f} s, kernel drops {r['kernel_drops']}"
                + (", direct I/O" if r["direct_io"] else ""))
    if r.get("sender_slips"):
        note += f"; sender slipped {r['sender_slips']}x"
    if r.get("search"):
        note = "search; " + note
    print(f"| {r['who']} | {r['disks']} | {r['rate']} | {r['frames_sent']} | {r['recorded']} | {r['lost']} | "
          f"{r['write_gbps']:.2f} | {r['cpu_s']:.2f} | {per_frame(r):.2f} | {per_gbps(r):.1f} | {note} |")
print()
for n in DISKS:
    b = best[n]
    print(f"evlbi highest rate recorded without loss into {n} director{'y' if n == 1 else 'ies'}: "
          + (f"{b['write_gbps']:.2f} Gb/s (asked {b['asked']})" if b else "none of " + " ".join(RATES))
          + (" — the highest asked" if b and b["asked"] == RATES[-1] else ""))
if disk:
    print(f"one real disk ({disk['dir']}, dd oflag=direct {disk['mb']} MB): {disk['mb_per_s']:.0f} MB/s; "
          f"4.096 Gb/s (512 MB/s) needs {disk['disks_for_4096']} such disk(s)")
res = {"secs": SECS, "dir": DIR, "rate": RATE, "format": FORMAT, "block": BLOCK, "jive5ab": J5, "rows": rows,
       "highest_lossless": best, "real_disk": disk, "load_average": os.getloadavg()}
for who in ("evlbi", "jive5ab", "dd"):
    for n in DISKS:
        rr = [r for r in rows if r["who"] == who and r["disks"] == n and not r.get("search")]
        if rr:
            m = res.setdefault("medians", {}).setdefault(who, {})[n] = {
                "pct_core_per_gbps": statistics.median(per_gbps(r) for r in rr),
                "write_gbps": statistics.median(r["write_gbps"] for r in rr)}
            if who != "dd":
                m["lost"] = statistics.median(r["lost"] for r in rr)
                m["us_cpu_per_frame"] = statistics.median(per_frame(r) for r in rr)
            if who == "evlbi":
                m["writer_pct_core_per_gbps"] = statistics.median(per_gbps({**r, "cpu_s": r["writer_cpu_s"]}) for r in rr)
print("\nmedians (% of a core per Gb/s written; write rate):")
for who, per in res.get("medians", {}).items():
    for n, m in per.items():
        extra = f", writers alone {m['writer_pct_core_per_gbps']:.1f}" if "writer_pct_core_per_gbps" in m else ""
        lost = f", lost {m['lost']:.0f}" if "lost" in m else ""
        print(f"  {who:8} {n} dir(s): {m['pct_core_per_gbps']:.1f} %/Gb/s{extra}; {m['write_gbps']:.2f} Gb/s{lost}")
json.dump(res, open(OUT, "w"), indent=1)
shutil.rmtree(work, ignore_errors=True); shutil.rmtree(root, ignore_errors=True)
print(f"results: {OUT}")
PY
