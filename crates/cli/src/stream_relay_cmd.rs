//! `evlbi stream relay`: the station's live link — backend datagrams in, the correlator's
//! stream out, a local copy beside.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use recording::write::WriterPlacement;
use stream::relay::RelayConfig;
use stream::SourceFilter;
use stream_session::relay::{BoundRelay, RelayLiveLine, RelayRunConfig};
use stream_session::report::RelayReport;

use crate::flags::JsonOutput;
use crate::stream_common::{parse_catch_up, recording_lines, rejected_lines, session_error, Format, Split};
use crate::units::{parse_duration, parse_positive_duration, parse_rate, parse_size, si_fmt};
use crate::{stop_flag, usage, ProblemsFound};

pub const EXAMPLES: &str = "Examples:\n  \
    # a DBBC3 sending bare VDIF to ports 46227 and 46228; native framing with ARQ to the correlator, a copy on disk\n  \
    evlbi stream relay --listen 46227 --listen 46228 --seq-format-in none --fps 15625 \\\n      \
    --to corr.example.org:46227 --arq-latency 300ms --tee /data/Ef/\n  \
    # an R2DBE's udps (8-byte PSN) relayed as jive5ab udps to a jive5ab recorder, keep-alive every 10 datagrams\n  \
    evlbi stream relay --listen 4001 --seq-format-in jive5ab --to 10.0.0.2:46227 --seq-format jive5ab --ack 10\n  \
    # a backend multicasting to 239.1.2.3 on the station LAN (interface eth1)\n  \
    evlbi stream relay --listen 239.1.2.3@46227%eth1 --to corr:46227 --arq-latency 300ms\n  \
    # the station's copy as a FlexBuff scan over four disks (vbs://ev123_no0001_dsEf), as jive5ab would record it\n  \
    evlbi stream relay --listen 46227 --to corr:46227 --format vbs --disks /mnt/disk0,/mnt/disk1,/mnt/disk2,/mnt/disk3 --scan ev123_no0001\n  \
    evlbi stream relay --listen 46227 --to corr:46227 --tee 'mk6:/mnt/disks/1/*' --scan ev123_no0001   # the same, Mark6\n  \
    # what it did, as JSON\n  \
    evlbi stream relay --listen 46227 --to corr:46227 --duration 10m --export-json relay.json";

