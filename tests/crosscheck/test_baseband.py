"""Cross-checks of evlbi's VDIF against baseband, an independent implementation (PyPI).

1. evlbi writes, baseband reads: every header field and every decoded sample agree, and
   evlbi's sampler state counts equal the counts of baseband's decoded values.
2. baseband writes (known random samples), evlbi reads: headers, samples and `inspect` agree.
3. `evlbi vdif inspect` agrees with baseband on every sample VDIF file baseband ships; where
   baseband cannot read a file as a stream, header by header.
4. Complex data (2-, 4- and 8-bit), 4- and 8-bit real data, multi-thread EDV 3, several stations
   in one file, a file across the leap second 2016-12-31T23:59:60 and one whose epoch predates
   four leap seconds: headers, samples, times and `inspect` agree; `correlate` finds in evlbi's
   complex data the delay an independent complex cross-correlation (numpy) finds.
5. Files that are not VDIF (issue 28): every Mark5B, Mark4, DADA and GUPPI file baseband ships
   or writes, alone and as four joined copies, is "not VDIF" for inspect, stats, dump and
   correlate, named as the format baseband's `file_info` says it is (Mark4 with its track
   count); GSB data, which baseband cannot identify either, is not named, its time stamps are.
6. A 4-thread file baseband writes, without thread 3's first or last frame: baseband warns
   "Thread(s) [3] missing" for that frame set; evlbi reports thread 3 one frame short there.

Run through scripts/test.sh (which builds evlbi and makes the venv), or directly:
    .venv/bin/pytest tests/crosscheck
"""

import json
import os
import subprocess
from pathlib import Path

import astropy.units as u
import baseband.data
import numpy as np
import pytest
from astropy.time import Time, TimeDelta
from baseband import vdif

ROOT = Path(__file__).resolve().parents[2]
EVLBI = os.environ.get("EVLBI", str(ROOT / "target" / "release" / "evlbi"))
LEVELS = {1: np.array([-1.0, 1.0]), 2: np.array([-3.316505, -1.0, 1.0, 3.316505])}


