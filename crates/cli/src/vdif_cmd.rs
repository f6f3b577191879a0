//! `evlbi vdif …`: generate, inspect, stats, dump.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use vdif::gen::{GenConfig, Generator, StationOutput, StationSpec};
use vdif::inspect::{inspect, InspectReport};
use vdif::stats::{SamplerStats, StateCounter};
use vdif::{FrameLayout, FrameScanner, ScanEvent};

use crate::flags::JsonOutput;
use crate::scan_args::DisksArg;
use crate::units::{parse_frequency, parse_rate, parse_seconds, si_fmt};
use crate::{progress_bar, usage, ProblemsFound};

/// Largest sky delay `--delay` takes, seconds either way.
const MAX_SKY_DELAY_S: f64 = 3600.0;

/// Progress-bar layout for work measured in bytes.
pub(crate) const BYTES_BAR: &str = "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}";

#[derive(Subcommand)]
pub enum VdifCommand {
    /// Generate synthetic multi-station VDIF: common sky noise (delayed per station) plus
    /// independent station noise, optionally a tone, quantised by an optimal sampler.
    #[command(after_help = "Examples:\n  \
        evlbi vdif gen --stations Ef,Wb,Jb --rate 512M --bits 2 --channels 8 --threads 1 --frame 8000 \\\n      \
        --seconds 10 --delay Wb=1.5us --snr 0.01 --tone 1.2MHz --out data/\n  \
        evlbi vdif gen --stations Ef,Wb --rate 4096M --channels 16 --threads 2 --seconds 1 --seed 7 --start 2026-01-01T00:00:00Z\n\n\
        One file per station, DIR/<station>.vdif. The same --seed and --start give byte-identical files.")]
    Gen(GenArgs),
    /// Describe a VDIF file: station, threads, frame size, bits, channels, rate, start time,
    /// duration, invalid frames, gaps and garbage. Exit code 1 when problems are found.
    #[command(
        after_help = "Examples:\n  evlbi vdif inspect data/Ef.vdif\n  evlbi vdif inspect --disks '/mnt/disk*' vbs://ev123_no0001_dsEf   # a FlexBuff recording\n  evlbi vdif inspect mk6://ev123_ef_no0001                             # on /mnt/disks/*/*\n  evlbi vdif inspect --json data/*.vdif\n  evlbi vdif inspect --export-json inspect.json data/Ef.vdif   # text on stdout, JSON in the file\n  evlbi vdif inspect --fps 1600 short.vdif   # frame rate of a file shorter than a second"
    )]
    Inspect(InspectArgs),
    /// Sampler statistics: how often each 2-bit (or 1-bit) state occurs per thread and channel,
    /// beside the Gaussian expectation (16/34/34/16 % for optimal 2-bit levels), with a verdict.
    #[command(
        after_help = "Examples:\n  evlbi vdif stats data/Ef.vdif\n  evlbi vdif stats --max-frames 10000 --json data/Ef.vdif"
    )]
    Stats(StatsArgs),
    /// Correlate two stations (a small FX correlator): find the fringe's delay and S/N on one
    /// channel, with frames flagged invalid on either side weighted out.
    #[command(after_help = "Examples:\n  \
        evlbi vdif gen --stations Ef,Wb --seconds 2 --delay Wb=1.5us --snr 0.01 --out data/\n  \
        evlbi vdif correlate data/Ef.vdif data/Wb.vdif            # delay 48 samples = 1.5 us\n  \
        evlbi vdif correlate --channel 3 --fft 1024 --json data/Ef.vdif data/Wb.vdif")]
    Correlate(CorrelateArgs),
    /// Print headers and decoded samples of the first frames as JSON lines (one per frame).
    #[command(after_help = "Example:\n  evlbi vdif dump --frames 2 data/Ef.vdif | head -c 600")]
    Dump(DumpArgs),
    /// Write a recorded FlexBuff vbs or Mark6 scan out as one continuous file (its blocks from
    /// every disk, in order). Exit code 1 when blocks are missing.
    #[command(after_help = crate::vdif_scan_cmd::GATHER_EXAMPLES)]
    Gather(crate::vdif_scan_cmd::GatherArgs),
    /// List the vbs and Mark6 scans on a set of disks: size, blocks, missing blocks, station,
    /// first and last frame time (what jive5ab's scan_check? and a Mark6's list tell).
    #[command(after_help = crate::vdif_scan_cmd::SCANS_EXAMPLES)]
    Scans(crate::vdif_scan_cmd::ScansArgs),
}