#[derive(Args)]
pub struct RelayArgs {
    /// PORT, ADDRESS:PORT, or a multicast GROUP@PORT (joined; %IFACE picks the interface by
    /// name, index or address: 239.1.2.3@46227%eth1) to receive the backend on. Repeat for
    /// several ports, each read on its own thread. Port 0 picks a free port (printed on stderr).
    #[arg(long, required = true)]
    listen: Vec<String>,
    /// Framing of the incoming datagrams: none (bare VDIF, most backends), jive5ab (8-byte
    /// packet serial number first: VTP, R2DBE, jive5ab udps), native (another evlbi).
    #[arg(long, value_enum, default_value = "none")]
    seq_format_in: Format,
    /// Where the stream goes: HOST:PORT of `evlbi stream recv` (or a jive5ab, or a DiFX UDP
    /// datastream with --seq-format jive5ab or none); tcp:HOST:PORT connects to a correlator
    /// that is the TCP server (a DiFX mpifxcorr NETWORK datastream) and writes the frames back
    /// to back, retrying until the job's port opens.
    #[arg(long)]
    to: String,
    /// With --to tcp:: how long to wait for the DiFX job's port before saying so on stderr (the
    /// relay goes on trying every 0.5 s; the tee keeps every frame meanwhile).
    #[arg(long, value_parser = parse_positive_duration, default_value = "30s")]
    connect_wait: Duration,
    /// With --to tcp:: memory queued for the DiFX job. A job reading slower than the station
    /// costs the frames that do not fit, counted (`dropped_slow_reader`); the relay never waits.
    #[arg(long, value_parser = parse_size, default_value = "128M", value_name = "SIZE")]
    live_buffer: u64,
    /// Framing out: native (evlbi's prefix; needed for --arq-latency), jive5ab udps, none.
    #[arg(long, value_enum, default_value = "native")]
    seq_format: Format,
    /// Keep this much of each stream to answer the receiver's NAKs (native framing): 300ms.
    #[arg(long, value_parser = parse_duration)]
    arq_latency: Option<Duration>,
    /// Record exactly what came in, one continuous file per station (as `stream recv --out`
    /// writes them); frames lost in the input are not invented. `vbs:GLOB` or `mk6:GLOB`
    /// records a scan over those disks instead (as --format vbs|mk6 --disks GLOB).
    #[arg(long, value_name = "DIR")]
    tee: Option<PathBuf>,
    #[command(flatten)]
    record: crate::scan_args::RecordArgs,
    /// Start a new tee file after this many bytes: 1G.
    #[arg(long, value_parser = parse_size)]
    chunk: Option<u64>,
    /// With --tee (or --format vbs|mk6): one file (scan) per station, or per VDIF thread of
    /// each station.
    #[arg(long, value_enum, default_value = "station")]
    split: Split,
    /// Frames per second per VDIF thread, when the headers carry no sample rate (bare and
    /// jive5ab framing). Without it such a stream is refused, said on stderr at its first frame.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    fps: Option<u32>,
    /// VDIF threads per station. Default: learned from the first frames (the ids seen before
    /// the time has advanced by two frames); a thread that shows up later is recorded by the
    /// tee but not relayed.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Pace each station at this data rate (sample bits, headers excluded): 4096M. Default:
    /// the rate the headers give (frames/s × threads × frame data).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// A backlog (the relay held up, a burst in) leaves at up to this multiple of the rate,
    /// never at line rate (1.0 to 16).
    #[arg(long, value_parser = parse_catch_up, default_value = "2")]
    catch_up: f64,
    /// Frames leave paced at the data rate until one has waited this long; then the backlog
    /// catches up.
    #[arg(long, value_parser = parse_duration, default_value = "2ms")]
    smoothing: Duration,
    /// Most frames per departure. The relay sleeps between departures; the frames that fell
    /// due meanwhile leave together in UDP GSO calls (none before its time; 8 KB frames go 8 to
    /// a call), so frames share a wake-up instead of a core spinning for each: a wake-up costs
    /// more than a frame (at 4 Gb/s, 8 KB frames: 32 → 2.6–2.9 µs of CPU per frame, 16 → 3.4–3.5). A
    /// departure also carries at most 0.5 ms of the stream: 32 frames from 4 Gb/s up, about 8
    /// at 1 Gb/s. Smaller bursts for a path that cannot take 256 KB at line rate; 1: every frame
    /// alone, at its own time, the relay's thread spinning between them (a core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64), default_value_t = stream::relay::DEFAULT_BURST as u16)]
    burst: u16,
    /// Most frame data held between input and output (the oldest go first when it is full).
    #[arg(long, value_parser = parse_size, default_value = "256M")]
    buffer: u64,
    /// Send a small keep-alive datagram back to each sender every N of its datagrams (what
    /// jive5ab does, so switches on the way learn the station's address). Off by default.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    ack: Option<u32>,
    /// Take datagrams only from this host (IP: any port) or this exact IP:PORT.
    #[arg(long, value_name = "IP[:PORT]")]
    from: Option<SourceFilter>,
    /// Most stations relayed.
    #[arg(long, default_value_t = 16)]
    max_stations: usize,
    /// Receive socket buffer per input.
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    rcvbuf: u64,
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
    output: JsonOutput,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
    /// No live lines.
    #[arg(long, short)]
    quiet: bool,
}

fn config(a: &RelayArgs) -> Result<RelayRunConfig> {
    let (tcp, to_text) = crate::addr::transport(&a.to);
    let (_, to) = crate::addr::peer("--to", to_text, None)?;
    if tcp && a.arq_latency.is_some() {
        return Err(usage(
            "--arq-latency repeats datagrams; a tcp: destination has TCP's own repeats",
        ));
    }
    if a.arq_latency.is_some() && !matches!(a.seq_format, Format::Native) {
        return Err(usage(
            "--arq-latency needs --seq-format native (NAKs name native sequence numbers)",
        ));
    }
    let listen = a
        .listen
        .iter()
        .map(|l| crate::addr::listen("--listen", l))
        .collect::<Result<Vec<_>>>()?;
    let (tee, tee_recording) = tee_config(a)?;
    if listen.len() > 64 {
        return Err(usage("at most 64 --listen addresses"));
    }
    // Over TCP the frames go back to back, no datagram framing.
    let output = if tcp {
        stream::SeqFormat::None
    } else {
        a.seq_format.into()
    };
    let mut relay = RelayConfig::new(a.seq_format_in.into(), output, Instant::now());
    relay.arq_latency = a.arq_latency.map(|l| l.min(Duration::from_secs(10)));
    relay.frames_per_second = a.fps;
    relay.threads = a.threads;
    relay.rate_bps = a.rate;
    relay.catch_up = a.catch_up;
    relay.smoothing = a.smoothing.min(Duration::from_secs(1));
    relay.burst = usize::from(a.burst);
    relay.buffer_bytes = usize::try_from(a.buffer).unwrap_or(usize::MAX);
    relay.max_stations = a.max_stations.clamp(1, 1024);
    relay.from = a.from;
    relay.ack_every = a.ack;
    Ok(RelayRunConfig {
        listen,
        to,
        tcp,
        connect_wait: a.connect_wait,
        live_buffer: a.live_buffer,
        relay,
        rcvbuf: usize::try_from(a.rcvbuf).unwrap_or(usize::MAX),
        sndbuf: 8 << 20,
        tee,
        tee_recording,
        chunk: a.chunk,
        split_threads: a.split == Split::Thread,
        writer: WriterPlacement::this_executable()?,
        write_buffer: recording::write::DEFAULT_WRITE_BUFFER,
        duration: a.duration,
        idle_timeout: a.idle_timeout,
        interval: a.interval.max(Duration::from_millis(50)),
    })
}

