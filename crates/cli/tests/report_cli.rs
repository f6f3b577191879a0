//! `evlbi report` on results of real runs over 127.0.0.1: a probe trial and a stream send/recv
//! of two stations; bad inputs; and the page rendered in headless Chromium.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{bin, spawn_with_port, Proc, Wan};
use serde_json::Value;

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One probe trial over 127.0.0.1, its JSON written to `dir/trial.json`.
fn probe_trial(dir: &Path) -> PathBuf {
    let mut cmd = bin();
    cmd.args(["probe", "server", "--bind", "127.0.0.1", "--port", "0", "--once"]);
    let (child, port, _log) = spawn_with_port(&mut cmd);
    let _server = Proc(child);
    let out = dir.join("trial.json");
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
        .args(["--count", "3000", "-q", "--export-json"])
        .arg(&out)
        .output()
        .unwrap();
    ok(&o, "probe client");
    out
}

/// Two stations streamed over 127.0.0.1 with 3 % loss injected: `(send.json, recv.json)`.
fn stream_run(dir: &Path) -> (PathBuf, PathBuf) {
    common::gen_two_stations(dir, &["--rate", "128M"]);
    let (send_json, recv_json) = (dir.join("send.json"), dir.join("recv.json"));
    let mut cmd = bin();
    cmd.args([
        "stream",
        "recv",
        "--listen",
        "127.0.0.1:0",
        "--idle-timeout",
        "3s",
        "-q",
        "--out",
    ])
    .arg(dir.join("rx"))
    .arg("--export-json")
    .arg(&recv_json);
    let (child, port, _log) = spawn_with_port(&mut cmd);
    let mut rx = Proc(child);
    let o = bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{port}")])
        .arg(dir.join("in/Ef.vdif"))
        .arg(dir.join("in/Wb.vdif"))
        .args(["--inject-loss", "3%", "--loss-seed", "3", "--export-json"])
        .arg(&send_json)
        .output()
        .unwrap();
    ok(&o, "stream send");
    let t0 = Instant::now();
    while rx.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "receiver did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    (send_json, recv_json)
}

