//! `evlbi vdif` on what real recordings contain (issue 20): complex samples, files shorter than
//! a second, leap seconds, non-VDIF bytes, long runs of zeros, several stations in one file,
//! odd sample widths, and the exit codes and messages of each command about them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use vdif::VdifHeader;

fn evlbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evlbi"))
        .args(args)
        .output()
        .expect("run evlbi")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `vdif gen` of Ef and Wb into `dir`: 64 Mb/s, 2-bit, 4 channels, 8000-byte frames (1000
/// frames/s real), from 2026-03-01T12:00:00Z unless `extra` says otherwise.
fn gen(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "vdif",
        "gen",
        "--stations",
        "Ef,Wb",
        "--rate",
        "64M",
        "--channels",
        "4",
        "--frame",
        "8000",
        "--seed",
        "3",
        "--json",
        "--out",
        p(dir),
    ];
    for (flag, default) in [("--start", "2026-03-01T12:00:00Z"), ("--snr", "0.02")] {
        if !extra.contains(&flag) {
            args.extend_from_slice(&[flag, default]);
        }
    }
    args.extend_from_slice(extra);
    let o = evlbi(&args);
    assert!(o.status.success(), "gen {extra:?}: {}", text(&o.stderr));
    json(&o)
}

fn frames_of(bytes: &[u8], len: usize) -> Vec<&[u8]> {
    assert_eq!(bytes.len() % len, 0);
    bytes.chunks_exact(len).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Rewrite every header of a file of `len`-byte frames with `f`.
fn edit_headers(bytes: &mut [u8], len: usize, mut f: impl FnMut(&mut VdifHeader)) {
    for frame in bytes.chunks_exact_mut(len) {
        let mut h = VdifHeader::parse_valid(frame).unwrap();
        f(&mut h);
        h.emit(frame).unwrap();
    }
}

/// Complex data: `gen --complex` writes I/Q samples, `correlate` finds the delay in complex
/// samples (treating I and Q as consecutive reals gave twice the delay and twice the samples),
/// `stats` counts I and Q of every channel, `dump` prints [I, Q] pairs.
#[test]
fn complex_data_end_to_end() {
    let d = tempfile::tempdir().unwrap();
    // 64 Mb/s of 2-bit complex x 4 channels: 4 MS/s complex per channel; 5 samples = 1.25 us.
    let g = gen(d.path(), &["--complex", "--seconds", "2", "--delay", "Wb=1.25us"]);
    assert_eq!(g["layout"]["complex"], true);
    assert_eq!(g["layout"]["sample_rate_hz"], 4e6);
    assert_eq!(g["stations"][1]["delay_samples"], 5);
    let (ef, wb) = (d.path().join("Ef.vdif"), d.path().join("Wb.vdif"));
    let o = evlbi(&["vdif", "correlate", "--channel", "1", "--json", p(&ef), p(&wb)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = json(&o);
    assert_eq!(f["complex"], true, "{f}");
    assert_eq!(f["delay_samples"], 5, "{f}");
    assert!((f["delay_s"].as_f64().unwrap() - 1.25e-6).abs() < 1e-12, "{f}");
    // 2000 frames of 4000 complex samples (16 bits each: 4 channels x 2-bit I and Q),
    // correlated in FFTs of 256.
    assert_eq!(f["samples"], 2000 * (4000 / 256 * 256), "{f}");
    // rho 0.02 x 2-bit efficiency 0.88 over 7.7e6 complex samples: S/N ~ 49.
    assert!((f["amplitude"].as_f64().unwrap() - 0.88 * 0.02).abs() < 0.003, "{f}");
    assert!(f["snr"].as_f64().unwrap() > 30.0 && f["detected"] == true, "{f}");
    let o = evlbi(&["vdif", "correlate", "--channel", "1", p(&ef), p(&wb)]);
    let out = text(&o.stdout);
    assert!(
        out.contains("delay 5 samples (1.2500 us)") && out.contains("complex samples"),
        "{out}"
    );

    let o = evlbi(&["vdif", "stats", "--json", p(&wb)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = json(&o);
    assert_eq!(s["complex"], true);
    let rows = s["channels"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "4 channels x (I, Q)");
    assert_eq!(
        (rows[0]["part"].as_str(), rows[1]["part"].as_str()),
        (Some("i"), Some("q"))
    );
    assert!(
        rows.iter().all(|r| r["verdict"] == "good" && r["samples"] == 8_000_000),
        "{s}"
    );

    let o = evlbi(&["vdif", "dump", p(&ef)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line: Value = serde_json::from_str(text(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(line["samples_per_frame"], 4000);
    let ch0 = line["samples"][0].as_array().unwrap();
    assert_eq!(ch0.len(), 4000);
    assert_eq!(ch0[0].as_array().unwrap().len(), 2, "an [I, Q] pair");
}

/// A file shorter than a second (EDV 0: no rate in the header): frame numbers still order the
/// frames of the second and show gaps, so cuts, repeats and reversals are reported, with a
/// note that the rate is unknown.
#[test]
fn gaps_and_disorder_without_a_frame_rate() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), &["--seconds", "1"]);
    let good = std::fs::read(d.path().join("Ef.vdif")).unwrap();
    let frames = frames_of(&good, 8032);
    let clean = evlbi(&["vdif", "inspect", "--json", p(&d.path().join("Ef.vdif"))]);
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    assert_eq!(json(&clean)["frames_per_second"], Value::Null);

    let mut cut: Vec<u8> = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if !(400..403).contains(&i) {
            cut.extend_from_slice(f);
        }
    }
    let repeated = [good.clone(), good.clone()].concat();
    let reversed: Vec<u8> = frames.iter().rev().flat_map(|f| f.iter().copied()).collect();
    for (name, bytes, missing, ooo) in [
        ("cut.vdif", cut, 3, 0),
        ("repeated.vdif", repeated, 0, 1000),
        ("reversed.vdif", reversed, 0, 999),
    ] {
        let path = write(d.path(), name, &bytes);
        let o = evlbi(&["vdif", "inspect", "--json", p(&path)]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o.stderr));
        let r = json(&o);
        assert_eq!(r["frames_per_second"], Value::Null, "{name}");
        assert_eq!(r["missing_frames"], missing, "{name}: {r}");
        assert_eq!(r["out_of_order_frames"], ooo, "{name}: {r}");
        assert!(
            r["notes"][0].as_str().unwrap().contains("frame rate unknown"),
            "{name}: {r}"
        );
        if missing > 0 {
            assert_eq!(
                r["gap_list"][0]["after"],
                serde_json::json!([r["per_thread"][0]["first"][0], 399])
            );
        }
        let o = evlbi(&["vdif", "inspect", p(&path)]);
        let out = text(&o.stdout);
        assert!(
            out.contains("rate       unknown") && !out.contains("verdict    OK"),
            "{name}: {out}"
        );
    }
}

/// VDIF seconds count leap seconds (they are seconds elapsed since a UTC epoch): a file
/// crossing 2016-12-31T23:59:60 has four seconds of frames from 23:59:58 to 00:00:01, and a
/// file whose epoch predates four leap seconds reads four seconds earlier than POSIX
/// arithmetic says.
#[test]
fn leap_seconds_are_counted() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), &["--seconds", "4", "--start", "2016-12-31T23:59:58Z"]);
    let ef = d.path().join("Ef.vdif");
    let o = evlbi(&["vdif", "inspect", "--json", p(&ef)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = json(&o);
    assert_eq!(r["start_utc"], "2016-12-31T23:59:58.000000000Z");
    assert_eq!(r["end_utc"], "2017-01-01T00:00:01.000000000Z", "{r}");
    assert_eq!(r["duration_s"], 4.0);
    assert_eq!(r["ref_epoch"], 33);
    // The frame 2.5 s in is inside the leap second.
    let mut one = std::fs::read(&ef).unwrap();
    let leap = 2 * 1000 * 8032 + 500 * 8032; // third second, frame 500
    let h = VdifHeader::parse_valid(&one[leap..]).unwrap();
    assert_eq!((h.seconds, h.frame_number), (184 * 86_400, 500));
    assert_eq!(
        vdif::time::iso(h.ref_epoch, h.seconds, 0.5),
        "2016-12-31T23:59:60.500000000Z"
    );

    // The same data stamped from epoch 0 (2000-01-01): 4 leap seconds lie between it and epoch
    // 33, so its seconds are 4 more than POSIX arithmetic says (which read them 4 s late).
    let from0 = (vdif::time::epoch_unix(33) - vdif::time::epoch_unix(0)) as u32 + 4;
    edit_headers(&mut one, 8032, |h| {
        h.ref_epoch = 0;
        h.seconds += from0;
    });
    let old = write(d.path(), "epoch0.vdif", &one);
    let r = json(&evlbi(&["vdif", "inspect", "--json", p(&old)]));
    assert_eq!(r["ref_epoch"], 0);
    assert_eq!(r["start_utc"], "2016-12-31T23:59:58.000000000Z", "{r}");
    assert_eq!(r["end_utc"], "2017-01-01T00:00:01.000000000Z", "{r}");
}

/// Bytes that are mostly not VDIF (an executable; frames buried in noise) are "not VDIF",
/// with the share of bytes in valid frames, exit code 1, from inspect and stats alike.
#[test]
fn non_vdif_input_is_called_so() {
    let d = tempfile::tempdir().unwrap();
    // The first MiB of an ELF executable the build made: structured bytes, not random.
    let elf = std::fs::read(env!("CARGO_BIN_EXE_evlbi")).unwrap();
    let elf = write(d.path(), "elf.bin", &elf[..elf.len().min(1 << 20)]);
    gen(d.path(), &["--seconds", "1"]);
    let good = std::fs::read(d.path().join("Ef.vdif")).unwrap();
    // 100 frames, then twice their size of pseudo-random bytes: 33 % VDIF.
    let mut mixed = good[..100 * 8032].to_vec();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    mixed.extend((0..200 * 8032).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    let mixed = write(d.path(), "mixed.vdif", &mixed);
    for (path, want) in [
        (&elf, "not VDIF ("),
        (&mixed, "not VDIF (33.3 % of bytes in valid frames)"),
    ] {
        for cmd in ["inspect", "stats"] {
            let o = evlbi(&["vdif", cmd, p(path)]);
            assert_eq!(o.status.code(), Some(1), "{cmd} {path:?}: {}", text(&o.stderr));
            assert!(text(&o.stderr).contains(want), "{cmd} {path:?}: {}", text(&o.stderr));
            assert!(
                !text(&o.stdout).contains("verdict"),
                "{cmd} {path:?}: {}",
                text(&o.stdout)
            );
        }
    }
}

/// Frames that differ only in station id are one recording of several stations: each is
/// reported, none is garbage. Odd widths pack whole samples per word (5-bit complex: 468 in a
/// 624-byte array).
#[test]
fn several_stations_and_odd_widths() {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), &["--seconds", "2", "--threads", "2"]);
    let ef = std::fs::read(d.path().join("Ef.vdif")).unwrap();
    let wb = std::fs::read(d.path().join("Wb.vdif")).unwrap();
    let both: Vec<u8> = frames_of(&ef, 8032)
        .into_iter()
        .zip(frames_of(&wb, 8032))
        .flat_map(|(a, b)| [a, b].concat())
        .collect();
    let both = write(d.path(), "both.vdif", &both);
    let o = evlbi(&["vdif", "inspect", "--json", p(&both)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = json(&o);
    assert_eq!(r["garbage_bytes"], 0, "{r}");
    assert_eq!(r["frames"], 4000);
    let st: Vec<(&str, u64)> = r["stations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["station"].as_str().unwrap(), s["frames"].as_u64().unwrap()))
        .collect();
    assert_eq!(st, [("Ef", 2000), ("Wb", 2000)]);
    assert_eq!(r["per_thread"].as_array().unwrap().len(), 4);
    assert_eq!(r["missing_frames"], 0);
    let o = evlbi(&["vdif", "stats", "--json", p(&both)]);
    let s = json(&o);
    assert_eq!(
        s["channels"].as_array().unwrap().len(),
        8,
        "2 stations x 2 threads x 2 channels"
    );

    // 5-bit complex, one channel, 624-byte arrays: 3 samples per 32-bit word.
    let mut h = VdifHeader::parse_valid(&ef).unwrap();
    (h.complex, h.bits_per_sample, h.log2_channels, h.frame_len_units) = (true, 5, 0, (624 + 32) / 8);
    let mut odd = Vec::new();
    for k in 0..3000u32 {
        h.seconds = 1000 + k / 1000;
        h.frame_number = k % 1000;
        odd.extend_from_slice(&h.to_bytes().unwrap());
        odd.extend(std::iter::repeat_n(0x55u8, 624));
    }
    let odd = write(d.path(), "odd.vdif", &odd);
    let o = evlbi(&["vdif", "inspect", "--json", p(&odd)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = json(&o);
    assert_eq!(r["samples_per_frame"], 468, "{r}");
    assert_eq!(r["sample_rate_hz"], 468_000.0, "{r}");
    // dump shows the header and says why it prints no values for 5 bits.
    let o = evlbi(&["vdif", "dump", p(&odd)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("\"samples_note\":\"cannot decode 5-bit complex samples"));
}

/// Two seconds of Ef and Wb in a new directory; the path and bytes of Ef.
fn two_seconds() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let d = tempfile::tempdir().unwrap();
    gen(d.path(), &["--seconds", "2"]);
    let ef_path = d.path().join("Ef.vdif");
    let ef = std::fs::read(&ef_path).unwrap();
    (d, ef_path, ef)
}

/// stats exits 1 on a bad verdict, and names the garbage and truncation it skipped.
#[test]
fn stats_exits_1_on_bad_data_and_names_what_it_skipped() {
    let (d, _, ef) = two_seconds();

    // A dead sampler: verdict bad, exit 1.
    let mut dead = ef.clone();
    for f in dead.chunks_exact_mut(8032) {
        f[32..].fill(0);
    }
    let dead = write(d.path(), "dead.vdif", &dead);
    let o = evlbi(&["vdif", "stats", p(&dead)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("verdict: Bad"));
    // Garbage and a truncated tail are named by stats too.
    let mut damaged = ef[..100 * 8032].to_vec();
    damaged.extend_from_slice(&[0xee; 777]);
    damaged.extend_from_slice(&ef[100 * 8032..200 * 8032 + 100]);
    let damaged = write(d.path(), "damaged.vdif", &damaged);
    let o = evlbi(&["vdif", "stats", "--json", p(&damaged)]);
    assert_eq!(o.status.code(), Some(1));
    let s = json(&o);
    assert_eq!(s["bytes_skipped"], 877);
    let problems = s["problems"].to_string();
    assert!(
        problems.contains("offset 803200: 777 bytes of garbage")
            && problems.contains("last frame truncated (100 of 8032"),
        "{problems}"
    );
}

/// inspect --json gives every file an object, a failed one with its error.
#[test]
fn inspect_json_has_an_object_per_file() {
    let (d, ef_path, _) = two_seconds();
    let zeros = write(d.path(), "zeros.bin", &[0u8; 4096]);
    let o = evlbi(&["vdif", "inspect", "--json", p(&zeros)]);
    assert_eq!(o.status.code(), Some(1));
    let r = json(&o);
    assert!(r["error"].as_str().unwrap().starts_with("not VDIF (0.0 %"), "{r}");
    assert_eq!(r["file"], p(&zeros));
    let missing = d.path().join("missing.vdif");
    let o = evlbi(&["vdif", "inspect", "--json", p(&ef_path), p(&zeros), p(&missing)]);
    assert_eq!(o.status.code(), Some(1));
    let all = json(&o);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["frames"], 2000);
    assert!(all[1]["error"].as_str().unwrap().contains("not VDIF"));
    assert!(all[2]["error"].as_str().unwrap().contains("cannot open"), "{}", all[2]);
}

#[test]
fn dump_skip_past_the_end_says_so() {
    let (_d, ef_path, _) = two_seconds();
    let o = evlbi(&["vdif", "dump", "--skip", "5000", p(&ef_path)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--skip 5000 passes the end: the file has 2000 VDIF frame(s)"),
        "{}",
        text(&o.stderr)
    );
}

/// Nonzero words 4-7 in EDV 0 headers (here a Mark5B sync word in word 7) are noted.
#[test]
fn nonzero_edv0_words_are_noted() {
    let (d, _, ef) = two_seconds();
    let mut m5 = ef.clone();
    // 0xABADDEED: the Mark5B sync word.
    edit_headers(&mut m5, 8032, |h| h.extended[3] = 0xABAD_DEED);
    let m5 = write(d.path(), "m5.vdif", &m5);
    let r = json(&evlbi(&["vdif", "inspect", "--json", p(&m5)]));
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("2000 EDV 0 frame(s) carry nonzero words 4-7") && notes.contains("Mark5B sync word"),
        "{notes}"
    );
}

/// No common signal: no fringe, a non-negative amplitude, exit 1.
#[test]
fn correlate_says_no_fringe() {
    let n = tempfile::tempdir().unwrap();
    gen(n.path(), &["--seconds", "1", "--snr", "0"]);
    let (a, b) = (n.path().join("Ef.vdif"), n.path().join("Wb.vdif"));
    let o = evlbi(&["vdif", "correlate", "--json", p(&a), p(&b)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let f = json(&o);
    assert_eq!(f["detected"], false);
    assert!(f["amplitude"].as_f64().unwrap() >= 0.0, "{f}");
    let o = evlbi(&["vdif", "correlate", p(&a), p(&b)]);
    assert!(text(&o.stdout).contains("no fringe above S/N 7"), "{}", text(&o.stdout));
    assert!(text(&o.stderr).contains("no fringe above S/N 7"), "{}", text(&o.stderr));
}
