//! DiFX correlates what evlbi delivers: mpifxcorr built from DiFX's own source
//! (`scripts/build-difx.sh`, found by `scripts/difx-path`; without it every test here prints
//! SKIPPED) runs a two-station synthetic job written by `tests/difx/difxjob.py` (stations at one
//! place: the generated sky delay stays in the data and shows as the fringe's delay), reading
//! each station from a FILE or from a NETWORK datastream that evlbi feeds — over TCP (mpifxcorr
//! is the server; evlbi connects, retrying until the job's port opens) or UDP. Its SWIN
//! visibilities are read back by the same script and compared record by record with those of
//! the same data read as FILE datastreams: bit-identical where the same frames arrived (the
//! same samples through the same arithmetic give the same floats).
//!
//! The stations are 64 Mb/s (2 channels of 8 MHz, 2-bit, one VDIF thread; 2 threads of one
//! channel where DiFX's INTERLACEDVDIF reader is tested) and each job 2 s, so it runs in seconds
//! on a busy 2-core host; UDP is sent at half the data rate so it never outruns mpifxcorr (a
//! datastream takes whatever time the data carry). The FILE references read files cut to the
//! job's span: mpifxcorr's INTERLACEDVDIF FILE reader weighted a 3 s file's 2 s job at 0.79.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::{bin, free_tcp_port, free_udp_port, Proc};

/// The DiFX install prefix (P/bin/mpifxcorr), or `None` with SKIPPED said.
fn difx(test: &str) -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/difx-path");
    let found = Command::new(script)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.join("bin/mpifxcorr").is_file());
    let mpirun = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found.is_none() || !mpirun {
        eprintln!("SKIPPED: {test}: no mpifxcorr (scripts/build-difx.sh builds it from ../shared/peers) or no mpirun");
        return None;
    }
    found
}

fn difxjob() -> Command {
    let mut c = Command::new("python3");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/difx/difxjob.py"));
    c
}

/// Frames per second of a station (all threads): 64 Mb/s of 8000-byte frames.
const STATION_FPS: u64 = 1000;
/// Bytes per frame.
const FRAME: u64 = 8032;

/// The 64 Mb/s stations: Ef and Wb (Wb's sky 1.5 µs later), `threads` VDIF threads, from
/// 2026-11-23T12:00:00, `seconds` long.
fn stations(dir: &Path, threads: u32, seconds: u32) -> (PathBuf, PathBuf) {
    let (threads, seconds) = (threads.to_string(), seconds.to_string());
    let out = bin()
        .args(["vdif", "gen", "--stations", "Ef,Wb", "--rate", "64M", "--bits", "2"])
        .args([
            "--channels",
            "2",
            "--threads",
            &threads,
            "--frame",
            "8000",
            "--delay",
            "Wb=1.5us",
        ])
        .args(["--snr", "0.03", "--seed", "7", "--seconds", &seconds, "-q"])
        .args(["--start", "2026-11-23T12:00:00Z", "--out"])
        .arg(dir.join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir.join("data/Ef.vdif"), dir.join("data/Wb.vdif"))
}