/// What to synthesise: shared by `vdif gen` and `stream send --generate`.
#[derive(Args)]
pub struct SignalArgs {
    /// Station codes, comma separated: two ASCII characters each (Ef, Wb, Jb) or numeric ids.
    #[arg(long, value_delimiter = ',')]
    pub stations: Vec<String>,
    /// Bits per sample: 1 or 2.
    #[arg(long, default_value_t = 2)]
    bits: u8,
    /// Channels per station (split evenly over threads; a power of two per thread).
    #[arg(long, default_value_t = 8)]
    channels: u32,
    /// VDIF threads per station.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// Data bytes per frame (header excluded), a multiple of 8.
    #[arg(long, default_value_t = 8000)]
    frame: usize,
    /// Sky-signal delay per station, STATION=TIME (e.g. Wb=1.5us); rounded to whole samples. Repeatable or comma separated.
    #[arg(long, value_delimiter = ',')]
    delay: Vec<String>,
    /// Correlated (sky) fraction of each station's power, i.e. the correlation coefficient of every baseline.
    #[arg(long, default_value_t = 0.01)]
    snr: f64,
    /// Inject a tone (like phase-cal) at this baseband frequency in every channel: 1.2MHz. It is
    /// undelayed and common to all stations, so it correlates on every baseline like a
    /// phase-cal spur; leave it out when a clean fringe is wanted.
    #[arg(long, value_parser = parse_frequency)]
    tone: Option<f64>,
    /// Tone amplitude relative to the noise σ.
    #[arg(long, default_value_t = 0.1)]
    tone_amp: f64,
    /// Seed of all random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// UTC time of the first frame (RFC 3339, e.g. 2026-01-01T00:00:00Z) or `now`.
    #[arg(long, default_value = "now")]
    start: String,
}

impl SignalArgs {
    /// VDIF threads per station (`--threads`).
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// Check the options and build the generator's configuration for `rate` b/s per station and
    /// `seconds` of data.
    /// `--start now` (the default): a backend simulator then sends each frame at its time.
    pub fn start_is_now(&self) -> bool {
        self.start.trim().eq_ignore_ascii_case("now")
    }

    pub fn to_config(&self, rate: f64, seconds: u32) -> Result<GenConfig> {
        let layout = FrameLayout::new(rate, self.bits, self.channels, self.threads, self.frame)
            .map_err(|e| usage(e.to_string()))?;
        if self.stations.is_empty() {
            return Err(usage("--stations is required (e.g. --stations Ef,Wb)"));
        }
        if !(0.0..=1.0).contains(&self.snr) {
            return Err(usage(format!(
                "--snr {} must be within 0..=1 (the correlated fraction of the power)",
                self.snr
            )));
        }
        if seconds == 0 {
            return Err(usage("--seconds must be at least 1"));
        }
        if let Some(f) = self.tone {
            if !(f > 0.0 && f < layout.sample_rate_hz / 2.0) {
                return Err(usage(format!(
                    "--tone {} Hz must lie inside the channel band (0, {} Hz)",
                    f,
                    layout.sample_rate_hz / 2.0
                )));
            }
        }
        let mut stations = Vec::new();
        for s in &self.stations {
            let id = vdif::parse_station(s).map_err(|e| usage(e.to_string()))?;
            if stations.iter().any(|x: &StationSpec| x.id == id) {
                return Err(usage(format!("station {s} given twice")));
            }
            stations.push(StationSpec {
                name: vdif::station_name(id),
                id,
                delay_s: 0.0,
            });
        }
        for d in &self.delay {
            let (name, t) = d
                .split_once('=')
                .ok_or_else(|| usage(format!("--delay {d:?}: expected STATION=TIME, e.g. Wb=1.5us")))?;
            let secs = parse_seconds(t).map_err(|e| usage(format!("--delay {d:?}: {e}")))?;
            // Geometric delays are below 50 ms; a bound keeps samples x channels within an i64.
            if secs.abs() > MAX_SKY_DELAY_S {
                return Err(usage(format!("--delay {d:?}: at most {MAX_SKY_DELAY_S} s either way")));
            }
            let st = stations
                .iter_mut()
                .find(|s| s.name == name)
                .ok_or_else(|| usage(format!("--delay {d:?}: station {name} is not in --stations")))?;
            st.delay_s = secs;
        }
        let start_unix = vdif::time::parse_start(&self.start).map_err(|e| usage(format!("--start: {e}")))?;
        let (ref_epoch, start_seconds) = vdif::time::to_epoch(start_unix)
            .ok_or_else(|| usage("--start must lie between 2000 and 2031 (VDIF epochs)"))?;
        Ok(GenConfig {
            layout,
            stations,
            seconds,
            ref_epoch,
            start_seconds,
            snr: self.snr,
            tone_hz: self.tone,
            tone_amplitude: self.tone_amp,
            seed: self.seed,
        })
    }
}

