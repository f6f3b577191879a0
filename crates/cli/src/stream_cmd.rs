//! `evlbi stream send|recv|relay`: real-time VDIF over UDP. `stream send` is here; `recv` and
//! `relay` have modules of their own, the text views are in `stream_print`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use stream_session::send::{run_sender_observed, Input, SendConfig};
use vdif::FrameRate;

use crate::flags::{JsonOutput, LegacyJsonOut};
use crate::session_flags::session_error;
use crate::shared_args::{ArqLatencyArg, DataRateArg, FpsArg, QuietArg};
use crate::stream_common::Format;
use crate::stream_print::{held_up_notes, send_live_line, send_summary};
use crate::units::{bytes_fmt, parse_duration, parse_factor, parse_fraction};
use crate::{stop_flag, usage, ProblemsFound};

#[derive(Subcommand)]
pub enum StreamCommand {
    /// Send VDIF files (one station each) as one frame per UDP datagram, paced on an exact
    /// timeline at the data rate (from the headers, or --rate).
    #[command(after_help = "Examples:\n  \
        evlbi stream send --to 127.0.0.1:46227 data/Ef.vdif data/Wb.vdif          # two stations, rate from the files\n  \
        evlbi stream send --to corr:46227 Ef.vdif --rate 4096M --loop --duration 10m\n  \
        evlbi stream send --to corr:46227 Ef.vdif --arq-latency 300ms             # answer NAKs for 300 ms\n  \
        evlbi stream send --to corr:46227 Ef.vdif --seq-format jive5ab            # jive5ab udps framing\n  \
        evlbi stream send --to corr:46227 --disks '/mnt/disk*' vbs://ev123_no0001_dsEf   # a FlexBuff recording\n  \
        evlbi stream send --to corr:46227 --generate --stations Ef,Wb --rate 1G --loop --duration 1m\n  \
        # DBBC3-like backend: 2 boards (sockets), board 1 threads 0-1, board 2 threads 2-3\n  \
        evlbi stream send --to corr:46227 --generate --stations Ef --threads 4 --rate 4096M --senders 2 --seq-format jive5ab --loop --duration 1m\n  \
        # R2DBE-like EHT stream: 8224-byte frames, 8232-byte udps datagrams\n  \
        evlbi stream send --to corr:46227 --generate --stations Aa --frame 8192 --rate 2048M --seq-format jive5ab --loop --duration 1m")]
    Send(Box<SendArgs>),
    /// Receive streams and write continuous VDIF per station: reordering repaired, lost frames
    /// written with the invalid bit set at the right time, everything counted.
    #[command(after_help = "Examples:\n  \
        evlbi stream recv --listen 46227 --out rx/                                # until Ctrl-C\n  \
        evlbi stream recv --listen 46227 --out rx/ --arq --latency 300ms --export-json summary.json\n  \
        evlbi stream recv --listen 46227 --seq-format jive5ab --fps 8000 --out rx/  # from jive5ab udps\n  \
        evlbi stream recv --listen 46227 --idle-timeout 5s                         # memory sink: count only\n  \
        evlbi stream recv --listen 46227 --listen 46228 --arq --out rx/ --split thread  # two relays, a file per thread\n  \
        evlbi stream recv --listen 46227 --format vbs --disks '/mnt/disk*' --scan ev123_no0001  # FlexBuff: vbs://ev123_no0001_dsEf\n  \
        evlbi stream recv --listen 46227 --format mk6 --disks '/mnt/disks/1/*' --scan 'ev123_{station}_no0001'  # Mark6 module 1\n\n\
        vbs and mk6 spread blocks of whole frames over the disks, one writer (process) per disk, O_DIRECT where the \
        file system takes it; a disk that fails (full, read-only, gone) leaves the set and the scan goes on on the \
        others, what it lost counted. Read a scan back with `evlbi vdif inspect vbs://SCAN`, `vdif gather`, `vdif scans`.")]
    Recv(Box<crate::stream_recv_cmd::RecvArgs>),
    /// Relay a backend's live VDIF (UDP, several ports and boards) to a correlator: paced at
    /// the data rate, lost frames repeated on NAK (native framing), a local copy on disk
    /// (--tee), every input sender counted.
    #[command(after_help = crate::stream_relay_cmd::EXAMPLES)]
    Relay(Box<crate::stream_relay_cmd::RelayArgs>),
}

