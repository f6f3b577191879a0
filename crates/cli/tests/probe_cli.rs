//! `evlbi probe server` and `evlbi probe client` as separate processes on 127.0.0.1.

mod common;

use std::process::{Child, Output};

use common::{assert_usage_error, bin, spawn_with_port};

use serde_json::Value;

/// A server process for one session on a free port; killed on drop if still running.
struct ServerProc(Child, u16);

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `evlbi probe server --port 0 --once` and read the port it bound from its stderr.
fn server(extra: &[&str]) -> ServerProc {
    let mut args = vec!["--once"];
    args.extend_from_slice(extra);
    server_with(&args)
}

/// Start `evlbi probe server --port 0` with `args`.
fn server_with(args: &[&str]) -> ServerProc {
    let mut cmd = bin();
    cmd.args(["probe", "server", "--bind", "127.0.0.1", "--port", "0"])
        .args(args);
    let (child, port, _log) = spawn_with_port(&mut cmd);
    ServerProc(child, port)
}

fn client(port: u16, extra: &[&str]) -> Output {
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "probe",
        "client",
        addr.as_str(),
        "--size",
        "1472",
        "--spacing",
        "20us",
        "--count",
        "4000",
    ];
    args.extend_from_slice(extra);
    bin().args(&args).output().unwrap()
}

#[test]
fn client_and_server_processes_measure_the_path() {
    let s = server(&[]);
    let o = client(s.1, &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["params"]["count"], 4000);
    assert_eq!(r["sender"]["packets_sent"], 4000);
    assert_eq!(r["receiver"]["unique_packets"], 4000);
    assert_eq!(r["receiver"]["lost_packets"], 0);
    assert!(r["receiver"]["inter_arrival_ns"]["p50"].as_u64().unwrap() > 0);
}