#[derive(Args)]
pub struct GenArgs {
    #[command(flatten)]
    signal: SignalArgs,
    /// Total data rate of each station (sample bits of all channels): 512M, 1G, 4096M.
    #[arg(long, default_value = "512M", value_parser = parse_rate)]
    rate: f64,
    /// Seconds of data to generate.
    #[arg(long, default_value_t = 10)]
    seconds: u32,
    /// Output directory of the VDIF files (created if missing).
    #[arg(long, short, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    output: JsonOutput,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
pub struct InspectArgs {
    /// VDIF files, or recorded scans: vbs://SCAN, mk6://SCAN (see --disks).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    disks: DisksArg,
    /// Frames per second per thread, for files too short to show it.
    #[arg(long)]
    fps: Option<u32>,
    // --json, --export-json: the report as JSON (an object for one file, an array for several).
    #[command(flatten)]
    output: JsonOutput,
}

#[derive(Args)]
pub struct StatsArgs {
    /// VDIF file, or a recorded scan: vbs://SCAN, mk6://SCAN.
    file: PathBuf,
    #[command(flatten)]
    disks: DisksArg,
    /// Stop after this many frames (0 = all).
    #[arg(long, default_value_t = 0)]
    max_frames: u64,
    #[command(flatten)]
    output: JsonOutput,
}

#[derive(Args)]
pub struct CorrelateArgs {
    /// Station A (a file, or vbs://SCAN, mk6://SCAN).
    a: PathBuf,
    /// Station B (its delay is reported relative to A).
    b: PathBuf,
    #[command(flatten)]
    disks: DisksArg,
    /// VDIF thread.
    #[arg(long, default_value_t = 0)]
    thread: u16,
    /// Channel within the thread.
    #[arg(long, default_value_t = 0)]
    channel: u32,
    /// FFT length (power of two); delays up to ±half of it are found.
    #[arg(long, default_value_t = 256)]
    fft: usize,
    /// Stop after this many frames of the thread (0 = all).
    #[arg(long, default_value_t = 0)]
    max_frames: u64,
    #[command(flatten)]
    output: JsonOutput,
}

#[derive(Args)]
pub struct DumpArgs {
    /// VDIF file, or a recorded scan: vbs://SCAN, mk6://SCAN.
    file: PathBuf,
    #[command(flatten)]
    disks: DisksArg,
    /// Number of frames to print.
    #[arg(long, default_value_t = 1)]
    frames: u64,
    /// Frames to skip first.
    #[arg(long, default_value_t = 0)]
    skip: u64,
    /// Print headers only (no samples): fast over whole files.
    #[arg(long)]
    headers_only: bool,
}

pub fn run(cmd: VdifCommand) -> Result<()> {
    match cmd {
        VdifCommand::Gen(a) => gen(a),
        VdifCommand::Inspect(a) => inspect_files(a),
        VdifCommand::Stats(a) => stats(a),
        VdifCommand::Dump(a) => dump(a),
        VdifCommand::Correlate(a) => correlate(a),
        VdifCommand::Gather(a) => crate::vdif_scan_cmd::gather(a),
        VdifCommand::Scans(a) => crate::vdif_scan_cmd::scans(a),
    }
}

/// Result of `evlbi vdif gen`.
#[derive(Serialize)]
struct GenReport {
    /// Frame layout used.
    layout: FrameLayout,
    /// Start time of the first frame, UTC.
    start_utc: String,
    /// Seconds generated.
    seconds: u32,
    /// Correlated fraction.
    snr: f64,
    /// Tone frequency, Hz.
    tone_hz: Option<f64>,
    /// Seed.
    seed: u64,
    /// One entry per station.
    stations: Vec<GenStation>,
    /// Bytes written, all stations.
    bytes: u64,
    /// Wall time, seconds.
    elapsed_s: f64,
    /// Bytes per second written.
    write_rate_bytes_per_s: f64,
}

#[derive(Serialize)]
struct GenStation {
    path: PathBuf,
    #[serde(flatten)]
    output: StationOutput,
}

fn gen(a: GenArgs) -> Result<()> {
    let config = a.signal.to_config(a.rate, a.seconds)?;
    let (layout, ref_epoch, start_seconds) = (config.layout, config.ref_epoch, config.start_seconds);
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create output directory {}", a.out.display()))?;
    let paths: Vec<PathBuf> = config
        .stations
        .iter()
        .map(|s| a.out.join(format!("{}.vdif", s.name)))
        .collect();
    let total = layout.bytes_per_second() * u64::from(a.seconds) * paths.len() as u64;
    let started = Instant::now();
    let generator = Generator::new(config);
    let done = AtomicU64::new(0);
    let bar = progress_bar(total, a.quiet || a.output.json, BYTES_BAR);
    // One writer thread per station: stations are independent streams of the same pools.
    let outputs: Vec<Result<StationOutput>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .iter()
            .enumerate()
            .map(|(s, path)| {
                let generator = &generator;
                let done = &done;
                scope.spawn(move || -> Result<StationOutput> {
                    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
                    let mut w = BufWriter::with_capacity(1 << 20, f);
                    generator
                        .write_station(s, &mut w, |n| {
                            done.fetch_add(n, Ordering::Relaxed);
                        })
                        .with_context(|| format!("writing {}", path.display()))
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            bar.set_position(done.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(10));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("generator thread panicked"))))
            .collect()
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let mut stations = Vec::new();
    for (path, out) in paths.into_iter().zip(outputs) {
        stations.push(GenStation { path, output: out? });
    }
    let bytes: u64 = stations.iter().map(|s| s.output.bytes).sum();
    let report = GenReport {
        layout,
        start_utc: vdif::time::iso(ref_epoch, start_seconds, 0.0),
        seconds: a.seconds,
        snr: a.signal.snr,
        tone_hz: a.signal.tone,
        seed: a.signal.seed,
        stations,
        bytes,
        elapsed_s: elapsed,
        write_rate_bytes_per_s: bytes as f64 / elapsed.max(1e-9),
    };
    if !a.output.emit(&report)? {
        return Ok(());
    }
    println!(
        "generated {} station(s) x {} s from {}: {}b/s, {}-bit, {} channel(s) in {} thread(s), {}-byte frames, {} frames/s per thread, {}S/s per channel",
        report.stations.len(),
        a.seconds,
        report.start_utc,
        si_fmt(layout.rate_bps),
        layout.bits,
        layout.channels,
        layout.threads,
        layout.frame_len,
        layout.frames_per_second,
        si_fmt(layout.sample_rate_hz)
    );
    for s in &report.stations {
        println!(
            "  {:<4} {}  {}B  {} frames  sky delay {} samples ({:.3} us)",
            s.output.station,
            s.path.display(),
            si_fmt(s.output.bytes as f64),
            s.output.frames,
            s.output.delay_samples,
            s.output.delay_applied_s * 1e6
        );
    }
    println!(
        "wrote {}B in {:.2} s ({}B/s)",
        si_fmt(bytes as f64),
        elapsed,
        si_fmt(report.write_rate_bytes_per_s)
    );
    Ok(())
}

/// A reader that advances a progress bar (drawn only when stderr is a terminal).
struct ProgressReader {
    inner: BufReader<Box<dyn std::io::Read + Send>>,
    bar: indicatif::ProgressBar,
}

impl std::io::Read for ProgressReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

impl Drop for ProgressReader {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// A VDIF file or a recorded scan (`vbs://SCAN`, `mk6://SCAN` on `disks`), read with a
/// progress bar.
fn open(path: &Path, disks: &DisksArg) -> Result<ProgressReader> {
    let (f, len) = crate::scan_args::open_input(path, disks)?;
    // Small files finish before a bar could be read; large ones take seconds to minutes.
    let bar = progress_bar(len, len < (256 << 20), BYTES_BAR);
    Ok(ProgressReader {
        inner: BufReader::with_capacity(1 << 20, f),
        bar,
    })
}

#[derive(Serialize)]
struct FileReport {
    file: PathBuf,
    #[serde(flatten)]
    report: InspectReport,
}

fn inspect_files(a: InspectArgs) -> Result<()> {
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for path in &a.files {
        match inspect(open(path, &a.disks)?, a.fps, |_, _| {}) {
            Ok(report) => {
                if !report.problems.is_empty() {
                    failures.push(format!("{}: {}", path.display(), report.problems.join("; ")));
                }
                reports.push(FileReport {
                    file: path.clone(),
                    report,
                });
            }
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
            }
        }
    }
    let text = if reports.len() == 1 && a.files.len() == 1 {
        a.output.emit(&reports[0])?
    } else {
        a.output.emit(&reports)?
    };
    if text {
        for r in &reports {
            print_inspect(r);
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(ProblemsFound(failures.join("\n"))))
    }
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("?".to_string(), |x| x.to_string())
}

fn print_inspect(f: &FileReport) {
    let r = &f.report;
    println!("file       {} ({} bytes)", f.file.display(), r.file_bytes);
    println!("station    {} (id {})", opt(&r.station), opt(&r.station_id));
    println!("threads    {} {:?}", r.threads.len(), r.threads);
    println!(
        "frames     {} of {} bytes ({}-byte header{}, EDV {})",
        r.frames,
        opt(&r.frame_bytes),
        opt(&r.header_bytes),
        if r.legacy == Some(true) { ", legacy" } else { "" },
        opt(&r.edv)
    );
    println!(
        "samples    {}-bit {}, {} channel(s), {} samples/frame",
        opt(&r.bits_per_sample),
        if r.complex == Some(true) { "complex" } else { "real" },
        opt(&r.channels),
        opt(&r.samples_per_frame)
    );
    match r.frames_per_second {
        Some(fps) => println!(
            "rate       {} frames/s per thread (from {}), {}S/s per channel, {}b/s",
            fps,
            opt(&r.frame_rate_source),
            si_fmt(r.sample_rate_hz.unwrap_or(0.0)),
            si_fmt(r.data_rate_bps.unwrap_or(0.0))
        ),
        None => println!("rate       unknown (file shorter than a second; pass --fps)"),
    }
    println!(
        "time       {} .. {} ({} s)",
        opt(&r.start_utc),
        opt(&r.end_utc),
        r.duration_s.map_or("?".into(), |d| format!("{d:.6}"))
    );
    println!("invalid    {} frame(s)", r.invalid_frames);
    println!(
        "missing    {} frame(s) in {} gap(s); {} out of order",
        r.missing_frames, r.gaps, r.out_of_order_frames
    );
    println!(
        "garbage    {} byte(s) in {} region(s)",
        r.garbage_bytes,
        r.garbage.len()
    );
    for n in &r.notes {
        println!("note       {n}");
    }
    if r.problems.is_empty() {
        println!("verdict    OK");
    } else {
        println!("verdict    {} problem(s):", r.problems.len());
        for p in r.problems.iter().take(vdif::inspect::MAX_LISTED) {
            println!("  - {p}");
        }
    }
}

fn stats(a: StatsArgs) -> Result<()> {
    let mut counter: Option<StateCounter> = None;
    let mut unsupported = None;
    let mut n = 0u64;
    for ev in FrameScanner::new(open(&a.file, &a.disks)?) {
        let ev = ev.with_context(|| format!("reading {}", a.file.display()))?;
        if let ScanEvent::Frame { header, bytes, .. } = ev {
            if header.complex || header.bits_per_sample > 2 {
                unsupported = Some((header.bits_per_sample, header.complex));
                break;
            }
            let c = counter.get_or_insert_with(|| StateCounter::new(header.bits_per_sample, header.channels()));
            c.add(&header, &bytes[header.header_len()..]);
            n += 1;
            if a.max_frames > 0 && n >= a.max_frames {
                break;
            }
        }
    }
    if let Some((bits, complex)) = unsupported {
        return Err(anyhow!(
            "{}: state counts need real 1- or 2-bit data, this file has {}-bit {} samples",
            a.file.display(),
            bits,
            if complex { "complex" } else { "real" }
        ));
    }
    let stats: SamplerStats = counter
        .ok_or_else(|| {
            anyhow!(
                "{}: no VDIF frames found (try `evlbi vdif inspect` for details)",
                a.file.display()
            )
        })?
        .finish();
    if !a.output.emit(&stats)? {
        return Ok(());
    }
    println!(
        "{}: {} frames, {}-bit, {} invalid frame(s) skipped",
        a.file.display(),
        stats.frames,
        stats.bits,
        stats.invalid_frames_skipped
    );
    let heads: &[&str] = if stats.bits == 2 {
        &["--", "-", "+", "++"]
    } else {
        &["-", "+"]
    };
    print!("thread chan     samples");
    for h in heads {
        print!(" {h:>7}");
    }
    println!("  thresh/σ  verdict");
    for c in &stats.channels {
        print!("{:>6} {:>4} {:>11}", c.thread, c.channel, c.samples);
        for f in &c.fractions {
            print!(" {:>6.2}%", f * 100.0);
        }
        println!(
            "  {:>8}  {:?}",
            c.implied_threshold_sigma.map_or("-".into(), |t| format!("{t:.3}")),
            c.verdict
        );
    }
    if let Some(c) = stats.channels.first() {
        print!("{:<23}", "expected (Gaussian)");
        for f in &c.expected {
            print!(" {:>6.2}%", f * 100.0);
        }
        println!("  {:>8}", if stats.bits == 2 { "0.982" } else { "-" });
    }
    println!("verdict: {:?}", stats.verdict);
    Ok(())
}

fn correlate(a: CorrelateArgs) -> Result<()> {
    // The sample rate (for the delay in seconds) comes from inspecting station A.
    let rate = inspect(open(&a.a, &a.disks)?, None, |_, _| {})
        .ok()
        .and_then(|r| r.sample_rate_hz);
    let config = fxcorr::CorrelateConfig {
        thread: a.thread,
        channel: a.channel,
        fft_len: a.fft,
        max_frames: a.max_frames,
    };
    let fringe =
        fxcorr::correlate(open(&a.a, &a.disks)?, open(&a.b, &a.disks)?, config, rate).map_err(|e| match e {
            fxcorr::CorrelateError::Parameter(m) => usage(m),
            other => anyhow!(other),
        })?;
    if !a.output.emit(&fringe)? {
        return Ok(());
    }
    println!(
        "{} x {}: thread {} channel {}, {} frames paired, {} used ({:.2}% valid), {} samples",
        a.a.display(),
        a.b.display(),
        a.thread,
        a.channel,
        fringe.frames_paired,
        fringe.frames_used,
        fringe.valid_fraction * 100.0,
        fringe.samples
    );
    println!(
        "fringe: delay {} samples{}, amplitude {:.5}, S/N {:.1}",
        fringe.delay_samples,
        fringe
            .delay_s
            .map_or(String::new(), |d| format!(" ({:.4} us)", d * 1e6)),
        fringe.amplitude,
        fringe.snr
    );
    Ok(())
}

#[derive(Serialize)]
struct DumpLine {
    offset: u64,
    header: vdif::VdifHeader,
    station: String,
    edv: u8,
    /// Decoded sample values per channel (`null` for encodings the codec does not handle).
    samples: Option<Vec<Vec<f32>>>,
}

fn dump(a: DumpArgs) -> Result<()> {
    let mut seen = 0u64;
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for ev in FrameScanner::new(open(&a.file, &a.disks)?) {
        let ev = ev.with_context(|| format!("reading {}", a.file.display()))?;
        let ScanEvent::Frame { offset, header, bytes } = ev else {
            continue;
        };
        seen += 1;
        if seen <= a.skip {
            continue;
        }
        let data = &bytes[header.header_len()..];
        let samples = (!header.complex && !a.headers_only)
            .then(|| vdif::codec::decode(data, header.bits_per_sample).ok())
            .flatten()
            .map(|v| vdif::codec::deinterleave(&v, header.channels() as usize));
        let line = DumpLine {
            offset,
            header,
            station: header.station_name(),
            edv: header.edv(),
            samples,
        };
        let written = serde_json::to_writer(&mut out, &line)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out));
        match written {
            // The reader (e.g. `head`) has seen enough: not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            other => other?,
        }
        printed += 1;
        if printed >= a.frames {
            break;
        }
    }
    if printed == 0 {
        return Err(anyhow!("{}: no VDIF frames to dump", a.file.display()));
    }
    Ok(())
}
