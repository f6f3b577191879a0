//! Issue 36 against `evlbi serve` over real sockets and files: a station's recording cannot be
//! destroyed or its daemon crashed by one statement — `scan_set` past the end then
//! `data_check?`, `disk2file` onto a recording, a copy of what is no VDIF —, frames that reached
//! the daemon but no disk are loss where the FS and the operator look, and the start-up refuses
//! disk patterns and peer lists that would open the station up.

// unsafe: kill(2) of the daemons the tests started (SIGTERM), and setrlimit(2) in the children
// run with a bounded address space.
#![allow(unsafe_code)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::vsi::{frames_of, sent, Serve, Vsi};
use common::{backend_sim, bin, free_udp_port, http_get};
use vsis::ReturnCode;

/// A vbs recording of two seconds of one station (128 Mb/s, 8032-byte frames: 32 128 000
/// bytes, from 23:17:10 UTC), as `<root>/disk0/<scan>/<scan>.00000000`; its bytes.
fn recording(root: &Path, scan: &str) -> Vec<u8> {
    let gen = root.join("gen");
    let out = bin()
        .args([
            "vdif",
            "gen",
            "--stations",
            "Ef",
            "--rate",
            "128M",
            "--seconds",
            "2",
            "-q",
        ])
        .args(["--start", "2026-11-23T23:17:10Z", "--out"])
        .arg(&gen)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = root.join("disk0").join(scan);
    std::fs::create_dir_all(&dir).unwrap();
    let chunk = dir.join(format!("{scan}.00000000"));
    std::fs::rename(gen.join("Ef.vdif"), &chunk).unwrap();
    std::fs::remove_dir_all(gen).unwrap();
    std::fs::read(chunk).unwrap()
}

