//! `evlbi stream relay`: the station's live link — backend datagrams in, the correlator's
//! stream out, a local copy beside.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use recording::write::WriterPlacement;
use stream_session::relay::{BoundRelay, RelayRunConfig};

use crate::flags::JsonOutput;
use crate::session_flags::session_error;
use crate::shared_args::{ArqLatencyArg, DataRateArg, FpsArg, ListenArgs, LiveArgs};
use crate::stream_common::{arrival, run_bound, Format, Split};
use crate::stream_recv_cmd::FramesArg;
use crate::units::{parse_duration, parse_factor, parse_size};
use crate::{usage, ProblemsFound};

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
    # a Mark5B station's jive5ab udps (8960-byte datagrams) on to a DiFX datastream, whole frames with their sequence numbers\n  \
    evlbi stream relay --listen 46227 --seq-format-in jive5ab --frames mark5b --to difx-host:46227 --seq-format jive5ab\n  \
    # what it did, as JSON\n  \
    evlbi stream relay --listen 46227 --to corr:46227 --duration 10m --export-json relay.json";

#[derive(Args)]
pub struct RelayArgs {
    #[command(flatten)]
    input: ListenArgs,
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
    #[arg(long, value_parser = crate::units::parse_positive_duration, default_value = "30s")]
    connect_wait: Duration,
    /// With --to tcp:: memory queued for the DiFX job. A job reading slower than the station
    /// costs the frames that do not fit, counted (`dropped_slow_reader`); the relay never waits.
    #[arg(long, value_parser = parse_size, default_value = "128M", value_name = "SIZE")]
    live_buffer: u64,
    /// Framing out: native (evlbi's prefix; needed for --arq-latency), jive5ab udps, none.
    #[arg(long, value_enum, default_value = "native")]
    seq_format: Format,
    #[command(flatten)]
    arq: ArqLatencyArg,
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
    /// Frame format. `mark5b`: one Mark5B stream in jive5ab's udps framing (--seq-format-in
    /// jive5ab, one --listen): jive5ab's datagrams of the MTU's size (8960 bytes, a frame
    /// straddling two or three) are joined into whole frames, and each frame leaves in one
    /// datagram as it is made whole, in order, behind an 8-byte sequence number that is its
    /// count in the stream (--seq-format jive5ab: what DiFX's Mark5B UDP reader and `stream recv
    /// --frames mark5b` take; a gap in the numbers is the gap in the data) or bare (none). Frames
    /// missing are counted (lost_in_input), never invented; no tee (recordings take VDIF).
    #[arg(long, value_enum, default_value = "vdif")]
    frames: FramesArg,
    #[command(flatten)]
    fps: FpsArg,
    /// VDIF threads per station. Default: learned from the first frames (the ids seen before
    /// the time has advanced by two frames); a thread that shows up later is recorded by the
    /// tee but not relayed.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    #[command(flatten)]
    rate: DataRateArg,
    /// A backlog (the relay held up, a burst in) leaves at up to this multiple of the rate,
    /// never at line rate (1.0 to 16).
    #[arg(long, value_parser = parse_factor, default_value = "2")]
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
    #[arg(long, default_value_t = stream::relay::DEFAULT_BURST)]
    burst: usize,
    /// Most frame data held between input and output (the oldest go first when it is full).
    #[arg(long, value_parser = parse_size, default_value = "256M")]
    buffer: u64,
    /// Send a small keep-alive datagram back to each sender every N of its datagrams (what
    /// jive5ab does, so switches on the way learn the station's address). Off by default.
    #[arg(long, value_name = "N")]
    ack: Option<u32>,
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    live: LiveArgs,
}

/// The relay's configuration: the flags translated into [`RelayRunConfig`], checked by its one
/// `validate()` (its errors said in flags).
fn config(a: &RelayArgs) -> Result<RelayRunConfig> {
    let (tcp, to_text) = crate::addr::transport(&a.to);
    let (_, to) = crate::addr::peer("--to", to_text, None)?;
    // Over TCP the frames go back to back, no datagram framing.
    let output = if tcp {
        stream::SeqFormat::None
    } else {
        a.seq_format.into()
    };
    let listen = a.input.specs()?;
    let (tee, tee_recording) = tee_config(a)?;
    let mut cfg = RelayRunConfig {
        rcvbuf: a.input.rcvbuf(),
        tee,
        tee_recording,
        chunk: a.chunk,
        split_threads: a.split == Split::Thread,
        writer: WriterPlacement::this_executable()?,
        duration: a.live.until.duration,
        idle_timeout: a.live.until.idle_timeout,
        first_datagram_timeout: a.live.until.first_datagram_timeout(),
        interval: a.live.until.interval,
        tcp,
        connect_wait: a.connect_wait,
        live_buffer: a.live_buffer,
        ..RelayRunConfig::new(listen, to, a.seq_format_in.into(), output)
    };
    let relay = &mut cfg.relay;
    relay.frame_format = a.frames.into();
    relay.arq_latency = a.arq.arq_latency;
    relay.frames_per_second = a.fps.fps;
    relay.threads = a.threads;
    relay.rate_bps = a.rate.rate;
    relay.catch_up = a.catch_up;
    relay.smoothing = a.smoothing;
    relay.burst = a.burst;
    relay.buffer_bytes = usize::try_from(a.buffer).unwrap_or(usize::MAX);
    relay.max_stations = a.input.max_stations;
    relay.from = a.input.from;
    relay.ack_every = a.ack;
    cfg.validate().map_err(|e| session_error(e.into()))
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
    Ok((tee, record.config()?))
}

/// `stream relay`: bind, say where it listens, sends and records, run, and say what arrived.
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
        a.seq_format.name()
    };
    let bound = BoundRelay::bind(cfg).map_err(session_error)?;
    let addrs: Vec<String> = bound.local_addrs().iter().map(|a| a.to_string()).collect();
    status!(
        "stream relay: listening on {} (UDP, {}), sending to {} ({}){}",
        addrs.join(", "),
        a.seq_format_in.name(),
        a.to,
        out_format,
        recording_to
    );
    let r = run_bound(bound, &a.live, &a.output)?;
    if let Some(e) = r.tee.as_ref().and_then(|t| t.write_error.as_ref()) {
        return Err(ProblemsFound(format!("tee: {e}")).into());
    }
    if r.datagrams.datagrams > 0 {
        if let Some(t) = r.live_out.as_ref().filter(|t| t.clients == 0) {
            return Err(ProblemsFound(format!(
                "no DiFX job accepted a TCP connection on {}: {} frames not delivered, all kept by the tee if one was asked for (last attempt: {})",
                t.endpoint,
                t.dropped_no_reader,
                r.live_out_error.as_deref().unwrap_or("none")
            ))
            .into());
        }
    }
    let relayed: u64 = r.stations.iter().map(|s| s.frames_out).sum();
    arrival(&r.datagrams, relayed, "relayed", &addrs, r.first_problem.as_deref())
}