#[derive(Args)]
pub struct SendArgs {
    /// VDIF files, one station each, or recorded scans: vbs://SCAN, mk6://SCAN (see --disks).
    #[arg(required_unless_present = "generate")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    disks: crate::scan_args::DisksArg,
    /// Synthesise the stations instead of reading files (the `vdif gen` options below; default
    /// 512 Mb/s each): --seconds of data are generated into memory and sent, looped with --loop
    /// or --duration (which sends that long).
    #[arg(long, conflicts_with = "files", requires = "stations")]
    generate: bool,
    #[command(flatten)]
    signal: crate::vdif_args::SignalArgs,
    /// With --generate: seconds of data to generate (and loop over).
    #[arg(long, default_value_t = 1)]
    seconds: u32,
    /// Receiver HOST:PORT. With --senders K, give it once (every board sends there) or K times
    /// (board k to the k-th, as a DBBC3's boards each have their own destination port).
    /// tcp:HOST:PORT, once per file, sends each file over TCP to a correlator that is the server
    /// (a DiFX mpifxcorr NETWORK datastream): every frame once, as fast as it reads, after
    /// waiting --connect-wait for the job's port to open.
    #[arg(long, required = true)]
    to: Vec<String>,
    /// With tcp: destinations, how long to wait for the correlator's port to open (its job
    /// starts after the data flow) before giving up.
    #[arg(long, value_parser = crate::units::parse_positive_duration, default_value = "30s")]
    connect_wait: Duration,
    #[command(flatten)]
    rate: DataRateArg,
    #[command(flatten)]
    fps: FpsArg,
    /// Datagram framing.
    #[arg(long, value_enum, default_value = "native")]
    seq_format: Format,
    /// Stop after this long: 10s, 10m. With --generate, send this long (the generated
    /// --seconds looped, as with --loop).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Restart each file at its end with VDIF time advanced (files of whole seconds).
    #[arg(long = "loop")]
    loop_files: bool,
    #[command(flatten)]
    arq: ArqLatencyArg,
    /// Drop this fraction of datagrams at random before sending (a lossy path inside the host): 1%.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    inject_loss: f64,
    /// Frames per system call (UDP GSO), sent together every N spacings: for rates beyond one
    /// core's per-datagram budget; the wire then sees N-frame bursts.
    #[arg(long, default_value_t = 1)]
    burst: usize,
    /// How close to each departure the sender stops sleeping and spins on the clock. 100us (the
    /// default) spins through any spacing under 100 us: a whole core at 4 Gb/s, tightest gaps.
    /// Smaller (e.g. 20us, with --burst 8) sleeps most of each gap with 1 ns timer slack: far
    /// less CPU, but a late wake-up (tens of us on a VM) shows in the gap p99.
    #[arg(long, value_parser = parse_duration, default_value = "100us")]
    spin: Duration,
    /// Catch up on the timeline after falling up to this far behind (a descheduled sender);
    /// later than that the time is given up, counted as a slip and said on stderr. A station's
    /// data come at a fixed rate: time given up is data never sent. See --late-frames.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    max_lag: Duration,
    /// What a sender more than --max-lag behind does with the frames whose time has passed:
    /// `send` (every frame is sent, later than its time: the timeline is re-anchored) or `skip`
    /// (frames stay at their time, as a backend's do: the late ones are never sent, counted
    /// and said on stderr). With --generate --start now, `skip` keeps the VDIF time on the
    /// clock on a loaded host, as a Field System session that names scan times needs.
    #[arg(long, value_enum, default_value_t = LateFrames::Send)]
    late_frames: LateFrames,
    /// While catching up, send at up to this multiple of the rate (1.0 to 16): 2 clears a
    /// backlog in as long as it took to build, without line-rate bursts. Keep it below the
    /// path's capacity ÷ the stream rate (`evlbi probe` measures the capacity): through a path
    /// of 1.25× the rate, a 200 ms hold caught up at 2× lost 1.3 % of the frames, at 1.2× none.
    #[arg(long, default_value_t = stream_session::send::DEFAULT_CATCH_UP, value_parser = parse_factor)]
    catch_up: f64,
    /// Send from K sockets, each bound to its own local port, like the K boards (outputs) of a
    /// digital backend (DBBC3/FiLa10G, RDBE): every station's VDIF threads are split into K
    /// contiguous blocks, one per socket (4 threads over 2: threads 0-1 and 2-3), each socket paced
    /// at its share of the rate with the frames of one time step leaving together. In jive5ab
    /// framing each socket numbers its own datagrams (one udps sequence per socket), as each
    /// board does. K > 1 needs --seq-format jive5ab or none, at most --threads senders, and data in
    /// memory (--generate, or files that fit). The JSON lists each sender's port, threads and
    /// frames.
    #[arg(long, default_value_t = 1)]
    senders: usize,
    /// Seed of --inject-loss.
    #[arg(long, default_value_t = 1)]
    loss_seed: u64,
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    legacy_out: LegacyJsonOut,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
    #[command(flatten)]
    quiet: QuietArg,
}

