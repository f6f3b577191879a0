//! The shared flags over the real binary and loopback: `--json` prints the JSON result on stdout,
//! `--export-json FILE` writes the same JSON to FILE (the text view may still go to stdout),
//! `--out` names produced data only; the old spellings (`--out FILE` for the JSON, `stream recv
//! --json FILE`) still work, hidden from --help, with a note on stderr.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use common::{assert_usage_error, bin, gen_two_stations, port_from_stderr, Proc};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

#[track_caller]
fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn file_json(p: &Path) -> Value {
    let text = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

#[track_caller]
fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", String::from_utf8_lossy(&o.stdout)))
}

/// JSON Lines: one value per line.
fn lines_json(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[track_caller]
fn assert_note(o: &Output, old: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("`{old}")) && err.contains("deprecated") && err.contains("--export-json"),
        "no deprecation note for {old}: {err}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `args` with `--json --export-json F`: stdout and F hold the same JSON. Then with
/// `--export-json G` alone: stdout is the text view (not JSON) and G holds JSON. Both values.
fn json_and_export(dir: &Path, name: &str, args: &[&str]) -> (Value, Value) {
    let (f, g) = (
        dir.join(format!("{name}-both.json")),
        dir.join(format!("{name}-file.json")),
    );
    let o = bin()
        .args(args)
        .args(["--json", "--export-json"])
        .arg(&f)
        .output()
        .unwrap();
    ok(&o, name);
    let printed = stdout_json(&o);
    assert_eq!(printed, file_json(&f), "{name}: --export-json differs from --json");
    let o = bin().args(args).arg("--export-json").arg(&g).output().unwrap();
    ok(&o, name);
    assert!(
        serde_json::from_slice::<Value>(&o.stdout).is_err() && !o.stdout.is_empty(),
        "{name}: --export-json alone should leave the text view on stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    (printed, file_json(&g))
}

#[test]
fn vdif_gen_and_inspect_export_what_they_print() {
    let d = tempfile::tempdir().unwrap();
    let (ef, wb) = gen_two_stations(d.path(), &["--rate", "32M"]);
    let (a, b) = json_and_export(d.path(), "inspect", &["vdif", "inspect", s(&ef)]);
    assert_eq!(a, b, "inspect is deterministic");
    assert_eq!(a["station"], "Ef");
    // Several files: an array either way.
    let (a, _) = json_and_export(d.path(), "inspect2", &["vdif", "inspect", s(&ef), s(&wb)]);
    assert_eq!(a.as_array().map(Vec::len), Some(2));
    let (a, b) = json_and_export(d.path(), "stats", &["vdif", "stats", s(&wb)]);
    assert_eq!(a, b);
    let (a, b) = json_and_export(
        d.path(),
        "correlate",
        // 50 frames hold no fringe above the default S/N 7 (exit 1); this checks the JSON only.
        &[
            "vdif",
            "correlate",
            "--fft",
            "64",
            "--max-frames",
            "50",
            "--min-snr",
            "0",
            s(&ef),
            s(&wb),
        ],
    );
    assert_eq!(a, b);
    // vdif gen: --out is the directory of the data, --export-json the result.
    let out = d.path().join("gen");
    let (a, b) = json_and_export(
        d.path(),
        "gen",
        &[
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
            s(&out),
        ],
    );
    assert!(out.join("Ef.vdif").is_file());
    assert_eq!(a["stations"], b["stations"]);
}

#[test]
fn models_export_what_they_print() {
    let d = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("wire", &["model", "wire", "--rate", "4.096G", "--payload", "8192"][..]),
        (
            "tcp",
            &["model", "tcp", "--rtt", "100ms", "--loss", "0.01%", "--target", "1G"],
        ),
        (
            "vlbi-loss",
            &[
                "model",
                "vlbi-loss",
                "--loss",
                "Ef=1%,Wb=0.1%",
                "--burst",
                "1,4",
                "--frames",
                "20000",
            ],
        ),
    ] {
        let (a, b) = json_and_export(d.path(), name, args);
        assert_eq!(a, b, "{name}");
    }
}

#[test]
fn json_is_a_switch_and_the_old_spellings_collide_with_the_new() {
    // A value after --json is no file (except stream recv's old form).
    let o = assert_usage_error(&["model", "wire", "--rate", "1G", "--payload", "1000", "--json", "r.json"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("r.json"));
    assert_usage_error(&["model", "wire", "--rate", "1G", "--payload", "1000", "--export-json"]);
    // Old and new spelling at once: which file? A usage error.
    assert_usage_error(&[
        "probe",
        "client",
        "127.0.0.1",
        "--rate",
        "1G",
        "--out",
        "a",
        "--export-json",
        "b",
    ]);
    assert_usage_error(&["send", "x", "127.0.0.1", "--out", "a", "--export-json", "b"]);
    assert_usage_error(&[
        "stream",
        "send",
        "--to",
        "127.0.0.1:9",
        "x",
        "--out",
        "a",
        "--export-json",
        "b",
    ]);
    assert_usage_error(&["stream", "recv", "--listen", "0", "--json", "a", "--export-json", "b"]);
    // `report --out` and `vdif gen --out` stay the data they produce.
    assert_usage_error(&["report", "r.json", "--out", "r.json"]);
}

#[test]
fn help_shows_the_vocabulary_and_hides_the_old_spellings() {
    for cmd in [
        &["probe", "client"][..],
        &["probe", "host-jitter"],
        &["probe", "server"],
        &["stream", "send"],
        &["stream", "recv"],
        &["send"],
        &["recv"],
        &["vdif", "gen"],
        &["vdif", "inspect"],
        &["vdif", "stats"],
        &["vdif", "correlate"],
        &["model", "wire"],
        &["model", "tcp"],
        &["model", "vlbi-loss"],
        &["linkemu"],
        &["report"],
    ] {
        let o = bin().args(cmd).arg("--help").output().unwrap();
        ok(&o, "help");
        let help = String::from_utf8_lossy(&o.stdout);
        let options: Vec<&str> = help
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with('-'))
            .collect();
        assert!(options.iter().any(|l| l.starts_with("--json")), "{cmd:?}: {help}");
        assert!(
            options.iter().any(|l| l.starts_with("--export-json <FILE>")),
            "{cmd:?}: {help}"
        );
        // --out only where it names produced data.
        let out = options
            .iter()
            .any(|l| l.starts_with("--out") || l.starts_with("-o, --out"));
        let data_out = matches!(cmd, ["vdif", "gen"] | ["stream", "recv"] | ["report"]);
        assert_eq!(out, data_out, "{cmd:?}: {help}");
    }
}

#[test]
fn quiet_and_fps_are_one_flag_each_with_one_rule() {
    // -q/--quiet: one declaration (shared_args::QuietArg), so the same short form and the same
    // words in every command that has it.
    for cmd in [
        &["probe", "client"][..],
        &["stream", "send"],
        &["stream", "recv"],
        &["stream", "relay"],
        &["vdif", "gen"],
        &["vdif", "gather"],
        &["linkemu"],
    ] {
        let o = bin().args(cmd).arg("--help").output().unwrap();
        ok(&o, "help");
        // Words only: clap puts a long option's help on the next line.
        let help = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(help.matches("--quiet").count(), 1, "{cmd:?}: {help}");
        assert!(
            help.contains("-q, --quiet No live lines or progress bar"),
            "{cmd:?}: {help}"
        );
    }
    // --fps: one parser (a FrameRate, 1 to 2^24) wherever it is taken; vdif inspect once took
    // any u32 and let 0 pass as "unknown".
    let d = tempfile::tempdir().unwrap();
    let (ef, _) = gen_two_stations(d.path(), &["--rate", "32M"]);
    for bad in ["0", "16777217", "x"] {
        let o = assert_usage_error(&["vdif", "inspect", "--fps", bad, s(&ef)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--fps"), "{bad}: {err}");
        assert_usage_error(&["stream", "recv", "--listen", "127.0.0.1:0", "--fps", bad]);
    }
    let o = run(&["vdif", "inspect", "--json", "--fps", "500", s(&ef)]);
    ok(&o, "inspect --fps 500");
    assert_eq!(stdout_json(&o)["station"], "Ef");
}

/// A server-like process on 127.0.0.1:0 whose stdout is kept (read as it comes, so that a
/// long JSON line cannot fill the pipe and hold the process up): the port from its stderr.
fn spawn_keeping_stdout(cmd: &mut Command) -> (Running, u16, Receiver<String>) {
    // In a Proc at once: killed on drop, whichever way this function leaves.
    let mut child = Proc(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let mut stdout = child.0.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    match port_from_stderr(&mut child.0, "127.0.0.1") {
        Some((port, rx)) => (Running(child, Some(stdout)), port, rx),
        None => panic!("no address on stderr within 10 s"),
    }
}

/// A process started by [`spawn_keeping_stdout`] and the reader of its stdout.
struct Running(Proc, Option<std::thread::JoinHandle<String>>);

/// Wait (bounded) for a process to exit by itself; its stdout.
fn finish(mut p: Running) -> (std::process::ExitStatus, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(st) = p.0 .0.try_wait().unwrap() {
            return (st, p.1.take().unwrap().join().unwrap());
        }
        assert!(std::time::Instant::now() < deadline, "process did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn probe_client_and_server() {
    let d = tempfile::tempdir().unwrap();
    let lines = d.path().join("server.jsonl");
    let (server, port, _log) = spawn_keeping_stdout(
        bin()
            .args([
                "probe",
                "server",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--sessions",
                "3",
                "--json",
            ])
            .arg("--export-json")
            .arg(&lines),
    );
    let addr = format!("127.0.0.1:{port}");
    let client = [
        "probe",
        "client",
        &addr,
        "--size",
        "1472",
        "--spacing",
        "20us",
        "--count",
        "2000",
    ];
    let (a, b) = json_and_export(d.path(), "probe", &client);
    assert_eq!(a["params"]["count"], 2000);
    assert_eq!(b["params"]["count"], 2000);
    // The old --out FILE: still the JSON result, with a note.
    let old = d.path().join("old.json");
    let o = bin().args(client).args(["-q", "--out", s(&old)]).output().unwrap();
    ok(&o, "probe client --out");
    assert_note(&o, "--out");
    assert_eq!(file_json(&old)["params"]["count"], 2000);
    // The server: one line per session on stdout and the same lines in its file.
    let (st, printed) = finish(server);
    assert!(st.success());
    let printed = lines_json(&printed);
    assert_eq!(printed.len(), 3);
    assert_eq!(printed, lines_json(&std::fs::read_to_string(&lines).unwrap()));
    assert_eq!(printed[0]["expected_packets"], 2000);
}

#[test]
fn probe_host_jitter_old_out() {
    let d = tempfile::tempdir().unwrap();
    let args = ["probe", "host-jitter", "--spacing", "50us", "--duration", "50ms"];
    let (a, b) = json_and_export(d.path(), "jitter", &args);
    assert_eq!(a["spacing_ns"], 50_000);
    assert_eq!(b["spacing_ns"], 50_000);
    let old = d.path().join("old.json");
    let o = run(&[&args[..], &["-q", "--out", s(&old)][..]].concat());
    ok(&o, "host-jitter --out");
    assert_note(&o, "--out");
    assert_eq!(file_json(&old)["spacing_ns"], 50_000);
}

/// `stream recv` with `recv_args` and a `stream send` of the two stations with `send_args`:
/// both outputs.
fn stream_pair(
    files: &[&Path],
    recv_args: &[&str],
    send_args: &[&str],
) -> (Output, (std::process::ExitStatus, String)) {
    let (rx, port, log) = spawn_keeping_stdout(
        bin()
            .args([
                "stream",
                "recv",
                "--listen",
                "127.0.0.1:0",
                "--idle-timeout",
                "3s",
                "-q",
            ])
            .args(recv_args),
    );
    let o = bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{port}")])
        .args(files)
        .args(send_args)
        .output()
        .unwrap();
    ok(&o, "stream send");
    let r = finish(rx);
    let log: Vec<String> = log.try_iter().collect();
    assert!(r.0.success(), "stream recv: {}", log.join("\n"));
    (o, r)
}

#[test]
fn stream_send_and_recv() {
    let d = tempfile::tempdir().unwrap();
    let (ef, wb) = gen_two_stations(d.path(), &["--rate", "32M"]);
    let (rj, sj) = (d.path().join("recv.json"), d.path().join("send.json"));
    let rx_dir = d.path().join("rx");
    let (tx, (_, rx_stdout)) = stream_pair(
        &[ef.as_path(), wb.as_path()],
        &["--out", s(&rx_dir), "--json", "--export-json", s(&rj)],
        &["--json", "--export-json", s(&sj)],
    );
    let sent = stdout_json(&tx);
    assert_eq!(sent, file_json(&sj));
    assert_eq!(sent["stations"].as_array().map(Vec::len), Some(2));
    let received: Value = serde_json::from_str(&rx_stdout).unwrap();
    assert_eq!(received, file_json(&rj));
    assert_eq!(received["stations"].as_array().map(Vec::len), Some(2));
    // --out of stream recv is the recordings.
    assert!(std::fs::read_dir(&rx_dir).unwrap().count() >= 2);

    // The old spellings: recv --json FILE and send --out FILE write the JSON files, print no
    // JSON on stdout, and say what to use instead.
    let (rj, sj) = (d.path().join("recv-old.json"), d.path().join("send-old.json"));
    let (tx, (_, rx_stdout)) = stream_pair(&[ef.as_path()], &["--json", s(&rj)], &["--out", s(&sj)]);
    assert_note(&tx, "--out");
    assert!(tx.stdout.is_empty(), "{}", String::from_utf8_lossy(&tx.stdout));
    assert_eq!(file_json(&sj)["stations"].as_array().map(Vec::len), Some(1));
    assert!(rx_stdout.is_empty(), "{rx_stdout}");
    assert_eq!(file_json(&rj)["stations"].as_array().map(Vec::len), Some(1));
}

#[test]
fn stream_recv_old_json_file_says_so() {
    // The note comes at parse time, before anything runs (here: a usage error after it).
    let o = run(&[
        "stream",
        "recv",
        "--listen",
        "0",
        "--json",
        "old.json",
        "--arq",
        "--seq-format",
        "none",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_note(&o, "--json old.json");
}

#[test]
fn send_and_recv() {
    let d = tempfile::tempdir().unwrap();
    let (root, file) = (d.path().join("root"), d.path().join("scan.bin"));
    std::fs::create_dir(&root).unwrap();
    std::fs::write(&file, vec![7u8; 300_000]).unwrap();
    let recv = |lines: &Path| {
        spawn_keeping_stdout(
            bin()
                .args([
                    "recv",
                    "--listen",
                    "127.0.0.1:0",
                    "--once",
                    "--overwrite",
                    "--json",
                    "--root",
                ])
                .arg(&root)
                .arg("--export-json")
                .arg(lines),
        )
    };
    let send = |port: u16, extra: &[&str]| {
        bin()
            .arg("send")
            .arg(&file)
            .arg(format!("127.0.0.1:{port}"))
            .args([
                "--cc", "fixed", "--rate", "200M", "--chunk", "8192", "--block", "1M", "-q",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let (lines, sj) = (d.path().join("recv.jsonl"), d.path().join("send.json"));
    let (rx, port, _log) = recv(&lines);
    let o = send(port, &["--json", "--export-json", s(&sj)]);
    ok(&o, "send");
    let sent = stdout_json(&o);
    assert_eq!(sent, file_json(&sj));
    assert_eq!(sent["ok"], true);
    let (st, printed) = finish(rx);
    assert!(st.success());
    let printed = lines_json(&printed);
    assert_eq!(printed.len(), 1);
    assert_eq!(printed[0]["verified"], true);
    assert_eq!(printed, lines_json(&std::fs::read_to_string(&lines).unwrap()));

    // --export-json alone: the summary text on stdout. The old --out FILE: still the JSON.
    for (i, extra) in [&["--export-json"][..], &["--out"]].into_iter().enumerate() {
        let (lines, f) = (
            d.path().join(format!("r{i}.jsonl")),
            d.path().join(format!("s{i}.json")),
        );
        let (rx, port, _log) = recv(&lines);
        let o = send(port, &[extra, &[s(&f)][..]].concat());
        ok(&o, "send");
        assert!(String::from_utf8_lossy(&o.stdout).contains("verified"));
        if extra == ["--out"] {
            assert_note(&o, "--out");
        }
        assert_eq!(file_json(&f)["ok"], true);
        assert!(finish(rx).0.success());
    }
}

#[test]
fn report_exports_what_it_prints() {
    let d = tempfile::tempdir().unwrap();
    let (_server, port, _log) =
        spawn_keeping_stdout(bin().args(["probe", "server", "--bind", "127.0.0.1", "--port", "0", "--once"]));
    let r = d.path().join("r.json");
    let o = run(&[
        "probe",
        "client",
        &format!("127.0.0.1:{port}"),
        "--count",
        "1000",
        "--spacing",
        "20us",
        "-q",
        "--export-json",
        s(&r),
    ]);
    ok(&o, "probe client");
    let page = d.path().join("page.html");
    let (a, b) = json_and_export(d.path(), "report", &["report", s(&r), "-o", s(&page)]);
    assert!(page.is_file());
    assert_eq!(a["sections"], b["sections"]);
}
