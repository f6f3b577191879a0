#!/usr/bin/env python3
"""A DiFX job for a synthetic array without an ephemeris, and a reader of its visibilities.

`job` writes what mpifxcorr reads (mpifxcorr/src/configuration.cpp, model.cpp): the .input (its
COMMON/CONFIGURATIONS/RULES/FREQ/TELESCOPE/DATASTREAM/BASELINE/DATA/NETWORK sections), the
.calc, the .im with the delay polynomials of a rigid array whose stations all sit at the same
place (delay, rate, u, v, w all 0: the generated sky delay is left in the data and shows as the
fringe's delay), and the .threads file. Each station is read from a FILE or from a NETWORK port
(TCP, or UDP: a negative "TCP WINDOW (KB)" is how DiFX says UDP).

`vis` reads the SWIN output (visibility.cpp: per record a 74-byte header, then nchan complex
float32) and prints JSON: the records, and per baseline the fringe of the visibilities summed
over the job (all sub-bands' lag functions added, peak delay, S/N = peak over the rms of the lags
away from it). With `--compare OTHER` it says whether both outputs hold the same records and how
far their visibilities differ.

Standard library only (run by the Rust tests and bench scripts with the system python3).
"""

import argparse
import cmath
import datetime as dt
import glob
import json
import math
import os
import struct
import sys

SYNC = 0xFF00FF00
HEADER_LEN = 74


def kv(key, value):
    """One line as difxio writes it: the key, a colon, the value from column 21."""
    return f"{key + ':':<20}{value}\n"


def mjd_of(t):
    epoch = dt.datetime(1858, 11, 17, tzinfo=dt.timezone.utc)
    d = t - epoch
    return d.days, d.seconds


def parse_station(spec):
    """NAME=FILE:path | NAME=TCP:port | NAME=UDP:port"""
    name, _, src = spec.partition("=")
    kind, _, arg = src.partition(":")
    kind = kind.upper()
    if not name or kind not in ("FILE", "TCP", "UDP") or not arg:
        raise SystemExit(f"bad --station {spec!r}: NAME=FILE:path, NAME=TCP:port or NAME=UDP:port")
    return {"name": name, "kind": kind, "arg": arg}


