//! `evlbi stream recv`: receive streams and write continuous VDIF per station (or a vbs/Mark6
//! scan over many disks), everything counted.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use recording::write::WriterPlacement;
use stream::ReceiverConfig;
use stream_session::live::sfxc::SfxcAddr;
use stream_session::live::{LiveConfig, LiveTarget};
use stream_session::recv::{BoundReceiver, RecvConfig};

use crate::flags::JsonOutputOldFile;
use crate::session_flags::session_error;
use crate::shared_args::{FpsArg, ListenArgs, LiveArgs};
use crate::stream_common::{arrival, run_bound, Format, Split};
use crate::units::{parse_duration, parse_size};
use crate::{usage, usage_in, ProblemsFound};

#[derive(Args)]
pub struct RecvArgs {
    #[command(flatten)]
    input: ListenArgs,
    /// Output directory of the recordings (files STATION_UTC.vdif). Without it, frames are
    /// counted and dropped. `sfxc:SOCKET` (a unix socket path) or `sfxc:tcp:[ADDRESS:]PORT`:
    /// no recording, the station's frames live to SFXC's `mk5://` reader (as jive5ab's
    /// `net2sfxc`): in time order, lost frames and silences (after 1 s) filled invalid at the
    /// station's rate, one station, one reader at a time; --latency defaults to 2ms then.
    /// `difx:HOST:PORT`: the same live stream to a DiFX mpifxcorr NETWORK datastream (TCP;
    /// this side connects, retrying until the job opens the port; each connection starts on a
    /// received frame at a time step, invalid frames carry the fill pattern).
    #[arg(long, value_name = "DIR|sfxc:SOCKET|difx:HOST:PORT")]
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
    /// Frame format. `mark5b`: 10016-byte Mark5B frames, one stream (--fps: the data rate over
    /// 80 000 bits), only with --out sfxc: or difx: (fills as jive5ab's net2sfxc makes them: a
    /// valid header at the missing frame's time, data the fill pattern).
    #[arg(long, value_enum, default_value = "vdif")]
    frames: FramesArg,
    #[command(flatten)]
    fps: FpsArg,
    /// VDIF threads per station (jive5ab/none framing; default 1). Their ids may be any (a
    /// jive5ab fill pattern is thread 290): each id seen takes one of the N; a thread never seen
    /// is never filled.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Reorder window: frames are written this long (in stream time) after they are due. A
    /// frame may move the window past frames not yet arrived only as far as the time since the
    /// stream last advanced explains (at twice its rate; a quarter window at once, never over
    /// half): frames forged ahead of a live stream never flush real ones.
    /// [default: 50ms; 2ms with --out sfxc: or difx:]
    #[arg(long, value_parser = parse_duration)]
    latency: Option<Duration>,
    /// Ask the sender to repeat lost frames while they can still arrive within --latency.
    #[arg(long)]
    arq: bool,
    /// Gaps up to this long are filled with invalid frames; longer ones start a new file.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    max_fill: Duration,
    /// With --out: memory between the receiver and the file writer. It absorbs disk stalls of
    /// SIZE / data rate (256M: 0.5 s at 4 Gb/s); when it is full the receiver waits, the socket
    /// buffer fills and the kernel drops — reported as "writer stall", the disk's loss, not the
    /// network's.
    #[arg(long, value_parser = parse_size, default_value = "256M", value_name = "SIZE")]
    write_buffer: u64,
    /// With --out sfxc: or difx:: memory queued for the reader. A reader slower than the station costs
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
    #[command(flatten)]
    output: JsonOutputOldFile,
    #[command(flatten)]
    live: LiveArgs,
}

