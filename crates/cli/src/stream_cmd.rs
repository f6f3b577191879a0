//! `evlbi stream send|recv|relay`: real-time VDIF over UDP.

use std::path::PathBuf;
use std::time::Duration;
use stream_session::live::sfxc::SfxcAddr;
use stream_session::live::{LiveConfig, LiveTarget};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use recording::write::WriterPlacement;
use stream::{ReceiverConfig, SourceFilter};
use stream_session::recv::{BoundReceiver, RecvConfig};
use stream_session::send::{run_sender_observed, Input, SendConfig};

use crate::flags::{JsonOutput, JsonOutputOldFile, LegacyJsonOut};
use crate::stream_common::{parse_catch_up, recording_lines, rejected_lines, session_error, Format, Split};
use crate::units::{
    bytes_fmt, parse_duration, parse_fraction, parse_positive_duration, parse_rate, parse_size, si_fmt, us_fmt,
};
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
    Recv(Box<RecvArgs>),
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
    #[arg(long, required = true)]
    to: Vec<String>,
    /// Data rate per station (sample bits, headers excluded): 4096M. Default: from the files.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Frames per second per thread, if a file is under a second long and states no sample rate.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    fps: Option<u32>,
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
    /// Answer the receiver's NAKs for frames up to this old: 300ms (native framing).
    #[arg(long, value_parser = parse_duration)]
    arq_latency: Option<Duration>,
    /// Drop this fraction of datagrams at random before sending (a lossy path inside the host): 1%.
    #[arg(long, value_parser = parse_fraction, default_value = "0")]
    inject_loss: f64,
    /// Frames per system call (UDP GSO), sent together every N spacings: for rates beyond one
    /// core's per-datagram budget; the wire then sees N-frame bursts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    burst: u64,
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
    #[arg(long, default_value_t = stream_session::send::DEFAULT_CATCH_UP, value_parser = parse_catch_up)]
    catch_up: f64,
    /// Send from K sockets, each bound to its own local port, like the K boards (outputs) of a
    /// digital backend (DBBC3/FiLa10G, RDBE): every station's VDIF threads are split into K
    /// contiguous blocks, one per socket (4 threads over 2: threads 0-1 and 2-3), each socket paced
    /// at its share of the rate with the frames of one time step leaving together. In jive5ab
    /// framing each socket numbers its own datagrams (one udps sequence per socket), as each
    /// board does. K > 1 needs --seq-format jive5ab or none, at most --threads senders, and data in
    /// memory (--generate, or files that fit). The JSON lists each sender's port, threads and
    /// frames.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    senders: u16,
    /// Seed of --inject-loss.
    #[arg(long, default_value_t = 1)]
    loss_seed: u64,
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    legacy_out: LegacyJsonOut,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
    /// No live lines (one a second: frames sent, rate, time given up).
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
pub struct RecvArgs {
    /// PORT, ADDRESS:PORT, or a multicast GROUP@PORT[%IFACE] to listen on (0 picks a free port,
    /// printed on stderr). Repeat for several ports (e.g. one per station or backend board).
    #[arg(long, required = true)]
    listen: Vec<String>,
    /// Output directory of the recordings (files STATION_UTC.vdif). Without it, frames are
    /// counted and dropped. `sfxc:SOCKET` (a unix socket path) or `sfxc:tcp:[ADDRESS:]PORT`:
    /// no recording, the station's frames live to SFXC's `mk5://` reader (as jive5ab's
    /// `net2sfxc`): in time order, lost frames and silences (after 1 s) filled invalid at the
    /// station's rate, one station, one reader at a time; --latency defaults to 2ms then.
    #[arg(long, value_name = "DIR|sfxc:SOCKET")]
    out: Option<PathBuf>,
    /// Start a new file after this many bytes: 1G.
    #[arg(long, value_parser = parse_size)]
    chunk: Option<u64>,
    /// With --out (or --format vbs|mk6): one file (scan) per station, or per VDIF thread of
    /// each station.
    #[arg(long, value_enum, default_value = "station")]
    split: Split,
    #[command(flatten)]
    record: crate::scan_args::RecordArgs,
    /// Datagram framing.
    #[arg(long, value_enum, default_value = "native")]
    seq_format: Format,
    /// Frames per second per thread (jive5ab/none framing without a rate in the header).
    /// Without it such a stream is refused, said on stderr at its first frame.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    fps: Option<u32>,
    /// VDIF threads per station (jive5ab/none framing; default 1). Their ids may be any (a
    /// jive5ab fill pattern is thread 290): each id seen takes one of the N; a thread never seen
    /// is never filled.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Reorder window: frames are written this long (in stream time) after they are due. A
    /// frame may move the window past frames not yet arrived only as far as the time since the
    /// stream last advanced explains (at twice its rate; a quarter window at once, never over
    /// half): frames forged ahead of a live stream never flush real ones.
    /// [default: 50ms; 2ms with --out sfxc:]
    #[arg(long, value_parser = parse_duration)]
    latency: Option<Duration>,
    /// Ask the sender to repeat lost frames while they can still arrive within --latency.
    #[arg(long)]
    arq: bool,
    /// Gaps up to this long are filled with invalid frames; longer ones start a new file.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    max_fill: Duration,
    /// Accept data only from this host (IP alone: any port, so a restarted sender is still
    /// taken) or this exact IP:PORT.
    #[arg(long, value_name = "IP[:PORT]")]
    from: Option<SourceFilter>,
    /// Most stations (further ones are counted and dropped). A station that sent for under
    /// 100 ms and went quiet for 100 ms gives its slot to a new one sending for 100 ms (its
    /// frames held meanwhile); one silent for 10 s gives its slot to any. Sources not yet
    /// stations are checked in a table of 2×N (at least 64) sources, N streams each.
    #[arg(long, default_value_t = 16)]
    max_stations: usize,
    /// Receive socket buffer to ask for.
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    rcvbuf: u64,
    /// With --out: memory between the receiver and the file writer. It absorbs disk stalls of
    /// SIZE / data rate (256M: 0.5 s at 4 Gb/s); when it is full the receiver waits, the socket
    /// buffer fills and the kernel drops — reported as "writer stall", the disk's loss, not the
    /// network's.
    #[arg(long, value_parser = parse_size, default_value = "256M", value_name = "SIZE")]
    write_buffer: u64,
    /// With --out sfxc:: memory queued for the reader. A reader slower than the station costs
    /// the frames that do not fit, counted (`dropped_slow_reader`); the receiver never waits.
    #[arg(long, value_parser = parse_size, default_value = "128M", value_name = "SIZE")]
    live_buffer: u64,
    /// With --out: write with direct I/O (O_DIRECT), from the receiver's shared memory straight
    /// to the disk, past the page cache. Far less CPU at high rates (this VM, 8 GB: 2 s of
    /// system time instead of 17) and no dirty pages piling up when the disk is slower than
    /// memory. The file system must take O_DIRECT (ext4, xfs, tmpfs from Linux 6.6).
    #[arg(long, requires = "out")]
    direct: bool,
    /// For measurements only: run the file writes in a thread of this process instead of the
    /// writer process (saves two copies through a pipe; a SIGKILL can then leave a partial frame).
    #[arg(long, hide = true)]
    writer_in_thread: bool,
    /// Stop after this long.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop when no datagram arrived for this long (from the start when none ever does).
    #[arg(long, value_parser = parse_positive_duration)]
    idle_timeout: Option<Duration>,
    /// Live line cadence.
    #[arg(long, value_parser = parse_positive_duration, default_value = "1s")]
    interval: Duration,
    #[command(flatten)]
    output: JsonOutputOldFile,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
    /// No live lines.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(cmd: StreamCommand) -> Result<()> {
    match cmd {
        StreamCommand::Send(a) => send(*a),
        StreamCommand::Recv(a) => recv(*a),
        StreamCommand::Relay(a) => crate::stream_relay_cmd::relay(*a),
    }
}