def evlbi(*args, check=True):
    p = subprocess.run([EVLBI, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"evlbi {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p


def bb_time(h):
    """UTC of the start of a header's second, as baseband computes it (seconds in TAI)."""
    return (h.ref_time + TimeDelta(h["seconds"], format="sec")).isot + "Z"


def to_complex(samples):
    """evlbi dump's samples (channel, time) or (channel, time, [I, Q]) as (time, channel)."""
    a = np.array(samples, dtype=np.float32)
    if a.ndim == 3:
        a = a[..., 0] + 1j * a[..., 1]
    return a.T


def dump(path, frames, headers_only=False):
    args = ["vdif", "dump", "--frames", frames, path] + (["--headers-only"] if headers_only else [])
    return [json.loads(line) for line in evlbi(*args).stdout.splitlines()]


def bb_headers(path):
    out = []
    with vdif.open(str(path), "rb") as fh:
        size = os.path.getsize(path)
        while fh.tell() < size:
            out.append(vdif.VDIFFrame.fromfile(fh).header)
    return out


def assert_header_equal(bb, ours):
    h = ours["header"]
    assert bb["invalid_data"] == h["invalid"]
    assert bb["legacy_mode"] == h["legacy"]
    assert bb["seconds"] == h["seconds"]
    assert bb["ref_epoch"] == h["ref_epoch"]
    assert bb["frame_nr"] == h["frame_number"]
    assert bb["vdif_version"] == h["version"]
    assert bb.nchan == 2 ** h["log2_channels"]
    assert bb.frame_nbytes == 8 * h["frame_len_units"]
    assert bb["complex_data"] == h["complex"]
    assert bb.bps == h["bits_per_sample"]
    assert bb["thread_id"] == h["thread_id"]
    assert bb["station_id"] == h["station_id"]
    assert bb.edv == ours["edv"]
    assert list(bb.words[4:]) == h["extended"]


@pytest.mark.parametrize("bits,channels,threads", [(2, 8, 1), (2, 4, 2), (1, 16, 1), (1, 2, 2)])
def test_evlbi_writes_baseband_reads(tmp_path, bits, channels, threads):
    # 2 s so baseband can infer the frame rate from the frame numbers.
    rate = {(2, 8, 1): "64M", (2, 4, 2): "32M", (1, 16, 1): "64M", (1, 2, 2): "16M"}[(bits, channels, threads)]
    evlbi("vdif", "gen", "--stations", "Ef,Wb", "--rate", rate, "--bits", bits, "--channels", channels,
          "--threads", threads, "--frame", 8000, "--seconds", 2, "--delay", "Wb=2us", "--snr", 0.1,
          "--tone", "0.5MHz", "--seed", 17, "--start", "2026-05-04T03:02:01Z", "--out", tmp_path, "-q")
    path = tmp_path / "Wb.vdif"
    ours = dump(path, 10**9, headers_only=True)
    theirs = bb_headers(path)
    assert len(ours) == len(theirs) > 0
    for o, t in zip(ours, theirs):
        assert_header_equal(t, o)
    assert theirs[0].station == "Wb"

    # Samples: the first 4 frame times of every thread, decoded by both.
    frames = dump(path, 4 * threads)
    with vdif.open(str(path), "rs", squeeze=False) as fr:
        assert fr.start_time.isot == "2026-05-04T03:02:01.000000000"
        spf = fr.samples_per_frame
        data = fr.read(4 * spf)  # shape (time, thread, channel)
    cpt = channels // threads
    assert data.shape == (4 * spf, threads, cpt)
    for i, f in enumerate(frames):
        k, th = divmod(i, threads)
        ours = np.array(f["samples"], dtype=np.float32)  # (channel, time)
        np.testing.assert_array_equal(ours.T, data[k * spf:(k + 1) * spf, th, :])

    # State counts of the whole file, evlbi vs baseband's decoded values.
    stats = json.loads(evlbi("vdif", "stats", "--json", path).stdout)
    with vdif.open(str(path), "rs", squeeze=False) as fr:
        everything = fr.read()
    levels = LEVELS[bits]
    for c in stats["channels"]:
        values = everything[:, c["thread"], c["channel"]]
        counts = [int(np.sum(values == np.float32(lv))) for lv in levels]
        assert counts == c["counts"], (c["thread"], c["channel"])


# (bits, complex, edv, threads, channels per thread, samples per frame). EDV 3 frames are 1032
# or 5032 bytes (baseband insists).
WRITES = [
    (2, False, 0, 2, 4, 4000),
    (1, False, 0, 1, 8, 8000),
    (2, False, 3, 4, 1, 4000),
    (4, False, 0, 1, 4, 2000),
    (8, False, 3, 2, 2, 2500),
    (2, True, 0, 1, 4, 2000),
    (1, True, 0, 1, 2, 8000),
    (4, True, 3, 2, 2, 2500),
    (8, True, 0, 1, 1, 2000),
]


@pytest.mark.parametrize("bits,cplx,edv,nthread,nchan,spf", WRITES,
                         ids=lambda v: str(v))
def test_baseband_writes_evlbi_reads(tmp_path, bits, cplx, edv, nthread, nchan, spf):
    rng = np.random.default_rng(2024 + bits + edv + 10 * cplx)
    frame_sets = 40
    shape = (spf * frame_sets, nthread, nchan)
    values = rng.normal(0.0, 2.2, size=shape)
    if cplx:
        values = values + 1j * rng.normal(0.0, 2.2, size=shape)
    values = values.astype(np.complex64 if cplx else np.float32)
    path = tmp_path / "bb.vdif"
    start = Time("2025-12-31T23:59:58", format="isot", scale="utc")
    with vdif.open(str(path), "ws", sample_rate=16 * u.MHz, samples_per_frame=spf, nchan=nchan, nthread=nthread,
                   bps=bits, complex_data=cplx, edv=edv, station="Ys", time=start, squeeze=False) as fw:
        fw.write(values)
    with vdif.open(str(path), "rs", sample_rate=16 * u.MHz, squeeze=False) as fr:
        decoded = fr.read()  # what baseband's own reader makes of what it wrote

    theirs = bb_headers(path)
    ours = dump(path, len(theirs))
    assert len(ours) == len(theirs) == frame_sets * nthread
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert_header_equal(t, o)
        assert o["samples_per_frame"] == t.samples_per_frame == spf
        assert o["second_utc"] == bb_time(t)
        k, th = divmod(i, nthread)
        np.testing.assert_array_equal(to_complex(o["samples"]), decoded[k * spf:(k + 1) * spf, th, :])

    fps = 16_000_000 // spf
    args = ["vdif", "inspect", "--json", path] + ([] if edv == 3 else ["--fps", fps])
    r = json.loads(evlbi(*args).stdout)
    assert r["station"] == "Ys"
    assert r["frames"] == frame_sets * nthread
    assert r["threads"] == list(range(nthread))
    assert (r["bits_per_sample"], r["complex"], r["samples_per_frame"]) == (bits, cplx, spf)
    assert r["frames_per_second"] == fps
    assert r["frame_rate_source"] == ("header" if edv == 3 else "given")
    assert r["sample_rate_hz"] == 16e6
    assert r["start_utc"] == "2025-12-31T23:59:58.000000000Z"
    assert r["problems"] == []

    # Sampler state counts of 1/2-bit data, I and Q apart for complex data.
    if bits <= 2:
        stats = json.loads(evlbi("vdif", "stats", "--json", path).stdout)
        assert len(stats["channels"]) == nthread * nchan * (2 if cplx else 1)
        for c in stats["channels"]:
            v = decoded[:, c["thread"], c["channel"]]
            v = {"real": v, "i": v.real, "q": v.imag}[c["part"]]
            counts = [int(np.sum(v == np.float32(lv))) for lv in LEVELS[bits]]
            assert counts == c["counts"], c


def test_evlbi_complex_correlates_as_numpy_does(tmp_path):
    """evlbi writes complex data, baseband reads every sample, and the delay evlbi's correlator
    finds is the peak of numpy's complex cross-correlation of baseband's samples (treating I
    and Q as consecutive reals gave twice the delay)."""
    evlbi("vdif", "gen", "--stations", "Ef,Wb", "--rate", "32M", "--bits", 2, "--channels", 2, "--complex",
          "--frame", 8000, "--seconds", 2, "--delay", "Wb=1.25us", "--snr", 0.05, "--seed", 5,
          "--start", "2026-05-04T03:02:01Z", "--out", tmp_path, "-q")
    got = {}
    for st in ("Ef", "Wb"):
        path = tmp_path / f"{st}.vdif"
        ours = dump(path, 10**9, headers_only=True)
        theirs = bb_headers(path)
        assert len(ours) == len(theirs) == 1000
        for o, t in zip(ours, theirs):
            assert_header_equal(t, o)
        with vdif.open(str(path), "rs", squeeze=False) as fr:
            assert fr.complex_data and fr.sample_rate == 4 * u.MHz
            got[st] = fr.read()[:, 0, 1]  # channel 1, complex
        first = dump(path, 1)[0]
        np.testing.assert_array_equal(to_complex(first["samples"])[:, 1], got[st][:8000])
    a, b = got["Ef"], got["Wb"]
    n = 1 << 16
    lags = range(-32, 33)
    xc = [abs(np.vdot(a[64:n + 64], b[64 + lag:n + 64 + lag])) for lag in lags]
    assert list(lags)[int(np.argmax(xc))] == 5  # 1.25 us at 4 MS/s complex
    f = json.loads(evlbi("vdif", "correlate", "--channel", 1, "--json", tmp_path / "Ef.vdif",
                         tmp_path / "Wb.vdif").stdout)
    assert f["complex"] and f["detected"]
    assert f["delay_samples"] == 5
    assert f["delay_s"] == pytest.approx(1.25e-6)


def test_several_stations_in_one_file(tmp_path):
    """Frames of two stations interleaved in one file (as a correlator's or relay's capture
    holds them): evlbi reports each station with the frames and threads baseband finds in
    each station's own file, and every header as baseband decodes it."""
    rng = np.random.default_rng(7)
    per_station = {}
    for st in ("Ys", "Yt"):
        path = tmp_path / f"{st}.vdif"
        with vdif.open(str(path), "ws", sample_rate=16 * u.MHz, samples_per_frame=4000, nchan=2, nthread=2,
                       bps=2, complex_data=False, edv=0, station=st,
                       time=Time("2025-06-01T00:00:00", scale="utc"), squeeze=False) as fw:
            fw.write(rng.normal(0, 2.2, size=(4000 * 30, 2, 2)).astype(np.float32))
        per_station[st] = path
    frames = {st: Path(p).read_bytes() for st, p in per_station.items()}
    size = 4000 * 2 * 2 // 8 + 32
    both = b"".join(frames["Ys"][i:i + size] + frames["Yt"][i:i + size]
                    for i in range(0, len(frames["Ys"]), size))
    mixed = tmp_path / "mixed.vdif"
    mixed.write_bytes(both)
    r = json.loads(evlbi("vdif", "inspect", "--json", "--fps", 4000, mixed).stdout)
    assert r["garbage_bytes"] == 0 and r["problems"] == []
    for s in r["stations"]:
        with vdif.open(str(per_station[s["station"]]), "rb") as fh:
            info = fh.info
        assert s["frames"] == info.number_of_frames
        assert s["threads"] == list(info.thread_ids)
    ours = dump(mixed, 10**9, headers_only=True)
    theirs = bb_headers(mixed)
    assert len(ours) == len(theirs) == 120
    for o, t in zip(ours, theirs):
        assert_header_equal(t, o)


def test_leap_seconds_as_baseband_counts_them(tmp_path):
    """VDIF seconds count leap seconds (elapsed seconds since a UTC epoch; baseband adds them
    in TAI). A file across 2016-12-31T23:59:60 written by baseband, and one stamped from epoch
    0 (2000-01-01, four leap seconds before the data), have the start and end baseband says."""
    path = tmp_path / "leap.vdif"
    start = Time("2016-12-31T23:59:58.5", scale="utc")
    with vdif.open(str(path), "ws", sample_rate=1 * u.MHz, samples_per_frame=10000, nchan=1, nthread=1, bps=2,
                   complex_data=True, edv=3, station="Ys", time=start, squeeze=False) as fw:
        fw.write(np.ones((1_000_000 * 3, 1, 1), np.complex64))
    with vdif.open(str(path), "rs", squeeze=False) as fr:
        bb_start, bb_stop = fr.start_time.isot + "Z", fr.stop_time.isot + "Z"
    assert bb_stop == "2017-01-01T00:00:00.500000000Z"
    r = json.loads(evlbi("vdif", "inspect", "--json", path).stdout)
    assert (r["start_utc"], r["end_utc"]) == (bb_start, bb_stop)
    for o, t in zip(dump(path, 10**9, headers_only=True), bb_headers(path)):
        assert o["second_utc"] == bb_time(t)

    # Epoch 0: 4 leap seconds (2005, 2008, 2012, 2015) between it and 2016-09-01.
    when = Time("2016-09-01T12:00:00", scale="utc")
    seconds = int(round((when - vdif.header.ref_epochs[0]).sec))
    old = tmp_path / "epoch0.vdif"
    with open(old, "wb") as fh:
        for k in range(3 * 4000):
            h = vdif.VDIFHeader.fromvalues(edv=0, ref_epoch=0, seconds=seconds + k // 4000, frame_nr=k % 4000,
                                           nchan=4, bps=2, complex_data=False, samples_per_frame=1000,
                                           station="Ys", thread_id=0)
            vdif.VDIFFrame.fromdata(np.ones((1000, 4), np.float32), h).tofile(fh)
    r = json.loads(evlbi("vdif", "inspect", "--json", old).stdout)
    assert r["start_utc"] == "2016-09-01T12:00:00.000000000Z" == bb_time(bb_headers(old)[0])
    assert r["end_utc"] == "2016-09-01T12:00:03.000000000Z"


SAMPLES = sorted(p for p in Path(baseband.data.__file__).parent.iterdir() if p.suffix == ".vdif")


def test_baseband_ships_sample_files():
    assert len(SAMPLES) >= 5, SAMPLES


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_inspect_agrees_with_baseband_samples(path):
    p = evlbi("vdif", "inspect", "--json", path, check=False)
    assert "panicked" not in p.stderr
    r = json.loads(p.stdout)
    # Header by header, wherever evlbi finds frames: every field, samples per frame (whole
    # samples per 32-bit word, 468 for the DRAO 5-bit complex x 8 channel frames) and the UTC of
    # the second (leap seconds counted: the DRAO file's epoch 0 predates four of them).
    frames = dump(path, 10**9, headers_only=True)
    with open(path, "rb") as raw:
        for o in frames:
            raw.seek(o["offset"])
            t = vdif.VDIFHeader.fromfile(raw, verify=False)
            assert_header_equal(t, o)
            assert o["samples_per_frame"] == t.samples_per_frame
            assert o["second_utc"] == bb_time(t)
    with vdif.open(str(path), "rb") as fh:
        info = fh.info
    if not info.readable:
        # baseband cannot read this file as a stream (sample_drao_corrupted.vdif: stations 0 and
        # 1 and seven threads interleaved); evlbi describes it frame by frame, as checked above.
        assert r["frames"] == len(frames) > 0
        assert r["frames"] * r["frame_bytes"] + r["garbage_bytes"] == path.stat().st_size
        assert len(r["stations"]) == len({o["header"]["station_id"] for o in frames})
        return
    h0 = info.header0
    assert r["frames"] == info.number_of_frames
    assert r["threads"] == list(info.thread_ids)
    assert r["frame_bytes"] == h0.frame_nbytes
    assert r["bits_per_sample"] == info.bps
    assert r["channels"] == info.sample_shape[-1]
    assert r["complex"] == info.complex_data
    assert r["edv"] == info.edv
    assert r["station_id"] == h0["station_id"]
    assert r["samples_per_frame"] == h0.samples_per_frame
    if info.frame_rate is not None:
        assert r["frames_per_second"] == pytest.approx(info.frame_rate.to_value(u.Hz))
        assert r["sample_rate_hz"] == pytest.approx(info.sample_rate.to_value(u.Hz))
    else:
        assert r["frames_per_second"] is None
    if info.start_time is not None:
        assert r["start_utc"] == info.start_time.isot + "Z"
    # Files baseband reads cleanly are clean for evlbi too, except where evlbi finds threads
    # whose clocks disagree by months (sample_vlbi.vdif), which it reports.
    if p.returncode != 0:
        assert all(" thread " in pr and "away from the first frame" in pr for pr in r["problems"]), r
    else:
        assert r["problems"] == []


# 5. Other formats. What evlbi calls each format baseband's file_info names.
NAMES = {"mark5b": "Mark5B data", "mark4": "Mark4 data", "dada": "a DADA file", "guppi": "GUPPI raw data"}


def write_other_formats(d):
    """Mark5B, Mark4 (32 tracks), DADA and GUPPI files written by baseband's own writers."""
    t = Time("2026-01-01T00:00:00", scale="utc")
    rng = np.random.default_rng(1)
    paths = [d / "w.m5b", d / "w.m4", d / "w.dada", d / "w.raw"]
    from baseband import dada, guppi, mark4, mark5b
    with mark5b.open(str(paths[0]), "ws", sample_rate=32 * u.MHz, nchan=8, bps=2, time=t) as fw:
        fw.write(rng.normal(0, 2, size=(5000 * 4, 8)).astype(np.float32))
    with mark4.open(str(paths[1]), "ws", sample_rate=32 * u.MHz, ntrack=32, decade=2020, bps=2, fanout=4,
                    time=t) as fw:
        fw.write(rng.normal(0, 2, size=(80000 * 2, 4)).astype(np.float32))
    with dada.open(str(paths[2]), "ws", sample_rate=16 * u.MHz, samples_per_frame=16000, npol=2, nchan=1, bps=8,
                   complex_data=True, time=t) as fw:
        fw.write((rng.normal(size=(32000, 2)) + 1j * rng.normal(size=(32000, 2))).astype(np.complex64))
    with guppi.open(str(paths[3]), "ws", sample_rate=3.125 * u.MHz, samples_per_frame=1024, pktsize=1024, npol=2,
                    nchan=4, time=t) as fw:
        fw.write((rng.normal(size=(2048, 2, 4)) + 1j * rng.normal(size=(2048, 2, 4))).astype(np.complex64))
    return paths


SHIPPED = [getattr(baseband.data, n) for n in sorted(dir(baseband.data)) if n.startswith("SAMPLE_")
           and n.split("_")[1] in ("MARK5B", "MARK4", "DADA", "PUPPI", "VEGAS", "BLC", "MEERKAT")]


def test_other_formats_are_named_as_baseband_names_them(tmp_path):
    paths = write_other_formats(tmp_path) + [Path(p) for p in SHIPPED]
    assert len(paths) >= 4 + 10, paths
    for path in paths:
        info = baseband.file_info(str(path))
        want = NAMES[info.format]
        if info.format == "mark4":
            want += f", {info.ntrack} tracks"
        joined = tmp_path / ("x4_" + path.name)
        joined.write_bytes(path.read_bytes() * 4)
        for f in (path, joined):
            for args in (["inspect"], ["stats"], ["dump"], ["correlate", f]):
                if info.format == "mark5b" and args == ["inspect"]:
                    # inspect reads Mark5B: as many frames as baseband counts; the file 4 times
                    # over repeats its frames' times, which inspect refuses saying so.
                    if f == joined:
                        p = evlbi("vdif", "inspect", f, check=False)
                        assert p.returncode == 1 and "out of time order or repeated" in p.stderr, (f, p.stderr)
                        continue
                    got = json.loads(evlbi("vdif", "inspect", "--json", f).stdout)
                    assert got["format"] == "mark5b" and got["frames"] == info.number_of_frames, (f, info, got)
                    continue
                p = evlbi("vdif", *args, f, check=False)
                assert p.returncode == 1, (args, f, p.stderr)
                assert "not VDIF (" in p.stderr and want in p.stderr, (args, f, p.stderr)
                assert p.stdout == "", (args, f)


def test_gsb_samples_cannot_be_named_their_time_stamps_can():
    raw = baseband.data.SAMPLE_GSB_RAWDUMP
    assert isinstance(baseband.file_info(raw), baseband.base.file_info.NoInfo)
    p = evlbi("vdif", "inspect", raw, check=False)
    assert p.returncode == 1 and "not VDIF (" in p.stderr and "GSB" not in p.stderr, p.stderr
    for stamps in (baseband.data.SAMPLE_GSB_RAWDUMP_HEADER, baseband.data.SAMPLE_GSB_PHASED_HEADER):
        assert baseband.file_info(stamps).format == "gsb"
        p = evlbi("vdif", "inspect", stamps, check=False)
        assert p.returncode == 1 and "a GSB time-stamp file" in p.stderr, p.stderr


# 6. A thread's first or last frame missing.
@pytest.mark.parametrize("which", ["first", "last"])
def test_a_missing_thread_frame_as_baseband_sees_it(tmp_path, which):
    path = tmp_path / "four.vdif"
    rng = np.random.default_rng(11)
    with vdif.open(str(path), "ws", sample_rate=16 * u.MHz, samples_per_frame=4000, nchan=1, nthread=4, bps=2,
                   edv=3, station="Ys", time=Time("2026-02-01T00:00:00", scale="utc"), squeeze=False) as fw:
        fw.write(rng.normal(0, 2.2, size=(4000 * 50, 4, 1)).astype(np.float32))
    size = 4000 * 2 // 8 + 32
    data = path.read_bytes()
    frames = [data[i:i + size] for i in range(0, len(data), size)]
    assert len(frames) == 200 and [bb_headers(path)[k]["thread_id"] for k in range(4)] == [0, 1, 2, 3]
    gone = 3 if which == "first" else 199  # thread 3 of frame set 0, or of the last (49)
    cut = tmp_path / "cut.vdif"
    cut.write_bytes(b"".join(f for k, f in enumerate(frames) if k != gone))
    with pytest.warns(UserWarning, match=r"Thread\(s\) \[3\] missing"):
        with vdif.open(str(cut), "rs", squeeze=False) as fr:
            fr.read()
    p = evlbi("vdif", "inspect", "--json", cut, check=False)
    assert p.returncode == 1
    r = json.loads(p.stdout)
    t3 = r["per_thread"][3]
    assert t3["thread"] == 3
    assert (t3["missing_at_start"], t3["missing_at_end"]) == ((1, 0) if which == "first" else (0, 1))
    assert r["missing_frames"] == 1
    for t in r["per_thread"][:3]:
        assert t["missing"] == 0
