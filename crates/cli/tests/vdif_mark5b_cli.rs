//! `evlbi vdif inspect` of Mark5B files made by `vdif gen --format mark5b`: frames, rate, the
//! time of the first and last frame, a frame removed (a gap), garbage between frames; VDIF's
//! JSON keeps its fields (no `format`).

mod common;

use std::path::Path;

use common::bin;
use serde_json::Value;

const FRAME: usize = 10_016;
const START: &str = "2026-11-23T12:00:00Z";

/// 2 s of a 32 Mb/s Mark5B station (400 frames/s, 800 frames) in `dir`.
fn mark5b(dir: &Path) -> Vec<u8> {
    let out = bin()
        .args(["vdif", "gen", "--format", "mark5b", "--stations", "Ef", "--rate", "32M"])
        .args(["--channels", "2", "--seconds", "2", "--start", START, "-q", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(dir.join("Ef.m5b")).unwrap()
}

/// `vdif inspect --json` of `data` written to `dir/name`: its exit code and report.
fn inspect(dir: &Path, name: &str, data: &[u8]) -> (Option<i32>, Value) {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    let out = bin().args(["vdif", "inspect", "--json"]).arg(&path).output().unwrap();
    let r =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), r)
}

#[test]
fn vdif_inspect_reads_a_mark5b_file() {
    let t = tempfile::tempdir().unwrap();
    let data = mark5b(t.path());
    let (code, r) = inspect(t.path(), "whole.m5b", &data);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["format"], "mark5b");
    assert_eq!(r["frames"], 800);
    assert_eq!(r["frame_bytes"], FRAME);
    assert_eq!(r["frames_per_second"], 400);
    assert_eq!(r["frame_rate_source"], "frame numbers");
    assert_eq!(r["data_rate_bps"], 32e6);
    assert_eq!(r["start_utc"], "2026-11-23T12:00:00.000000000Z");
    assert_eq!(r["end_utc"], "2026-11-23T12:00:02.000000000Z");
    assert_eq!(r["duration_s"], 2.0);
    assert_eq!((r["gaps"].as_u64(), r["garbage_bytes"].as_u64()), (Some(0), Some(0)));
    // The text view says the same.
    let out = bin()
        .args(["vdif", "inspect"])
        .arg(t.path().join("whole.m5b"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("format     Mark5B, one stream"), "{text}");
    assert!(
        text.contains("rate       400 frames/s (from frame numbers), 32 Mb/s"),
        "{text}"
    );
    assert!(text.contains("verdict    OK"), "{text}");
}

#[test]
fn vdif_inspect_of_mark5b_reports_a_frame_removed_as_a_gap() {
    let t = tempfile::tempdir().unwrap();
    let data = mark5b(t.path());
    // Frame 500 is frame 100 of the second second.
    let cut = [&data[..500 * FRAME], &data[501 * FRAME..]].concat();
    let (code, r) = inspect(t.path(), "gap.m5b", &cut);
    assert_eq!(code, Some(1), "a gap is a problem: {r}");
    assert_eq!(r["frames"], 799);
    assert_eq!(
        (r["gaps"].as_u64(), r["missing_frames"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    let after = &r["gap_list"][0]["after"];
    assert_eq!(after[1], 99, "the gap follows frame 99 of its second: {r}");
    assert_eq!(r["problems"][0], "1 frames missing in 1 gap(s)");
}

#[test]
fn vdif_inspect_of_mark5b_skips_garbage_between_frames() {
    let t = tempfile::tempdir().unwrap();
    let data = mark5b(t.path());
    let garbage = [&data[..50 * FRAME], &[7u8; 123][..], &data[50 * FRAME..]].concat();
    let (code, r) = inspect(t.path(), "garbage.m5b", &garbage);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["frames"], 800, "every frame found: {r}");
    assert_eq!(
        (r["gaps"].as_u64(), r["garbage_bytes"].as_u64()),
        (Some(0), Some(123)),
        "{r}"
    );
    assert_eq!(r["garbage"][0]["offset"], 50 * FRAME);
    assert_eq!(r["garbage"][0]["len"], 123);
}

#[test]
fn vdif_inspect_of_vdif_has_no_format_field() {
    let t = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "vdif",
            "gen",
            "--stations",
            "Ef",
            "--rate",
            "32M",
            "--seconds",
            "1",
            "-q",
            "--out",
        ])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let data = std::fs::read(t.path().join("Ef.vdif")).unwrap();
    let (code, r) = inspect(t.path(), "v.vdif", &data);
    assert_eq!(code, Some(0), "{r}");
    assert!(r.get("format").is_none(), "{r}");
    assert_eq!(r["station"], "Ef");
}
