//! `evlbi probe client --tcp` (with `--cpu-load` and `--cpu-load-sweep`) and `--rcvbuf-sweep`
//! as separate processes on 127.0.0.1: what arrived, the competing task's life, servers and
//! clients killed mid-test, bad input, and the report's figures.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{assert_usage_error, bin, spawn_with_port, Proc};
use serde_json::Value;

/// `evlbi probe server` on a free port serving `sessions` sessions; stderr lines come back.
fn server(sessions: u32) -> (Proc, u16, Receiver<String>) {
    let mut cmd = bin();
    cmd.args(["probe", "server", "--bind", "127.0.0.1", "--port", "0", "--sessions"])
        .arg(sessions.to_string());
    let (child, port, log) = spawn_with_port(&mut cmd);
    (Proc(child), port, log)
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn run(args: &[&str]) -> std::process::Output {
    bin().args(args).output().unwrap()
}

/// PIDs of `burn-cpu` tasks started by process `parent` (their command line says so).
fn burners_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let parent_arg = args.iter().position(|a| a == "--parent").and_then(|i| args.get(i + 1));
        // A zombie has an empty command line; only live tasks count.
        if args.iter().any(|a| a == "burn-cpu") && parent_arg.map(String::as_str) == Some(&parent.to_string()) {
            out.push(pid);
        }
    }
    out
}

/// Nice level of process `pid` (field 19 of /proc/PID/stat).
fn nice_of(pid: u32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..].split_whitespace().nth(16)?.parse().ok()
}

/// Wait (bounded) until `f` holds.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Wait (bounded) for a stderr line of the server containing `what`.
fn wait_line(log: &Receiver<String>, what: &str) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(l) = log.recv_timeout(Duration::from_millis(100)) {
            if l.contains(what) {
                return l;
            }
        }
    }
    panic!("the server never said {what:?}");
}

