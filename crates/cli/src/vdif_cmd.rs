//! `evlbi vdif …`: generate, inspect, stats, dump.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use vdif::gen::{Generator, StationOutput};
use vdif::inspect::inspect;
use vdif::stats::{SamplerStats, StateCounter, Verdict};
use vdif::{CheckedFrames, FrameLayout, FrameScanner, ScanEvent};

use crate::flags::JsonOutput;
use crate::scan_args::DisksArg;
use crate::shared_args::{FpsArg, QuietArg};
use crate::units::{parse_rate, si_fmt};
use crate::vdif_args::{CorrelateArgs, FileReport, SignalArgs, BYTES_BAR};
use crate::vdif_print::{print_fringe, print_inspect, print_stats};
use crate::{progress_bar, usage, usage_in, ProblemsFound};

/// Bytes at the start of its input that `dump` checks (as `inspect` checks a whole file)
/// before it prints a frame: reading a whole recording first would take minutes.
const DUMP_CHECK_BYTES: u64 = 64 << 20;

#[derive(Subcommand)]
pub enum VdifCommand {
    /// Generate synthetic multi-station VDIF: common sky noise (delayed per station) plus
    /// independent station noise, optionally a tone, quantised by an optimal sampler.
    #[command(after_help = "Examples:\n  \
        evlbi vdif gen --stations Ef,Wb,Jb --rate 512M --bits 2 --channels 8 --threads 1 --frame 8000 \\\n      \
        --seconds 10 --delay Wb=1.5us --snr 0.01 --tone 1.2MHz --out data/\n  \
        evlbi vdif gen --stations Ef,Wb --rate 4096M --channels 16 --threads 2 --seconds 1 --seed 7 --start 2026-01-01T00:00:00Z\n  \
        evlbi vdif gen --stations Ef,Wb --rate 64M --channels 4 --complex --delay Wb=1.25us --seconds 2 --out cplx/   # I/Q, 4 MS/s\n\n\
        evlbi vdif gen --format mark5b --stations Ef,Wb --rate 64M --channels 2 --delay Wb=1.5us --seconds 2 --out m5b/\n\n\
        One file per station, DIR/<station>.vdif (.m5b with --format mark5b). The same --seed and --start give byte-identical files.")]
    Gen(GenArgs),
    /// Describe a VDIF file: stations, threads, frame size, bits, channels, rate, start time
    /// (leap seconds counted), duration, invalid frames, gaps (within a second even without a
    /// frame rate; a thread that starts late or ends early against its station's others) and
    /// garbage. Exit code 1 when problems are found (a recorded scan's missing blocks among
    /// them) or the file is not VDIF (Mark4, DADA, GUPPI data are named). A Mark5B file is
    /// inspected as Mark5B (`"format": "mark5b"` in the JSON): frames, rate, time (the time
    /// code's day taken nearest today), gaps and garbage.
    #[command(
        after_help = "Examples:\n  evlbi vdif inspect data/Ef.vdif\n  evlbi vdif inspect --disks '/mnt/disk*' vbs://ev123_no0001_dsEf   # a FlexBuff recording\n  evlbi vdif inspect mk6://ev123_ef_no0001                             # on /mnt/disks/*/*\n  evlbi vdif inspect --json data/*.vdif   # one object per file; {\"file\", \"error\"} where one fails\n  evlbi vdif inspect --export-json inspect.json data/Ef.vdif   # text on stdout, JSON in the file\n  evlbi vdif inspect --fps 1600 short.vdif   # frame rate of a file shorter than a second\n  evlbi vdif inspect Ef.m5b                  # a Mark5B file\n\nFrames are believed only in runs of three, each starting where the one before ends, whose headers agree.\nA file with under half of its bytes in such frames is \"not VDIF (n % of bytes in valid frames)\", naming Mark4, DADA and GUPPI data (Mark5B is read as Mark5B)."
    )]
    Inspect(InspectArgs),
    /// Sampler statistics: how often each 2-bit (or 1-bit) state occurs per thread and channel
    /// (I and Q apart for complex data), beside the Gaussian expectation (16/34/34/16 % for
    /// optimal 2-bit levels), with a verdict. Exit code 1 on a bad verdict, skipped garbage or a
    /// truncated frame, missing frames, or a file that is not VDIF.
    #[command(
        after_help = "Examples:\n  evlbi vdif stats data/Ef.vdif\n  evlbi vdif stats --max-frames 10000 --json data/Ef.vdif"
    )]
    Stats(StatsArgs),
    /// Correlate two stations (a small FX correlator): find the fringe's delay, |amplitude| and
    /// S/N on one channel (real or complex samples), with frames flagged invalid on either side
    /// weighted out. Exit code 1 when no peak reaches --min-snr ("no fringe"), an input is not
    /// VDIF, or lacks the thread or station asked for.
    #[command(after_help = "Examples:\n  \
        evlbi vdif gen --stations Ef,Wb --seconds 2 --delay Wb=1.5us --snr 0.01 --out data/\n  \
        evlbi vdif correlate data/Ef.vdif data/Wb.vdif            # delay 48 samples = 1.5 us\n  \
        evlbi vdif correlate --channel 3 --fft 1024 --json data/Ef.vdif data/Wb.vdif\n  \
        evlbi vdif correlate --channel 1 cplx/Ef.vdif cplx/Wb.vdif   # complex: delay 5 complex samples = 1.25 us\n  \
        evlbi vdif correlate --min-snr 5 data/Ef.vdif data/Wb.vdif\n  \
        evlbi vdif correlate --station-a Ef --station-b Wb both.vdif both.vdif   # a file of several stations")]
    Correlate(CorrelateArgs),
    /// Print headers and decoded samples of the first frames as JSON lines (one per frame):
    /// 1/2/4/8-bit samples per channel, [I, Q] pairs for complex data. The first 64 MiB are
    /// checked first, as inspect checks a file: bytes that are not VDIF are refused (exit 1).
    #[command(
        after_help = "Examples:\n  evlbi vdif dump --frames 2 data/Ef.vdif | head -c 600\n  evlbi vdif dump --headers-only --frames 100000 data/Ef.vdif | wc -l"
    )]
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
    /// Output directory of the files (created if missing).
    #[arg(long, short, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// Frame format of the files. `mark5b`: DIR/<station>.m5b, 10016-byte Mark5B frames (VLBA
    /// time code and CRC, 10 000-byte payloads: --frame is 10000) of the same samples, one
    /// stream (--threads 1), 2-bit real only.
    #[arg(long, value_enum, default_value = "vdif")]
    format: GenFormat,
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    quiet: QuietArg,
}