/// The tee: VDIF files in a directory, or a vbs/Mark6 scan (`--format`, or `--tee vbs:GLOB`).
fn tee_config(a: &RelayArgs) -> Result<(Option<PathBuf>, Option<recording::write::RecordingConfig>)> {
    let mut record = a.record.clone();
    let mut tee = a.tee.clone();
    if let Some((layout, glob)) = a
        .tee
        .as_ref()
        .and_then(|t| t.to_str())
        .and_then(|t| t.split_once(':'))
        .and_then(|(f, g)| scanfmt::Layout::parse(f).map(|l| (l, g)))
    {
        if record.format != crate::scan_args::RecordFormat::Vdif || !record.disks.is_empty() {
            return Err(usage("--tee vbs:GLOB already names the format and the disks"));
        }
        record.format = match layout {
            scanfmt::Layout::Vbs => crate::scan_args::RecordFormat::Vbs,
            scanfmt::Layout::Mk6 => crate::scan_args::RecordFormat::Mk6,
        };
        record.disks = vec![glob.to_string()];
        tee = None;
    }
    let recording = record.config()?;
    if recording.is_some() && (tee.is_some() || a.chunk.is_some()) {
        return Err(usage(
            "--format vbs|mk6 records the tee to --disks in blocks of --block: leave out --tee DIR and --chunk",
        ));
    }
    if recording.is_none() && tee.is_none() && a.split == Split::Thread {
        return Err(usage("--split thread needs a tee: --tee DIR or --format vbs|mk6"));
    }
    Ok((tee, recording))
}

pub fn relay(a: RelayArgs) -> Result<()> {
    let cfg = config(&a)?;
    let recording_to = match (&cfg.tee, &cfg.tee_recording) {
        (Some(d), _) => format!(", recording to {}", d.display()),
        (None, Some(r)) => format!(
            ", recording {} scan {} over {} disk(s)",
            r.layout,
            r.names.as_str(),
            r.disks.len()
        ),
        (None, None) => String::new(),
    };
    let out_format = if cfg.tcp {
        "TCP, bare VDIF back to back"
    } else {
        format_name(a.seq_format)
    };
    let bound = BoundRelay::bind(cfg).map_err(session_error)?;
    let addrs: Vec<String> = bound.local_addrs().iter().map(|a| a.to_string()).collect();
    status!(
        "stream relay: listening on {} (UDP, {}), sending to {} ({}){}",
        addrs.join(", "),
        format_name(a.seq_format_in),
        a.to,
        out_format,
        recording_to
    );
    for w in bound.grants().iter().flat_map(|g| g.warnings.iter()) {
        status!("warning: {w}");
    }
    let metrics = a.metrics.start("stream relay")?;
    let bound = match metrics.observer("stream_relay", metrics::Status::StreamRelay) {
        Some(o) => bound.observe(o),
        None => bound,
    };
    // Said when it happens, quiet or not: nothing is relayed until the operator acts.
    let bound = bound.on_notice(Box::new(|n: String| status!("error: {n}")));
    let stop = stop_flag()?;
    let quiet = a.quiet;
    let r = bound.run(&stop, |l| {
        if !quiet {
            status!("{}", live_line(l));
        }
    })?;
    if a.output.emit(&r)? {
        summary(&r);
    }
    if let Some(e) = r.tee.as_ref().and_then(|t| t.write_error.as_ref()) {
        return Err(ProblemsFound(format!("tee: {e}")).into());
    }
    let d = &r.datagrams;
    if d.datagrams == 0 {
        return Err(ProblemsFound::nothing_arrived(&addrs).into());
    }
    if let Some(t) = r.live_out.as_ref().filter(|t| t.clients == 0) {
        return Err(ProblemsFound(format!(
            "no DiFX job accepted a TCP connection on {}: {} frames not delivered, all kept by the tee if one was asked for (last attempt: {})",
            t.endpoint,
            t.dropped_no_reader,
            r.live_out_error.as_deref().unwrap_or("none")
        ))
        .into());
    }
    let relayed: u64 = r.stations.iter().map(|s| s.frames_out).sum();
    let unusable = d.rejected() - d.foreign_source - d.too_many_stations;
    if unusable > 0 && relayed == 0 {
        return Err(ProblemsFound(format!(
            "all {} datagrams were rejected and no frame was relayed: {}",
            d.datagrams,
            r.first_problem.as_deref().unwrap_or("see the counts above")
        ))
        .into());
    }
    Ok(())
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Native => "native framing",
        Format::Jive5ab => "jive5ab udps",
        Format::None => "bare VDIF",
    }
}

