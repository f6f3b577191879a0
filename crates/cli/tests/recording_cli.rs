//! Recording the way stations and correlators do: real packets over loopback from `stream send`
//! into `stream recv --format vbs|mk6` over four directories, read back with `vdif gather`,
//! `vdif inspect vbs://`, `vdif scans`, `stream send` and `evlbi send`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{assert_usage_error, bin, spawn_with_port, Proc};
use serde_json::Value;
use testkit::SmallDisk;
use vdif::VdifHeader;

/// 128 Mb/s in 4 threads of 8000-byte frames: 500 frames/s per thread, 4000 frames in 2 s.
const FRAME: usize = 8032;
const FRAMES: u64 = 4000;

type Recv = common::StreamRecv;

/// One station (Ef) with 4 VDIF threads, 2 s from 2026-11-23T12:00:00Z, in `dir/in/Ef.vdif`.
fn generate(dir: &Path) -> PathBuf {
    let out = bin()
        .args([
            "vdif",
            "gen",
            "--stations",
            "Ef",
            "--threads",
            "4",
            "--channels",
            "8",
            "--rate",
            "128M",
        ])
        .args(["--seconds", "2", "-q", "--start", "2026-11-23T12:00:00Z", "--out"])
        .arg(dir.join("in"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir.join("in/Ef.vdif")
}

fn send(port: u16, inputs: &[&str]) {
    let out = bin()
        .args(["stream", "send", "--to", &format!("127.0.0.1:{port}")])
        .args(inputs)
        .output()
        .unwrap();
    assert!(out.status.success(), "send: {}", String::from_utf8_lossy(&out.stderr));
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

/// `dir/d0,…,dir/d3`.
fn four(dir: &Path) -> Vec<PathBuf> {
    (0..4).map(|i| dir.join(format!("d{i}"))).collect()
}

fn joined(disks: &[PathBuf]) -> String {
    disks.iter().map(|d| d.to_str().unwrap()).collect::<Vec<_>>().join(",")
}

/// `vdif inspect --json` of `input` without its name.
fn inspect(input: &str, disks: &str) -> Value {
    let out = run(&["vdif", "inspect", "--json", "--disks", disks, input]);
    assert!(
        out.status.success(),
        "inspect {input}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object_mut().unwrap().remove("file");
    v
}

/// Record `file` with `stream recv --format <layout>` over four directories of `dir`; the
/// receiver's JSON summary and the disks.
fn record(dir: &Path, file: &Path, layout: &str, extra: &[&str]) -> (Value, Vec<PathBuf>, String, i32) {
    let disks = four(dir);
    let summary = dir.join(format!("{layout}.json"));
    let joined = joined(&disks);
    let mut args = vec![
        "--format",
        layout,
        "--disks",
        &joined,
        "--scan",
        "rt_no0001",
        "--block",
        "1M",
        "--export-json",
        summary.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let rx = Recv::start(&args);
    send(rx.port, &[file.to_str().unwrap()]);
    let (status, log) = rx.wait();
    (json(&summary), disks, log, status.code().unwrap_or(-1))
}

#[test]
fn vbs_and_mk6_recordings_over_four_disks_gather_byte_identical_and_inspect_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let file = generate(dir.path());
    let sent = std::fs::read(&file).unwrap();
    let plain = inspect(file.to_str().unwrap(), "unused");
    for layout in ["vbs", "mk6"] {
        let (r, disks, log, code) = record(&dir.path().join(layout), &file, layout, &[]);
        assert_eq!(code, 0, "{layout}: {log}");
        let rec = &r["recording"];
        assert_eq!(rec["layout"], layout);
        assert_eq!(rec["scans"][0]["scan"], "rt_no0001_dsEf");
        assert_eq!(rec["scans"][0]["frames"], FRAMES, "{rec}");
        assert_eq!(rec["frames_not_written"], 0);
        for d in rec["disks"].as_array().unwrap() {
            assert!(d["blocks"].as_u64().unwrap() >= 5, "every disk works: {d}");
        }
        let url = format!("{layout}://rt_no0001_dsEf");
        let out_file = dir.path().join(format!("{layout}.vdif"));
        let g = run(&[
            "vdif",
            "gather",
            "--disks",
            &joined(&disks),
            &url,
            "-o",
            out_file.to_str().unwrap(),
            "--json",
        ]);
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        let gathered = std::fs::read(&out_file).unwrap();
        assert_eq!(gathered.len(), sent.len(), "{layout}");
        assert!(gathered == sent, "{layout}: the gathered scan differs from the input");
        let report: Value = serde_json::from_slice(&g.stdout).unwrap();
        assert_eq!(report["scan"]["missing_blocks"], 0);
        assert_eq!(inspect(&url, &joined(&disks)), plain, "{layout}: inspect differs");
        // The glob form of --disks finds the same scan.
        let glob = format!("{}/d*", dir.path().join(layout).display());
        assert_eq!(inspect(&url, &glob), plain);
    }
}

/// `got` (frames gathered from a scan) holds only frames of `sent`, in their order.
fn assert_in_order(got: &[u8], sent: &[u8], what: &str) {
    let mut at = 0;
    for (k, f) in got.chunks(FRAME).enumerate() {
        VdifHeader::parse_valid(f).unwrap_or_else(|e| panic!("{what}: frame {k}: {e}"));
        let next = sent[at..].chunks(FRAME).position(|s| s == f);
        let i = next.unwrap_or_else(|| panic!("{what}: frame {k} was never sent, or is out of order"));
        at += (i + 1) * FRAME;
    }
}

/// `vdif gather` of `url` from `disks` into `dir/g.vdif`: the bytes, and whether it found the
/// scan whole (it writes what there is, and says so, when blocks are missing).
fn gather(dir: &Path, disks: &[PathBuf], url: &str) -> (Vec<u8>, bool) {
    let out_file = dir.join("g.vdif");
    let out = run(&[
        "vdif",
        "gather",
        "--disks",
        &joined(disks),
        url,
        "-o",
        out_file.to_str().unwrap(),
    ]);
    (std::fs::read(&out_file).unwrap(), out.status.success())
}

/// A recording of `file` over `disks` as scan `scan` with 1 MiB blocks: its JSON summary, log
/// and exit code.
fn record_on(dir: &Path, file: &Path, layout: &str, disks: &[PathBuf], scan: &str) -> (Value, String, Option<i32>) {
    let summary = dir.join("r.json");
    let rx = Recv::spawn(
        false,
        &[
            "--format",
            layout,
            "--disks",
            &joined(disks),
            "--scan",
            scan,
            "--block",
            "1M",
            "--export-json",
            summary.to_str().unwrap(),
        ],
    );
    send(rx.port, &[file.to_str().unwrap()]);
    let (status, log) = rx.wait();
    (json(&summary), log, status.code())
}

/// Issue 37 (3), jive5ab issue 30: disks of mixed sizes, three of them filling during the scan
/// (small file systems of 2, 3 and 5 MiB beside a large one; 32 MB recorded in 1 MiB blocks).
/// Each is given blocks while it has room for a whole one and is then passed over — no write
/// fails, no disk leaves the set, no frame is lost —, and the scan reads back whole.
#[test]
fn disks_of_mixed_sizes_filling_mid_scan_are_left_without_loss() {
    for layout in ["vbs", "mk6"] {
        let mut small = Vec::new();
        for mib in [2u64, 3, 5] {
            match SmallDisk::mount(mib << 20) {
                Ok(d) => small.push(d),
                Err(why) => {
                    eprintln!("skipped: cannot mount a small tmpfs (needs root): {why}");
                    return;
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let file = generate(dir.path());
        let sent = std::fs::read(&file).unwrap();
        let mut disks: Vec<PathBuf> = small.iter().map(|d| d.path().join(layout)).collect();
        disks.push(dir.path().join("large"));
        let (r, log, code) = record_on(dir.path(), &file, layout, &disks, "mixed");
        assert_eq!(code, Some(0), "{layout}: {log}");
        let rec = &r["recording"];
        assert_eq!(rec["frames_not_written"], 0, "{layout}: {rec}");
        assert_eq!(rec["disks_dropped"], 0, "{layout}: {rec}");
        assert!(r["write_error"].is_null(), "{layout}: {}", r["write_error"]);
        for d in rec["disks"].as_array().unwrap() {
            assert_eq!(d["dropped"], false, "{layout}: {d}");
            assert!(
                d["blocks"].as_u64().unwrap() > 0,
                "{layout}: every disk took blocks: {d}"
            );
            assert!(d["free_bytes"].is_u64(), "{layout}: its free space is known: {d}");
            let small_one = !d["path"].as_str().unwrap().ends_with("large");
            assert_eq!(
                d["passed_over_full"].as_u64().unwrap() > 0,
                small_one,
                "{layout}: the small disks filled and were passed over, the large one never: {d}"
            );
        }
        assert_eq!(rec["scans"][0]["frames"], FRAMES, "{layout}");
        let (got, whole) = gather(dir.path(), &disks, &format!("{layout}://mixed_dsEf"));
        assert!(whole, "{layout}: blocks missing");
        assert!(got == sent, "{layout}: the scan read back is not what was sent");
    }
}

/// A disk that fails during a scan for a reason its free space does not show (here: out of
/// files, nr_inodes, with bytes to spare) leaves the set with what was in flight on it; the
/// scan goes on on the others and reads back as exactly the frames counted, in order.
#[test]
fn a_disk_that_fails_mid_scan_leaves_the_set_and_the_scan_stays_readable() {
    // Room for the root directory, the scan's directory and 2 chunk files.
    let small = match SmallDisk::mount_with("size=64m,nr_inodes=4") {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs (needs root): {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let file = generate(dir.path());
    let sent = std::fs::read(&file).unwrap();
    let mut disks = four(dir.path());
    disks[2] = small.path().to_path_buf();
    let (r, log, code) = record_on(dir.path(), &file, "vbs", &disks, "full");
    assert_eq!(code, Some(1), "a lost disk is a problem in the data: {log}");
    assert!(
        log.contains("DROPPED from the set") && log.contains("No space left"),
        "{log}"
    );
    let rec = &r["recording"];
    assert_eq!(rec["disks_dropped"], 1, "{rec}");
    for d in rec["disks"].as_array().unwrap() {
        let failed = d["path"] == disks[2].to_str().unwrap();
        assert_eq!(d["dropped"], failed, "{d}");
        assert!(d["blocks"].as_u64().unwrap() > 0, "it worked before it failed: {d}");
    }
    let written = rec["scans"][0]["frames"].as_u64().unwrap();
    let lost = rec["frames_not_written"].as_u64().unwrap();
    assert!(lost > 0 && written > FRAMES / 2, "{written} written, {lost} lost");
    assert_eq!(written + lost, FRAMES, "every frame is written or counted as lost");
    // 130 frames per 1 MiB block: what the failed disk was writing and what was in flight,
    // not every block that would have been its turn afterwards.
    assert!(lost <= 3 * 130, "the failed disk kept being given blocks: {lost} lost");
    // Read back from all four disks: exactly the frames counted, each one sent, in order.
    let (got, _) = gather(dir.path(), &disks, "vbs://full_dsEf");
    assert_eq!(got.len() as u64, written * FRAME as u64);
    assert_in_order(&got, &sent, "vbs");
    let list = run(&["vdif", "scans", "--json", "--disks", &joined(&disks)]);
    let v: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(v["scans"][0]["url"], "vbs://full_dsEf");
    assert_eq!(v["scans"][0]["bytes"], written * FRAME as u64);
}

#[test]
fn a_killed_receiver_leaves_scans_of_whole_frames() {
    for layout in ["vbs", "mk6"] {
        let dir = tempfile::tempdir().unwrap();
        let file = generate(dir.path());
        let disks = four(dir.path());
        let mut rx = Recv::start(&[
            "--format",
            layout,
            "--disks",
            &joined(&disks),
            "--scan",
            "k",
            "--block",
            "1M",
        ]);
        let port = rx.port;
        let f = file.clone();
        let sender = std::thread::spawn(move || {
            bin()
                .args([
                    "stream",
                    "send",
                    "--loop",
                    "--duration",
                    "3s",
                    "--to",
                    &format!("127.0.0.1:{port}"),
                ])
                .arg(&f)
                .output()
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(1500));
        rx.child.kill().unwrap(); // SIGKILL: the writer processes finish what they were given
        rx.child.wait().unwrap();
        sender.join().unwrap();
        // The writers end on their own once their input closes; wait for them (bounded).
        let url = format!("{layout}://k_dsEf");
        let mut info = Value::Null;
        for _ in 0..100 {
            let out = run(&["vdif", "scans", "--json", "--disks", &joined(&disks)]);
            info = serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone();
            if out.status.success() && info["truncated_blocks"] == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(info["url"], url.as_str());
        assert_eq!(
            info["truncated_blocks"], 0,
            "{layout}: a cut block says its length: {info}"
        );
        assert_eq!(info["missing_blocks"], 0, "{info}");
        let bytes = info["bytes"].as_u64().unwrap();
        assert!(
            bytes > 100 * FRAME as u64 && bytes.is_multiple_of(FRAME as u64),
            "{layout}: {bytes}"
        );
        let out = dir.path().join("g.vdif");
        run(&[
            "vdif",
            "gather",
            "--disks",
            &joined(&disks),
            &url,
            "-o",
            out.to_str().unwrap(),
        ]);
        for (i, f) in std::fs::read(&out).unwrap().chunks(FRAME).enumerate() {
            VdifHeader::parse_valid(f).unwrap_or_else(|e| panic!("{layout} frame {i}: {e}"));
        }
    }
}

#[test]
fn a_relay_tees_a_mark6_scan_and_stream_send_plays_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = generate(dir.path());
    let sent = std::fs::read(&file).unwrap();
    // Correlator side: a plain receiver. Station side: a relay teeing to four Mark6 disks.
    let corr = Recv::start(&["--out", dir.path().join("corr").to_str().unwrap()]);
    let disks = four(dir.path());
    let tee = format!("mk6:{}/d*", dir.path().display());
    for d in &disks {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut relay_cmd = bin();
    relay_cmd.args([
        "stream",
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--seq-format-in",
        "native",
    ]);
    relay_cmd.args([
        "--to",
        &format!("127.0.0.1:{}", corr.port),
        "--tee",
        &tee,
        "--scan",
        "tee_no0001",
    ]);
    let summary = dir.path().join("relay.json");
    relay_cmd.args([
        "--block",
        "1M",
        "--idle-timeout",
        "3s",
        "-q",
        "--export-json",
        summary.to_str().unwrap(),
    ]);
    let (child, port, _log) = spawn_with_port(&mut relay_cmd);
    let mut relay = Proc(child);
    send(port, &[file.to_str().unwrap()]);
    wait_bounded(&mut relay.0);
    let r = json(&summary);
    let rec = &r["tee"]["recording"];
    assert_eq!(rec["scans"][0]["scan"], "tee_no0001_dsEf", "{r}");
    assert_eq!(rec["scans"][0]["frames"], FRAMES);
    corr.wait();
    // Play the tee's scan back to a new receiver: it arrives as the input was.
    let rx_dir = dir.path().join("again");
    let again = Recv::start(&["--out", rx_dir.to_str().unwrap()]);
    let glob = format!("{}/d*", dir.path().display());
    send(again.port, &["--disks", &glob, "mk6://tee_no0001_dsEf"]);
    again.wait();
    let f = std::fs::read_dir(&rx_dir).unwrap().next().unwrap().unwrap().path();
    assert!(std::fs::read(f).unwrap() == sent, "played back ≠ recorded input");
}

/// Wait for a process's end (bounded).
fn wait_bounded(child: &mut std::process::Child) {
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(40), "did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn evlbi_send_lands_a_scan_as_one_verified_file_or_as_it_lies() {
    let dir = tempfile::tempdir().unwrap();
    let file = generate(dir.path());
    let sent = std::fs::read(&file).unwrap();
    let (_, disks, log, code) = record(&dir.path().join("rec"), &file, "vbs", &[]);
    assert_eq!(code, 0, "{log}");
    let root = dir.path().join("inbox");
    std::fs::create_dir_all(&root).unwrap();
    let mut srv = bin();
    srv.args(["recv", "--listen", "127.0.0.1:0", "--root", root.to_str().unwrap()]);
    let (child, port, _log) = spawn_with_port(&mut srv);
    let _srv = Proc(child);
    let dest = format!("127.0.0.1:{port}/exp");
    let url = "vbs://rt_no0001_dsEf";
    let out = run(&["send", "--disks", &joined(&disks), url, &dest, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["files"][0]["verified"], true, "{r}");
    assert_eq!(r["files"][0]["source"], url);
    assert!(std::fs::read(root.join("exp/rt_no0001_dsEf.vdif")).unwrap() == sent);
    let out = run(&[
        "send",
        "--keep-layout",
        "--disks",
        &joined(&disks),
        url,
        &format!("127.0.0.1:{port}/raw"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for d in ["d0", "d1", "d2", "d3"] {
        assert!(root.join("raw").join(d).join("rt_no0001_dsEf").is_dir(), "{d}");
    }
    let again = dir.path().join("again.vdif");
    let glob = format!("{}/raw/*", root.display());
    let g = run(&["vdif", "gather", "--disks", &glob, url, "-o", again.to_str().unwrap()]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    assert!(
        std::fs::read(again).unwrap() == sent,
        "the layout sent as it lay reads back the same"
    );
}

#[test]
fn recording_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let base = ["stream", "recv", "--listen", "127.0.0.1:0"];
    let with = |extra: &[&str]| -> Vec<String> { base.iter().chain(extra).map(|s| s.to_string()).collect() };
    for extra in [
        &["--format", "vbs", "--disks", d][..],
        &["--format", "mk6", "--disks", d, "--scan", "a.b"],
        &["--format", "vbs", "--disks", d, "--scan", "x", "--out", d],
        &["--disks", d, "--scan", "x"],
        &["--format", "mk6", "--disks", d, "--scan", "x", "--block", "3G"],
    ] {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_usage_error(&args);
    }
    assert_usage_error(&["vdif", "gather", "nothing", "-o", "x.vdif"]);
    assert_usage_error(&["vdif", "stats", "--disks", d, "vbs://../etc"]);
    // inspect reports each input that fails (exit 1), the bad name said.
    let bad = run(&["vdif", "inspect", "--disks", d, "vbs://../etc"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("scan name"));
    let nf = run(&["vdif", "inspect", "--disks", d, "vbs://absent"]);
    assert_eq!(nf.status.code(), Some(1), "{}", String::from_utf8_lossy(&nf.stderr));
    assert!(String::from_utf8_lossy(&nf.stderr).contains("not found"));
}

/// Issue 28 (1): a directory symlink planted at a vbs scan's directory name on two of four
/// disks (`DISK/rt_no0001_dsEf -> /elsewhere`) and a file symlink at a Mark6 scan's name.
/// Before, `stream recv --format vbs` wrote all 9 of its chunks on those disks into the link's
/// target and said nothing (exit 0). Now a name held by anything on any disk — a link too — is
/// taken: the recording gets the next free name (`rt_no0001_dsEfa`, as jive5ab names a repeated
/// scan), nothing reaches the target, and no frame is lost. (A link planted after that look
/// fails the disk instead: the writer's own guard, tested in recording's scan_files.)
#[test]
fn a_link_planted_at_a_scan_name_receives_nothing() {
    for layout in ["vbs", "mk6"] {
        let dir = tempfile::tempdir().unwrap();
        let file = generate(dir.path());
        let outside = dir.path().join("elsewhere");
        std::fs::create_dir_all(&outside).unwrap();
        let disks = four(&dir.path().join(layout));
        for (i, d) in disks.iter().enumerate() {
            std::fs::create_dir_all(d).unwrap();
            if i % 2 == 0 {
                let target = if layout == "vbs" {
                    outside.clone()
                } else {
                    outside.join(format!("victim{i}"))
                };
                std::os::unix::fs::symlink(&target, d.join("rt_no0001_dsEf")).unwrap();
            }
        }
        let (r, _, log, code) = record(&dir.path().join(layout), &file, layout, &[]);
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "{layout}: a planted link received data"
        );
        assert_eq!(code, 0, "{layout}: {log}");
        let rec = &r["recording"];
        assert_eq!(rec["scans"][0]["scan"], "rt_no0001_dsEfa", "{layout}: {rec}");
        assert_eq!(rec["scans"][0]["frames"], FRAMES, "{layout}: {rec}");
        assert_eq!(rec["disks_dropped"], 0, "{layout}: {rec}");
        for (i, d) in disks.iter().enumerate() {
            let linked = d.join("rt_no0001_dsEf").is_symlink();
            assert_eq!(
                linked,
                i % 2 == 0,
                "{layout}: the links are left alone, no other name made"
            );
            assert!(d.join("rt_no0001_dsEfa").exists(), "{layout}: disk {i} has the scan");
        }
    }
}