/// SIGTERM to the daemon; whether it exited (status 0) within 20 s.
fn terminated_cleanly(serve: &mut Serve) -> Option<std::process::ExitStatus> {
    // SAFETY: kill(2) on the PID of a child we started and have not reaped.
    unsafe { libc::kill(serve.proc.0.id() as libc::pid_t, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(st)) = serve.proc.0.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Issue 36, item 2: `scan_set = SCAN : +40000000` on a 32 MB scan, a start after the end, times
/// that are no time of day or lie outside the data were taken with 0, and the next `data_check?`
/// panicked the connection thread (`min > max`): the FS was dropped unanswered and SIGTERM no
/// longer stopped `evlbi serve`. Now each is refused with 8 and the numbers (jive5ab refuses only
/// a start before the scan or an end after it, with the same words; evlbi refuses an empty or
/// reversed range too), the pointer stays where it was, `data_check?` answers, and SIGTERM stops
/// the daemon with status 0.
#[test]
fn scan_set_past_the_end_is_refused_data_check_answers_and_sigterm_stops_the_daemon() {
    let root = tempfile::tempdir().unwrap();
    let bytes = recording(root.path(), "conc1");
    assert_eq!(bytes.len(), 32_128_000);
    let mut serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("set_disks = {} ;", root.path().join("disk0").display()));
    fs.ok("scan_set = conc1 : +1000000 : -1000000 ;");
    let set = fs.ok("scan_set? ;");
    for bad in [
        "scan_set = conc1 : +40000000 ;",
        "scan_set = conc1 : 23h17m20s : 23h17m14s ;",
        "scan_set = conc1 : 23h17m11s : 23h17m10.5s ;",
        "scan_set = conc1 : 99h99m99s ;",
        "scan_set = conc1 : 00h00m00s ;",
        "scan_set = conc1 : +100 : -32127950 ;",
        "scan_set = conc1 : +32128000 ;",
        "scan_set = conc1 : : +40000000 ;",
        "scan_set = conc1 : 25h : ;",
    ] {
        let r = fs.ask(bad);
        eprintln!("{bad} -> {r}");
        assert_eq!(r.code, ReturnCode::BadParameter, "{bad} -> {r}");
        let said = r.fields.join(" : ");
        assert!(
            said.contains("out of bound") || said.contains("only relative byte numbers"),
            "{bad} -> {r}"
        );
        assert_eq!(fs.ok("scan_set? ;"), set, "{bad} moved the pointer");
        // The connection lives on, and the pointer still reads.
        assert_eq!(fs.ok("data_check? ;")[0], "VDIF");
    }
    // Times inside the data still set the range, and data_check? reads where it starts.
    fs.ok("scan_set = conc1 : 23h17m11s : +0.5s ;");
    assert_eq!(fs.ok("scan_set? ;")[2..], ["16064000", "24096000"]);
    let dc = fs.ok("data_check? ;");
    assert_eq!(dc[..2], ["VDIF", "2026y327d23h17m11.0000s"], "{dc:?}");
    assert_eq!(fs.ok("version? ;")[0], "evlbi");
    drop(fs);
    let status = terminated_cleanly(&mut serve);
    assert!(status.is_some_and(|s| s.success()), "SIGTERM: {status:?}");
    // Not a byte of the recording changed.
    let now = std::fs::read(root.path().join("disk0/conc1/conc1.00000000")).unwrap();
    assert!(now == bytes);
}

/// Ask `disk2file?` (bounded, 60 s) until the copy is over.
fn until_copied(fs: &mut Vsi) {
    let t0 = Instant::now();
    while fs.ok("disk2file? ;")[0] == "active" {
        assert!(t0.elapsed() < Duration::from_secs(60), "disk2file still active");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 36, item 3: `scan_set = conc1 ; disk2file = <disk>/conc1/conc1.00000000 : : : w ;`
/// truncated the 32 MB recording to 0 bytes before reading it, and naming another scan's chunk
/// overwrote that scan. Now a copy never writes into a recording: a FlexBuff chunk name, a file
/// of the scan being read under any other name (here a `--root` that is a link to the scan's
/// directory), a Mark6 scan file are refused with 4 and why, every byte of them kept; onto
/// other files the modes are jive5ab's — `n` a new file (an existing one refused), `w` replaces,
/// `a` appends — and the reply says what `w` and `a` did to a file that held data.
#[test]
fn disk2file_never_writes_into_a_recording_and_says_what_its_mode_did() {
    let root = tempfile::tempdir().unwrap();
    let conc1 = recording(root.path(), "conc1");
    let disk = root.path().join("disk0");
    let other_dir = disk.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    std::fs::write(other_dir.join("other.00000000"), &conc1[..8032 * 125]).unwrap();
    // A Mark6 scan's file starts with its sync word (0xfeed6666, little-endian).
    let mut mk6 = 0xfeed_6666u32.to_le_bytes().to_vec();
    mk6.extend([0x5a; 4092]);
    std::fs::write(disk.join("m6scan"), &mk6).unwrap();
    let alias = tempfile::tempdir().unwrap();
    let via = alias.path().join("via");
    std::os::unix::fs::symlink(disk.join("conc1"), &via).unwrap();
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &["--root", via.to_str().unwrap()]);
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("set_disks = {} ;", disk.display()));
    fs.ok("scan_set = conc1 ;");
    let files: [(PathBuf, &[u8], &str); 4] = [
        (
            disk.join("conc1/conc1.00000000"),
            &conc1,
            "is a chunk of a FlexBuff recording",
        ),
        (
            other_dir.join("other.00000000"),
            &conc1[..8032 * 125],
            "is a chunk of a FlexBuff recording",
        ),
        (via.join("conc1.00000000"), &conc1, "is a file of the scan being copied"),
        (disk.join("m6scan"), &mk6, "is a Mark6 recording"),
    ];
    for (path, bytes, why) in &files {
        for mode in ["w", "a", "n"] {
            let r = fs.ask(&format!("disk2file = {} : : : {mode} ;", path.display()));
            eprintln!("{} {mode} -> {r}", path.display());
            assert_eq!(r.code, ReturnCode::Failed, "{} {mode} -> {r}", path.display());
            let said = r.fields.join(" : ");
            assert!(
                said.contains(why) || (mode == "n" && said.contains("exists already")),
                "{r}"
            );
            let now = std::fs::read(path).unwrap();
            assert!(
                now == *bytes,
                "{} ({mode}) changed: {} bytes now",
                path.display(),
                now.len()
            );
        }
    }
    // jive5ab's modes onto a file that is no recording.
    let copy = out.join("conc1.copy");
    let start = |fs: &mut Vsi, mode: &str| {
        let r = fs.ask(&format!("disk2file = {} : : : {mode} ;", copy.display()));
        eprintln!("{mode} -> {r}");
        r
    };
    let r = start(&mut fs, "n");
    assert_eq!((r.code, r.fields.len()), (ReturnCode::Initiated, 0), "{r}");
    until_copied(&mut fs);
    assert!(std::fs::read(&copy).unwrap() == conc1);
    let r = start(&mut fs, "n");
    assert_eq!(r.code, ReturnCode::Failed, "{r}");
    assert!(
        r.fields[0].contains("exists already") && r.fields[0].contains("mode n"),
        "{r}"
    );
    let r = start(&mut fs, "w");
    assert_eq!(r.code, ReturnCode::Initiated, "{r}");
    assert_eq!(r.fields[0], "w");
    assert!(r.fields[1].contains("replacing the 32128000 bytes"), "{r}");
    until_copied(&mut fs);
    assert!(std::fs::read(&copy).unwrap() == conc1);
    let r = start(&mut fs, "a");
    assert_eq!(r.code, ReturnCode::Initiated, "{r}");
    assert_eq!(r.fields[0], "a");
    assert!(r.fields[1].contains("appending to the 32128000 bytes"), "{r}");
    until_copied(&mut fs);
    let twice = std::fs::read(&copy).unwrap();
    assert!(twice.len() == 2 * conc1.len() && twice[..conc1.len()] == conc1[..] && twice[conc1.len()..] == conc1[..]);
    drop(fs);
    let _ = serve.stop();
    for (path, bytes, _) in &files {
        assert!(std::fs::read(path).unwrap() == **bytes, "{} changed", path.display());
    }
}

/// Issue 36, item 5: `disk2file` of a scan that is not VDIF copied it without a word (a 1 TiB
/// sparse file named as a chunk filled the disk). Now the range is checked as `scan_check?`
/// checks it and refused unless it holds VDIF or Mark5B frames (jive5ab copies both); nothing is
/// created.
#[test]
fn disk2file_copies_vdif_and_mark5b_and_refuses_anything_else() {
    let root = tempfile::tempdir().unwrap();
    let disk = root.path().join("disk0");
    let junk = disk.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    // 256 MiB of nothing, sparse.
    let f = std::fs::File::create(junk.join("junk.00000000")).unwrap();
    f.set_len(256 << 20).unwrap();
    drop(f);
    // Three Mark5B frames: a 16-byte header whose word 0 is the sync word, 10 000 data bytes.
    let m5b_dir = disk.join("m5b");
    std::fs::create_dir_all(&m5b_dir).unwrap();
    let mut m5b = Vec::new();
    for i in 0..3u8 {
        m5b.extend(0xabad_deedu32.to_le_bytes());
        m5b.extend([i; 12]);
        m5b.extend([0x33; 10_000]);
    }
    std::fs::write(m5b_dir.join("m5b.00000000"), &m5b).unwrap();
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok(&format!("set_disks = {} ;", disk.display()));
    fs.ok("scan_set = junk ;");
    let r = fs.ask(&format!("disk2file = {}/junk.copy : : : w ;", out.display()));
    eprintln!("junk -> {r}");
    assert_eq!(r.code, ReturnCode::Failed, "{r}");
    assert!(r.fields[0].contains("hold no VDIF or Mark5B frames"), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fs.ok("disk2file? ;")[0], "inactive");
    assert!(!out.join("junk.copy").exists(), "a copy was started");
    fs.ok("scan_set = m5b ;");
    let r = fs.ask(&format!("disk2file = {}/m5b.copy : : : w ;", out.display()));
    assert_eq!(r.code, ReturnCode::Initiated, "{r}");
    until_copied(&mut fs);
    assert!(std::fs::read(out.join("m5b.copy")).unwrap() == m5b);
    drop(fs);
    let _ = serve.stop();
}

/// The frames of a vbs recording's regular chunk files on `disk` (links left out), in order.
fn frames_on(disk: &Path, scan: &str) -> (u64, u64) {
    let mut chunks: Vec<PathBuf> = std::fs::read_dir(disk.join(scan))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
        .collect();
    chunks.sort();
    let data: Vec<u8> = chunks.iter().flat_map(|c| std::fs::read(c).unwrap()).collect();
    frames_of(&data)
}

/// A Prometheus sample's value.
fn metric(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Issue 36, item 5: a disk dropped mid-scan (chunk names planted as links) kept a part of the
/// scan, yet `evlbi?` said loss 0. Frames that reached the daemon but no disk are loss now:
/// `evlbi?` counts them as lost (total is what the recording holds), `scan_check?` counts their
/// bytes as missing (here they are lost at the end, where the data shows no gap), and the
/// metrics show them (`evlbi_stream_frames_not_written_total`).
#[test]
fn frames_no_disk_took_are_loss_in_evlbi_scan_check_and_metrics() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let disk = root.path().join("disk0");
    std::fs::create_dir_all(&disk).unwrap();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &[]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    // 4 MiB chunks: the scan's 3 s are some 46 of them.
    fs.ok("net_protocol = udps : 64M : 4M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok(&format!("set_disks = {} ;", disk.display()));
    fs.ok("record = on : dropped ;");
    let sender = backend_sim(port, "3s", &[]);
    // As soon as the scan's first chunk is made, every chunk name not taken yet is planted as a
    // link: the writer's next chunk cannot be made, and the one disk leaves the recording. (Not
    // as soon as the directory is made: a link planted before the first chunk leaves the scan
    // with no chunk at all, and `scan_set` rightly says it does not exist; CI's busy host did.)
    let dir = disk.join("dropped");
    let first_chunk = dir.join("dropped.00000000");
    let t0 = Instant::now();
    while std::fs::symlink_metadata(&first_chunk).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no first chunk");
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..400 {
        let _ = std::os::unix::fs::symlink(
            outside.path().join(format!("x{i}")),
            dir.join(format!("dropped.{i:08}")),
        );
    }
    let (frames_sent, _) = sent(sender);
    std::thread::sleep(Duration::from_millis(500));
    fs.ok("record = off ;");
    let (total, loss) = common::vsi::evlbi(&mut fs);
    let (valid, filled) = frames_on(&disk, "dropped");
    let (_, text) = http_get(serve.metrics, "/metrics");
    let not_written = metric(&text, "evlbi_stream_frames_not_written_total{source=\"record\"}");
    // The disk left the set; the FS sets it again to read the scan back.
    fs.ok(&format!("set_disks = {} ;", disk.display()));
    fs.ok("scan_set = dropped ;");
    let check = fs.ok("scan_check? ;");
    eprintln!(
        "{frames_sent} frames sent; evlbi? total {total} loss {loss}; on disk {valid} valid + {filled} filled; \
         metric {not_written:?}; scan_check? {check:?}"
    );
    assert!(
        loss > 0 && valid < frames_sent,
        "the disk was not dropped: {loss} lost, {valid} on disk"
    );
    assert_eq!(filled, 0);
    assert_eq!(total, valid, "evlbi?'s total is what the recording holds");
    assert_eq!(total + loss, frames_sent, "evlbi? accounts for every frame sent");
    assert_eq!(not_written, Some(loss));
    // Fields: ?, scan, format, tracks, start, duration, rate, missing bytes, frame size.
    assert_eq!(
        check[7],
        (loss * 8032).to_string(),
        "scan_check?'s missing bytes: {check:?}"
    );
    drop(fs);
    let _ = serve.stop();
}

/// Disks smaller than one default block (128 MiB): a 64 MiB and a 128 MiB file system and
/// jive5ab's default `net_protocol` (no work block of 1 MiB or more given). Every disk failed
/// `has_room` for a whole block, so the recorder dropped every frame (evlbi? "total 0 : loss
/// 8000 ( 0.00%)", `record = off` answered 0, nothing on the disks; jive5ab 3.1.0 kept 1000 of
/// the 8000 frames here). Now the last space of a disk takes a short block, every frame that
/// fits is written, and frames that no disk took are said in `error?` (status? bit 0x2).
#[test]
fn disks_smaller_than_a_block_take_short_blocks_and_lose_nothing_that_fits() {
    let mut small = Vec::new();
    for mib in [64u64, 128] {
        match testkit::SmallDisk::mount(mib << 20) {
            Ok(d) => small.push(d),
            Err(why) => {
                println!("SKIPPED: small disks need a tmpfs mount (root): {why}");
                return;
            }
        }
    }
    let root = tempfile::tempdir().unwrap();
    let roots: Vec<String> = small.iter().map(|d| d.path().display().to_string()).collect();
    let serve = Serve::start(root.path(), "127.0.0.1:0", &["--root", &roots[0], "--root", &roots[1]]);
    let port = free_udp_port();
    let mut fs = Vsi::connect(serve.vsi);
    fs.ok("mode = VDIF_8000-512-16-2 ;");
    fs.ok("net_protocol = udps : 32M ;");
    fs.ok(&format!("net_port = {port} ;"));
    fs.ok(&format!("set_disks = {} : {} ;", roots[0], roots[1]));
    fs.ok("record = on : small ;");
    // 1 s at 512 Mb/s: 8000 frames, 64 MB: more than the first disk, less than the second.
    let (frames_sent, _) = sent(backend_sim(port, "1s", &[]));
    std::thread::sleep(Duration::from_millis(500));
    fs.ok("record = off ;");
    let (total, loss) = common::vsi::evlbi(&mut fs);
    let on_disks: Vec<(u64, u64)> = small
        .iter()
        .map(|d| match d.path().join("small").is_dir() {
            true => frames_on(d.path(), "small"),
            false => (0, 0),
        })
        .collect();
    let valid: u64 = on_disks.iter().map(|x| x.0).sum();
    let status = fs.ok("status? ;");
    eprintln!("{frames_sent} sent; evlbi? total {total} loss {loss}; on the disks {on_disks:?}; status? {status:?}");
    assert!(frames_sent > 0);
    assert_eq!(total, valid, "evlbi?'s total is what the disks hold");
    assert_eq!(total + loss, frames_sent, "evlbi? accounts for every frame sent");
    // 64 MB fit the 128 MiB disk: whatever the kernel dropped on this host is the only loss,
    // and evlbi? counts it; the disks took every frame the recorder had.
    assert!(valid > frames_sent / 2, "the disks took {valid} of {frames_sent}");
    let text = http_get(serve.metrics, "/metrics").1;
    assert_eq!(
        metric(&text, "evlbi_stream_frames_not_written_total{source=\"record\"}").unwrap_or(0),
        0,
        "frames the recorder had but no disk took"
    );
    // And where frames reach no disk at all, the FS is told: fill both disks past a block.
    fs.ok("record = on : small2 ;");
    let (sent2, _) = sent(backend_sim(port, "3s", &[]));
    std::thread::sleep(Duration::from_millis(500));
    fs.ok("record = off ;");
    let (total2, loss2) = common::vsi::evlbi(&mut fs);
    assert!(
        loss2 > 0 && total2 < sent2,
        "3 s cannot fit: {total2} kept, {loss2} lost of {sent2}"
    );
    let word = fs.ok("status? ;")[0].clone();
    let bits = u32::from_str_radix(word.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(bits & 0x2, 0x2, "status? says an error is queued: {word}");
    let err = fs.ok("error? ;");
    assert!(
        err.iter()
            .any(|f| f.contains("frames reached the recorder but no disk")),
        "{err:?}"
    );
    drop(fs);
    let _ = serve.stop();
}

/// `cmd` run with at most 4 GB of address space (so a read without end fails fast instead of
/// taking the host's memory), for at most `secs`: its output, or `None` if it was still running
/// (then killed).
fn run_bounded(mut cmd: Command, secs: u64) -> Option<std::process::Output> {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit(2) is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Ok(Some(_)) = child.try_wait() {
            return child.wait_with_output().ok();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `evlbi ARGS` must end at once with a usage error (exit 2) saying `why`.
fn refused(args: &[&str], why: &str) {
    let mut cmd = bin();
    cmd.args(args);
    let out = run_bounded(cmd, 20).unwrap_or_else(|| panic!("{args:?} still ran after 20 s"));
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{args:?}: exit {:?}: {}", out.status.code(), err.trim());
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(why), "{args:?}: {why:?} not in {err}");
}

/// Issue 36, item 5: `--disks '/*/*/*/*'` made some 900 system directories writable "disks",
/// and `--vsi-allow 0.0.0.0` was accepted and allowed nobody. Both are refused at start with
/// the reason, from the command line and from a config file alike.
#[test]
fn disk_patterns_from_the_top_and_peer_lists_of_nobody_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let vsi = ["--vsi", "127.0.0.1:0", "--metrics", "127.0.0.1:0"];
    for pattern in ["/*/*/*/*", "/*", "/[a-z]*/disk*"] {
        refused(
            &[&["serve", "--disks", pattern][..], &vsi].concat(),
            "matches the system's own directories",
        );
    }
    for i in 0..300 {
        std::fs::create_dir_all(dir.path().join(format!("t/d{i}"))).unwrap();
    }
    refused(
        &[&["serve", "--disks", &format!("{d}/t/d*")][..], &vsi].concat(),
        "matches more than 256 directories",
    );
    for ip in ["0.0.0.0", "::", "255.255.255.255", "224.0.0.1"] {
        refused(
            &[&["serve", "--root", d, "--vsi-allow", ip][..], &vsi].concat(),
            &format!("--vsi-allow {ip}: not the address of a peer"),
        );
    }
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!("root = [\"{d}\"]\nvsi = \"127.0.0.1:0\"\nvsi_allow = [\"0.0.0.0\"]\n"),
    )
    .unwrap();
    refused(&["serve", "--config", cfg.to_str().unwrap()], "--vsi-allow 0.0.0.0");
}

/// Issue 36, item 4: `--config` with `key_file = "/dev/zero"` (and `recv_listen`) read without
/// a bound — 23 GB resident, SIGTERM ignored, ended by the out-of-memory killer. Every small file
/// the program reads by name goes through one bounded reader now: a device, a FIFO or a
/// directory where a regular file is meant, or a file over its bound, is refused at once with a
/// usage error naming it. (Each child runs with 4 GB of address space, so the unbounded reads
/// of before fail the test instead of the host.)
#[test]
fn files_read_by_name_are_regular_files_within_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.to_str().unwrap();
    let toml = |key: &str| {
        let p = dir.path().join(format!("k{}.toml", key.len()));
        std::fs::write(
            &p,
            format!(
                "root = [\"{d}\"]\nvsi = \"127.0.0.1:0\"\nmetrics = \"127.0.0.1:0\"\nrecv_listen = \"127.0.0.1:0\"\n\
                 key_file = \"{key}\"\n"
            ),
        )
        .unwrap();
        p
    };
    let c = toml("/dev/zero");
    refused(
        &["serve", "--config", c.to_str().unwrap()],
        "key file /dev/zero: not a regular file",
    );
    let c = toml(fifo);
    refused(&["serve", "--config", c.to_str().unwrap()], "not a regular file");
    let big = dir.path().join("big.key");
    std::fs::write(&big, vec![b'k'; 5000]).unwrap();
    let c = toml(big.to_str().unwrap());
    refused(&["serve", "--config", c.to_str().unwrap()], "larger than 4096 bytes");
    refused(
        &["serve", "--config", "/dev/zero"],
        "--config /dev/zero: cannot read it: not a regular file",
    );
    refused(&["serve", "--config", fifo], "cannot read it: not a regular file");
    let huge = dir.path().join("huge.toml");
    std::fs::write(&huge, "#".repeat(2 << 20)).unwrap();
    refused(
        &["serve", "--config", huge.to_str().unwrap()],
        "larger than 1048576 bytes",
    );
    let html = format!("{d}/r.html");
    refused(&["report", "/dev/zero", "--out", &html], "not a regular file");
    refused(
        &[
            "probe",
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--key-file",
            "/dev/zero",
        ],
        "not a regular file",
    );
    // A data file to send is a regular file too (its bytes were read into memory until EOF).
    let mut cmd = bin();
    cmd.args(["stream", "send", "/dev/zero", "--to", "127.0.0.1:9", "--fps", "1000"]);
    let out = run_bounded(cmd, 20).expect("stream send /dev/zero still ran after 20 s");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not a regular file"), "{err}");
}