/// `stream recv`: bind, say where it listens and what it writes, run, and say what arrived.
pub fn recv(a: RecvArgs) -> Result<()> {
    let output = a.output.resolve()?;
    let cfg = recv_config(&a)?;
    let target = match (&cfg.out_dir, &cfg.recording) {
        _ if cfg.live.is_some() => format!(
            "live to {}",
            cfg.live
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
        (Some(d), None) => format!("{}{}", d.path().display(), if a.direct { " (direct I/O)" } else { "" }),
        (None, None) => "nothing (memory sink)".to_string(),
    };
    let bound = BoundReceiver::bind(cfg).map_err(session_error)?;
    let addrs: Vec<String> = bound.local_addrs()?.iter().map(|a| a.to_string()).collect();
    status!("stream recv: listening on {} (UDP), writing {target}", addrs.join(", "));
    let r = run_bound(bound, &a.live, &output)?;
    if let Some(e) = &r.write_error {
        return Err(ProblemsFound(format!("{e}; {} frames not written", r.frames_not_written)).into());
    }
    let written: u64 = r
        .stations
        .iter()
        .map(|s| s.window.written_valid + s.window.written_filled)
        .sum();
    arrival(&r.datagrams, written, "written", &addrs, r.first_problem.as_deref())
}

/// `--frames` (of `stream recv` and `stream relay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FramesArg {
    /// VDIF 1.1.1.
    Vdif,
    /// Mark5B.
    Mark5b,
}

impl From<FramesArg> for vdif::FrameFormat {
    fn from(f: FramesArg) -> vdif::FrameFormat {
        match f {
            FramesArg::Vdif => vdif::FrameFormat::Vdif,
            FramesArg::Mark5b => vdif::FrameFormat::Mark5b,
        }
    }
}

/// The receiver's configuration: the flags translated into [`RecvConfig`], checked by its one
/// `validate()` (its errors said in flags).
fn recv_config(a: &RecvArgs) -> Result<RecvConfig> {
    let listen = a.input.specs()?;
    let live = live_out(a.out.as_deref())?.map(|l| LiveConfig {
        buffer: a.live_buffer,
        ..l
    });
    let base = match live {
        Some(l) => RecvConfig::new(listen).with_live(l),
        None => RecvConfig::new(listen),
    };
    let frame_format = a.frames.into();
    let cfg = RecvConfig {
        out_dir: a
            .out
            .clone()
            .filter(|_| base.live.is_none())
            .map(recording::write::OutputDir::Path),
        recording: a.record.config()?,
        chunk: a.chunk,
        rcvbuf: a.input.rcvbuf(),
        receiver: ReceiverConfig {
            format: a.seq_format.into(),
            frame_format,
            frames_per_second: a.fps.fps,
            threads: a.threads,
            latency: a.latency.unwrap_or(base.receiver.latency),
            max_fill: a.max_fill,
            max_stations: a.input.max_stations,
            from: a.input.from,
            arq: a.arq,
            ..ReceiverConfig::default()
        },
        duration: a.live.until.duration,
        idle_timeout: a.live.until.idle_timeout,
        first_datagram_timeout: a.live.until.first_datagram_timeout(),
        interval: a.live.until.interval,
        writer: if a.writer_in_thread {
            WriterPlacement::Thread
        } else {
            WriterPlacement::this_executable()?
        },
        write_buffer: a.write_buffer,
        direct_io: a.direct,
        split_threads: a.split == Split::Thread,
        ..base
    };
    cfg.validate().map_err(|e| session_error(e.into()))
}

/// `--out sfxc:SOCKET` or `sfxc:tcp:[ADDRESS:]PORT` (the socket's directory is the
/// operator's, opened once; the socket is made in it by descriptor), or `difx:HOST:PORT`: the
/// live output, if asked for.
fn live_out(out: Option<&std::path::Path>) -> Result<Option<LiveConfig>> {
    let text = out.and_then(|o| o.to_str());
    if let Some(peer) = text.and_then(|o| o.strip_prefix("difx:")) {
        let (_, to) = crate::addr::peer("--out difx:", peer, None)?;
        return Ok(Some(LiveConfig::new(vec![LiveTarget::Difx {
            to,
            station: None,
            connect_wait: stream_session::live::difx::DEFAULT_CONNECT_WAIT,
        }])));
    }
    let Some(spec) = text.and_then(|o| o.strip_prefix("sfxc:")) else {
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
        SfxcAddr::unix_path(std::path::Path::new(spec)).map_err(|e| usage_in(format!("--out sfxc:{spec}"), e))?
    };
    Ok(Some(LiveConfig::new(vec![LiveTarget::Sfxc { addr, station: None }])))
}

/// Where a live output's readers connect, for the listening line.
fn live_endpoint(t: &LiveTarget) -> String {
    match t {
        LiveTarget::Sfxc { addr, .. } => format!("SFXC's mk5:// reader at {}", addr.endpoint()),
        LiveTarget::Difx { to, .. } => format!("DiFX's datastream at tcp:{to}"),
    }
}