/// A job: `name` in `dir`, starting `offset_s` seconds after 12:00:00, 2 s long, the stations
/// as difxjob.py takes them (`Ef=FILE:path`, `Wb=TCP:port`, …); its .input.
fn job(dir: &Path, name: &str, offset_s: u32, threads: u32, stations: &[String]) -> PathBuf {
    let mut c = difxjob();
    c.args(["job", "--dir"]).arg(dir).args(["--name", name]);
    c.args(["--start", &format!("2026-11-23T12:00:{offset_s:02}Z"), "--seconds", "2"]);
    let threads = threads.to_string();
    c.args([
        "--channels",
        "2",
        "--bandwidth-mhz",
        "8",
        "--nchan",
        "128",
        "--threads",
        &threads,
    ]);
    for s in stations {
        c.args(["--station", s]);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "difxjob.py job: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(format!("{name}.input"))
}

/// A running mpifxcorr (4 MPI processes: manager, two datastreams, one core) and its log lines.
struct Mpifxcorr {
    proc: Proc,
    log: Receiver<String>,
    lines: Vec<String>,
}

impl Mpifxcorr {
    fn start(prefix: &Path, input: &Path) -> Mpifxcorr {
        let mut c = Command::new("mpirun");
        c.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            "4",
        ]);
        c.arg(prefix.join("bin/mpifxcorr")).arg(input);
        // No difxmessage multicast: the job's messages stay in its log.
        for v in [
            "DIFX_MESSAGE_GROUP",
            "DIFX_MESSAGE_PORT",
            "DIFX_BINARY_GROUP",
            "DIFX_BINARY_PORT",
        ] {
            c.env_remove(v);
        }
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        Mpifxcorr {
            proc: Proc(child),
            log,
            lines: Vec::new(),
        }
    }

    fn take_lines(&mut self) {
        while let Ok(l) = self.log.try_recv() {
            self.lines.push(l);
        }
    }

    /// Wait (60 s at most) until `n` log lines contain `what`.
    fn wait_for(&mut self, what: &str, n: usize) {
        let t0 = Instant::now();
        while self.lines.iter().filter(|l| l.contains(what)).count() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "mpifxcorr never said {what:?} {n} times:\n{}",
                self.lines.join("\n")
            );
            if let Ok(l) = self.log.recv_timeout(Duration::from_millis(100)) {
                self.lines.push(l);
            }
        }
    }

    /// Wait (120 s at most) for the job to end; it must succeed. Its log.
    fn finish(mut self) -> String {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.proc.0.try_wait().unwrap() {
                break s;
            }
            self.take_lines();
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "mpifxcorr did not end in 120 s:\n{}",
                self.lines.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        std::thread::sleep(Duration::from_millis(200));
        self.take_lines();
        let log = self.lines.join("\n");
        assert!(status.success(), "mpifxcorr failed ({status}):\n{log}");
        log
    }
}

/// Run a job whose stations are all files; its log.
fn run_files(prefix: &Path, input: &Path) -> String {
    Mpifxcorr::start(prefix, input).finish()
}