/// Run `evlbi report --json` on `inputs` into `dir/report.html`; the report JSON.
fn report(dir: &Path, inputs: &[&Path]) -> (PathBuf, Value) {
    let html = dir.join("report.html");
    let o = bin()
        .arg("report")
        .args(inputs)
        .arg("-o")
        .arg(&html)
        .arg("--json")
        .output()
        .unwrap();
    ok(&o, "evlbi report");
    (html, serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn report_of_real_probe_and_stream_runs_has_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    let trial = probe_trial(dir.path());
    let (send, recv) = stream_run(dir.path());
    let floor = dir.path().join("floor.json");
    let o = bin()
        .args([
            "probe",
            "host-jitter",
            "--spacing",
            "16us",
            "--duration",
            "200ms",
            "-q",
            "--export-json",
        ])
        .arg(&floor)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (html, r) = report(dir.path(), &[&trial, &send, &recv, &floor]);
    let page = std::fs::read_to_string(&html).unwrap();

    let kinds: Vec<&str> = r["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["probe_trial", "stream_send", "stream_recv", "host_jitter"]);
    let metric = |section: usize, name: &str| {
        r["sections"][section]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no metric {name}"))["value"]
            .clone()
    };
    assert_eq!(metric(0, "received (unique)"), 3000.0);
    assert_eq!(metric(0, "lost"), 0.0);
    let recv_json: Value = serde_json::from_slice(&std::fs::read(&recv).unwrap()).unwrap();
    assert_eq!(
        metric(2, "datagrams"),
        recv_json["datagrams"]["datagrams"].as_f64().unwrap()
    );
    // The station table shows what the receiver wrote.
    let rows = &r["sections"][2]["tables"][0]["rows"];
    assert_eq!(rows.as_array().unwrap().len(), 2);
    for (row, st) in rows
        .as_array()
        .unwrap()
        .iter()
        .zip(recv_json["stations"].as_array().unwrap())
    {
        assert_eq!(row[0], st["station"]);
        assert_eq!(row[2].as_str().unwrap(), st["window"]["written_filled"].to_string());
    }
    let floor_json: Value = serde_json::from_slice(&std::fs::read(&floor).unwrap()).unwrap();
    assert_eq!(
        metric(3, "releases"),
        floor_json["releases"]["packets_sent"].as_f64().unwrap()
    );

    let figures: Vec<&Value> = r["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["figures"].as_array().unwrap())
        .collect();
    let ids: Vec<&str> = figures.iter().map(|f| f["id"].as_str().unwrap()).collect();
    for id in [
        "1-inter-arrival",
        "1-departure-gaps",
        "1-one-way-delay",
        "2-send-rates",
        "3-snr-factor",
        "3-frames",
        "4-host-jitter-gaps",
    ] {
        assert!(ids.contains(&id), "figure {id} missing from {ids:?}");
    }
    let bars = figures.iter().find(|f| f["id"] == "3-snr-factor").unwrap();
    assert_eq!(bars["series"], 2, "S/N factor and loss fraction");
    for f in &figures {
        let (png, svg) = (f["png"].as_str().unwrap(), f["svg"].as_str().unwrap());
        assert!(
            png.starts_with("report_files/") && svg.starts_with("report_files/"),
            "{png} {svg}"
        );
        let png_bytes = std::fs::read(dir.path().join(png)).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n", "{png}");
        let svg_text = std::fs::read_to_string(dir.path().join(svg)).unwrap();
        assert!(svg_text.contains("<svg") && svg_text.contains("</svg>"), "{svg}");
        assert!(page.contains(&format!("src=\"{png}\"")), "page does not show {png}");
        assert!(page.contains(&format!("href=\"{svg}\"")), "page does not link {svg}");
    }
    assert_eq!(page.matches("<figure data-fig=").count(), figures.len());
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page needs no network"
    );
}

/// The "CPU (user + system)" figure of a report section.
fn cpu_metric(r: &Value, section: usize) -> f64 {
    r["sections"][section]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "CPU (user + system)")
        .unwrap_or_else(|| panic!("no CPU metric in {}", r["sections"][section]))["value"]
        .as_f64()
        .unwrap()
}

/// Results are written with the one host schema (`cpu.user_pct`, `cpu.system_pct`), and files
/// written before it (`cpu.user`, `cpu.system`) are still read and show the same CPU figure.
#[test]
fn stream_results_with_the_old_cpu_field_names_are_still_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (send, recv) = stream_run(dir.path());
    let mut olds = Vec::new();
    for (path, name) in [(&send, "old_send.json"), (&recv, "old_recv.json")] {
        let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let cpu = v["cpu"].as_object().unwrap().clone();
        let mut keys: Vec<&str> = cpu.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["system_pct", "user_pct"], "{name}: {cpu:?}");
        let (user, system) = (cpu["user_pct"].clone(), cpu["system_pct"].clone());
        v["cpu"] = serde_json::json!({"user": user, "system": system});
        let old = dir.path().join(name);
        std::fs::write(&old, serde_json::to_vec(&v).unwrap()).unwrap();
        olds.push((old, user.as_f64().unwrap() + system.as_f64().unwrap()));
    }
    let (_, new_report) = report(dir.path(), &[&send, &recv]);
    let (_, old_report) = report(dir.path(), &[&olds[0].0, &olds[1].0]);
    for (section, (_, total)) in olds.iter().enumerate() {
        assert_eq!(
            old_report["sections"][section]["kind"],
            new_report["sections"][section]["kind"]
        );
        assert_eq!(cpu_metric(&new_report, section), *total);
        assert_eq!(
            cpu_metric(&old_report, section),
            *total,
            "section {section} of the old files"
        );
    }
}