/// `--generate`: each station's frames synthesised into memory (the same generator as `vdif gen`),
/// and their frame rate per thread (a file of one second could not tell it otherwise).
fn generate(a: &SendArgs) -> Result<(Vec<Input>, u32)> {
    let rate = a.rate.unwrap_or(512e6);
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
fn send_inputs(a: &SendArgs) -> Result<(Vec<Input>, Option<u32>)> {
    Ok(if a.generate {
        let (inputs, fps) = generate(a)?;
        (inputs, a.fps.or(Some(fps)))
    } else {
        if !a.signal.stations.is_empty() {
            return Err(usage("--stations goes with --generate (files carry their own station)"));
        }
        let inputs = a
            .files
            .iter()
            .map(|f| crate::scan_args::stream_input(f, &a.disks))
            .collect::<Result<Vec<_>>>()?;
        (inputs, a.fps)
    })
}

/// The sender's configuration from its flags (usage errors for combinations that cannot work).
fn send_config(a: &SendArgs) -> Result<SendConfig> {
    let mut dests = Vec::with_capacity(a.to.len());
    for t in &a.to {
        dests.push(crate::addr::peer("--to", t, None)?.1);
    }
    if dests.len() > 1 && dests.len() != usize::from(a.senders) {
        return Err(usage(format!(
            "{} --to for --senders {}: give one destination for all boards or one per board",
            dests.len(),
            a.senders
        )));
    }
    let to = *dests.first().ok_or_else(|| usage("--to HOST:PORT is required"))?;
    let board_to = if dests.len() > 1 { dests } else { Vec::new() };
    if a.arq_latency.is_some() && !matches!(a.seq_format, Format::Native) {
        return Err(usage("--arq-latency needs --seq-format native"));
    }
    check_senders(a)?;
    let (inputs, fps) = send_inputs(a)?;
    Ok(SendConfig {
        to,
        board_to,
        inputs,
        fps,
        rate_bps: a.rate,
        format: a.seq_format.into(),
        duration: a.duration,
        // Generated data are whole seconds: `--generate --duration 4s` means four seconds sent,
        // not the one generated (issue 29: it sent 1 s unless --loop was given too).
        loop_files: a.loop_files || (a.generate && a.duration.is_some()),
        arq_latency: a.arq_latency,
        inject_loss: a.inject_loss,
        seed: a.loss_seed,
        sndbuf: 8 << 20,
        burst: a.burst as usize,
        spin: a.spin.min(Duration::from_secs(1)),
        max_lag: a.max_lag.min(Duration::from_secs(3600)),
        catch_up: a.catch_up,
        senders: usize::from(a.senders),
        realtime: a.generate && a.signal.start_is_now(),
        skip_late: a.late_frames == LateFrames::Skip,
    })
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
    let cfg = send_config(&a)?;
    let stop = stop_flag()?;
    let metrics = a.metrics.start("stream send")?;
    let observer = send_observer(metrics.observer("stream_send", metrics::Status::StreamSend), a.quiet);
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

/// One live line of `stream send`; `last` holds the elapsed time and bytes of the line before.
fn send_live_line(s: &stream::results::SendStatus, last: &mut (f64, u64)) -> String {
    let frames: u64 = s.stations.iter().map(|t| t.frames_sent).sum();
    let bytes: u64 = s.stations.iter().map(|t| t.bytes_sent).sum();
    let slipped: f64 = s.stations.iter().map(|t| t.slipped_s).sum();
    let span = s.elapsed_s - last.0;
    let rate = if span > 0.0 {
        (bytes - last.1.min(bytes)) as f64 * 8.0 / span
    } else {
        0.0
    };
    *last = (s.elapsed_s, bytes);
    let arq = s
        .arq
        .as_ref()
        .map_or(String::new(), |q| format!("  resent {}", q.resent));
    format!(
        "{:7.1} s  {:>9}b/s  {} station(s)  frames sent {:>8}  time given up {:.1} ms{arq}",
        s.elapsed_s,
        si_fmt(rate),
        s.stations.len(),
        frames,
        slipped * 1e3
    )
}

/// What a held-up sender gave up, per station, on stderr whatever the output format: time (a
/// slip of the timeline) or frames (skipped by a backend simulator fixed to the clock).
fn held_up_notes(r: &stream_session::report::SendReport) {
    for s in &r.stations {
        if s.slips > 0 {
            status!(
                "{}: fell more than --max-lag behind {} times and gave up {:.1} ms of its timeline (the sender was held up, not the network)",
                s.station,
                s.slips,
                s.slipped_s * 1e3
            );
        }
        if s.skipped_late > 0 {
            status!(
                "{}: skipped {} frames whose VDIF time had passed by more than --max-lag (the sender was held up, not the network)",
                s.station,
                s.skipped_late
            );
        }
    }
}

/// The closing lines of `stream send`: per station, per sender, ARQ, CPU.
fn send_summary(r: &stream_session::report::SendReport) {
    for s in &r.stations {
        let g = &s.departure_gap_ns;
        status!(
            "{} ({}): {} frames in {:.2} s, {}b/s of data (asked {}b/s), gap p50 {} µs p99 {} µs σ {} µs (nominal {:.3} µs){}",
            s.station,
            s.file,
            s.frames_sent,
            r.duration_s,
            si_fmt(s.achieved_rate_bps),
            si_fmt(s.rate_bps),
            us_fmt(g.p50),
            us_fmt(g.p99),
            us_fmt(g.stdev.map(|v| v.round() as u64)),
            s.spacing_us,
            if s.injected_drops > 0 {
                format!(", {} dropped on purpose", s.injected_drops)
            } else {
                String::new()
            }
        );
    }
    if r.senders.len() > 1 {
        for (i, b) in r.senders.iter().enumerate() {
            status!(
                "sender {} from {} to {}: threads {:?}, {} frames, {}b/s of data",
                i + 1,
                b.local_addr,
                b.to,
                b.threads,
                b.frames_sent,
                si_fmt(b.achieved_rate_bps)
            );
        }
    }
    if let Some(q) = &r.arq {
        status!(
            "ARQ: {} NAKs asked for {} frames, {} resent ({} B), {} no longer kept",
            q.naks,
            q.asked,
            q.resent,
            q.resent_bytes,
            q.unavailable
        );
    }
    if r.rejected_control > 0 {
        status!(
            "the destination sent back {} datagrams that were not NAKs (a jive5ab's keep-alives, or strays): read and counted",
            r.rejected_control
        );
    }
    status!(
        "sender CPU {:.0} % user + {:.0} % system of one core",
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}

fn recv(a: RecvArgs) -> Result<()> {
    let output = a.output.resolve()?;
    let cfg = recv_config(&a)?;
    let cfg_recording = cfg.recording.clone();
    let cfg_live = cfg.live.clone();
    let bound = BoundReceiver::bind(cfg).map_err(session_error)?;
    let addrs: Vec<String> = bound.local_addrs()?.iter().map(|a| a.to_string()).collect();
    let target = match (&a.out, &cfg_recording) {
        (_, _) if cfg_live.is_some() => format!(
            "live to SFXC's mk5:// reader at {}",
            cfg_live
                .iter()
                .flat_map(|l| &l.targets)
                .map(live_endpoint)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, Some(r)) => format!(
            "{} scan {} over {} disk(s): {}",
            r.layout,
            r.names.as_str(),
            r.disks.len(),
            r.disks_joined(" ")
        ),
        (Some(d), None) => format!("{}{}", d.display(), if a.direct { " (direct I/O)" } else { "" }),
        (None, None) => "nothing (memory sink)".to_string(),
    };
    status!("stream recv: listening on {} (UDP), writing {target}", addrs.join(", "));
    for w in bound.grants().iter().flat_map(|g| g.warnings.iter()) {
        status!("warning: {w}");
    }
    let metrics = a.metrics.start("stream recv")?;
    let bound = match metrics.observer("stream_recv", metrics::Status::StreamRecv) {
        Some(o) => bound.observe(o),
        None => bound,
    };
    // Said when it happens, quiet or not: nothing is recorded until the operator acts.
    let bound = bound.on_notice(Box::new(|n: String| status!("error: {n}")));
    let stop = stop_flag()?;
    let quiet = a.quiet;
    let r = bound.run(&stop, |l| {
        if !quiet {
            status!("{}", live_line(l));
        }
    })?;
    output.emit(&r)?;
    recv_summary(&r);
    if let Some(e) = &r.write_error {
        return Err(ProblemsFound(format!("{e}; {} frames not written", r.frames_not_written)).into());
    }
    let written: u64 = r
        .stations
        .iter()
        .map(|s| s.window.written_valid + s.window.written_filled)
        .sum();
    // Datagrams refused by policy (--from, --max-stations) are other people's traffic; the rest
    // were meant for this recorder.
    let d = &r.datagrams;
    if d.datagrams == 0 {
        // A recorder that heard nothing has not recorded: say it in the exit code, so a script
        // (or the operator's cron check of a link) sees it.
        return Err(ProblemsFound::nothing_arrived(&addrs).into());
    }
    let unusable = d.rejected() - d.foreign_source - d.too_many_stations;
    if unusable > 0 && written == 0 {
        // Data came and none of it was usable: a recorder that wrote nothing has failed (exit 1,
        // "problems found in the data").
        return Err(ProblemsFound(format!(
            "all {} datagrams were rejected and no frame was written: {}",
            d.datagrams,
            r.first_problem.as_deref().unwrap_or("see the counts above")
        ))
        .into());
    }
    Ok(())
}

/// The receiver's configuration from its flags (usage errors for combinations that cannot work).
fn recv_config(a: &RecvArgs) -> Result<RecvConfig> {
    let listen = a
        .listen
        .iter()
        .map(|l| crate::addr::listen("--listen", l))
        .collect::<Result<Vec<_>>>()?;
    if listen.len() > 64 {
        return Err(usage("at most 64 --listen addresses"));
    }
    if a.arq && !matches!(a.seq_format, Format::Native) {
        return Err(usage(
            "--arq needs --seq-format native (NAKs name native sequence numbers)",
        ));
    }
    let recording = a.record.config()?;
    if recording.is_some() && (a.out.is_some() || a.chunk.is_some() || a.direct) {
        return Err(usage(
            "--format vbs|mk6 records to --disks in blocks of --block: leave out --out, --chunk and --direct",
        ));
    }
    if recording.is_none() && a.out.is_none() && a.split == Split::Thread {
        return Err(usage("--split thread needs an output: --out DIR or --format vbs|mk6"));
    }
    let live = sfxc_out(a.out.as_deref())?.map(|l| LiveConfig {
        buffer: a.live_buffer,
        ..l
    });
    if live.is_some() && (recording.is_some() || a.chunk.is_some() || a.direct || a.split == Split::Thread) {
        return Err(usage(
            "--out sfxc: is a live output: leave out --format vbs|mk6, --chunk, --direct and --split thread",
        ));
    }
    let default_latency = if live.is_some() {
        LIVE_LATENCY
    } else {
        Duration::from_millis(50)
    };
    Ok(RecvConfig {
        listen,
        out_dir: a
            .out
            .clone()
            .filter(|_| live.is_none())
            .map(recording::write::OutputDir::Path),
        out_file: None,
        recording,
        chunk: a.chunk,
        rcvbuf: a.rcvbuf as usize,
        receiver: ReceiverConfig {
            format: a.seq_format.into(),
            frames_per_second: a.fps,
            threads: a.threads,
            latency: a.latency.unwrap_or(default_latency),
            max_fill: a.max_fill,
            // One station per live output (further ones are counted and dropped).
            max_stations: if live.is_some() { 1 } else { a.max_stations },
            fill_silence_after: live.as_ref().map(|l| l.fill_silence_after),
            from: a.from,
            arq: a.arq,
            confirm: 4,
            ..ReceiverConfig::default()
        },
        duration: a.duration,
        idle_timeout: a.idle_timeout,
        interval: a.interval.max(Duration::from_millis(50)),
        writer: if a.writer_in_thread {
            WriterPlacement::Thread
        } else {
            WriterPlacement::this_executable()?
        },
        write_buffer: a.write_buffer,
        direct_io: a.direct,
        split_threads: a.split == Split::Thread,
        output_before_bind: false,
        live,
    })
}

/// A live reader's reorder window (frames are out this long after they are due).
const LIVE_LATENCY: Duration = Duration::from_millis(2);

/// `--out sfxc:SOCKET` or `sfxc:tcp:[ADDRESS:]PORT`: the live output, if asked for. The socket's
/// directory is the operator's (opened once; the socket is made in it by descriptor).
fn sfxc_out(out: Option<&std::path::Path>) -> Result<Option<LiveConfig>> {
    let Some(spec) = out.and_then(|o| o.to_str()).and_then(|o| o.strip_prefix("sfxc:")) else {
        return Ok(None);
    };
    let addr = if let Some(tcp) = spec.strip_prefix("tcp:") {
        let a = match tcp.parse::<u16>() {
            Ok(port) => std::net::SocketAddr::from(([0, 0, 0, 0], port)),
            Err(_) => tcp
                .parse::<std::net::SocketAddr>()
                .map_err(|_| usage(format!("--out sfxc:tcp:{tcp}: a PORT or ADDRESS:PORT")))?,
        };
        SfxcAddr::Tcp(a)
    } else {
        SfxcAddr::unix_path(std::path::Path::new(spec)).map_err(|e| usage(format!("--out sfxc:{spec}: {e}")))?
    };
    Ok(Some(LiveConfig::new(vec![LiveTarget::Sfxc { addr, station: None }])))
}

/// Where a live output's readers connect, for the listening line.
fn live_endpoint(t: &LiveTarget) -> String {
    match t {
        LiveTarget::Sfxc { addr, .. } => addr.endpoint(),
    }
}

/// One live line of `stream recv` (every --interval).
fn live_line(l: &stream_session::recv::LiveLine) -> String {
    let mut stall = if l.writer_stall.is_zero() {
        String::new()
    } else {
        format!("  writer stall {:.0} ms", l.writer_stall.as_secs_f64() * 1e3)
    };
    if l.duplicate_mismatch > 0 {
        stall += &format!("  dup differing {}", l.duplicate_mismatch);
    }
    if l.sender_changes > 0 {
        stall += &format!("  sender changes {}", l.sender_changes);
    }
    if l.disks_dropped > 0 {
        stall += &format!("  DISKS DROPPED {}", l.disks_dropped);
    }
    format!(
            "{:7.1} s  {:>9}b/s  {} station(s)  frames written {:>7}  filled {:>5}  reordered {:>4}  late {:>4}  dup {:>4}  rejected {:>4}  kernel drops {}{stall}",
            l.elapsed_s,
            si_fmt(l.rate_bps),
            l.stations,
            l.frames,
            l.filled,
            l.reordered,
            l.late,
            l.duplicates,
            l.rejected,
            l.kernel_drops
        )
}

/// Which buffer took the output's stalls: the write buffer, then the socket's.
fn buffers_line(r: &stream_session::report::RecvReport) {
    if let (Some(size), Some(peak)) = (r.write_buffer, r.write_buffer_peak) {
        let socket = match r.socket_queue_peak {
            Some(q) if r.rcvbuf.granted_rcv > 0 => format!(
                ", the socket buffer {:.0} % of {} bytes at most",
                q as f64 * 100.0 / r.rcvbuf.granted_rcv as f64,
                r.rcvbuf.granted_rcv
            ),
            _ => String::new(),
        };
        status!(
            "buffers: the write buffer held {:.0} % of its {size} bytes at most{socket}",
            peak as f64 * 100.0 / size.max(1) as f64
        );
    }
}

/// The closing lines of `stream recv`: per station, per file, and what went wrong where.
fn recv_summary(r: &stream_session::report::RecvReport) {
    for s in &r.stations {
        let w = &s.window;
        status!(
            "{}: {} frames written ({} filled invalid{}, f = {:.3e}, S/N factor {:.5}), {} reordered, {} late, {} duplicate, {} out of range{}{}",
            s.station,
            w.written_valid + w.written_filled,
            w.written_filled,
            if w.filled_at_end > 0 {
                format!(
                    ", {} of them after their thread's last frame at the end: not counted lost",
                    w.filled_at_end
                )
            } else {
                String::new()
            },
            s.loss_fraction,
            s.snr_factor,
            w.reordered,
            w.late,
            w.duplicates,
            w.out_of_range,
            if w.duplicate_mismatch > 0 {
                format!(
                    ", {} duplicate(s) differing from the frame kept (forged or corrupt; the first copy was written)",
                    w.duplicate_mismatch
                )
            } else {
                String::new()
            },
            s.arq.map_or(String::new(), |q| format!(", ARQ recovered {} of {} missing", q.recovered, q.missing_seen))
        );
        if s.boards.len() > 1 {
            for b in &s.boards {
                let seq = match (b.seq_first, b.seq_last) {
                    (Some(f), Some(l)) => format!(", sequence numbers {f}-{l}"),
                    _ => String::new(),
                };
                status!(
                    "{}: board {} threads {:?}: {} frames{seq}",
                    s.station,
                    b.source,
                    b.threads,
                    b.frames
                );
            }
        }
        for c in &s.sender_change_log {
            status!(
                "{}: sender {} from {} to {}",
                s.station,
                if c.restarted { "restarted" } else { "changed" },
                c.from,
                c.to
            );
        }
        if s.sender_changes > s.sender_change_log.len() as u64 {
            status!("{}: {} sender changes in all", s.station, s.sender_changes);
        }
    }
    for f in &r.files {
        status!("  {}: {} frames, {} bytes", f.path, f.frames, f.bytes);
    }
    if let Some(rec) = &r.recording {
        recording_lines(rec);
    }
    rejected_lines(&r.datagrams, r.first_problem.as_deref());
    if r.socket_drops > 0 {
        status!(
            "kernel dropped {} datagrams at this socket, its receive buffer full{}",
            r.socket_drops,
            if r.gro_most_coalesced > 1 {
                format!(
                    "; with UDP GRO one of them held up to {} frames (the filled counts above are exact)",
                    r.gro_most_coalesced
                )
            } else {
                String::new()
            }
        );
    }
    if r.dropped_after_last > 0 {
        status!(
            "{} of them after the last datagram received: frames lost at the end of the stream, {}",
            r.dropped_after_last,
            if r.stations.iter().any(|s| s.lost_at_end > 0) {
                "counted in f as lost at the end"
            } else {
                "in no station's f (several stations: whose they were is not known)"
            }
        );
    }
    if r.writer_stalls > 0 {
        status!(
            "the file writer held the receiver up {} times, {:.2} s in all: the output takes less than the \
             stream's rate (or stalled); datagrams the kernel dropped meanwhile are the disk's loss, not the network's",
            r.writer_stalls,
            r.writer_stall_s
        );
    }
    buffers_line(r);
    let writer = r.writer_cpu.map_or(String::new(), |w| {
        format!("; file writer {:.0} % + {:.0} %", w.user_pct, w.system_pct)
    });
    if r.datagrams.datagrams == 0 && r.stopped_by == "idle timeout" {
        status!("no datagram arrived: the idle timeout counted from the start");
    }
    status!(
        "stopped by {}; receiver CPU {:.0} % user + {:.0} % system of one core{writer}",
        r.stopped_by,
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}

/// `--senders K`: K > 1 simulates a backend's boards, which number datagrams per board (jive5ab)
/// or not at all; a generated station must have a thread for every board.
fn check_senders(a: &SendArgs) -> Result<()> {
    if a.senders <= 1 {
        return Ok(());
    }
    if matches!(a.seq_format, Format::Native) {
        return Err(usage(format!(
            "--senders {} simulates a backend's boards: add --seq-format jive5ab (each board numbers its own \
             datagrams, like jive5ab's udps) or --seq-format none (bare VDIF frames); native framing numbers one \
             stream per station from one socket",
            a.senders
        )));
    }
    let threads = a.signal.threads();
    if a.generate && u32::from(a.senders) > threads {
        return Err(usage(format!(
            "--senders {} needs at least as many VDIF threads (--threads {threads}): each board sends at least \
             one thread, e.g. --threads 4 --senders 2 (threads 0-1 and 2-3)",
            a.senders
        )));
    }
    Ok(())
}
