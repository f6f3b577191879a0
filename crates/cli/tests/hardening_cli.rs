//! Regression tests of a security review, each against the real binary: durations (and rates)
//! that made `Duration` arithmetic panic are usage errors naming the option; output into a closed
//! pipe ends quietly (exit 141, no panic); pre-shared keys of fewer than 16 bytes are refused and
//! key files others can read are warned about; malformed addresses get precise usage errors.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, Proc, Wan};

/// Exit status of a process whose reader went away (128 + SIGPIPE, as a shell reports it).
const CLOSED_OUTPUT: i32 = 141;

/// Run `cmd` to its end, at most 30 s (a value wrongly accepted must not hang the test: a
/// receiver would listen for ever); stdin is closed.
fn run_bounded(cmd: &mut Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "{cmd:?} still running after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(mut o) = p.0.stdout.take() {
        o.read_to_end(&mut stdout).unwrap();
    }
    if let Some(mut e) = p.0.stderr.take() {
        e.read_to_end(&mut stderr).unwrap();
    }
    Output { status, stdout, stderr }
}

/// `evlbi ARGS` must exit 2 with a message containing `needle`, and without a panic.
fn assert_usage(args: &[&str], needle: &str) -> String {
    let o = run_bounded(bin().args(args));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: expected {needle:?} in: {err}");
    err
}

#[test]
fn durations_that_panicked_are_usage_errors_naming_the_option() {
    let recv = ["stream", "recv", "--listen", "127.0.0.1:0"];
    let send = [
        "stream",
        "send",
        "--to",
        "127.0.0.1:9",
        "--generate",
        "--stations",
        "Ef",
    ];
    for value in ["-1s", "1e30s", "1e300h", "-0.5ms"] {
        for opt in ["--latency", "--idle-timeout", "--max-fill", "--interval", "--duration"] {
            let arg = format!("{opt}={value}");
            let mut args = recv.to_vec();
            args.push(&arg);
            assert_usage(&args, opt);
        }
        for opt in ["--duration", "--spin", "--max-lag", "--arq-latency"] {
            let arg = format!("{opt}={value}");
            let mut args = send.to_vec();
            args.push(&arg);
            assert_usage(&args, opt);
        }
    }
    // A live-line cadence and an idle timeout of 0 are refused, not clamped.
    for opt in ["--interval=0", "--interval=0s", "--idle-timeout=0"] {
        let mut args = recv.to_vec();
        args.push(opt);
        assert_usage(&args, opt.split('=').next().unwrap());
    }
}

#[test]
fn every_command_refuses_out_of_range_durations() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    for (args, opt) in [
        (&["probe", "client", "127.0.0.1", "--spacing=-1us"][..], "--spacing"),
        (&["probe", "client", "127.0.0.1", "--spacing=1e30s"], "--spacing"),
        (
            &["probe", "client", "127.0.0.1", "--spacing", "1us", "--interval=1e30s"],
            "--interval",
        ),
        (
            &["probe", "client", "127.0.0.1", "--tcp", "--duration=-5s"],
            "--duration",
        ),
        (
            &["probe", "host-jitter", "--spacing", "16us", "--duration=1e30s"],
            "--duration",
        ),
        (&["probe", "host-jitter", "--spacing=0"], "--spacing"),
        (&["probe", "burn-cpu", "--seconds", "nan", "--parent", "1"], "--seconds"),
        (&["model", "tcp", "--rtt=-100ms", "--loss", "1%"], "--rtt"),
        (&["model", "tcp", "--rtt", "0", "--loss", "1%"], "--rtt"),
        (
            &[
                "recv",
                "--root",
                root,
                "--listen",
                "127.0.0.1:0",
                "--handshake-timeout=1e30s",
            ],
            "--handshake-timeout",
        ),
        (&["linkemu", "--a", "ns:x", "--b", "ns:y", "--delay=1e30s"], "--delay"),
        (
            &["linkemu", "--a", "ns:x", "--b", "ns:y", "--jitter-ba=-1ms"],
            "--jitter-ba",
        ),
        (
            &["linkemu", "--a", "ns:x", "--b", "ns:y", "--duration=inf"],
            "--duration",
        ),
        (
            &[
                "vdif",
                "gen",
                "--stations",
                "Ef,Wb",
                "--delay",
                "Wb=1e30s",
                "--out",
                root,
            ],
            "--delay",
        ),
        (
            &["vdif", "gen", "--stations", "Ef,Wb", "--delay", "Wb=2h", "--out", root],
            "--delay",
        ),
    ] {
        assert_usage(args, opt);
    }
}

