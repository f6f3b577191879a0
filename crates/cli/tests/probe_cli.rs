//! `evlbi probe server` and `evlbi probe client` as separate processes on 127.0.0.1.

mod common;

use std::process::{Child, Output};

use common::{bin, spawn_with_port};

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
    let mut cmd = bin();
    cmd.args(["probe", "server", "--bind", "127.0.0.1", "--port", "0", "--once"])
        .args(extra);
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
fn wrong_key_fails_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("good.key");
    let bad = d.path().join("bad.key");
    std::fs::write(&good, "s3cret\n").unwrap();
    std::fs::write(&bad, "guess\n").unwrap();
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
    ] {
        let o = bin().args(args).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
