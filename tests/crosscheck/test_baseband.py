"""Cross-checks of evlbi's VDIF against baseband, an independent implementation (PyPI).

1. evlbi writes, baseband reads: every header field and every decoded sample agree, and
   evlbi's sampler state counts equal the counts of baseband's decoded values.
2. baseband writes (known random samples), evlbi reads: headers, samples and `inspect` agree.
3. `evlbi vdif inspect` agrees with baseband on every sample VDIF file baseband ships.

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
from astropy.time import Time
from baseband import vdif

ROOT = Path(__file__).resolve().parents[2]
EVLBI = os.environ.get("EVLBI", str(ROOT / "target" / "release" / "evlbi"))
LEVELS = {1: np.array([-1.0, 1.0]), 2: np.array([-3.316505, -1.0, 1.0, 3.316505])}


def evlbi(*args, check=True):
    p = subprocess.run([EVLBI, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"evlbi {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p


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


@pytest.mark.parametrize("bits,edv,nthread,nchan", [(2, 0, 2, 4), (1, 0, 1, 8), (2, 3, 4, 1)])
def test_baseband_writes_evlbi_reads(tmp_path, bits, edv, nthread, nchan):
    rng = np.random.default_rng(2024 + bits + edv)
    spf = 4000 if bits == 2 else 8000
    frame_sets = 40
    values = rng.normal(0.0, 2.2, size=(spf * frame_sets, nthread, nchan)).astype(np.float32)
    path = tmp_path / "bb.vdif"
    start = Time("2025-12-31T23:59:58", format="isot", scale="utc")
    with vdif.open(str(path), "ws", sample_rate=16 * u.MHz, samples_per_frame=spf, nchan=nchan, nthread=nthread,
                   bps=bits, complex_data=False, edv=edv, station="Ys", time=start, squeeze=False) as fw:
        fw.write(values)
    with vdif.open(str(path), "rs", sample_rate=16 * u.MHz, squeeze=False) as fr:
        decoded = fr.read()  # what baseband's own reader makes of what it wrote

    theirs = bb_headers(path)
    ours = dump(path, len(theirs))
    assert len(ours) == len(theirs) == frame_sets * nthread
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert_header_equal(t, o)
        k, th = divmod(i, nthread)
        got = np.array(o["samples"], dtype=np.float32).T
        np.testing.assert_array_equal(got, decoded[k * spf:(k + 1) * spf, th, :])

    fps = 16_000_000 // spf
    args = ["vdif", "inspect", "--json", path] + ([] if edv == 3 else ["--fps", fps])
    r = json.loads(evlbi(*args).stdout)
    assert r["station"] == "Ys"
    assert r["frames"] == frame_sets * nthread
    assert r["threads"] == list(range(nthread))
    assert r["frames_per_second"] == fps
    assert r["frame_rate_source"] == ("header" if edv == 3 else "given")
    assert r["sample_rate_hz"] == 16e6
    assert r["start_utc"] == "2025-12-31T23:59:58.000000000Z"
    assert r["problems"] == []


SAMPLES = sorted(p for p in Path(baseband.data.__file__).parent.iterdir() if p.suffix == ".vdif")


def test_baseband_ships_sample_files():
    assert len(SAMPLES) >= 5, SAMPLES


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_inspect_agrees_with_baseband_samples(path):
    p = evlbi("vdif", "inspect", "--json", path, check=False)
    assert "panicked" not in p.stderr
    with vdif.open(str(path), "rb") as fh:
        info = fh.info
    if not info.readable:
        # baseband gives up on this file; evlbi must still describe it and flag the damage,
        # naming offsets, with exit code 1.
        assert p.returncode == 1
        r = json.loads(p.stdout)
        assert r["garbage_bytes"] > 0
        assert all(g["offset"] >= 0 for g in r["garbage"])
        assert "offset" in p.stderr
        return
    r = json.loads(p.stdout)
    h0 = info.header0
    assert r["frames"] == info.number_of_frames
    assert r["threads"] == list(info.thread_ids)
    assert r["frame_bytes"] == h0.frame_nbytes
    assert r["bits_per_sample"] == info.bps
    assert r["channels"] == info.sample_shape[-1]
    assert r["complex"] == info.complex_data
    assert r["edv"] == info.edv
    assert r["station_id"] == h0["station_id"]
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
        assert all(pr.startswith("thread ") and "away from the first frame" in pr for pr in r["problems"]), r
    else:
        assert r["problems"] == []