#[test]
fn bursts_leave_together_and_all_arrive() {
    let s = server(&[]);
    // 4000 datagrams in bursts of 7: the last burst is short (3), every datagram is numbered.
    let o = client(s.1, &["--burst", "7", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["sender"]["packets_sent"], 4000);
    assert_eq!(r["receiver"]["unique_packets"], 4000);
    assert_eq!(r["receiver"]["lost_packets"], 0);
    let strays: u64 = r["receiver"]["strays"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(strays, 0, "every segment of a GSO burst is a whole probe datagram");
    // Six of every seven departures share their burst's timestamp.
    assert_eq!(r["sender"]["departure_gap_ns"]["p50"], 0);
    // A burst leaves at the deadline of its last datagram, never earlier: no datagram leaves
    // before its own deadline, and the first of a full burst waits 6 spacings for the last.
    assert_eq!(r["sender"]["early_packets"], 0);
    assert!(
        r["sender"]["lateness_ns"]["max"].as_u64().unwrap() >= 6 * 20_000,
        "{}",
        r["sender"]["lateness_ns"]
    );
    let notes = r["notes"].to_string();
    assert!(notes.contains("--burst 7"), "{notes}");
}

#[test]
fn wrong_key_fails_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("good.key");
    let bad = d.path().join("bad.key");
    // Keys of at least 16 bytes: shorter ones are refused before any connection.
    std::fs::write(&good, "s3cret-s3cret-s3cret\n").unwrap();
    std::fs::write(&bad, "guess-guess-guess-guess\n").unwrap();
    let s = server(&["--key-file", good.to_str().unwrap()]);
    let o = client(s.1, &["--key-file", bad.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("auth") || err.contains("refused"), "{err}");
}

#[test]
fn probe_usage_errors_exit_2() {
    for args in [
        &["probe", "client", "127.0.0.1", "--size", "8", "--spacing", "1us"][..],
        &["probe", "client", "127.0.0.1", "--count", "10"][..],
        &["probe", "client", "127.0.0.1", "--spacing", "1us", "--rate", "1G"][..],
        &["probe", "server", "--bind", "not-an-ip", "--once"][..],
        &["probe", "host-jitter"][..],
        &["probe", "host-jitter", "--spacing", "0us"][..],
        &["probe", "host-jitter", "--spacing", "16us", "--duration", "2h"][..],
        &["probe", "host-jitter", "--spacing", "16us", "--rate", "1G"][..],
    ] {
        assert_usage_error(args);
    }
}

#[test]
fn trials_gives_every_trial_and_the_spread() {
    let s = server_with(&["--sessions", "3"]);
    let o = client(s.1, &["--trials", "3", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 3);
    for t in trials {
        assert_eq!(t["receiver"]["unique_packets"], 4000);
        assert_eq!(t["params"]["size"], 1472);
    }
    // Three trials with three different test ids: three sessions.
    let mut ids: Vec<u64> = trials
        .iter()
        .map(|t| t["params"]["test_id"].as_u64().unwrap())
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    assert_eq!(r["summary"]["trials"], 3);
    assert_eq!(r["summary"]["lost_packets"]["max"], 0.0);
    assert_eq!(r["summary"]["received_user_rate_bps"]["n"], 3);
}

#[test]
fn sweep_runs_every_point_and_writes_json_and_csv() {
    let d = tempfile::tempdir().unwrap();
    let (json, csv) = (d.path().join("s.json"), d.path().join("s.csv"));
    let s = server_with(&["--sessions", "4"]);
    let o = client(
        s.1,
        &[
            "--sweep",
            "sizes=1000,1472 spacings=20us,30us",
            "--export-json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "-q",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["sizes"], serde_json::json!([1000, 1472]));
    assert_eq!(r["spacings_ns"], serde_json::json!([20000, 30000]));
    let points = r["points"].as_array().unwrap();
    let grid: Vec<(u64, u64)> = points
        .iter()
        .map(|p| (p["size"].as_u64().unwrap(), p["spacing_ns"].as_u64().unwrap()))
        .collect();
    assert_eq!(grid, vec![(1000, 20000), (1000, 30000), (1472, 20000), (1472, 30000)]);
    for p in points {
        assert_eq!(p["result"]["params"]["size"], p["size"]);
        assert_eq!(p["result"]["params"]["spacing_ns"], p["spacing_ns"]);
        assert_eq!(p["result"]["receiver"]["unique_packets"], 4000);
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert_eq!(rows[0][0..3], ["size", "spacing_ns", "offered_user_rate_bps"]);
    let cols = rows[0].len();
    for (row, (size, spacing)) in rows[1..].iter().zip(&grid) {
        assert_eq!(row.len(), cols);
        assert_eq!(row[0], size.to_string());
        assert_eq!(row[1], spacing.to_string());
        assert_eq!(row[6], "0", "lost: {row:?}");
    }
}

#[test]
fn interval_prints_live_lines_during_the_trial() {
    // With a key on both ends: the interim cadence is part of the authenticated parameters.
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("k");
    std::fs::write(&key, "s3cret-s3cret-s3cret\n").unwrap();
    let s = server(&["--key-file", key.to_str().unwrap()]);
    // 15 000 × 40 µs = 0.6 s of data: at least two 200 ms intervals.
    let addr = format!("127.0.0.1:{}", s.1);
    let o = bin()
        .args([
            "probe",
            "client",
            &addr,
            "--size",
            "1472",
            "--count",
            "15000",
            "--spacing",
            "40us",
        ])
        .args(["--interval", "200ms", "-q", "--key-file", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("received"))
        .collect();
    assert!(lines.len() >= 2, "{err}");
    assert!(
        lines.iter().all(|l| l.contains("missing") && l.contains("reordered")),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("received   15000 of 15000"), "{out}");
}

fn host_jitter(prefix: &[&str], args: &[&str]) -> Value {
    let mut cmd = if prefix.is_empty() {
        bin()
    } else {
        let mut c = std::process::Command::new(prefix[0]);
        c.args(&prefix[1..]).arg(env!("CARGO_BIN_EXE_evlbi"));
        c
    };
    let o = cmd
        .args(["probe", "host-jitter", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn host_jitter_reports_the_pacers_own_gaps() {
    let r = host_jitter(&[], &["--size", "8000", "--rate", "4.096G", "--duration", "300ms"]);
    assert_eq!(r["kind"], "host_jitter");
    assert_eq!(r["spacing_ns"], 15_625);
    let rel = &r["releases"];
    let n = rel["packets_sent"].as_u64().unwrap();
    // 300 ms / 15.625 us = 19 200 releases on time; slips re-anchor later, never earlier.
    assert!(n <= 19_201 && n > 1000, "{n}");
    assert_eq!(rel["bytes_sent"], 0);
    let gaps = &rel["departure_gap_ns"];
    assert_eq!(gaps["count"].as_u64().unwrap(), n - 1);
    // The pacer's rule, per release: never before its place on the absolute timeline (a release
    // less than 1 ms late goes at once, so a gap may be shorter than the spacing; a mean gap
    // is not promised).
    assert_eq!(rel["early_packets"], 0, "{rel}");
    // Release k is at or after release 0's place + k spacings, and release 0 was at most the
    // largest lateness late: the span is at least (n − 1) spacings less that lateness.
    let span = rel["last_send_ns"].as_u64().unwrap() - rel["first_send_ns"].as_u64().unwrap();
    let latest = rel["lateness_ns"]["max"].as_u64().unwrap();
    assert!(
        span + latest >= (n - 1) * 15_625,
        "{span} + {latest} vs {n} releases: {rel}"
    );
    let share = r["interrupted_share"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&share), "{share}");
    let excess = r["gap_p99_excess_ns"].as_f64().unwrap();
    assert_eq!(excess, gaps["p99"].as_f64().unwrap() - 15_625.0);
}

#[test]
fn host_jitter_sees_a_competing_task_on_its_core() {
    // Our own CPU burner and the measurement pinned to one core: the scheduler must share it,
    // so the spinning thread is taken off the CPU for whole time slices.
    let mut burner = std::process::Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_evlbi"),
            "probe",
            "burn-cpu",
            "--threads",
            "1",
            "--seconds",
            "20",
        ])
        .arg("--parent")
        .arg(std::process::id().to_string())
        .spawn()
        .unwrap();
    let r = host_jitter(&["taskset", "-c", "0"], &["--spacing", "16us", "--duration", "1s"]);
    let _ = burner.kill();
    let _ = burner.wait();
    // The scheduler took the core from it for the burner (a second of two CPU-bound tasks on
    // one core), and the spin loop saw it: what the measurement promises is that it counts
    // each gap above its threshold and that its share is exactly those gaps over the spin time
    // — not how long the kernel's slices are or how fairly it shares (a loaded CI host's
    // business).
    assert!(r["involuntary_context_switches"].as_u64().unwrap() >= 1, "{r}");
    let gaps = &r["interruptions"];
    let count = gaps["count"].as_u64().unwrap();
    assert!(count >= 1, "no interruption seen: {r}");
    assert!(
        gaps["min"].as_u64().unwrap() > r["interruption_threshold_ns"].as_u64().unwrap(),
        "{r}"
    );
    let lost = count as f64 * gaps["mean"].as_f64().unwrap();
    let spin = r["spin_ns"].as_f64().unwrap();
    let share = r["interrupted_share"].as_f64().unwrap();
    assert!(
        (share - lost / spin).abs() < 1e-6,
        "share {share} vs {lost} / {spin}: {r}"
    );
}