/// `vdif gen --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum GenFormat {
    /// VDIF 1.1.1.
    Vdif,
    /// Mark5B.
    Mark5b,
}

#[derive(Args)]
pub struct InspectArgs {
    /// VDIF files, or recorded scans: vbs://SCAN, mk6://SCAN (see --disks).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    disks: DisksArg,
    #[command(flatten)]
    fps: FpsArg,
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
    /// Frame format of the files.
    format: GenFormat,
    /// Frame layout used (`frame_len` is VDIF's: a Mark5B frame is `data_len` + 16 bytes).
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

fn gen(mut a: GenArgs) -> Result<()> {
    let mark5b = a.format == GenFormat::Mark5b;
    if mark5b {
        const DEFAULT_FRAME: usize = 8000;
        let payload = vdif::mark5b::MARK5B_DATA_LEN;
        if a.signal.frame != DEFAULT_FRAME && a.signal.frame != payload {
            return Err(usage(format!(
                "--frame {}: a Mark5B payload is {payload} bytes",
                a.signal.frame
            )));
        }
        a.signal.frame = payload;
    }
    let config = a.signal.to_config(a.rate, a.seconds)?;
    let (layout, ref_epoch, start_seconds) = (config.layout, config.ref_epoch, config.start_seconds);
    let (extension, frame_len) = if mark5b {
        vdif::gen::mark5b_layout(&layout).map_err(crate::usage_of)?;
        ("m5b", vdif::formats::MARK5B_FRAME_LEN)
    } else {
        ("vdif", layout.frame_len)
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create output directory {}", a.out.display()))?;
    let paths: Vec<PathBuf> = config
        .stations
        .iter()
        .map(|s| a.out.join(format!("{}.{extension}", s.name)))
        .collect();
    let total = (frame_len as u64) * u64::from(layout.frames_per_second) * u64::from(a.seconds) * paths.len() as u64;
    let started = Instant::now();
    let generator = Generator::new(config);
    let done = AtomicU64::new(0);
    let bar = progress_bar(total, a.quiet.quiet || a.output.json, BYTES_BAR);
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
                    let progress = |n| {
                        done.fetch_add(n, Ordering::Relaxed);
                    };
                    let written = if mark5b {
                        generator.write_station_mark5b(s, &mut w, progress)
                    } else {
                        generator.write_station(s, &mut w, progress)
                    };
                    written.with_context(|| format!("writing {}", path.display()))
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
        format: a.format,
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
        "generated {} station(s) x {} s from {}: {}{}b/s, {}-bit {}, {} channel(s) in {} thread(s), {}-byte frames, {} per thread, {}S/s per channel",
        report.stations.len(),
        a.seconds,
        report.start_utc,
        if mark5b { "Mark5B, " } else { "" },
        si_fmt(layout.rate_bps),
        layout.bits,
        if layout.complex { "complex" } else { "real" },
        layout.channels,
        layout.threads,
        frame_len,
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
/// progress bar, and what is wrong with the scan (missing blocks and the like: its bytes are
/// read with them left out).
fn open(path: &Path, disks: &DisksArg) -> Result<(ProgressReader, Vec<String>)> {
    let input = crate::scan_args::open_input(path, disks)?;
    // Small files finish before a bar could be read; large ones take seconds to minutes.
    let bar = progress_bar(input.len, input.len < (256 << 20), BYTES_BAR);
    let reader = ProgressReader {
        inner: BufReader::with_capacity(1 << 20, input.reader),
        bar,
    };
    Ok((reader, input.problems))
}

/// [`open`] for a command without a verdict of its own: the scan's problems are warnings.
fn open_warning(path: &Path, disks: &DisksArg) -> Result<ProgressReader> {
    let (reader, problems) = open(path, disks)?;
    for p in problems {
        status!("warning: {}: {p}", path.display());
    }
    Ok(reader)
}

/// One file of `vdif inspect --json`: its report, or why there is none.
#[derive(Serialize)]
#[serde(untagged)]
enum FileResult {
    Report(Box<FileReport>),
    Failed { file: PathBuf, error: String },
}

/// Inspect VDIF, or Mark5B when the first bytes say so (`vdif::formats::identify`, the check
/// that names Mark5B in "not VDIF").
fn inspect_any(mut r: ProgressReader, fps: Option<vdif::FrameRate>) -> Result<vdif::inspect::InspectReport> {
    use std::io::Read;
    let mut head = Vec::new();
    (&mut r)
        .take(vdif::formats::IDENTIFY_BYTES as u64)
        .read_to_end(&mut head)?;
    let whole = head.len() < vdif::formats::IDENTIFY_BYTES;
    let all = std::io::Cursor::new(head.clone()).chain(r);
    if let Some(vdif::formats::KnownFormat::Mark5b { .. }) = vdif::formats::identify(&head, whole) {
        // The time code's day is resolved nearest today.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        return Ok(vdif::inspect::mark5b::inspect_mark5b(all, fps, now)?);
    }
    Ok(inspect(all, fps, |_, _| {})?)
}

fn inspect_files(a: InspectArgs) -> Result<()> {
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for path in &a.files {
        let inspected = open(path, &a.disks).and_then(|(r, scan_problems)| {
            let mut report = inspect_any(r, a.fps.fps)?;
            report.problems.splice(0..0, scan_problems);
            Ok(report)
        });
        match inspected {
            Ok(report) => {
                if !report.problems.is_empty() {
                    failures.push(format!("{}: {}", path.display(), report.problems.join("; ")));
                }
                results.push(FileResult::Report(Box::new(FileReport {
                    file: path.clone(),
                    report,
                })));
            }
            Err(e) => {
                failures.push(format!("{}: {e:#}", path.display()));
                results.push(FileResult::Failed {
                    file: path.clone(),
                    error: format!("{e:#}"),
                });
            }
        }
    }
    let text = if a.files.len() == 1 {
        a.output.emit(&results[0])?
    } else {
        a.output.emit(&results)?
    };
    if text {
        for r in &results {
            if let FileResult::Report(r) = r {
                print_inspect(r);
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(ProblemsFound(failures.join("\n"))))
    }
}

fn stats(a: StatsArgs) -> Result<()> {
    let name = a.file.display().to_string();
    // The check every VDIF reader applies runs alongside, so garbage, truncation and a file that
    // is not VDIF are reported here exactly as `vdif inspect` reports them.
    let (reader, scan_problems) = open(&a.file, &a.disks)?;
    let mut frames = CheckedFrames::new(reader, None);
    // Why the samples cannot be counted is said only once the bytes are known to be VDIF.
    let mut counter: Option<Result<StateCounter, vdif::stats::StatsError>> = None;
    let mut n = 0u64;
    for ev in frames.by_ref() {
        let ev = ev.with_context(|| format!("reading {name}"))?;
        if let ScanEvent::Frame { header, bytes, .. } = &ev {
            if let Ok(c) = counter.get_or_insert_with(|| StateCounter::for_header(header)) {
                c.add(header, &bytes[header.header_len()..]);
            }
            n += 1;
            if a.max_frames > 0 && n >= a.max_frames {
                break;
            }
        }
    }
    let scan = frames.finish().map_err(|e| anyhow!("{name}: {e}"))?;
    let counter = match counter {
        None => return Err(anyhow!("{name}: no VDIF frames found")),
        Some(c) => c.map_err(|e| anyhow!("{name}: {e}"))?,
    };
    let mut stats: SamplerStats = counter.finish();
    stats.bytes_skipped = scan.garbage_bytes + scan.truncated.map_or(0, |(_, len, _)| len);
    stats.problems = scan_problems;
    stats.problems.extend(scan.problems);
    if counter.uncounted_frames() > 0 {
        stats.problems.push(format!(
            "{} frame(s) of further station/thread streams not counted (memory bound)",
            counter.uncounted_frames()
        ));
    }
    if stats.verdict == Verdict::Bad {
        stats
            .problems
            .push("sampler states far from the Gaussian expectation (verdict bad)".into());
    }
    if a.output.emit(&stats)? {
        print_stats(&name, &stats);
    }
    if stats.problems.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(ProblemsFound(format!("{name}: {}", stats.problems.join("; ")))))
    }
}

fn correlate(a: CorrelateArgs) -> Result<()> {
    let station = |flag: &str, s: &Option<String>| {
        s.as_deref()
            .map(|s| vdif::StationId::parse(s).map_err(|e| usage_in(format!("--{flag}"), e)))
            .transpose()
    };
    let config = fxcorr::CorrelateConfig {
        thread: a.thread,
        channel: a.channel,
        fft_len: a.fft,
        max_frames: a.max_frames,
        min_snr: a.min_snr,
        station_a: station("station-a", &a.station_a)?,
        station_b: station("station-b", &a.station_b)?,
    };
    // Both inputs are checked as they are read (fxcorr runs the check every VDIF reader runs);
    // the sample rate, for the delay in seconds, is what inspecting A finds.
    let (ra, rb) = (open_warning(&a.a, &a.disks)?, open_warning(&a.b, &a.disks)?);
    let fringe = fxcorr::correlate(ra, rb, config, None).map_err(|e| match e {
        fxcorr::CorrelateError::Parameter(m) => usage(m),
        other => anyhow!("{other} (A = {}, B = {})", a.a.display(), a.b.display()),
    })?;
    if a.output.emit(&fringe)? {
        print_fringe(&a, &fringe);
    }
    if fringe.detected {
        Ok(())
    } else {
        Err(anyhow!(ProblemsFound(format!(
            "{} x {}: no fringe above S/N {}",
            a.a.display(),
            a.b.display(),
            a.min_snr
        ))))
    }
}

/// Decoded samples of a frame, per channel.
#[derive(Serialize)]
#[serde(untagged)]
enum Samples {
    /// `[channel][time]` values.
    Real(Vec<Vec<f32>>),
    /// `[channel][time]` as `[I, Q]` pairs.
    Complex(Vec<Vec<[f32; 2]>>),
}

#[derive(Serialize)]
struct DumpLine {
    offset: u64,
    header: vdif::VdifHeader,
    station: String,
    edv: u8,
    /// UTC of the start of the frame's second (leap seconds counted).
    second_utc: String,
    samples_per_frame: u64,
    /// Decoded sample values per channel (`null` with --headers-only or for widths without
    /// agreed levels, see `samples_note`).
    samples: Option<Samples>,
    /// Why `samples` is null for a width the decoder has no levels for.
    #[serde(skip_serializing_if = "Option::is_none")]
    samples_note: Option<String>,
}

/// The samples of one frame (real or complex) per channel, or why they cannot be decoded.
fn frame_samples(h: &vdif::VdifHeader, data: &[u8]) -> Result<Samples, vdif::CodecError> {
    let values = vdif::codec::decode_values(data, h.bits_per_sample, h.complex)?;
    let per = h.values_per_time_sample() as usize;
    let values = &values[..(h.samples_per_frame() as usize * per).min(values.len())];
    let nch = h.channels() as usize;
    Ok(if h.complex {
        let pairs: Vec<[f32; 2]> = values.chunks_exact(2).map(|p| [p[0], p[1]]).collect();
        Samples::Complex(vdif::codec::deinterleave(&pairs, nch))
    } else {
        Samples::Real(vdif::codec::deinterleave(values, nch))
    })
}

fn dump(a: DumpArgs) -> Result<()> {
    let start = crate::scan_args::open_input(&a.file, &a.disks)?;
    vdif::check::check_start(start.reader, DUMP_CHECK_BYTES).map_err(|e| anyhow!("{}: {e}", a.file.display()))?;
    let mut seen = 0u64;
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for ev in FrameScanner::new(open_warning(&a.file, &a.disks)?) {
        let ev = ev.with_context(|| format!("reading {}", a.file.display()))?;
        let ScanEvent::Frame { offset, header, bytes } = ev else {
            continue;
        };
        seen += 1;
        if seen <= a.skip {
            continue;
        }
        let data = &bytes[header.header_len()..];
        let (samples, samples_note) = if a.headers_only {
            (None, None)
        } else {
            match frame_samples(&header, data) {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e.to_string())),
            }
        };
        let line = DumpLine {
            offset,
            header,
            station: header.station_id.to_string(),
            edv: header.edv(),
            second_utc: vdif::time::iso(header.ref_epoch, header.seconds, 0.0),
            samples_per_frame: header.samples_per_frame(),
            samples,
            samples_note,
        };
        let written = serde_json::to_writer(&mut out, &line)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out));
        match written {
            // The reader (e.g. `head`) has seen enough: no error message, but the status every
            // command gives then (141, README "Conventions"), not success.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => crate::exit_output_closed(),
            other => other?,
        }
        printed += 1;
        if printed >= a.frames {
            break;
        }
    }
    if printed == 0 {
        return Err(if seen > 0 {
            anyhow!(
                "{}: --skip {} passes the end: the file has {seen} VDIF frame(s)",
                a.file.display(),
                a.skip
            )
        } else {
            anyhow!(
                "{}: no VDIF frames to dump (`evlbi vdif inspect` says why)",
                a.file.display()
            )
        });
    }
    Ok(())
}