#[test]
fn rates_that_overflow_are_usage_errors() {
    for (args, opt) in [
        (
            &[
                "stream",
                "send",
                "--to",
                "127.0.0.1:9",
                "--generate",
                "--stations",
                "Ef",
                "--rate",
                "1e300G",
            ][..],
            "--rate",
        ),
        (&["model", "wire", "--rate", "1e300G", "--payload", "8192"], "--rate"),
        (&["model", "wire", "--rate", "0.001", "--payload", "8192"], "--rate"),
        (&["probe", "client", "127.0.0.1", "--rate", "1e300G"], "--rate"),
        (&["send", "--rate", "1e300G", "x", "127.0.0.1"], "--rate"),
        (&["model", "tcp", "--rtt", "10ms", "--loss", "NaN"], "--loss"),
        (&["vdif", "gen", "--stations", "Ef", "--tone", "1e306GHz"], "--tone"),
    ] {
        assert_usage(args, opt);
    }
}

/// A 1-second, 16-frame station file in `dir`.
fn small_vdif(dir: &Path) -> PathBuf {
    let o = bin()
        .args([
            "vdif",
            "gen",
            "--stations",
            "Ef",
            "--seconds",
            "1",
            "--rate",
            "1.024M",
            "--channels",
            "1",
        ])
        .args(["--frame", "8000", "-q", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join("Ef.vdif")
}

/// Run `cmd` with its stdout (or stderr, if `stderr`) a pipe whose reader has already gone:
/// every write to it fails with EPIPE at once, no race with a reader's timing.
fn run_into_closed_pipe(cmd: &mut Command, stderr: bool) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    if stderr {
        cmd.stderr(writer).stdout(Stdio::piped());
    } else {
        cmd.stdout(writer).stderr(Stdio::piped());
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn assert_quiet_end(what: &str, o: &Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(!err.contains("Broken pipe"), "{what}: {err}");
    assert_eq!(o.status.code(), Some(CLOSED_OUTPUT), "{what}: {:?} {err}", o.status);
}

#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    let d = tempfile::tempdir().unwrap();
    let f = small_vdif(d.path());
    let f = f.to_str().unwrap();
    for args in [
        &["vdif", "inspect", f][..],
        &["vdif", "inspect", "--json", f],
        &["vdif", "stats", f],
        &["vdif", "dump", "--frames", "10", f],
        &["model", "vlbi-loss", "--loss", "Ef=1%,Wb=2%", "--frames", "1000"],
        &["model", "tcp", "--rtt", "100ms", "--loss", "0.01%"],
    ] {
        let o = run_into_closed_pipe(bin().args(args), false);
        assert_quiet_end(&format!("{args:?} with stdout closed"), &o);
    }
    // The error message of a failed run, into a closed stderr.
    let o = run_into_closed_pipe(bin().args(["vdif", "inspect", "/nonexistent/x.vdif"]), true);
    assert!(o.status.code() == Some(CLOSED_OUTPUT), "{:?}", o.status);
}

#[test]
fn long_output_through_head_ends_quietly() {
    let d = tempfile::tempdir().unwrap();
    let f = small_vdif(d.path());
    // 1000 reports of about 600 bytes: far more than a pipe holds, so `head` is surely gone
    // while evlbi still prints.
    let files = vec![f.to_str().unwrap(); 1000];
    let o = Command::new("bash")
        .args([
            "-c",
            r#""$0" vdif inspect "$@" | head -1; echo "status ${PIPESTATUS[0]}""#,
        ])
        .arg(env!("CARGO_BIN_EXE_evlbi"))
        .args(&files)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.starts_with("file "), "{out}");
    assert!(
        out.trim_end().ends_with(&format!("status {CLOSED_OUTPUT}")),
        "{out} {err}"
    );
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    // The same for a command printing line by line (one line per station and burst length).
    let stations: Vec<String> = (0..300).map(|i| format!("S{i}=1%")).collect();
    let o = Command::new("bash")
        .args(["-c", r#""$0" model vlbi-loss --frames 100 --burst 1,2,4,8 --loss "$1" | head -1; echo "status ${PIPESTATUS[0]}""#])
        .arg(env!("CARGO_BIN_EXE_evlbi"))
        .arg(stations.join(","))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        out.trim_end().ends_with(&format!("status {CLOSED_OUTPUT}")),
        "{out} {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Network namespaces whose names contain `tag`.
fn namespaces_with(tag: &str) -> Vec<String> {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains(tag))
        .map(str::to_owned)
        .collect()
}

#[test]
fn linkemu_into_a_closed_pipe_ends_quietly_and_cleans_up() {
    if let Some(why) = Wan::skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let pid = std::process::id();
    for (i, (extra, closed_stderr)) in [
        (&["--quiet"][..], false),
        (&["--quiet", "--json"], false),
        // The status lines on a closed stderr: the run stops and still removes its namespaces.
        (&[], true),
    ]
    .into_iter()
    .enumerate()
    {
        let tag = format!("evhd{i}-{pid}");
        let mut cmd = bin();
        cmd.args(["linkemu", "--a", &format!("ns:{tag}-a"), "--b", &format!("ns:{tag}-b")])
            .args(["--duration", "1500ms", "--state-dir"])
            .arg(state.path())
            .args(extra);
        let o = run_into_closed_pipe(&mut cmd, closed_stderr);
        let what = format!(
            "linkemu {extra:?}, closed {}",
            if closed_stderr { "stderr" } else { "stdout" }
        );
        assert_quiet_end(&what, &o);
        assert_eq!(
            namespaces_with(&tag),
            Vec::<String>::new(),
            "{what}: namespaces left behind"
        );
    }
}

/// A key file in `dir` holding `content`, with permission bits `mode`.
fn key_file(dir: &Path, name: &str, content: &[u8], mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn short_keys_are_usage_errors_on_every_command() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let root = root.to_str().unwrap();
    let data = d.path().join("data");
    std::fs::write(&data, b"x").unwrap();
    let data = data.to_str().unwrap();
    // 15 bytes and a newline: the newline is not key.
    for content in [&b"x"[..], b"x\n", b"0123456789abcde\n", b"\n\n  \n"] {
        let k = key_file(d.path(), "short.key", content, 0o600);
        let k = k.to_str().unwrap();
        for args in [
            &[
                "probe",
                "client",
                "127.0.0.1:1",
                "--spacing",
                "1us",
                "--count",
                "1",
                "--key-file",
                k,
            ][..],
            &[
                "probe",
                "client",
                "127.0.0.1:1",
                "--tcp",
                "--duration",
                "1s",
                "--key-file",
                k,
            ],
            &["probe", "server", "--bind", "127.0.0.1", "--port", "0", "--key-file", k],
            &["recv", "--listen", "127.0.0.1:0", "--root", root, "--key-file", k],
            &["send", data, "127.0.0.1:1", "--key-file", k],
        ] {
            let err = assert_usage(args, "at least 16");
            assert!(err.contains("head -c 32 /dev/urandom"), "{args:?}: {err}");
        }
    }
}

#[test]
fn key_files_others_can_read_are_warned_about() {
    let d = tempfile::tempdir().unwrap();
    let key = b"0123456789abcdef0123456789abcdef\n";
    for (mode, warned) in [
        (0o644, true),
        (0o640, true),
        (0o604, true),
        (0o600, false),
        (0o400, false),
    ] {
        let k = key_file(d.path(), &format!("k{mode:o}"), key, mode);
        // Nothing listens on port 1: the client reads the key, then fails to connect (exit 1).
        let o = probe_with_key(&k);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "mode {mode:o}: {err}");
        assert_eq!(
            err.contains("readable by group or others"),
            warned,
            "mode {mode:o}: {err}"
        );
        if warned {
            assert!(err.contains("chmod 600"), "{err}");
        }
    }
    // Exactly 16 bytes (plus a newline) is enough.
    let k = key_file(d.path(), "k16", b"0123456789abcdef\n", 0o600);
    let o = probe_with_key(&k);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn malformed_addresses_get_precise_usage_errors() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::write(&data, b"x").unwrap();
    let data = data.to_str().unwrap();
    let root = d.path().to_str().unwrap();
    for (args, needle) in [
        (&["send", data, "127.0.0.1:70000:5310"][..], "too many colons"),
        (
            &["send", data, "127.0.0.1:70000/x"],
            "port 70000 out of range (1..=65535)",
        ),
        (&["send", data, "127.0.0.1:0"], "out of range"),
        (&["send", data, "127.0.0.1:ssh/x"], "not a number"),
        (&["send", data, "[::1/x"], "without ']'"),
        (
            &["probe", "client", "127.0.0.1:70000:5310", "--spacing", "1us"],
            "too many colons",
        ),
        (
            &["probe", "client", "127.0.0.1:70000", "--spacing", "1us"],
            "out of range (1..=65535)",
        ),
        (&["probe", "client", "127.0.0.1:", "--spacing", "1us"], "missing port"),
        (&["probe", "client", ":5301", "--spacing", "1us"], "missing host"),
        (&["probe", "server", "--bind", "127.0.0.1:80"], "not an IP address"),
        (
            &["recv", "--root", root, "--listen", "127.0.0.1:70000"],
            "out of range (0..=65535)",
        ),
        (&["recv", "--root", root, "--listen", "70000"], "out of range"),
        (&["recv", "--root", root, "--listen", "1.2.3.4:5:6"], "too many colons"),
        (
            &["recv", "--root", root, "--listen", "localhost:5310"],
            "\"localhost\" is not an IPv4 or IPv6 address",
        ),
    ] {
        assert_usage(args, needle);
    }
}

/// A probe client with key file `k` against port 1, where nothing listens: it reads the key,
/// then fails to connect (exit 1).
fn probe_with_key(k: &Path) -> Output {
    run_bounded(
        bin()
            .args([
                "probe",
                "client",
                "127.0.0.1:1",
                "--spacing",
                "1us",
                "--count",
                "1",
                "-q",
            ])
            .arg("--key-file")
            .arg(k),
    )
}

/// A recorder whose log reader went away keeps recording: `stream recv` with its stderr a pipe
/// whose reader is already gone writes every frame and its JSON summary and exits 0 (a closed
/// stderr used to end it with 141 at its first status line, data and summary lost).
#[test]
fn a_recorder_without_a_log_reader_keeps_recording() {
    let d = tempfile::tempdir().unwrap();
    let (ef, _) = common::gen_two_stations(d.path(), &["--rate", "128M"]);
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (rx_dir, summary) = (d.path().join("rx"), d.path().join("r.json"));
    let mut child = bin()
        .args([
            "stream",
            "recv",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--idle-timeout",
            "3s",
        ])
        .arg("--out")
        .arg(&rx_dir)
        .arg("--export-json")
        .arg(&summary)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let _guard = common::Proc(child);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let o = bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{port}")])
        .arg(&ef)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut guard = _guard;
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = guard.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "receiver did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let w = &v["stations"][0]["window"];
    assert_eq!(w["written_valid"].as_u64(), Some(4000), "{v}");
    let written: Vec<_> = std::fs::read_dir(&rx_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(written.len(), 1);
    assert!(std::fs::read(&written[0]).unwrap() == std::fs::read(&ef).unwrap());
}

/// Every command reads HOST:PORT in netio's one grammar and says it the same way: the form,
/// an example, the address as given, and what is wrong with it (exit 2).
#[test]
fn every_command_reads_host_port_in_one_grammar() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::write(&data, b"x").unwrap();
    let data = data.to_str().unwrap();
    let forms = "expected HOST:PORT, e.g. 127.0.0.1:5000 or [::1]:5000";
    for (args, what) in [
        (
            &["stream", "send", "--to", "127.0.0.1:70000", data][..],
            "--to: {forms}: \"127.0.0.1:70000\": port 70000 out of range (1..=65535)",
        ),
        (
            &["stream", "send", "--to", "::1:5000", data],
            "--to: {forms}: \"::1:5000\": missing port: an IPv6 address alone (IPv6 with a port goes in brackets",
        ),
        (
            &["stream", "relay", "--listen", "127.0.0.1:0", "--to", "corr"],
            "--to: {forms}: \"corr\": missing port",
        ),
        (
            &["stream", "relay", "--listen", "127.0.0.1:0", "--to", "[::1]x"],
            "--to: {forms}: \"[::1]x\": expected ':PORT' after ']', found \"x\"",
        ),
        (
            &["send", data, "127.0.0.1:70000:5310"],
            "destination: {forms}: \"127.0.0.1:70000:5310\": too many colons",
        ),
        (
            &["send", data, "host:http/dir"],
            "destination \"host:http/dir\": {forms}: \"host:http\": port \"http\" is not a number",
        ),
        (
            &["probe", "client", "[::1", "--spacing", "1us"],
            "server: {forms}: \"[::1\": '[' without ']'",
        ),
    ] {
        assert_usage(args, &what.replace("{forms}", forms));
    }
    // Names are resolved after the syntax is checked; one that does not resolve says which
    // (.invalid never resolves, RFC 6761).
    assert_usage(
        &["stream", "send", "--to", "nowhere.invalid:5000", data],
        "--to: cannot resolve nowhere.invalid",
    );
    // Listening takes the same ADDR:PORT (port 0 allowed) inside the listen forms.
    for args in [
        &["stream", "recv", "--listen", "1.2.3.4:5:6"][..],
        &["stream", "relay", "--listen", "1.2.3.4:5:6", "--to", "127.0.0.1:9"],
        &["recv", "--root", d.path().to_str().unwrap(), "--listen", "1.2.3.4:5:6"],
    ] {
        let err = assert_usage(args, "\"1.2.3.4:5:6\": too many colons");
        assert!(
            err.contains("expected PORT, ADDR:PORT, [IPV6]:PORT, GROUP@PORT"),
            "{err}"
        );
    }
    // A transfer receiver takes no multicast group.
    assert_usage(
        &[
            "recv",
            "--root",
            d.path().to_str().unwrap(),
            "--listen",
            "239.1.2.3@5000",
        ],
        "a multicast group; this listens on a unicast address",
    );
}

/// A flag that takes bytes, a rate or a duration refuses what it cannot read and says the
/// forms it takes (exit 2).
#[test]
fn unit_flags_say_the_forms_they_take() {
    let sizes = "expected a size in bytes: 9000, 2kB, 1.5MB, 3GB, 64KiB, 1GiB";
    assert_usage(
        &["stream", "recv", "--listen", "127.0.0.1:0", "--rcvbuf", "2parsecs"],
        &format!("\"2parsecs\": unknown size unit \"parsecs\"; {sizes}"),
    );
    assert_usage(
        &[
            "probe",
            "client",
            "127.0.0.1",
            "--spacing",
            "1us",
            "--sweep",
            "sizes=1472,lots",
        ],
        &format!("\"lots\": expected a number first; {sizes}"),
    );
    assert_usage(
        &["stream", "send", "--to", "127.0.0.1:9", "x", "--rate", "fast"],
        "\"fast\": expected a number first; expected a bit rate: 512M, 4.096G",
    );
    assert_usage(
        &[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "3 fortnights",
        ],
        "unknown time unit \"fortnights\"; expected a duration: 250ns, 16us, 1.5ms, 2s",
    );
}

/// What a stream session cannot do as asked is a usage error by its type
/// (`StreamSessionError::Input`), not by the wording of a message: a looped file of 1.5 s.
#[test]
fn a_stream_input_that_cannot_be_sent_as_asked_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let (ef, _) = common::gen_two_stations(d.path(), &[]);
    let bytes = std::fs::read(&ef).unwrap();
    // VDIF 1.1.1 §3 word 2: frame length in units of 8 bytes.
    let frame = (u32::from_le_bytes(bytes[8..12].try_into().unwrap()) & 0xff_ffff) as usize * 8;
    let frames = bytes.len() / frame;
    let part = d.path().join("one-and-a-half.vdif");
    std::fs::write(&part, &bytes[..frames * 3 / 4 * frame]).unwrap();
    let err = assert_usage(
        &[
            "stream",
            "send",
            "--to",
            "127.0.0.1:9",
            "--loop",
            part.to_str().unwrap(),
        ],
        "--loop needs a file of whole seconds",
    );
    assert!(err.contains("one-and-a-half.vdif: "), "{err}");
}
