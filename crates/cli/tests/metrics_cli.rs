//! `--metrics` seen by the tools a station uses: a real Prometheus server (the Debian
//! `prometheus` package) scrapes a running `stream recv` and its query API returns the frame
//! counts; headless Chromium loads the live page twice and sees the numbers move.

// unsafe: geteuid(2): some checks need root; std cannot ask.
#![allow(unsafe_code)]

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{backend_sim, bin, free_tcp_port, http_get, stream_send_json, Proc};

/// Whether this process runs as root (setup.sh installs missing packages only then).
fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `tool` is there, or the test is skipped (not root: setup.sh could not install it) or fails
/// (root: setup.sh should have installed it).
fn need(tool: &str, package: &str) -> bool {
    if Path::new(tool).exists() {
        return true;
    }
    if !root() {
        eprintln!("skipped: {tool} is missing; run scripts/setup.sh as root to install the Debian package {package}");
        return false;
    }
    panic!("{tool} is missing: run scripts/setup.sh (it installs the Debian package {package})");
}

/// A `stream recv` of jive5ab-framed 8000-byte frames with `--metrics` on 127.0.0.1, and a
/// backend simulator sending it `seconds` of 512 Mb/s. Returns both processes and the
/// metrics address.
fn stream_with_metrics(seconds: &str) -> (Proc, Proc, SocketAddr) {
    let data = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let recv = Proc(
        bin()
            .args([
                "stream",
                "recv",
                "-q",
                "--seq-format",
                "jive5ab",
                "--fps",
                "8000",
                "--interval",
                "200ms",
            ])
            .args(["--idle-timeout", "60s", "--listen"])
            .arg(format!("127.0.0.1:{data}"))
            .arg("--metrics")
            .arg(metrics.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !http_get(metrics, "/metrics").0.contains(" 200 ") {
        assert!(t0.elapsed() < Duration::from_secs(10), "no metrics server on {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let send = backend_sim(data, seconds, &[]);
    (recv, send, metrics)
}

/// The sender's frames, once it exits (bounded).
fn frames_sent(send: Proc) -> u64 {
    stream_send_json(send)["stations"][0]["frames_sent"].as_u64().unwrap()
}

/// The value of the first series of an instant query, if any.
fn query(prom: SocketAddr, expr: &str) -> Option<f64> {
    let encoded: String = expr
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={encoded}"));
    if status.is_empty() {
        return None;
    }
    let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
    doc["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_the_frame_counts_of_a_running_stream() {
    if !need("/usr/bin/prometheus", "prometheus") {
        return;
    }
    let (recv, send, metrics) = stream_with_metrics("4s");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: evlbi\n    \
             static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let prom: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let _prometheus = Proc(
        Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={prom}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !http_get(prom, "/-/ready").0.contains(" 200 ") {
        assert!(t0.elapsed() < Duration::from_secs(60), "prometheus not ready on {prom}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let sent = frames_sent(send);
    // Prometheus scrapes every second: within a few its latest sample is the final count.
    let t0 = Instant::now();
    let mut seen = None;
    while t0.elapsed() < Duration::from_secs(30) {
        seen = query(prom, "evlbi_stream_frames_total");
        if seen == Some(sent as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        seen,
        Some(sent as f64),
        "Prometheus's evlbi_stream_frames_total, {sent} frames sent"
    );
    assert_eq!(query(prom, "up"), Some(1.0));
    assert_eq!(query(prom, "evlbi_stream_frames_lost_total"), Some(0.0));
    // The scrape's own counts: every series taken, none refused.
    assert!(query(prom, "scrape_samples_scraped").is_some_and(|n| n > 20.0));
    // Grafana's usual panel: the rate from the counter.
    // (a rate needs two scrapes in its window: wait for them, bounded).
    let t0 = Instant::now();
    let mut rate = None;
    while rate.is_none() && t0.elapsed() < Duration::from_secs(20) {
        rate = query(prom, "sum(rate(evlbi_stream_bytes_total[30s]))");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(rate.is_some_and(|r| r >= 0.0), "no rate from evlbi_stream_bytes_total");
    drop(recv);
}

/// Chromium's DOM of the live page after its script ran: the station rows' frame counts.
fn page_frames(chromium: &Path, url: &str) -> Vec<u64> {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let pid = child.id();
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        let _ = out.read_to_string(&mut dom);
        dom
    });
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(90) {
            // Only the browser we started, by its pid.
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = reader.join().unwrap();
    assert!(dom.contains("<canvas id=\"rate\""), "not the live page: {dom}");
    assert!(
        dom.contains("<div id=\"error\"></div>"),
        "the page reported an error: {dom}"
    );
    dom.split("<tr class=\"station\">")
        .skip(1)
        .filter_map(|row| {
            let cells: Vec<&str> = row.split("<td").skip(1).collect();
            let third = cells.get(2)?;
            third.split('>').nth(1)?.split('<').next()?.parse().ok()
        })
        .collect()
}

#[test]
fn the_live_page_shows_the_counts_moving_in_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    if !need("/usr/bin/chromium", "chromium") {
        return;
    }
    let (_recv, send, metrics) = stream_with_metrics("20s");
    let url = format!("http://{metrics}/");
    // Wait (bounded) until frames are counted.
    let t0 = Instant::now();
    while !http_get(metrics, "/status.json").1.contains("\"placed\":") {
        assert!(t0.elapsed() < Duration::from_secs(20), "no station in /status.json");
        std::thread::sleep(Duration::from_millis(100));
    }
    let first = page_frames(chromium, &url);
    std::thread::sleep(Duration::from_millis(1500));
    let second = page_frames(chromium, &url);
    assert_eq!(
        (first.len(), second.len()),
        (1, 1),
        "one station row each: {first:?} {second:?}"
    );
    assert!(
        first[0] > 0 && second[0] > first[0],
        "frames did not move: {first:?} then {second:?}"
    );
    drop(send);
}

/// The value of the sample of `/metrics` whose line starts with `series`.
fn sample(metrics: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = http_get(metrics, "/metrics");
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Wait (bounded) until `series` reads `want`.
fn until_sample(metrics: SocketAddr, series: &str, want: f64) {
    let t0 = Instant::now();
    let mut seen = None;
    while t0.elapsed() < Duration::from_secs(30) {
        seen = sample(metrics, series);
        if seen == Some(want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{series} = {seen:?}, expected {want}");
}

/// A server started on port 0 with `--metrics` on a free port; its control port.
fn server_with_metrics(args: &[&str]) -> (Proc, u16, SocketAddr) {
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let mut cmd = bin();
    cmd.args(args).arg("--metrics").arg(metrics.to_string());
    let (child, port, _log) = common::spawn_with_port(&mut cmd);
    (Proc(child), port, metrics)
}

#[test]
fn the_transfer_and_probe_servers_count_what_they_received() {
    // evlbi recv: one file of 3 MB, verified.
    let root = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("scan.vdif");
    std::fs::write(&file, (0..3_000_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let root_arg = root.path().to_str().unwrap();
    let (_recv, port, metrics) = server_with_metrics(&["recv", "--listen", "127.0.0.1:0", "--root", root_arg]);
    // The sender, slow enough (3 MB at 8 Mb/s, 3 s) to be scraped while it sends.
    let send_metrics: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let mut sender = Proc(
        bin()
            .arg("send")
            .arg(&file)
            .arg(format!("127.0.0.1:{port}/"))
            .args([
                "--cc",
                "fixed",
                "--rate",
                "8M",
                "-q",
                "--metrics",
                &send_metrics.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    let (mut done, mut rtt) = (None, None);
    while sender.0.try_wait().unwrap().is_none() {
        if let Some(d) = sample(send_metrics, "evlbi_transfer_bytes_total{source=\"transfer_send\"}") {
            done = Some(d);
            rtt = sample(send_metrics, "evlbi_transfer_rtt_seconds{source=\"transfer_send\"}").or(rtt);
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "evlbi send did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(sender.0.wait().unwrap().success());
    assert!(
        done.is_some_and(|d| d > 0.0 && d <= 3_000_000.0),
        "bytes delivered while sending: {done:?}"
    );
    assert!(
        rtt.is_some_and(|r| r > 0.0 && r < 1.0),
        "round-trip time while sending: {rtt:?}"
    );
    until_sample(
        metrics,
        "evlbi_transfer_files_total{source=\"transfer_recv\",outcome=\"verified\"}",
        1.0,
    );
    until_sample(
        metrics,
        "evlbi_transfer_bytes_total{source=\"transfer_recv\"}",
        3_000_000.0,
    );
    assert_eq!(
        sample(
            metrics,
            "evlbi_transfer_sessions_total{source=\"transfer_recv\",outcome=\"ok\"}"
        ),
        Some(1.0)
    );
    // probe server: one trial of 2000 packets.
    let (_probe, port, metrics) = server_with_metrics(&["probe", "server", "--bind", "127.0.0.1", "--port", "0"]);
    let o = bin()
        .args([
            "probe",
            "client",
            &format!("127.0.0.1:{port}"),
            "--size",
            "1472",
            "--spacing",
            "20us",
        ])
        .args(["--count", "2000", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = r["receiver"]["unique_packets"].as_u64().unwrap();
    until_sample(
        metrics,
        "evlbi_probe_packets_total{source=\"probe_server\"}",
        got as f64,
    );
    assert_eq!(
        sample(
            metrics,
            "evlbi_probe_trials_total{source=\"probe_server\",outcome=\"ok\"}"
        ),
        Some(1.0)
    );
}

#[test]
fn linkemu_counts_what_it_forwards() {
    if let Some(why) = common::Wan::skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let metrics = format!("127.0.0.1:{}", free_tcp_port());
    let addr: SocketAddr = metrics.parse().unwrap();
    let wan = common::Wan::start("met", &["--delay", "1ms", "--metrics", &metrics]);
    // 50 datagrams from A to B (to the discard port: whether B answers does not matter).
    let send = Command::new("ip")
        .args(["netns", "exec", &wan.a, "python3", "-c"])
        .arg(format!(
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for _ in range(50): s.sendto(b'x' * 100, ('{}', 9))",
            common::Wan::B_ADDR
        ))
        .output()
        .unwrap();
    assert!(send.status.success(), "{}", String::from_utf8_lossy(&send.stderr));
    // Published once a second.
    let series =
        |fate: &str| format!("evlbi_linkemu_packets_total{{source=\"linkemu\",direction=\"a_to_b\",fate=\"{fate}\"}}");
    let t0 = Instant::now();
    loop {
        let (got, fwd) = (sample(addr, &series("received")), sample(addr, &series("forwarded")));
        if got.is_some_and(|n| n >= 50.0) && fwd.is_some_and(|n| n >= 50.0) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "linkemu a->b received {got:?}, forwarded {fwd:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(wan);
}
