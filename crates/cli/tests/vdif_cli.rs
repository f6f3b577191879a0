//! `evlbi vdif …` as a user runs it: real files, exit codes, messages naming offsets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn evlbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evlbi"))
        .args(args)
        .output()
        .expect("run evlbi")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Generate Ef and Wb (64 Mb/s, 4 ch, 2 s, Wb delayed 1.5 us) into `dir`, plus `extra`
/// flags; returns the gen JSON report.
fn gen_with(dir: &Path, seed: &str, extra: &[&str]) -> Value {
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
        "--seconds",
        "2",
        "--delay",
        "Wb=1.5us",
        "--snr",
        "0.02",
        "--seed",
        seed,
        "--start",
        "2026-03-01T12:00:00Z",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = evlbi(&args);
    assert!(o.status.success(), "gen failed: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("gen --json prints JSON")
}

/// [`gen_with`] with a 1.2 MHz tone.
fn gen(dir: &Path, seed: &str) -> Value {
    gen_with(dir, seed, &["--tone", "1.2MHz"])
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn gen_then_inspect_agree() {
    let d = tmp();
    let report = gen(d.path(), "5");
    assert_eq!(report["layout"]["frames_per_second"], 1000);
    assert_eq!(report["stations"][1]["delay_samples"], 12); // 1.5 us at 8 MS/s
    let ef = d.path().join("Ef.vdif");
    let o = evlbi(&["vdif", "inspect", "--json", ef.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["station"], "Ef");
    assert_eq!(r["frames"], 2000);
    assert_eq!(r["frame_bytes"], 8032);
    assert_eq!(r["bits_per_sample"], 2);
    assert_eq!(r["channels"], 4);
    assert_eq!(r["frames_per_second"], 1000);
    assert_eq!(r["data_rate_bps"], 64e6);
    assert_eq!(r["sample_rate_hz"], 8e6);
    assert_eq!(r["start_utc"], "2026-03-01T12:00:00.000000000Z");
    assert_eq!(r["duration_s"], 2.0);
    assert_eq!(r["missing_frames"], 0);
    assert_eq!(r["garbage_bytes"], 0);
    assert_eq!(r["problems"].as_array().unwrap().len(), 0);
    // Human output names the essentials.
    let o = evlbi(&["vdif", "inspect", ef.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(
        text.contains("station    Ef") && text.contains("1000 frames/s") && text.contains("verdict    OK"),
        "{text}"
    );
}

#[test]
fn same_seed_gives_identical_files() {
    let (a, b, c) = (tmp(), tmp(), tmp());
    gen(a.path(), "9");
    gen(b.path(), "9");
    gen(c.path(), "10");
    let read = |d: &tempfile::TempDir| std::fs::read(d.path().join("Wb.vdif")).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
}

#[test]
fn stats_gives_gaussian_verdict_and_flags_a_dead_sampler() {
    let d = tmp();
    gen(d.path(), "1");
    let wb = d.path().join("Wb.vdif");
    let o = evlbi(&["vdif", "stats", "--json", wb.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["verdict"], "good");
    assert_eq!(s["channels"].as_array().unwrap().len(), 4);
    // Zero every data byte: all samples in state 0, as from a dead sampler.
    let mut bytes = std::fs::read(&wb).unwrap();
    for frame in bytes.chunks_exact_mut(8032) {
        frame[32..].fill(0);
    }
    let dead = d.path().join("dead.vdif");
    std::fs::write(&dead, bytes).unwrap();
    let o = evlbi(&["vdif", "stats", "--json", dead.to_str().unwrap()]);
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["verdict"], "bad");
    assert_eq!(s["channels"][0]["fractions"][0], 1.0);
}

#[test]
fn dump_prints_headers_and_samples() {
    let d = tmp();
    gen(d.path(), "1");
    let o = evlbi(&[
        "vdif",
        "dump",
        "--frames",
        "2",
        "--skip",
        "1",
        d.path().join("Ef.vdif").to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let lines: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["offset"], 8032);
    assert_eq!(lines[0]["header"]["frame_number"], 1);
    assert_eq!(lines[0]["samples"].as_array().unwrap().len(), 4);
    assert_eq!(lines[0]["samples"][0].as_array().unwrap().len(), 8000);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Bad files: exit code 1, a message naming the offset and the problem, never a panic.
#[test]
fn bad_files_give_clear_errors() {
    let d = tmp();
    gen(d.path(), "1");
    let good = std::fs::read(d.path().join("Ef.vdif")).unwrap();
    let mut random = vec![0u8; 100_000];
    let mut x = 88172645463325252u64;
    for b in &mut random {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let mut bad_len = good[..20 * 8032].to_vec();
    // Frame 7 claims 4000 bytes (500 units) instead of 8032.
    bad_len[7 * 8032 + 8..7 * 8032 + 11].copy_from_slice(&[0xf4, 0x01, 0x00]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.vdif", vec![], "the file is empty"),
        (
            "random.vdif",
            random,
            "no VDIF frame found in 100000 bytes; at offset 0",
        ),
        (
            "text.vdif",
            b"SIMPLE  = T / this is a FITS file, not VDIF\n".repeat(50),
            "no VDIF frame found",
        ),
        (
            "truncated.vdif",
            good[..5 * 8032 + 1000].to_vec(),
            "offset 40160: last frame truncated (1000 of 8032 bytes)",
        ),
        ("badlen.vdif", bad_len, "offset 56224: 8032 bytes of garbage skipped"),
    ];
    for (name, bytes, want) in cases {
        let p = write(d.path(), name, &bytes);
        let o = evlbi(&["vdif", "inspect", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "{name}: stderr {:?} lacks {want:?}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{name}");
        // stats and dump fail cleanly too.
        let o = evlbi(&["vdif", "stats", p.to_str().unwrap()]);
        assert!(!stderr(&o).contains("panicked"), "{name}");
    }
    let o = evlbi(&["vdif", "inspect", d.path().join("missing.vdif").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot open"), "{}", stderr(&o));
}

/// Inconsistent flags are usage errors: exit code 2 and a message that says what to change.
#[test]
fn usage_errors_exit_2() {
    let d = tmp();
    let out = d.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--frame", "8001"], "not a multiple of 8"),
        (&["--bits", "3"], "bits per sample is not supported"),
        (&["--rate", "fast"], "expected a number"),
        (&["--rate", "500M", "--frame", "8192"], "whole number"),
        (&["--channels", "6"], "power of two"),
        (&["--delay", "Xx=1us"], "station Xx is not in --stations"),
        (&["--delay", "Wb=soon"], "expected a number"),
        (&["--snr", "2"], "--snr 2 must be within 0..=1"),
        (&["--tone", "30MHz"], "inside the channel band"),
        (&["--start", "yesterday"], "--start"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["vdif", "gen", "--stations", "Ef,Wb", "--seconds", "1", "--out", out];
        args.extend_from_slice(extra);
        let o = evlbi(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {:?} lacks {want:?}", stderr(&o));
    }
    assert_eq!(evlbi(&["vdif", "frobnicate"]).status.code(), Some(2));
    assert_eq!(evlbi(&[]).status.code(), Some(2));
}

#[test]
fn help_teaches_with_examples() {
    let o = evlbi(&["vdif", "gen", "--help"]);
    let h = stdout(&o);
    assert!(
        h.contains("Examples:") && h.contains("--delay Wb=1.5us") && h.contains("--seed"),
        "{h}"
    );
    let o = evlbi(&["--help"]);
    assert!(stdout(&o).contains("Exit codes"));
}

#[test]
fn correlate_finds_the_generated_delay() {
    let d = tmp();
    // No tone: a tone common to both stations correlates at every lag and buries the fringe.
    gen_with(d.path(), "4", &[]);
    let o = evlbi(&[
        "vdif",
        "correlate",
        "--channel",
        "2",
        "--json",
        d.path().join("Ef.vdif").to_str().unwrap(),
        d.path().join("Wb.vdif").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let f: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(f["delay_samples"], 12);
    assert!((f["delay_s"].as_f64().unwrap() - 1.5e-6).abs() < 1e-12);
    assert!(f["snr"].as_f64().unwrap() > 20.0, "{f}");
    assert_eq!(f["valid_fraction"], 1.0);
    let o = evlbi(&[
        "vdif",
        "correlate",
        "--fft",
        "100",
        d.path().join("Ef.vdif").to_str().unwrap(),
        d.path().join("Wb.vdif").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// mark5access's reading of one 2-bit sample of a Mark5B payload (mark5_format_mark5b.c
/// `initluts`: bit 2k the sign, bit 2k+1 the magnitude, lut4level = {−H, +1, −1, +H} indexed by
/// sign + 2 × magnitude) as its level −2 −1 +1 +2, against VDIF's offset binary 0 1 2 3 read as
/// the same levels (mark5access's format_vdif.c: lut4level = {−H, −1, +1, +H}).
fn mark5b_level(byte: u8, k: usize) -> i8 {
    let (sign, mag) = ((byte >> (2 * k)) & 1, (byte >> (2 * k + 1)) & 1);
    [-2, 1, -1, 2][usize::from(sign + 2 * mag)]
}

fn vdif_level(byte: u8, k: usize) -> i8 {
    [-2, -1, 1, 2][usize::from((byte >> (2 * k)) & 3)]
}

#[test]
fn gen_mark5b_writes_timed_frames_of_the_samples_vdif_carries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let common = [
        "vdif",
        "gen",
        "--stations",
        "Ef,Wb",
        "--rate",
        "64M",
        "--channels",
        "2",
        "--seconds",
        "2",
        "--delay",
        "Wb=1.5us",
        "--seed",
        "7",
        "--start",
        "2026-11-23T23:59:59Z",
        "--json",
    ];
    let m5b_dir = d.join("m5b");
    let mut args = common.to_vec();
    args.extend(["--format", "mark5b", "--out", m5b_dir.to_str().unwrap()]);
    let out = evlbi(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["format"], "mark5b", "{rep}");
    // 64 Mb/s in 80 000-bit payloads: 800 frames a second.
    assert_eq!(rep["layout"]["frames_per_second"].as_u64(), Some(800), "{rep}");
    // The same samples as VDIF with 10 000-byte payloads.
    let vdif_dir = d.join("vdif");
    let mut args = common.to_vec();
    args.extend(["--frame", "10000", "--out", vdif_dir.to_str().unwrap()]);
    let out = evlbi(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    for station in ["Ef", "Wb"] {
        let m5b = std::fs::read(m5b_dir.join(format!("{station}.m5b"))).unwrap();
        let vdif = std::fs::read(vdif_dir.join(format!("{station}.vdif"))).unwrap();
        assert_eq!(m5b.len(), 1600 * 10_016, "{station}");
        assert_eq!(vdif.len(), 1600 * 10_032, "{station}");
        let fps = vdif::FrameRate::new(800).unwrap();
        for (i, (f, v)) in m5b.chunks(10_016).zip(vdif.chunks(10_032)).enumerate() {
            let h = vdif::Mark5bHeader::parse(f).unwrap_or_else(|e| panic!("{station} frame {i}: {e}"));
            // 2026-11-23 is MJD 61 367; its last second, then the next day's first: the time
            // code steps across a day.
            let (day, second) = if i < 800 { (367, 86_399) } else { (368, 0) };
            let n = (i % 800) as u16;
            assert_eq!(
                (h.mjd_mod_1000, h.second_of_day, h.frame_number),
                (day, second, n),
                "{station} frame {i}"
            );
            // Frame n starts n × 1.25 ms into the second; the code holds 0.1 ms, truncated.
            assert_eq!(u32::from(h.fraction), u32::from(n) * 125 / 10, "{station} frame {i}");
            assert!(h.crc_ok() && h.crc != 0, "{station} frame {i}: {h:?}");
            assert_eq!(
                h.frame_index(fps),
                ((367 * 86_400 + 86_399) * 800 + i as u64) % (1000 * 86_400 * 800)
            );
            // Every sample as mark5access decodes each format.
            let (pm, pv) = (&f[16..], &v[32..]);
            for (j, (&a, &b)) in pm.iter().zip(pv).enumerate() {
                for k in 0..4 {
                    assert_eq!(
                        mark5b_level(a, k),
                        vdif_level(b, k),
                        "{station} frame {i} byte {j} sample {k}"
                    );
                }
            }
        }
    }
    // Only what Mark5B carries.
    for (extra, said) in [
        (&["--threads", "2"][..], "one stream"),
        (&["--bits", "1"][..], "2-bit real samples only"),
        (&["--frame", "8192"][..], "a Mark5B payload is 10000 bytes"),
    ] {
        let mut args = common.to_vec();
        args.extend(["--format", "mark5b", "--out", m5b_dir.to_str().unwrap()]);
        args.extend(extra);
        let out = evlbi(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(said), "{extra:?}: {}", stderr(&out));
    }
}
