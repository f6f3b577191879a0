//! `evlbi send` / `evlbi recv` as separate processes over 127.0.0.1: a kill -9 of either side
//! and the same command again continues where it stopped, never re-sending held blocks, and the
//! result is byte-exact; usage errors exit 2.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_usage_error, bin, spawn_with_port, Proc, Wan};

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn recv(root: &Path) -> (Proc, u16) {
    let (child, port, _lines) = spawn_with_port(bin().args(["recv", "--listen", "127.0.0.1:0", "--root"]).arg(root));
    (Proc(child), port)
}

/// `evlbi send` at a modest fixed rate so the transfer lasts long enough to be interrupted.
fn send_cmd(file: &Path, port: u16, rate: &str) -> Command {
    let mut c = bin();
    c.arg("send")
        .arg(file)
        .arg(format!("127.0.0.1:{port}/scans"))
        .args(["--cc", "fixed", "--rate", rate, "--block", "1048576", "--json", "-q"]);
    c
}

/// Wait (bounded) until the receiver's resume record lists at least `blocks` blocks.
fn wait_for_blocks(record: &Path, blocks: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(bytes) = fs::read(record) {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
                let held: u64 = v["have"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|r| r[1].as_u64().unwrap_or(0) - r[0].as_u64().unwrap_or(0))
                            .sum()
                    })
                    .unwrap_or(0);
                if held >= blocks {
                    return held;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the receiver never recorded {blocks} blocks in {}", record.display());
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

const SIZE: usize = 24 << 20;

/// A source file of `SIZE` bytes named `name` and an empty receiver root.
fn fixture(name: &str, seed: u64) -> (tempfile::TempDir, tempfile::TempDir, Vec<u8>, std::path::PathBuf) {
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(SIZE, seed);
    let file = src.path().join(name);
    fs::write(&file, &data).unwrap();
    (src, root, data, file)
}

#[test]
fn kill_9_of_the_receiver_then_the_same_command_resumes() {
    let (_src, root, data, file) = fixture("ef.vdif", 11);

    let (mut r, port) = recv(root.path());
    // 24 MiB at 100 Mb/s takes ~2 s: kill the receiver once a few blocks are recorded.
    let mut s = Proc(
        send_cmd(&file, port, "100M")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let held = wait_for_blocks(&root.path().join("scans/ef.vdif.part.evlbi"), 3);
    r.0.kill().unwrap(); // SIGKILL
    r.0.wait().unwrap();
    // The sender notices (control connection gone) and fails; bounded by its own timeouts.
    let status = s.0.wait().unwrap();
    assert!(
        !status.success(),
        "the sender claimed success against a killed receiver"
    );
    assert!(
        !root.path().join("scans/ef.vdif").exists(),
        "an unverified file got its final name"
    );

    let (_r2, port) = recv(root.path());
    let out = send_cmd(&file, port, "1G").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rep = json_of(&out);
    let f = &rep["files"][0];
    let resumed = f["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= held * (1 << 20),
        "resumed {resumed} B, the record held {held} blocks"
    );
    assert_eq!(
        f["rounds"][0]["bytes"].as_u64().unwrap(),
        SIZE as u64 - resumed,
        "held blocks sent again"
    );
    assert_eq!(f["verified"], true);
    assert_eq!(fs::read(root.path().join("scans/ef.vdif")).unwrap(), data);
    assert!(!root.path().join("scans/ef.vdif.part").exists());
}

#[test]
fn kill_9_of_the_sender_then_the_same_command_resumes() {
    let (_src, root, data, file) = fixture("wb.vdif", 12);

    let (_r, port) = recv(root.path());
    let mut s = Proc(
        send_cmd(&file, port, "100M")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let record = root.path().join("scans/wb.vdif.part.evlbi");
    wait_for_blocks(&record, 3);
    s.0.kill().unwrap();
    s.0.wait().unwrap();
    // The receiver saves its record when the session breaks; the same receiver takes the retry.
    std::thread::sleep(Duration::from_millis(300));
    let held = wait_for_blocks(&record, 3);
    let out = send_cmd(&file, port, "1G").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let f = &json_of(&out)["files"][0];
    let resumed = f["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= held * (1 << 20),
        "resumed {resumed} B, the record held {held} blocks"
    );
    assert_eq!(f["rounds"][0]["bytes"].as_u64().unwrap(), SIZE as u64 - resumed);
    assert_eq!(fs::read(root.path().join("scans/wb.vdif")).unwrap(), data);
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    for args in [
        vec!["send", "/nonexistent/file.vdif", "127.0.0.1:1"],
        vec!["send", "Cargo.toml", "/no-host"],
        vec!["send", "Cargo.toml", "127.0.0.1:1", "--chunk", "10"],
        vec!["recv", "--root", "/nonexistent/dir", "--listen", "127.0.0.1:0"],
        vec!["recv", "--root", ".", "--listen", "nonsense"],
    ] {
        let out = assert_usage_error(&args);
        assert!(String::from_utf8_lossy(&out.stderr).contains("error:"), "{args:?}");
    }
    // Nobody listening: a runtime failure (1), not a usage error, naming the address.
    let out = bin().args(["send", "Cargo.toml", "127.0.0.1:1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"));
}

#[test]
fn through_linkemu_with_loss_and_delay_the_file_arrives_byte_exact() {
    if let Some(why) = Wan::skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = pattern(16 << 20, 13);
    let file = src.path().join("jb.vdif");
    fs::write(&file, &data).unwrap();
    // 400 Mb/s, 10 ms each way, 1 % random loss both ways, jumbo MTU so a chunk is one packet.
    let mut wan = Wan::start(
        "trt",
        &[
            "--rate", "400M", "--delay", "10ms", "--loss", "1%", "--seed", "3", "--mtu", "9000",
        ],
    );
    let mut r = wan.evlbi_in(&wan.b);
    r.args(["recv", "--listen", "10.77.0.2:5310", "--once", "--root"])
        .arg(root.path());
    let mut rx = Proc(r.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let mut s = wan.evlbi_in(&wan.a);
    s.arg("send").arg(&file).arg("10.77.0.2:5310/wan");
    s.args(["--rate", "400M", "--json", "-q"]);
    let out = s.output().unwrap();
    let status = rx.0.wait().unwrap();
    wan.stop();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(status.success());
    let rep = json_of(&out);
    let stream = &rep["data"];
    assert!(
        stream["loss_seen"].as_f64().unwrap() > 0.002,
        "1 % loss not seen: {stream}"
    );
    assert!(stream["retransmitted_bytes"].as_u64().unwrap() > 0);
    assert!(
        stream["rtt_min_us"].as_u64().unwrap() >= 20_000,
        "RTT below the emulated 20 ms: {stream}"
    );
    assert_eq!(rep["files"][0]["verified"], serde_json::Value::Bool(true));
    assert_eq!(fs::read(root.path().join("wan/jb.vdif")).unwrap(), data);
}

/// `evlbi send` through 127.0.0.1 with the adaptive controller and `--state-dir`: the first
/// session writes the path rate it measured for this receiver, the second starts from it (its
/// JSON says so); a planted link, a huge file and garbage in its place are refused with a
/// warning naming the file (the session starts at the default rate and succeeds), never
/// followed or believed, and replaced by a good file afterwards.
#[test]
fn the_path_rate_is_remembered_per_receiver_and_a_bad_file_is_refused() {
    let (src, root, data, file) = fixture("remember.vdif", 21);
    let (_rx, port) = recv(root.path());
    let state = tempfile::tempdir().unwrap();
    let rates = state.path().join("peer-rates.json");
    let send = |extra: &[&str]| {
        let mut c = bin();
        c.arg("send")
            .arg(&file)
            .arg(format!("127.0.0.1:{port}/r"))
            .args(["--rate", "2G", "--block", "1048576", "--json", "-q", "--state-dir"])
            .arg(state.path())
            .args(extra);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(fs::read(root.path().join("r/remember.vdif")).unwrap(), data);
        fs::remove_file(root.path().join("r/remember.vdif")).unwrap();
        (json_of(&out), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (first, _) = send(&[]);
    assert!(first["start"].is_null(), "nothing remembered yet: {}", first["start"]);
    let saved: serde_json::Value = serde_json::from_slice(&fs::read(&rates).unwrap()).unwrap();
    let entry = &saved["peers"]["127.0.0.1"];
    let rate = entry["rate_bps"].as_f64().expect("the receiver's rate was remembered");
    assert!(rate > 0.0 && entry["rtt_us"].as_u64().unwrap() > 0, "{saved}");
    let (second, _) = send(&[]);
    assert_eq!(second["start"]["from"], "remembered", "{}", second["start"]);
    assert_eq!(second["start"]["rate_bps"].as_f64(), Some(rate));
    // The operator's rate wins over the remembered one.
    let (given, _) = send(&["--start-rate", "500M"]);
    assert_eq!(given["start"]["from"], "--start-rate");
    assert_eq!(given["start"]["rate_bps"].as_f64(), Some(500e6));
    // A remembered file that cannot be believed: refused with a warning, never followed.
    let secret = src.path().join("secret.json");
    let link = r#"{"version":1,"peers":{"127.0.0.1":{"rate_bps":9e11,"rtt_us":100,"saved_unix_s":4000000000}}}"#;
    fs::write(&secret, link).unwrap();
    let huge = vec![b' '; 1 << 20];
    for (what, plant) in [
        (
            "link",
            Box::new(|p: &Path| std::os::unix::fs::symlink(&secret, p).unwrap()) as Box<dyn Fn(&Path)>,
        ),
        ("huge", Box::new(|p: &Path| fs::write(p, &huge).unwrap())),
        (
            "garbage",
            Box::new(|p: &Path| fs::write(p, b"{\"version\":1,\"peers\":[1,2").unwrap()),
        ),
        (
            "version",
            Box::new(|p: &Path| fs::write(p, b"{\"version\":7,\"peers\":{}}").unwrap()),
        ),
    ] {
        fs::remove_file(&rates).unwrap();
        plant(&rates);
        let (rep, stderr) = send(&[]);
        assert!(rep["start"].is_null(), "{what}: believed: {}", rep["start"]);
        assert!(
            stderr.contains("peer-rates.json ignored"),
            "{what}: no warning naming the file: {stderr}"
        );
        let meta = fs::symlink_metadata(&rates).unwrap();
        assert!(meta.file_type().is_file(), "{what}: not replaced by a regular file");
        assert!(fs::read(&rates).unwrap().len() < 4096, "{what}: not replaced");
    }
    assert_eq!(
        fs::read_to_string(&secret).unwrap(),
        link,
        "the link's target was written"
    );
}