/// difxjob.py vis of a job's output (optionally compared with another's): its JSON.
fn vis(input: &Path, compare: Option<&Path>) -> serde_json::Value {
    let mut c = difxjob();
    c.arg("vis")
        .arg(input.with_extension("difx"))
        .args(["--bandwidth-mhz", "8"]);
    if let Some(other) = compare {
        c.arg("--compare").arg(other.with_extension("difx"));
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "difxjob.py vis: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The fringe of baseline Ef-Wb (258: antennas 1 and 2 numbered from 1).
fn fringe(v: &serde_json::Value) -> (f64, f64) {
    let f = &v["fringe"]["258"];
    (f["delay_us"].as_f64().unwrap(), f["snr"].as_f64().unwrap())
}

/// The frames of `path` from second `offset_s` on, 2 s of them, in a file of their own.
fn cut(path: &Path, offset_s: u32) -> PathBuf {
    let all = std::fs::read(path).unwrap();
    let from = (u64::from(offset_s) * STATION_FPS * FRAME) as usize;
    let to = from + (2 * STATION_FPS * FRAME) as usize;
    let out = path.with_extension(format!("{offset_s}s.vdif"));
    std::fs::write(&out, &all[from..to]).unwrap();
    out
}

/// The reference: both stations as FILE datastreams, the job's 2 s from `offset_s` on cut out of
/// the files; its .input. The fringe is where the generator put it.
fn file_reference(prefix: &Path, dir: &Path, offset_s: u32, threads: u32, ef: &Path, wb: &Path) -> PathBuf {
    let (ef, wb) = (cut(ef, offset_s), cut(wb, offset_s));
    let input = job(
        &dir.join("file"),
        "file",
        offset_s,
        threads,
        &[format!("Ef=FILE:{}", ef.display()), format!("Wb=FILE:{}", wb.display())],
    );
    run_files(prefix, &input);
    let v = vis(&input, None);
    let (delay, snr) = fringe(&v);
    // Wb's sky is 1.5 µs later: DiFX's baseline Ef-Wb peaks at lag −1.5 µs (a lag is 0.125 µs).
    assert!((delay + 1.5).abs() < 0.01, "fringe at {delay} µs: {v}");
    // 2 × 16 MS/s × 2 s at ρ = 0.03 through 2-bit sampling, 1.5 µs of a 16 µs FFT unaligned:
    // about 190 expected.
    assert!(snr > 100.0, "S/N {snr}: {v}");
    input
}

/// Every record of `got` is bit-identical to the FILE job's: the same records (baseline, time,
/// sub-band), the same weights, the same floats.
fn assert_same_visibilities(got: &Path, reference: &Path) -> serde_json::Value {
    let v = vis(got, Some(reference));
    let c = &v["compare"];
    let n = c["records"][1].as_u64().unwrap();
    assert!(n > 0, "{v}");
    assert_eq!(c["records"][0].as_u64(), Some(n), "records: {v}");
    assert_eq!(c["common"].as_u64(), Some(n), "{v}");
    assert_eq!(c["bit_identical"].as_u64(), Some(n), "{v}");
    v
}

#[test]
fn file_datastreams_show_the_generated_fringe() {
    let Some(prefix) = difx("file_datastreams_show_the_generated_fringe") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ef, wb) = stations(dir.path(), 1, 2);
    let input = file_reference(&prefix, dir.path(), 0, 1, &ef, &wb);
    let v = vis(&input, None);
    // 4 integrations of 0.5 s × 2 sub-bands of the cross baseline.
    assert_eq!(v["cross_records"].as_u64(), Some(8), "{v}");
    let (delay, snr) = fringe(&v);
    eprintln!("FILE datastreams: fringe at {delay} µs, S/N {snr:.1}");
}

#[test]
fn tcp_datastreams_fed_by_stream_send_before_the_job_starts_equal_the_files() {
    let Some(prefix) = difx("tcp_datastreams_fed_by_stream_send") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ef, wb) = stations(dir.path(), 1, 2);
    let reference = file_reference(&prefix, dir.path(), 0, 1, &ef, &wb);
    let (pe, pw) = (free_tcp_port(), free_tcp_port());
    let input = job(
        &dir.path().join("tcp"),
        "tcp",
        0,
        1,
        &[format!("Ef=TCP:{pe}"), format!("Wb=TCP:{pw}")],
    );
    // The data flow first: the sender waits for the job's ports to open.
    let send = Proc(
        bin()
            .args(["stream", "send", "--json", "--connect-wait", "60s"])
            .args([
                "--to",
                &format!("tcp:127.0.0.1:{pe}"),
                "--to",
                &format!("tcp:127.0.0.1:{pw}"),
            ])
            .arg(&ef)
            .arg(&wb)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    Mpifxcorr::start(&prefix, &input).finish();
    let out = output_of(send);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in reports.as_array().unwrap() {
        assert_eq!(r["frames_read"].as_u64(), Some(2 * STATION_FPS), "{r}");
        assert_eq!(r["out"]["frames_sent"].as_u64(), Some(2 * STATION_FPS), "{r}");
        assert_eq!(r["out"]["connections"].as_u64(), Some(1), "{r}");
        // It connected after the job started, well after its own start.
        assert!(r["out"]["first_connected_s"].as_f64().unwrap() > 1.0, "{r}");
    }
    assert_same_visibilities(&input, &reference);
}

/// A process's exit status, stdout and stderr once it ends (60 s at most, then it is killed
/// by the guard).
fn output_of(mut p: Proc) -> std::process::Output {
    use std::io::Read;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut r) = pipe {
                let _ = r.read_to_end(&mut out);
            }
            out
        })
    };
    let so = read(p.0.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let se = read(p.0.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = p.0.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "process did not end in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: so.join().unwrap(),
        stderr: se.join().unwrap(),
    }
}