#[test]
fn tcp_test_reports_every_byte_intervals_tcp_info_cpu_and_mathis() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("tcp.json");
    let (_s, port, log) = server(1);
    let o = run(&[
        "probe",
        "client",
        &addr(port),
        "--tcp",
        "--duration",
        "1s",
        "--streams",
        "2",
        "--cc",
        "reno",
        "--interval",
        "250ms",
        "--export-json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .filter(|l| l.starts_with('[') && l.contains("retrans"))
            .count()
            >= 3,
        "{text}"
    );
    assert!(
        text.contains("\nmathis ") && text.contains("\nsender ") && text.contains("\nreceiver "),
        "{text}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["partial"], false, "{}", r["error"]);
    assert_eq!(r["cc"], "reno");
    assert_eq!(r["params"]["streams"], 2);
    let written = r["bytes_written"].as_u64().unwrap();
    assert!(written > 0);
    assert_eq!(r["received_bytes"].as_u64(), Some(written));
    assert_eq!(r["bytes_acked"].as_u64(), Some(written));
    for s in r["streams"].as_array().unwrap() {
        assert_eq!(s["bytes_received"], s["bytes_written"]);
    }
    let intervals = r["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 3);
    let sum: u64 = intervals.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, written);
    let samples = r["samples"].as_array().unwrap();
    assert!(samples
        .iter()
        .all(|s| s["cwnd"].as_u64().unwrap() > 0 && s["snd_mss"].as_u64().unwrap() > 0));
    assert!(r["mathis"]["rtt_s"].as_f64().unwrap() > 0.0);
    for end in ["sender", "receiver"] {
        let c = &r["host"][end]["cpu"];
        let total = [
            "user_pct",
            "nice_pct",
            "system_pct",
            "idle_pct",
            "iowait_pct",
            "irq_pct",
            "softirq_pct",
            "steal_pct",
        ]
        .iter()
        .map(|k| c[k].as_f64().unwrap())
        .sum::<f64>();
        assert!((total - 100.0).abs() < 0.01, "{end}: {c}");
    }
    wait_line(&log, "TCP test done");
    // The report draws throughput (retransmits marked), cwnd and RTT.
    let page = d.path().join("page.html");
    let o = run(&["report", json.to_str().unwrap(), "-o", page.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = rep["sections"][0]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1-tcp-throughput", "1-tcp-cwnd", "1-tcp-rtt"]);
    assert!(d.path().join("page_files/1-tcp-throughput.svg").exists());
}

#[test]
fn bad_input_is_a_usage_error_and_an_unknown_cc_lists_the_kernels() {
    // Nothing listens on port 1: every one of these must fail before connecting.
    let o = run(&["probe", "client", "127.0.0.1:1", "--tcp", "--cc", "nosuchcc"]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    assert!(err.contains("nosuchcc") && err.contains(avail.trim()), "{err}");
    for args in [
        &["--tcp", "--cpu-load", "nice=20"][..],
        &["--tcp", "--cpu-load", "nice=-21"][..],
        &["--tcp", "--cpu-load", "threads=2"][..],
        &["--tcp", "--cpu-load-sweep", "19..25"][..],
        &["--tcp", "--streams", "0"][..],
        &["--tcp", "--streams", "65"][..],
        &["--tcp", "--duration", "10ms"][..],
        &["--tcp", "--cc", "Not A Name"][..],
        &["--tcp", "--size", "1000"][..],
        &["--cpu-load", "nice=5", "--spacing", "10us"][..],
        &["--cc", "reno", "--spacing", "10us"][..],
        &["--duration", "1s", "--spacing", "10us"][..],
        &["--tcp", "--write-size", "100"][..],
        &["--rcvbuf-sweep", "100", "--spacing", "10us"][..],
        &["--rcvbuf-sweep", "512K..64K", "--spacing", "10us"][..],
    ] {
        let mut a = vec!["probe", "client", "127.0.0.1:1"];
        a.extend_from_slice(args);
        assert_usage_error(&a);
    }
}

#[test]
fn cpu_load_runs_at_its_nice_level_during_the_test_and_none_is_left_after() {
    let (_s, port, _log) = server(1);
    let client = bin()
        .args(["probe", "client", &addr(port), "--tcp", "--duration", "1500ms"])
        .args(["--cpu-load", "nice=15,threads=1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = client.id();
    // While the test runs: one task, started by this client, at nice 15.
    let mut seen = Vec::new();
    assert!(
        eventually(10, || {
            seen = burners_of(pid);
            !seen.is_empty()
        }),
        "no burn-cpu task of client {pid} appeared"
    );
    assert_eq!(seen.len(), 1);
    assert_eq!(nice_of(seen[0]), Some(15));
    let o = client.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(burners_of(pid).is_empty(), "a burn-cpu task outlived its client");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &r["cpu_load"];
    assert_eq!(
        (c["nice"].as_i64(), c["nice_observed"].as_i64(), c["threads"].as_u64()),
        (Some(15), Some(15), Some(1))
    );
    let task = c["task_cpu_pct"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&task));
    assert!((c["available_cpu_pct"].as_f64().unwrap() - (100.0 - task)).abs() < 1e-9);
    assert_eq!(r["partial"], false);
}

#[test]
fn cpu_load_sweep_runs_a_baseline_then_each_level_and_draws_three_figures() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("cpu.json");
    let (_s, port, _log) = server(3);
    let o = run(&[
        "probe",
        "client",
        &addr(port),
        "--tcp",
        "--duration",
        "500ms",
        "--cpu-load-sweep",
        "19,10",
        "--cpu-load",
        "nice=0,threads=1",
        "--export-json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("no load") && out.contains("CPU left"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["nice_levels"], serde_json::json!([19, 10]));
    assert_eq!(r["partial"], false);
    let points = r["points"].as_array().unwrap();
    let nices: Vec<Option<i64>> = points.iter().map(|p| p["nice"].as_i64()).collect();
    assert_eq!(nices, vec![None, Some(19), Some(10)]);
    assert_eq!(points[0]["available_cpu_pct"], 100.0);
    assert!(points[0]["result"]["cpu_load"].is_null());
    for p in points {
        assert!(p["rate_bps"].as_f64().unwrap() > 0.0);
        assert_eq!(p["result"]["received_bytes"], p["result"]["bytes_written"]);
    }
    for p in &points[1..] {
        assert_eq!(p["result"]["cpu_load"]["nice_observed"], p["nice"]);
        assert_eq!(p["result"]["cpu_load"]["threads"], 1);
    }
    let page = d.path().join("cpu.html");
    let o = run(&["report", json.to_str().unwrap(), "-o", page.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rep["sections"][0]["kind"], "cpu_load_sweep");
    assert_eq!(rep["sections"][0]["figures"].as_array().unwrap().len(), 3);
}

#[test]
fn a_server_killed_mid_test_gives_exit_1_a_partial_json_and_no_task_left() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("partial.json");
    let (mut s, port, log) = server(1);
    let client = bin()
        .args([
            "probe",
            "client",
            &addr(port),
            "--tcp",
            "--duration",
            "30s",
            "--interval",
            "200ms",
        ])
        .args([
            "--cpu-load",
            "nice=19,threads=1",
            "-q",
            "--export-json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let client = Proc(client);
    let pid = client.0.id();
    wait_line(&log, "TCP test, 1 stream");
    std::thread::sleep(Duration::from_millis(700));
    // SIGKILL the server (our child, by PID).
    s.0.kill().unwrap();
    s.0.wait().unwrap();
    let mut client = client;
    let mut status = None;
    assert!(eventually(25, || {
        status = client.0.try_wait().unwrap();
        status.is_some()
    }));
    assert_eq!(status.and_then(|s| s.code()), Some(1));
    let mut err = String::new();
    if let Some(mut e) = client.0.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    assert!(
        err.contains("ended early") && err.contains("partial result is in"),
        "{err}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["partial"], true);
    assert!(r["error"].as_str().unwrap().contains("of 30.00 s"), "{}", r["error"]);
    assert!(r["bytes_written"].as_u64().unwrap() > 0);
    assert!(!r["intervals"].as_array().unwrap().is_empty());
    assert!(r["receiver"].is_null());
    // The competing task was measured and stopped with the test.
    assert_eq!(r["cpu_load"]["nice"], 19);
    assert!(burners_of(pid).is_empty(), "a burn-cpu task outlived the failed test");
}

#[test]
fn a_client_killed_mid_test_leaves_a_partial_server_report_its_task_dies_and_the_server_goes_on() {
    let mut cmd = bin();
    cmd.args([
        "probe",
        "server",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--sessions",
        "2",
        "--json",
    ]);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let _server = Proc(child);
    let (tx, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let (jtx, json_lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in stdout.lines().map_while(Result::ok) {
            let _ = jtx.send(l);
        }
    });
    let first = wait_line(&log, "127.0.0.1:");
    let port: u16 = first
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let mut victim = Proc(
        bin()
            .args(["probe", "client", &addr(port), "--tcp", "--duration", "30s"])
            .args(["--cpu-load", "nice=19,threads=1", "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let vpid = victim.0.id();
    wait_line(&log, "TCP test, 1 stream");
    assert!(eventually(10, || !burners_of(vpid).is_empty()));
    let task = burners_of(vpid)[0];
    std::thread::sleep(Duration::from_millis(500));
    // SIGKILL: the client cannot clean up.
    victim.0.kill().unwrap();
    victim.0.wait().unwrap();
    // Its task dies with it (PR_SET_PDEATHSIG), not at its 30 s + margin.
    assert!(
        eventually(5, || burners_of(vpid).is_empty()),
        "task {task} outlived its killed client"
    );
    let line = json_lines
        .recv_timeout(Duration::from_secs(30))
        .expect("the server's report");
    let rep: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(rep["partial"], true, "{rep}");
    assert!(rep["error"].as_str().unwrap().contains("went away"), "{rep}");
    assert!(rep["bytes"].as_u64().unwrap() > 0);
    // The server serves the next client.
    let o = run(&["probe", "client", &addr(port), "--tcp", "--duration", "300ms", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["partial"], false);
    let rep2: Value = serde_json::from_str(&json_lines.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(rep2["bytes"], r["bytes_written"]);
}

#[test]
fn rcvbuf_sweep_reports_loss_beside_the_kernels_drops_for_each_buffer() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("rcv.json");
    let (_s, port, _log) = server(3);
    let o = run(&[
        "probe",
        "client",
        &addr(port),
        "--size",
        "1472",
        "--spacing",
        "0",
        "--count",
        "20000",
        "--rcvbuf-sweep",
        "4K,64K,1M",
        "--export-json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("socket drops"));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["rcvbufs"], serde_json::json!([4000, 64000, 1000000]));
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    for p in points {
        let asked = p["rcvbuf_requested"].as_u64().unwrap();
        // Linux doubles what it grants (socket(7)); all three are below rmem_max.
        assert_eq!(p["rcvbuf_granted"].as_u64(), Some(2 * asked));
        let rx = &p["result"]["receiver"];
        let lost = p["lost_packets"].as_u64().unwrap();
        assert_eq!(rx["lost_packets"].as_u64(), Some(lost));
        assert_eq!(rx["unique_packets"].as_u64().unwrap() + lost, 20000);
        let drops = p["socket_drops"].as_u64().unwrap();
        // Every datagram dropped at the socket is one the application found missing.
        assert!(drops <= lost, "{p}");
        assert_eq!(p["lost_elsewhere"].as_u64(), Some(lost - drops));
        // The host-wide counter saw at least this socket's drops.
        assert!(p["rcvbuf_errors"].as_u64().unwrap() >= drops);
    }
    let page = d.path().join("rcv.html");
    let o = run(&["report", json.to_str().unwrap(), "-o", page.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rep["sections"][0]["figures"][0]["id"], "1-rcvbuf-loss");
}