fn run_report(args: &[&str], dir: &Path) -> Output {
    bin()
        .arg("report")
        .args(args)
        .arg("-o")
        .arg(dir.join("r.html"))
        .output()
        .unwrap()
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let unknown = p("unknown.json", r#"{"hello": 1, "world": [2]}"#);
    let truncated = p("trunc.json", r#"{"schema_version": 1, "params": {"test_id": 1, "si"#);
    let wrong = p("wrong.json", r#"{"schema_version": 1, "params": 7, "receiver": null}"#);
    let missing = dir.path().join("nope.json").to_str().unwrap().to_string();
    let cases: [(&str, i32, &str); 4] = [
        (&unknown, 2, "is not an evlbi result: expected a probe trial"),
        (&missing, 2, "cannot read"),
        (&truncated, 1, "is not valid JSON"),
        (&wrong, 1, "looks like a probe trial but does not match it"),
    ];
    for (file, code, msg) in cases {
        let o = run_report(&[file], dir.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{file}: {err}");
        assert!(err.contains(file) && err.contains(msg), "{file}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!dir.path().join("r.html").exists(), "no page from bad inputs");
    let o = bin().args(["report", &unknown, "-o", "r.txt"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Headless Chromium opens the page from disk: every figure renders and no script or load error
/// occurs (the page's self-check writes counts into `<body data-…>`).
#[test]
fn report_renders_in_headless_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        if std::env::var("EVLBI_SKIP_BROWSER").is_ok_and(|v| v == "1") {
            eprintln!("skipped: /usr/bin/chromium missing and EVLBI_SKIP_BROWSER=1");
            return;
        }
        panic!("/usr/bin/chromium is missing: run scripts/setup.sh (or set EVLBI_SKIP_BROWSER=1)");
    }
    let dir = tempfile::tempdir().unwrap();
    let trial = probe_trial(dir.path());
    let (_, recv) = stream_run(dir.path());
    let (html, r) = report(dir.path(), &[&trial, &recv]);
    let total = r["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["figures"].as_array().unwrap().len())
        .sum::<usize>();
    assert!(total >= 5);
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--timeout=20000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg("--dump-dom")
    .arg(format!("file://{}", html.canonicalize().unwrap().display()));
    let o = run_bounded(cmd, Duration::from_secs(90));
    let dom = String::from_utf8_lossy(&o.stdout);
    let log = String::from_utf8_lossy(&o.stderr);
    let body = dom
        .split("<body")
        .nth(1)
        .and_then(|b| b.split('>').next())
        .unwrap_or("");
    let attr = |name: &str| {
        body.split(&format!("{name}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .and_then(|v| v.parse::<usize>().ok())
    };
    assert_eq!(attr("data-figures-total"), Some(total), "body: {body}\n{log}");
    assert_eq!(
        attr("data-figures-ok"),
        Some(total),
        "figures failed to render; body: {body}"
    );
    assert_eq!(attr("data-errors"), Some(0), "script or load errors; body: {body}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}

/// Run `cmd`, killing it after `limit`; its output.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            // Only the browser we started, by its pid.
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("chromium did not finish within {limit:?}");
        }
    }
}

#[test]
fn report_of_a_real_transfer_shows_its_rate_over_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let file = dir.path().join("scan.bin");
    std::fs::write(&file, (0..12_000_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let mut cmd = bin();
    cmd.args(["recv", "--listen", "127.0.0.1:0", "--once", "--root"])
        .arg(&root);
    let (child, port, _log) = spawn_with_port(&mut cmd);
    let _rx = Proc(child);
    let json = dir.path().join("send.json");
    let o = bin()
        .arg("send")
        .arg(&file)
        .arg(format!("127.0.0.1:{port}"))
        .args(["--cc", "fixed", "--rate", "300M", "-q", "--export-json"])
        .arg(&json)
        .output()
        .unwrap();
    ok(&o, "evlbi send");
    let (html, r) = report(dir.path(), &[&json]);
    assert_eq!(r["sections"][0]["kind"], "transfer_send");
    let fig = &r["sections"][0]["figures"][0];
    assert_eq!(fig["id"], "1-transfer-rate");
    assert_eq!(fig["series"], 2, "goodput and pacing");
    let row = &r["sections"][0]["tables"][0]["rows"][0];
    assert_eq!(row[0], "scan.bin");
    assert_eq!(row[8], "verified");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Transfer rate over time") || page.contains("1-transfer-rate"));

    // The sender's CPU is written as the one host schema's share; a result of an older version
    // said only the sum, as `cpu_percent`, and still reports the same figure.
    let mut sent: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cpu = sent["cpu"].clone();
    let total = cpu["user_pct"].as_f64().unwrap() + cpu["system_pct"].as_f64().unwrap();
    assert!(sent.get("cpu_percent").is_none(), "{sent}");
    assert_eq!(cpu_metric(&r, 0), total);
    sent.as_object_mut().unwrap().remove("cpu");
    sent["cpu_percent"] = total.into();
    let old = dir.path().join("old_send.json");
    std::fs::write(&old, serde_json::to_vec(&sent).unwrap()).unwrap();
    let (_, old_report) = report(dir.path(), &[&old]);
    assert_eq!(cpu_metric(&old_report, 0), total);

    // The other views of the same report: every headline number and table cell of the JSON is
    // a CSV row, and the text view shows them.
    let (csv, text) = (dir.path().join("r.csv"), dir.path().join("r.txt"));
    let o = bin()
        .arg("report")
        .arg(&json)
        .arg("-o")
        .arg(&html)
        .arg("--export-csv")
        .arg(&csv)
        .arg("--export-text")
        .arg(&text)
        .output()
        .unwrap();
    ok(&o, "evlbi report --export-csv --export-text");
    let csv = std::fs::read_to_string(&csv).unwrap();
    let text = std::fs::read_to_string(&text).unwrap();
    assert!(
        csv.starts_with("section,source,table,row,column,value,unit,text\n"),
        "{csv}"
    );
    let section = &r["sections"][0];
    let metrics = section["metrics"].as_array().unwrap();
    assert!(!metrics.is_empty());
    for m in metrics {
        let name = m["name"].as_str().unwrap();
        let value = m["value"].as_f64().map(|v| v.to_string()).unwrap_or_default();
        let row = csv
            .lines()
            .find(|l| l.contains(&format!(",,,{name},")) || l.contains(&format!(",,,\"{name}\",")));
        let row = row.unwrap_or_else(|| panic!("metric {name} missing from CSV:\n{csv}"));
        assert!(row.contains(&format!(",{value},")), "{name}: {row} vs {value}");
        assert!(
            text.contains(&format!("  {name}: ")),
            "{name} missing from text:\n{text}"
        );
    }
    let cells = section["tables"][0]["rows"][0].as_array().unwrap();
    assert!(csv.contains(",scan.bin,") && csv.contains(",verified,"), "{csv}");
    assert!(text.contains("scan.bin") && text.contains("verified"), "{text}");
    let first_row = csv.lines().filter(|l| l.contains(",0,")).count();
    assert!(
        first_row >= cells.len(),
        "one CSV row per cell of the first table row:\n{csv}"
    );
}

#[test]
fn a_linkemu_summary_becomes_a_section_with_its_figures() {
    if let Some(why) = Wan::skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut wan = Wan::start("rep", &["--loss", "5%", "--seed", "9", "--rate", "200M", "--json"]);
    // 2.5 s of 128 Mb/s UDP from A to B (nobody listens at B: the packets still cross the link).
    let o = wan
        .evlbi_in(&wan.a)
        .args([
            "stream",
            "send",
            "--generate",
            "--stations",
            "Ef",
            "--rate",
            "128M",
            "--loop",
        ])
        .args(["--duration", "2500ms", "--to", "10.77.0.2:9"])
        .output()
        .unwrap();
    ok(&o, "stream send through linkemu");
    let summary = wan.stop_with_summary();
    let v: Value = serde_json::from_str(&summary).unwrap_or_else(|e| panic!("{e}: {summary}"));
    let intervals = v["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "per-second counters: {summary}");
    let lost = v["a_to_b"]["model"]["dropped_loss"]["packets"].as_u64().unwrap();
    let fwd = v["a_to_b"]["forwarded"]["packets"].as_u64().unwrap();
    assert!(fwd > 1000 && lost > 0, "{fwd} forwarded, {lost} lost");
    let per_second: u64 = intervals
        .iter()
        .map(|i| i["a_to_b"]["dropped_loss"].as_u64().unwrap())
        .sum();
    assert!(per_second <= lost, "intervals {per_second} within the total {lost}");
    let json = dir.path().join("linkemu.json");
    std::fs::write(&json, &summary).unwrap();
    let html = dir.path().join("page.html");
    let o = bin().arg("report").arg(&json).arg("-o").arg(&html).output().unwrap();
    ok(&o, "report");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("What the emulator did to each direction"),
        "table missing"
    );
    assert!(page.contains("Bernoulli loss 5.0000 %"), "model missing");
    for fig in ["linkemu-rates", "linkemu-drops"] {
        let png = dir.path().join(format!("page_files/1-{fig}.png"));
        assert!(png.exists(), "{} missing", png.display());
    }
}

/// The demo's report (scripts/demo.sh) is one input of three sections; with a probe trial after
/// it the page numbers them 1 to 4 (each of the demo's three was once "1.").
#[test]
fn sections_are_numbered_in_page_order_when_one_input_makes_several() {
    let dir = tempfile::tempdir().unwrap();
    let (send, recv) = stream_run(dir.path());
    let trial = probe_trial(dir.path());
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let demo = serde_json::json!({
        "generated": {},
        "path": "127.0.0.1 with 3 % of the datagrams dropped at the sender",
        "stream": {"send": read(&send), "recv": read(&recv)},
        "correlate": {"sent": {"snr": 90.0}, "received": {"snr": 88.5, "delay_s": 1.5e-6}},
    });
    let demo_json = dir.path().join("demo.json");
    std::fs::write(&demo_json, demo.to_string()).unwrap();
    let (html, r) = report(dir.path(), &[&demo_json, &trial]);
    let headings: Vec<&str> = r["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["heading"].as_str().unwrap())
        .collect();
    let demo_src = demo_json.display().to_string();
    let trial_src = trial.display().to_string();
    assert_eq!(
        headings,
        [
            format!("1. demo: correlation — {demo_src}"),
            "2. demo: stream send".to_string(),
            "3. demo: stream recv".to_string(),
            format!("4. probe trial — {trial_src}"),
        ]
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for h in ["<h2>2. demo: stream send</h2>", "<h2>3. demo: stream recv</h2>"] {
        assert!(page.contains(h), "{h} not on the page");
    }
}