pub fn run(cmd: StreamCommand) -> Result<()> {
    match cmd {
        StreamCommand::Send(a) => send(*a),
        StreamCommand::Recv(a) => crate::stream_recv_cmd::recv(*a),
        StreamCommand::Relay(a) => crate::stream_relay_cmd::relay(*a),
    }
}

/// `--generate`: each station's frames synthesised into memory (the same generator as `vdif gen`),
/// and their frame rate per thread (a file of one second could not tell it otherwise).
fn generate(a: &SendArgs) -> Result<(Vec<Input>, FrameRate)> {
    let rate = a.rate.rate.map_or(512e6, |r| r.get() as f64);
    let config = a.signal.to_config(rate, a.seconds)?;
    let bytes = config.layout.bytes_per_second() * u64::from(a.seconds);
    if bytes > 4 << 30 {
        return Err(usage(format!(
            "--generate would hold {} per station in memory; use fewer --seconds (it loops with --loop)",
            bytes_fmt(bytes as f64)
        )));
    }
    let names: Vec<String> = config.stations.iter().map(|s| s.name.clone()).collect();
    let fps = config.layout.frames_per_second;
    let generator = vdif::gen::Generator::new(config);
    let mut inputs = Vec::new();
    for (s, name) in names.into_iter().enumerate() {
        let mut data = Vec::with_capacity(bytes as usize);
        generator
            .write_station(s, &mut data, |_| {})
            .context("generating in memory")?;
        inputs.push(Input::Memory {
            name: format!("generated:{name}"),
            data,
        });
    }
    Ok((inputs, fps))
}

/// The stations to send: generated, or read from files and recorded scans; their frame rate
/// when known.
fn send_inputs(a: &SendArgs) -> Result<(Vec<Input>, Option<FrameRate>)> {
    Ok(if a.generate {
        let (inputs, fps) = generate(a)?;
        (inputs, a.fps.fps.or(Some(fps)))
    } else {
        if !a.signal.stations.is_empty() {
            return Err(usage("--stations goes with --generate (files carry their own station)"));
        }
        let inputs = a
            .files
            .iter()
            .map(|f| crate::scan_args::stream_input(f, &a.disks))
            .collect::<Result<Vec<_>>>()?;
        (inputs, a.fps.fps)
    })
}