#[test]
fn relay_feeds_a_tcp_datastream_whose_job_starts_after_the_data_flow() {
    let Some(prefix) = difx("relay_feeds_a_tcp_datastream") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // 10 s of data; the job is 12:00:06 to 12:00:08, started while the stream flows.
    let (ef, wb) = stations(dir.path(), 1, 10);
    let reference = file_reference(&prefix, dir.path(), 6, 1, &ef, &wb);
    let (pe, pw) = (free_tcp_port(), free_tcp_port());
    let input = job(
        &dir.path().join("relay"),
        "relay",
        6,
        1,
        &[format!("Ef=TCP:{pe}"), format!("Wb=TCP:{pw}")],
    );
    let mut relays = Vec::new();
    let mut ins = Vec::new();
    for (port, name) in [(pe, "Ef"), (pw, "Wb")] {
        let inp = free_udp_port();
        ins.push(inp);
        let child = Proc(
            bin()
                .args([
                    "stream",
                    "relay",
                    "--listen",
                    &format!("127.0.0.1:{inp}"),
                    "--seq-format-in",
                    "none",
                ])
                .args([
                    "--fps",
                    "1000",
                    "--to",
                    &format!("tcp:127.0.0.1:{port}"),
                    "--idle-timeout",
                    "20s",
                ])
                .args(["--json", "-q", "--tee"])
                .arg(dir.path().join(format!("tee-{name}")))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        relays.push(child);
    }
    // The backends: each station's file, bare VDIF at its rate (10 s).
    let senders: Vec<Proc> = [(&ef, ins[0]), (&wb, ins[1])]
        .into_iter()
        .map(|(f, p)| {
            Proc(
                bin()
                    .args(["stream", "send", "--seq-format", "none", "--max-lag", "1h", "-q"])
                    .args(["--to", &format!("127.0.0.1:{p}")])
                    .arg(f)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    // The job starts a second into the stream.
    std::thread::sleep(Duration::from_secs(1));
    Mpifxcorr::start(&prefix, &input).finish();
    drop(senders);
    let mut delivered = Vec::new();
    for r in relays {
        let out = output_of(r);
        let rep: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let t = &rep["tcp_out"];
        // One accepted by the job; after it ended a retry may have been taken into the listen
        // backlog of its socket before mpifxcorr exited (and reset then).
        assert!(t["connections"].as_u64().unwrap() >= 1, "{t}");
        // Frames flowed before the job's port opened: dropped there, counted, kept by the tee.
        assert!(t["dropped_unconnected"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["dropped_queue_full"].as_u64(), Some(0), "{t}");
        let tee_frames: u64 = rep["tee"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["frames"].as_u64().unwrap())
            .sum();
        assert_eq!(rep["stations"][0]["frames_in"].as_u64(), Some(tee_frames), "{rep}");
        delivered.push(t["frames_sent"].as_u64().unwrap());
    }
    let v = assert_same_visibilities(&input, &reference);
    let (delay, snr) = fringe(&v);
    eprintln!("relay → TCP: frames delivered {delivered:?}, fringe {delay} µs S/N {snr:.1}, identical to FILE");
}

#[test]
fn udp_datastreams_equal_the_files_vdif_with_psn_and_interlaced_bare() {
    let Some(prefix) = difx("udp_datastreams_equal_the_files") else {
        return;
    };
    // VDIF (DiFX's Mk5DataStream: an 8-byte PSN before each frame, datagrams of exactly
    // frame + 8 bytes) and INTERLACEDVDIF (VDIFNetworkDataStream: bare frames, here 2 threads).
    for (threads, framing) in [(1, "jive5ab"), (2, "none")] {
        let dir = tempfile::tempdir().unwrap();
        // 3 s of data for a 2 s job: a UDP datastream has no end of stream, the job ends when
        // data past it arrive.
        let (ef, wb) = stations(dir.path(), threads, 3);
        let reference = file_reference(&prefix, dir.path(), 0, threads, &ef, &wb);
        let (pe, pw) = (free_udp_port(), free_udp_port());
        let input = job(
            &dir.path().join("udp"),
            "udp",
            0,
            threads,
            &[format!("Ef=UDP:{pe}"), format!("Wb=UDP:{pw}")],
        );
        let mut corr = Mpifxcorr::start(&prefix, &input);
        corr.wait_for("Ready to receive UDP data", 2);
        let senders: Vec<Proc> = [(&ef, pe), (&wb, pw)]
            .into_iter()
            .map(|(f, p)| {
                Proc(
                    bin()
                        .args(["stream", "send", "--seq-format", framing, "--max-lag", "1h", "-q"])
                        .args(["--rate", "32M"])
                        .args(["--to", &format!("127.0.0.1:{p}")])
                        .arg(f)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap(),
                )
            })
            .collect();
        corr.finish();
        drop(senders);
        assert_same_visibilities(&input, &reference);
    }
}

/// The frames of a VDIF file that are not flagged invalid, in a file of their own.
fn valid_frames_only(path: &Path) -> PathBuf {
    let all = std::fs::read(path).unwrap();
    let kept: Vec<u8> = all
        .chunks(FRAME as usize)
        .filter(|f| f[3] & 0x80 == 0)
        .flatten()
        .copied()
        .collect();
    let out = path.with_extension("valid.vdif");
    std::fs::write(&out, kept).unwrap();
    out
}

#[test]
fn frames_a_receiver_filled_are_missing_data_to_difx_not_samples() {
    let Some(prefix) = difx("frames_a_receiver_filled_are_missing_data_to_difx") else {
        return;
    };
    // Two threads per station: DiFX reads them with vdifio's vdifmux (INTERLACEDVDIF), which
    // does not look at the invalid bit.
    let dir = tempfile::tempdir().unwrap();
    let (ef, wb) = stations(dir.path(), 2, 2);
    let rx = dir.path().join("rx");
    let recv = common::StreamRecv::start(&["--out", rx.to_str().unwrap()]);
    let send = bin()
        .args([
            "stream",
            "send",
            "--to",
            &format!("127.0.0.1:{}", recv.port),
            "--inject-loss",
            "5%",
            "-q",
        ])
        .args(["--seed", "3"])
        .arg(&ef)
        .arg(&wb)
        .output()
        .unwrap();
    assert!(send.status.success(), "{}", String::from_utf8_lossy(&send.stderr));
    let (status, log) = recv.wait();
    assert!(status.success(), "{log}");
    let file_of = |station: &str| {
        std::fs::read_dir(&rx)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(station))
            .unwrap()
    };
    let (ef_rx, wb_rx) = (file_of("Ef_"), file_of("Wb_"));
    let filled = std::fs::read(&ef_rx)
        .unwrap()
        .chunks(FRAME as usize)
        .filter(|f| f[3] & 0x80 != 0)
        .count();
    assert!(filled > 50, "5 % of 2000 frames lost and filled: {filled}");
    // The recordings as written (fill frames in place of the lost ones) and with the fill
    // frames left out: DiFX must make the same of both — a lost frame is missing data.
    let with_fill = job(
        &dir.path().join("fill"),
        "fill",
        0,
        2,
        &[
            format!("Ef=FILE:{}", ef_rx.display()),
            format!("Wb=FILE:{}", wb_rx.display()),
        ],
    );
    run_files(&prefix, &with_fill);
    let (ef_v, wb_v) = (valid_frames_only(&ef_rx), valid_frames_only(&wb_rx));
    let without = job(
        &dir.path().join("gaps"),
        "gaps",
        0,
        2,
        &[
            format!("Ef=FILE:{}", ef_v.display()),
            format!("Wb=FILE:{}", wb_v.display()),
        ],
    );
    run_files(&prefix, &without);
    let v = assert_same_visibilities(&with_fill, &without);
    // The loss shows as weight, as it should: about 0.95 × 0.95 of the time has both stations.
    let w = v["mean_cross_weight"].as_f64().unwrap();
    assert!(w < 0.97 && w > 0.8, "mean cross weight {w}: {v}");
    eprintln!("filled recordings: {filled} of Ef's frames filled, DiFX weight {w:.3}, visibilities identical to the recordings without them");
}
