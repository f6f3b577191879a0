//! Sequences of VSI-S statements — the read-back ones above all: `scan_set` with every pointer
//! form and absurd values, `scan_check?`, `data_check?`, `disk2file` in every mode onto every
//! kind of destination, `reset = abort` — against a daemon with a real recording on a real disk
//! (issue 36: `scan_set` past the end, then `data_check?`, panicked the connection thread;
//! `disk2file` truncated the scan it read). Whatever the sequence: every statement is answered
//! with a reply that parses back, none fails inside the daemon, the scan pointer always lies
//! inside the scan, and the recording keeps every byte. `fuzz/fuzz_targets/vsis_sessions.rs`
//! runs the same daemon on arbitrary bytes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use daemon::paths::StationPaths;
use daemon::sessions::TransferEnv;
use daemon::Daemon;
use metrics::Hub;
use proptest::prelude::*;
use vsis::statement::split_request;
use vsis::{ReplyRepr, ReturnCode};

/// Frames of the recording: 2 s of 1000 frames/s, 1032 bytes each.
const FRAME: usize = 1032;
const FPS: u32 = 1000;
const SECONDS: u32 = 2;
const SCAN_LEN: u64 = FRAME as u64 * FPS as u64 * SECONDS as u64;

/// One station's VDIF, one thread, from 2026-11-23 23:17:10 UTC.
fn vdif() -> Vec<u8> {
    let layout = vdif::layout::FrameLayout::new(8e6, 2, 8, 1, FRAME - 32).unwrap();
    // 2026-11-23T23:17:10Z as VDIF epoch and seconds.
    let (epoch, start) = vdif::time::to_epoch(1_795_475_830).unwrap();
    let mut out = Vec::new();
    for s in 0..SECONDS {
        for n in 0..FPS {
            let mut h = layout.header(u16::from_be_bytes(*b"Ef"));
            h.ref_epoch = epoch;
            h.seconds = start + s;
            h.frame_number = n;
            out.extend(h.to_bytes().unwrap());
            out.resize(out.len() + FRAME - 32, 0x5a);
        }
    }
    out
}

/// A station: `<root>/disk0/fz/fz.00000000` holding the recording, `<root>/out` for copies.
struct Station {
    root: tempfile::TempDir,
    bytes: Vec<u8>,
}

impl Station {
    fn new() -> Station {
        let root = tempfile::tempdir().unwrap();
        let scan = root.path().join("disk0/fz");
        std::fs::create_dir_all(&scan).unwrap();
        std::fs::create_dir_all(root.path().join("out")).unwrap();
        let bytes = vdif();
        assert_eq!(bytes.len() as u64, SCAN_LEN);
        std::fs::write(scan.join("fz.00000000"), &bytes).unwrap();
        Station { root, bytes }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn daemon(&self) -> Daemon {
        let env = TransferEnv {
            paths: StationPaths::new(&[self.root.path().to_path_buf()], &[]).unwrap(),
            writer: recording::write::WriterPlacement::Thread,
            interval: Duration::from_millis(100),
        };
        Daemon::new(env, "0", Hub::new("serve", "0")).unwrap()
    }
}

/// Answer `line` (one or more statements); the replies, each checked to parse back.
fn say(d: &Daemon, line: &str) -> Vec<ReplyRepr> {
    split_request(line.as_bytes())
        .into_iter()
        .filter_map(Result::ok)
        .map(|s| {
            let r = d.execute(&s);
            let text = r.to_string();
            assert_eq!(ReplyRepr::parse(text.as_bytes()).as_ref(), Ok(&r), "{line} -> {text}");
            r
        })
        .collect()
}

/// A reply saying the statement failed inside the daemon (a panic caught: a bug).
fn internal_error(r: &ReplyRepr) -> bool {
    r.code == ReturnCode::Failed && r.fields.first().is_some_and(|f| f.starts_with("internal error"))
}

/// A byte offset as the FS or a clumsy operator writes one: near the scan's edges, far past
/// them, hex.
fn offset() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..SCAN_LEN * 2).prop_map(|n| n.to_string()),
        Just(SCAN_LEN.to_string()),
        Just((SCAN_LEN - 1).to_string()),
        Just("1000000".to_string()),
        Just("40000000".to_string()),
        Just("9223372036854775807".to_string()),
        (0..SCAN_LEN).prop_map(|n| format!("0x{n:x}")),
    ]
}

/// A VEX time or duration: inside the data (23:17:10–12), around it, and out of every range.
fn time() -> impl Strategy<Value = String> {
    prop_oneof![
        (10u32..13, 0u32..1000).prop_map(|(s, ms)| format!("23h17m{s:02}.{ms:03}s")),
        (0u32..30, 0u32..70, 0u32..70).prop_map(|(h, m, s)| format!("{h:02}h{m:02}m{s:02}s")),
        (0u32..4, 0u32..100).prop_map(|(s, cs)| format!("{s}.{cs:02}s")),
        Just("2026y327d23h17m11s".to_string()),
        Just("99h99m99s".to_string()),
        Just("400d".to_string()),
    ]
}