/// The sender's configuration: the flags translated into [`SendConfig`], checked by its one
/// `validate()` (its errors said in flags).
fn send_config(a: &SendArgs) -> Result<SendConfig> {
    let mut dests = Vec::with_capacity(a.to.len());
    for t in &a.to {
        dests.push(crate::addr::peer("--to", t, None)?.1);
    }
    let to = *dests.first().ok_or_else(|| usage("--to HOST:PORT is required"))?;
    let (inputs, fps) = send_inputs(a)?;
    let cfg = SendConfig {
        board_to: if dests.len() > 1 { dests } else { Vec::new() },
        fps,
        rate_bps: a.rate.rate,
        format: a.seq_format.into(),
        duration: a.duration,
        // Generated data are whole seconds: `--generate --duration 4s` means four seconds sent,
        // not the one generated (issue 29: it sent 1 s unless --loop was given too).
        loop_files: a.loop_files || (a.generate && a.duration.is_some()),
        arq_latency: a.arq.arq_latency,
        inject_loss: a.inject_loss,
        seed: a.loss_seed,
        burst: a.burst,
        spin: a.spin,
        max_lag: a.max_lag,
        catch_up: a.catch_up,
        senders: a.senders,
        realtime: a.generate && a.signal.start_is_now(),
        skip_late: a.late_frames == LateFrames::Skip,
        ..SendConfig::new(to, inputs)
    };
    cfg.validate().map_err(|e| session_error(e.into()))
}

/// `--late-frames`: what a held-up sender does with frames whose time has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LateFrames {
    /// Send every frame, later than its time (the timeline is re-anchored).
    Send,
    /// Skip the frames more than --max-lag late (they stay at their time, as a backend's).
    Skip,
}

fn send(a: SendArgs) -> Result<()> {
    if a.to.iter().any(|t| crate::addr::transport(t).0) {
        return send_tcp(&a);
    }
    let cfg = send_config(&a)?;
    let stop = stop_flag()?;
    let metrics = a.metrics.start("stream send")?;
    let observer = send_observer(
        metrics.observer("stream_send", metrics::Status::StreamSend),
        a.quiet.quiet,
    );
    let r = run_sender_observed(cfg, &stop, observer).map_err(session_error)?;
    let text = a.legacy_out.apply(&a.output).emit(&r)?;
    for w in &r.warnings {
        status!("warning: {w}");
    }
    held_up_notes(&r);
    if text {
        send_summary(&r);
    }
    if r.interrupted {
        return Err(ProblemsFound("interrupted".into()).into());
    }
    Ok(())
}

/// `stream send --to tcp:HOST:PORT`: each file to its own DiFX datastream, at once.
fn send_tcp(a: &SendArgs) -> Result<()> {
    if a.generate || a.to.len() != a.files.len() || !a.to.iter().all(|t| crate::addr::transport(t).0) {
        return Err(usage(format!(
            "tcp: destinations take one file each: {} file(s), {} --to; all of them tcp:HOST:PORT (no --generate)",
            a.files.len(),
            a.to.len()
        )));
    }
    let mut jobs = Vec::new();
    for (file, to) in a.files.iter().zip(&a.to) {
        jobs.push((
            file.clone(),
            crate::addr::peer("--to", crate::addr::transport(to).1, None)?.1,
        ));
    }
    let stop = stop_flag()?;
    let wait = a.connect_wait;
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|(file, to)| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || stream_session::live::difx::send_file(&file, to, wait, &stop))
        })
        .collect();
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => failures.push(e.to_string()),
            Err(_) => failures.push("a sending thread panicked".into()),
        }
    }
    if a.legacy_out.apply(&a.output).emit(&reports)? {
        reports.iter().for_each(crate::stream_print::difx_send_line);
    }
    if !failures.is_empty() {
        return Err(ProblemsFound(failures.join("; ")).into());
    }
    if reports.iter().any(|r| r.interrupted) {
        return Err(ProblemsFound("interrupted".into()).into());
    }
    Ok(())
}

/// What `stream send` does with its counts each second: a live line on stderr (unless `quiet`),
/// and the `--metrics` page's update.
fn send_observer(
    mut metrics: Option<stream_session::Observer<stream::results::SendStatus>>,
    quiet: bool,
) -> Option<stream_session::Observer<stream::results::SendStatus>> {
    if quiet {
        return metrics;
    }
    let mut last = (0.0, 0u64);
    Some(Box::new(move |s: stream::results::SendStatus| {
        status!("{}", send_live_line(&s, &mut last));
        if let Some(m) = metrics.as_mut() {
            m(s);
        }
    }))
}