fn live_line(l: &RelayLiveLine) -> String {
    format!(
        "{:7.1} s  in {:>9}b/s  {} sender(s)  frames in {:>7}  out {:>7}  queued {:>5}  lost in input {:>4}  \
         overflow {:>4}  rejected {:>4}  kernel drops {}",
        l.elapsed_s,
        si_fmt(l.in_rate_bps),
        l.senders,
        l.frames_in,
        l.frames_out,
        l.queued,
        l.lost_in_input,
        l.overflow_dropped,
        l.rejected,
        l.kernel_drops
    )
}

/// The closing lines: per sender, per station, the tee, what went wrong where.
fn summary(r: &RelayReport) {
    for s in &r.senders {
        let seq = match (s.seq_first, s.seq_last) {
            (Some(f), Some(l)) => format!(
                ", serial numbers {f}..{l}: {} lost, {} reordered (extent ≤ {})",
                s.lost, s.reordered, s.reorder_extent_max
            ),
            _ => String::new(),
        };
        status!(
            "sender {} (input {}): {} datagrams, {} frames of {} thread(s) {:?}{seq}",
            s.source,
            s.input,
            s.datagrams,
            s.frames,
            s.threads.len(),
            s.threads
        );
    }
    let o = &r.other_senders;
    if o.senders > 0 || r.untracked_datagrams > 0 {
        status!(
            "{} other sender(s) (fewer frames than those above, or quiet and no longer listed): {} datagrams, {} frames{}",
            o.senders,
            o.datagrams + r.untracked_datagrams,
            o.frames,
            if r.untracked_datagrams > 0 {
                format!(" ({} datagrams from senders beyond the 256 counted while all were live)", r.untracked_datagrams)
            } else {
                String::new()
            }
        );
    }
    for s in &r.stations {
        let q = &s.queue_delay_ns;
        status!(
            "{}: {} frames in ({} lost in the input, {} reordered, {} duplicate), {} out{}; threads {:?}; time in the relay p50 {} µs p99 {} µs",
            s.station,
            s.frames_in,
            s.lost_in_input,
            s.reordered_in,
            s.duplicates_in,
            s.frames_out,
            if s.overflow_dropped + s.unexpected_thread > 0 {
                format!(", {} dropped at a full buffer, {} of unexpected threads", s.overflow_dropped, s.unexpected_thread)
            } else {
                String::new()
            },
            s.thread_ids,
            q.p50.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3)),
            q.p99.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3)),
        );
    }
    if let Some(a) = &r.arq {
        status!(
            "ARQ: {} NAKs, {} frames asked, {} repeated, {} no longer held",
            a.naks,
            a.asked,
            a.resent,
            a.unavailable
        );
    }
    if let Some(t) = &r.live_out {
        crate::stream_common::difx_out_lines(t, r.live_out_error.as_deref());
    }
    if let Some(t) = &r.tee {
        for f in &t.files {
            status!("  tee {}: {} frames, {} bytes", f.path, f.frames, f.bytes);
        }
        if let Some(rec) = &t.recording {
            recording_lines(rec);
        }
    }
    rejected_lines(&r.datagrams, r.first_problem.as_deref());
    if r.socket_drops > 0 {
        status!(
            "kernel dropped {} datagrams at the input sockets, their buffers full",
            r.socket_drops
        );
    }
    if r.datagrams.datagrams == 0 && r.stopped_by == "idle timeout" {
        status!("no datagram arrived: the idle timeout counted from the start");
    }
    status!(
        "stopped by {}; relay CPU {:.0} % user + {:.0} % system of one core",
        r.stopped_by,
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}