/// A `scan_set` pointer.
fn pointer(start: bool) -> impl Strategy<Value = String> {
    let fixed = if start { vec!["", "s", "c", "e", "s+"] } else { vec![""] };
    prop_oneof![
        proptest::sample::select(fixed).prop_map(str::to_string),
        offset().prop_map(|o| format!("+{o}")),
        offset().prop_map(|o| format!("-{o}")),
        time(),
        time().prop_map(|t| format!("+{t}")),
        time().prop_map(|t| format!("-{t}")),
    ]
}

/// Where a copy might be asked to go: the recording's own chunk, beside it, a copy's file, the
/// scan's directory itself.
fn destination(root: &'static str) -> impl Strategy<Value = String> {
    proptest::sample::select(vec![
        format!("{root}/disk0/fz/fz.00000000"),
        format!("{root}/disk0/fz/fz.00000001"),
        format!("{root}/disk0/fz/copy"),
        format!("{root}/disk0/fz"),
        format!("{root}/out/copy"),
        "copy2".to_string(),
        String::new(),
    ])
}

/// One statement (`ROOT` stands for the station's directory).
fn statement() -> impl Strategy<Value = String> {
    let scan = proptest::sample::select(vec!["fz", "fz", "fz", "", "inc", "dec", "1", "next", "nothere", "FZ"]);
    let d2f_end = prop_oneof![Just(String::new()), offset(), offset().prop_map(|o| format!("+{o}"))];
    let mode = proptest::sample::select(vec!["", "n", "w", "a", "resume"]);
    prop_oneof![
        4 => (scan, pointer(true), pointer(false)).prop_map(|(s, a, b)| format!("scan_set = {s} : {a} : {b} ;")),
        1 => Just("scan_set = ;".to_string()),
        2 => Just("scan_set? ;".to_string()),
        2 => Just("data_check? ;".to_string()),
        1 => prop_oneof![Just(String::new()), (0u64..5_000_000).prop_map(|n| n.to_string())]
            .prop_map(|b| format!("scan_check? : {b} ;")),
        3 => (destination("ROOT"), prop_oneof![Just(String::new()), offset()], d2f_end, mode)
            .prop_map(|(f, a, b, m)| format!("disk2file = {f} : {a} : {b} : {m} ;")),
        1 => Just("disk2file? ;".to_string()),
        1 => Just("reset = abort ;".to_string()),
        1 => Just("set_disks = ROOT/disk0 ;".to_string()),
        1 => proptest::sample::select(vec!["status? ;", "error? ;", "rtime? ;", "evlbi? ;", "tstat? ;"])
            .prop_map(str::to_string),
    ]
}

/// After every statement: the pointer, when it names the recording, lies inside it.
fn pointer_inside(d: &Daemon, after: &str) {
    let q = say(d, "scan_set? ;").remove(0);
    assert_eq!(q.code, ReturnCode::Done);
    if q.fields.get(1).map(String::as_str) == Some("fz") {
        let start: u64 = q.fields[2].parse().unwrap();
        let end: u64 = q.fields[3].parse().unwrap();
        assert!(
            start < SCAN_LEN && (end == 0 || (start < end && end <= SCAN_LEN)),
            "after {after}: pointer {start}-{end} of a {SCAN_LEN}-byte scan"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_statement_sequence_answers_every_statement_and_keeps_the_recording(
        statements in proptest::collection::vec(statement(), 1..16),
    ) {
        let station = Station::new();
        let root = station.root.path().display().to_string();
        let d = station.daemon();
        // The FS's start: the disks, then the scan (the sequence may move off it at once).
        say(&d, &format!("set_disks = {root}/disk0 ; scan_set = fz ;"));
        for s in &statements {
            let s = s.replace("ROOT", &root);
            let replies = say(&d, &s);
            if std::env::var_os("SHOW_REPLIES").is_some() {
                eprintln!("{s} -> {}", replies[0]);
            }
            prop_assert_eq!(replies.len(), 1, "{}", s);
            prop_assert!(!internal_error(&replies[0]), "{} -> {}", s, replies[0]);
            pointer_inside(&d, &s);
        }
        let _ = d.shutdown();
        let now = std::fs::read(station.path("disk0/fz/fz.00000000")).unwrap();
        prop_assert!(now == station.bytes, "the recording changed: {} bytes now", now.len());
    }
}

/// The sequences of issue 36 that panicked or destroyed, one by one.
#[test]
fn the_statements_of_issue_36_are_refused_and_the_recording_kept() {
    let station = Station::new();
    let root = station.root.path().display().to_string();
    let d = station.daemon();
    say(&d, &format!("set_disks = {root}/disk0 ;"));
    for line in [
        "scan_set = fz : +40000000 ; data_check? ;",
        "scan_set = fz : 23h17m20s : 23h17m14s ; data_check? ;",
        "scan_set = fz : 99h99m99s ; data_check? ;",
        "scan_set = fz : 00h00m00s ; data_check? ;",
    ] {
        let r = say(&d, line);
        assert_eq!(r[0].code, ReturnCode::BadParameter, "{line}: {}", r[0]);
        assert!(!internal_error(&r[1]), "{line}: {}", r[1]);
    }
    let r = say(
        &d,
        &format!("scan_set = fz ; disk2file = {root}/disk0/fz/fz.00000000 : : : w ;"),
    );
    assert_eq!(r[1].code, ReturnCode::Failed, "{}", r[1]);
    let _ = d.shutdown();
    assert!(std::fs::read(Path::new(&root).join("disk0/fz/fz.00000000")).unwrap() == station.bytes);
}