def write_job(a):
    start = dt.datetime.fromisoformat(a.start.replace("Z", "+00:00"))
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.timezone.utc)
    mjd, sec = mjd_of(start)
    stations = [parse_station(s) for s in a.station]
    n = len(stations)
    os.makedirs(a.dir, exist_ok=True)
    base = os.path.join(os.path.abspath(a.dir), a.name)
    nfreq = a.channels
    sub_ns = a.subint_ns
    inp = []
    w = inp.append
    w("# COMMON SETTINGS ##!\n")
    w(kv("CALC FILENAME", base + ".calc"))
    w(kv("CORE CONF FILENAME", base + ".threads"))
    w(kv("EXECUTE TIME (SEC)", a.seconds))
    w(kv("START MJD", mjd))
    w(kv("START SECONDS", sec))
    w(kv("ACTIVE DATASTREAMS", n))
    w(kv("ACTIVE BASELINES", n * (n - 1) // 2))
    w(kv("VIS BUFFER LENGTH", 80))
    w(kv("OUTPUT FORMAT", "SWIN"))
    w(kv("OUTPUT FILENAME", base + ".difx"))
    w("\n# CONFIGURATIONS ###!\n")
    w(kv("NUM CONFIGURATIONS", 1))
    w(kv("CONFIG NAME", "evlbi"))
    w(kv("INT TIME (SEC)", f"{a.int_time:.6f}"))
    w(kv("SUBINT NANOSECONDS", sub_ns))
    w(kv("GUARD NANOSECONDS", 2000))
    w(kv("FRINGE ROTN ORDER", 1))
    w(kv("ARRAY STRIDE LENGTH", 0))
    w(kv("XMAC STRIDE LENGTH", 0))
    w(kv("NUM BUFFERED FFTS", 1))
    w(kv("WRITE AUTOCORRS", "TRUE"))
    w(kv("PULSAR BINNING", "FALSE"))
    w(kv("PHASED ARRAY", "FALSE"))
    for i in range(n):
        w(kv(f"DATASTREAM {i} INDEX", i))
    for b in range(n * (n - 1) // 2):
        w(kv(f"BASELINE {b} INDEX", b))
    w("\n# RULES ############!\n")
    w(kv("NUM RULES", 1))
    w(kv("CONFIG NAME", "evlbi"))
    w("\n# FREQ TABLE #######!\n")
    w(kv("FREQ ENTRIES", nfreq))
    for f in range(nfreq):
        w(kv(f"FREQ (MHZ) {f}", f"{a.sky_mhz + f * a.bandwidth_mhz:.6f}"))
        w(kv(f"BW (MHZ) {f}", f"{a.bandwidth_mhz:.6f}"))
        w(kv(f"SIDEBAND {f}", "U"))
        w(kv(f"NUM CHANNELS {f}", a.nchan))
        w(kv(f"CHANS TO AVG {f}", 1))
        w(kv(f"OVERSAMPLE FAC. {f}", 1))
        w(kv(f"DECIMATION FAC. {f}", 1))
        w(kv(f"PHASE CALS {f} OUT", 0))
    w("\n# TELESCOPE TABLE ##!\n")
    w(kv("TELESCOPE ENTRIES", n))
    for i, s in enumerate(stations):
        w(kv(f"TELESCOPE NAME {i}", s["name"]))
        w(kv(f"CLOCK REF MJD {i}", f"{mjd + sec / 86400:.10f}"))
        w(kv(f"CLOCK POLY ORDER {i}", 1))
        w(kv(f"CLOCK COEFF {i}/0", "0.000000000000000e+00"))
        w(kv(f"CLOCK COEFF {i}/1", "0.000000000000000e+00"))
    w("\n# DATASTREAM TABLE #!\n")
    w(kv("DATASTREAM ENTRIES", n))
    w(kv("DATA BUFFER FACTOR", 32))
    w(kv("NUM DATA SEGMENTS", 8))
    for i, s in enumerate(stations):
        w(kv("TELESCOPE INDEX", i))
        w(kv("TSYS", "0.000000"))
        fmt = a.format
        if a.threads > 1 or a.interlaced:
            # Threads of one station multiplexed by DiFX itself (vdifio's vdifmux): the
            # FILE reader VDIFDataStream, the NETWORK reader VDIFNetworkDataStream (bare
            # frames, one per datagram over UDP).
            fmt = "INTERLACEDVDIF/" + ":".join(str(t) for t in range(a.threads))
        w(kv("DATA FORMAT", fmt))
        w(kv("QUANTISATION BITS", a.bits))
        w(kv("DATA FRAME SIZE", a.frame_bytes))
        w(kv("DATA SAMPLING", "REAL"))
        w(kv("DATA SOURCE", "FILE" if s["kind"] == "FILE" else "NETWORK"))
        w(kv("FILTERBANK USED", "FALSE"))
        w(kv("PHASE CAL INT (MHZ)", 0))
        w(kv("NUM RECORDED FREQS", nfreq))
        for f in range(nfreq):
            w(kv(f"REC FREQ INDEX {f}", f))
            w(kv(f"CLK OFFSET {f} (us)", "0.000000"))
            w(kv(f"FREQ OFFSET {f} (Hz)", "0.000000"))
            w(kv(f"NUM REC POLS {f}", 1))
        for f in range(nfreq):
            w(kv(f"REC BAND {f} POL", "R"))
            w(kv(f"REC BAND {f} INDEX", f))
        w(kv("NUM ZOOM FREQS", 0))
    w("\n# BASELINE TABLE ###!\n")
    w(kv("BASELINE ENTRIES", n * (n - 1) // 2))
    b = 0
    for i in range(n):
        for j in range(i + 1, n):
            w(kv(f"D/STREAM A INDEX {b}", i))
            w(kv(f"D/STREAM B INDEX {b}", j))
            w(kv(f"NUM FREQS {b}", nfreq))
            for f in range(nfreq):
                w(kv(f"TARGET FREQ {b}/{f}", f))
                w(kv(f"POL PRODUCTS {b}/{f}", 1))
                w(kv("D/STREAM A BAND 0", f))
                w(kv("D/STREAM B BAND 0", f))
            b += 1
    w("\n# DATA TABLE #######!\n")
    for i, s in enumerate(stations):
        if s["kind"] == "FILE":
            w(kv(f"D/STREAM {i} FILES", 1))
            w(kv(f"FILE {i}/0", os.path.abspath(s["arg"])))
        else:
            w(kv(f"D/STREAM {i} FILES", 0))
    if any(s["kind"] != "FILE" for s in stations):
        w("\n# NETWORK TABLE ####!\n")
        for i, s in enumerate(stations):
            port = 0 if s["kind"] == "FILE" else int(s["arg"])
            # For UDP the value's magnitude is the datagram size Mark5B readers expect
            # (mk5.cpp); the VDIF reader takes each datagram as it comes.
            window = {"FILE": 0, "TCP": 0, "UDP": -a.udp_bytes}[s["kind"]]
            w(kv(f"PORT NUM {i}", port))
            w(kv(f"TCP WINDOW (KB) {i}", window))
    with open(base + ".input", "w") as f:
        f.write("".join(inp))
    write_calc(a, base, stations, start, mjd, sec)
    with open(base + ".threads", "w") as f:
        f.write(kv("NUMBER OF CORES", 1) + f"{a.core_threads}\n")
    print(base + ".input")


def write_calc(a, base, stations, start, mjd, sec):
    t = start
    c = []
    w = c.append
    w(kv("JOB ID", 1))
    w(kv("JOB START TIME", f"{mjd + sec / 86400:.7f}"))
    w(kv("JOB STOP TIME", f"{mjd + (sec + a.seconds) / 86400:.7f}"))
    w(kv("DUTY CYCLE", "1.000"))
    w(kv("OBSCODE", "EVLBI"))
    w(kv("DIFX VERSION", "evlbi-synthetic"))
    w(kv("SUBJOB ID", 0))
    w(kv("SUBARRAY ID", 0))
    w(kv("START MJD", f"{mjd + sec / 86400:.7f}"))
    for k, v in (("YEAR", t.year), ("MONTH", t.month), ("DAY", t.day), ("HOUR", t.hour),
                 ("MINUTE", t.minute), ("SECOND", t.second)):
        w(kv(f"START {k}", v))
    w(kv("SPECTRAL AVG", 1))
    w(kv("TAPER FUNCTION", "UNIFORM"))
    w(kv("NUM TELESCOPES", len(stations)))
    for i, s in enumerate(stations):
        w(kv(f"TELESCOPE {i} NAME", s["name"]))
        w(kv(f"TELESCOPE {i} MOUNT", "azel"))
        w(kv(f"TELESCOPE {i} OFFSET (m)", "0.000000"))
        # One place for all: a rigid array of co-located stations (no geometric delay).
        w(kv(f"TELESCOPE {i} X (m)", "3839349.0"))
        w(kv(f"TELESCOPE {i} Y (m)", "430412.0"))
        w(kv(f"TELESCOPE {i} Z (m)", "5057840.0"))
        w(kv(f"TELESCOPE {i} SHELF", "NONE"))
    w(kv("NUM SOURCES", 1))
    w(kv("SOURCE 0 NAME", "SYNTH"))
    w(kv("SOURCE 0 RA", "0.000000000000"))
    w(kv("SOURCE 0 DEC", "1.000000000000"))
    w(kv("SOURCE 0 CALCODE", ""))
    w(kv("SOURCE 0 QUAL", 0))
    w(kv("NUM SCANS", 1))
    w(kv("SCAN 0 IDENTIFIER", "No0001"))
    w(kv("SCAN 0 START (S)", 0))
    w(kv("SCAN 0 DUR (S)", a.seconds))
    w(kv("SCAN 0 OBS MODE NAME", "evlbi"))
    w(kv("SCAN 0 UVSHIFT INTERVAL (NS)", 2000000000))
    w(kv("SCAN 0 AC AVG INTERVAL (NS)", 2000000))
    w(kv("SCAN 0 POINTING SRC", 0))
    w(kv("SCAN 0 NUM PHS CTRS", 1))
    w(kv("SCAN 0 PHS CTR 0", 0))
    w(kv("NUM EOPS", 0))
    w(kv("NUM SPACECRAFT", 0))
    w(kv("IM FILENAME", base + ".im"))
    with open(base + ".calc", "w") as f:
        f.write("".join(c))
    order, interval = 5, 120
    zeros = " ".join(["0.000000000000000e+00"] * (order + 1))
    m = []
    w = m.append
    w(kv("CALC SERVER", "NONE"))
    w(kv("CALC PROGRAM", "evlbi tests/difx/difxjob.py"))
    w(kv("CALC VERSION", 0))
    for k, v in (("YEAR", t.year), ("MONTH", t.month), ("DAY", t.day), ("HOUR", t.hour),
                 ("MINUTE", t.minute), ("SECOND", t.second)):
        w(kv(f"START {k}", v))
    w(kv("POLYNOMIAL ORDER", order))
    w(kv("INTERVAL (SECS)", interval))
    w(kv("ABERRATION CORR", "UNCORRECTED"))
    w(kv("NUM TELESCOPES", len(stations)))
    for i, s in enumerate(stations):
        w(kv(f"TELESCOPE {i} NAME", s["name"]))
    w(kv("NUM SCANS", 1))
    w(kv("SCAN 0 POINTING SRC", "SYNTH"))
    w(kv("SCAN 0 NUM PHS CTRS", 1))
    w(kv("SCAN 0 PHS CTR 0", "SYNTH"))
    npoly = max(1, math.ceil(a.seconds / interval))
    w(kv("SCAN 0 NUM POLY", npoly))
    for p in range(npoly):
        pm, ps = mjd, sec + p * interval
        pm, ps = pm + ps // 86400, ps % 86400
        w(kv(f"SCAN 0 POLY {p} MJD", pm))
        w(kv(f"SCAN 0 POLY {p} SEC", ps))
        for k in range(2):  # the pointing centre, then phase centre 0
            for i in range(len(stations)):
                for q in ("DELAY (us)", "U (m)", "V (m)", "W (m)"):
                    w(kv(f"SRC {k} ANT {i} {q}", zeros))
    with open(base + ".im", "w") as f:
        f.write("".join(m))


def read_swin(path):
    """Every record of every SWIN file below a .difx directory, in file order."""
    files = sorted(glob.glob(os.path.join(path, "DIFX_*")))
    if not files:
        raise SystemExit(f"{path}: no DIFX_* visibility file")
    recs = []
    for fn in files:
        with open(fn, "rb") as f:
            data = f.read()
        off = 0
        while off < len(data):
            if len(data) - off < HEADER_LEN:
                raise SystemExit(f"{fn}: {len(data) - off} bytes after the last record")
            sync, ver, bl, mjd, secs, cfg, src, freq = struct.unpack_from("<IiiidiiI", data, off)
            if sync != SYNC or ver != 1:
                raise SystemExit(f"{fn}: offset {off}: sync {sync:#x} version {ver}")
            pol = data[off + 36:off + 38].decode("ascii", "replace")
            (weight,) = struct.unpack_from("<d", data, off + 42)
            off += HEADER_LEN
            # The channel count is not in the header: the next sync word (or the end) bounds it.
            nxt = data.find(struct.pack("<I", SYNC), off)
            while nxt != -1 and (nxt - off) % 8 != 0:
                nxt = data.find(struct.pack("<I", SYNC), nxt + 1)
            end = len(data) if nxt == -1 else nxt
            vis = data[off:end]
            off = end
            recs.append({"baseline": bl, "mjd": mjd, "seconds": secs, "freq": freq, "pol": pol,
                         "weight": weight, "vis": vis})
    return recs


def fringe(recs, bandwidth_mhz):
    """Per cross baseline: each sub-band's visibilities summed over the job (as DiFX weighted
    them), their lag function (inverse DFT of the n channels: lags of 1/BW), the lag where the
    sub-bands' power adds up highest, and the S/N there. A sub-band's S/N is |peak| over the rms
    of one component of its other lags (more than 2 from the peak): the convention of a real
    lag function, as `evlbi vdif correlate` (crates/fxcorr) reports it; the sub-bands' S/N add
    in quadrature (independent bands)."""
    out = {}
    cross = [r for r in recs if r["baseline"] % 257 != 0]
    for bl in sorted({r["baseline"] for r in cross}):
        per_freq = {}
        for r in cross:
            if r["baseline"] != bl:
                continue
            n = len(r["vis"]) // 8
            v = struct.unpack(f"<{2 * n}f", r["vis"])
            acc = per_freq.setdefault(r["freq"], [0j] * n)
            for c in range(n):
                acc[c] += complex(v[2 * c], v[2 * c + 1])
        lag_fns = [lag_function(acc) for _, acc in sorted(per_freq.items())]
        size = len(lag_fns[0])
        power = [sum(abs(f[k]) ** 2 for f in lag_fns) for k in range(size)]
        peak = max(range(size), key=lambda k: power[k])
        snrs = []
        for f in lag_fns:
            away = [abs(f[k]) ** 2 for k in range(size) if min((k - peak) % size, (peak - k) % size) > 2]
            component_rms = math.sqrt(sum(away) / len(away) / 2)
            snrs.append(abs(f[peak]) / component_rms if component_rms > 0 else float("inf"))
        lag = peak if peak < size // 2 else peak - size
        out[str(bl)] = {
            "ants": [bl // 256 - 1, bl % 256 - 1],
            "delay_us": lag / bandwidth_mhz,
            "snr": math.sqrt(sum(x * x for x in snrs)),
            "snr_per_subband": snrs,
            "records": sum(1 for r in cross if r["baseline"] == bl),
        }
    return out


def lag_function(spectrum):
    """Inverse DFT of n channels (plain: n is a few hundred)."""
    n = len(spectrum)
    tw = [cmath.exp(2j * math.pi * c / n) for c in range(n)]
    return [sum(spectrum[c] * tw[(c * k) % n] for c in range(n)) for k in range(n)]


def compare(a, b):
    key = lambda r: (r["baseline"], r["mjd"], r["seconds"], r["freq"], r["pol"])
    ka = {key(r): r for r in a}
    kb = {key(r): r for r in b}
    common = sorted(set(ka) & set(kb))
    max_abs = 0.0
    max_rel = 0.0
    identical = 0
    wdiff = 0.0
    for k in common:
        ra, rb = ka[k], kb[k]
        wdiff = max(wdiff, abs(ra["weight"] - rb["weight"]))
        if ra["vis"] == rb["vis"]:
            identical += 1
            continue
        va = struct.unpack(f"<{len(ra['vis']) // 4}f", ra["vis"])
        vb = struct.unpack(f"<{len(rb['vis']) // 4}f", rb["vis"])
        scale = max(max(abs(x) for x in va), 1e-30)
        d = max(abs(x - y) for x, y in zip(va, vb))
        max_abs = max(max_abs, d)
        max_rel = max(max_rel, d / scale)
    return {
        "records": [len(a), len(b)],
        "common": len(common),
        "only_in_first": len(set(ka) - set(kb)),
        "only_in_second": len(set(kb) - set(ka)),
        "bit_identical": identical,
        "max_abs_diff": max_abs,
        "max_rel_diff": max_rel,
        "max_weight_diff": wdiff,
    }


def vis(a):
    recs = read_swin(a.difx)
    res = {
        "records": len(recs),
        "cross_records": sum(1 for r in recs if r["baseline"] % 257 != 0),
        "mean_cross_weight": 0.0,
        "fringe": fringe(recs, a.bandwidth_mhz),
    }
    cw = [r["weight"] for r in recs if r["baseline"] % 257 != 0]
    res["mean_cross_weight"] = sum(cw) / len(cw) if cw else 0.0
    if a.compare:
        res["compare"] = compare(recs, read_swin(a.compare))
    json.dump(res, sys.stdout, indent=1)
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job", help="write NAME.input/.calc/.im/.threads in DIR")
    j.add_argument("--dir", required=True)
    j.add_argument("--name", default="evlbi")
    j.add_argument("--start", required=True, help="the data's first second, e.g. 2026-11-23T12:00:00Z")
    j.add_argument("--seconds", type=int, required=True)
    j.add_argument("--station", action="append", required=True,
                   help="NAME=FILE:path | NAME=TCP:port | NAME=UDP:port, in array order")
    j.add_argument("--format", default="VDIF",
                   help="VDIF, or MARK5B (one stream of 10016-byte frames, mark5access's Mark5B-<Mbps>-<nchan>-<nbits>)")
    j.add_argument("--bits", type=int, default=2)
    j.add_argument("--threads", type=int, default=1, help="VDIF threads per station (ids 0..N-1)")
    j.add_argument("--interlaced", action="store_true",
                   help="INTERLACEDVDIF/0 for one thread too (bare UDP frames, vdifio's reader)")
    j.add_argument("--channels", type=int, default=4, help="sub-bands (VDIF channels)")
    j.add_argument("--bandwidth-mhz", type=float, default=8.0)
    j.add_argument("--sky-mhz", type=float, default=8400.0)
    j.add_argument("--frame-bytes", type=int, help="header included (default 8032 for VDIF, 10016 for MARK5B)")
    j.add_argument("--nchan", type=int, default=128, help="spectral channels per sub-band")
    j.add_argument("--int-time", type=float, default=0.5)
    j.add_argument("--subint-ns", type=int, default=10000000)
    j.add_argument("--udp-bytes", type=int,
                   help="|TCP WINDOW (KB)| of a UDP station: its datagram size, 8-byte PSN included "
                        "(default the frame + 8)")
    j.add_argument("--core-threads", type=int, default=1)
    v = sub.add_parser("vis", help="read NAME.difx: records, fringes (JSON)")
    v.add_argument("difx")
    v.add_argument("--bandwidth-mhz", type=float, default=8.0)
    v.add_argument("--compare", help="another .difx output of the same job")
    a = p.parse_args()
    if a.cmd == "job":
        if a.format not in ("VDIF", "MARK5B"):
            raise SystemExit(f"--format {a.format!r}: VDIF or MARK5B")
        if a.format == "MARK5B" and (a.threads != 1 or a.interlaced):
            raise SystemExit("--format MARK5B is one stream: no --threads, no --interlaced")
        if a.frame_bytes is None:
            a.frame_bytes = 10016 if a.format == "MARK5B" else 8032
        if a.udp_bytes is None:
            a.udp_bytes = a.frame_bytes + 8
    {"job": write_job, "vis": vis}[a.cmd](a)


if __name__ == "__main__":
    main()
