//! The daemon's sessions (not the `transfer` crate): the transfers it runs, one at a time as
//! jive5ab's runtime does: a recording (`record = on`, `net2file = open`: `stream recv` writing
//! below the root) or a relay (`net2net`: `stream relay` to another host), each on its own
//! thread, handing its counts to the daemon (and through it to the metrics view) once per
//! interval ([`CountsOutlet`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use recording::write::{FileMode, OutputDir, RecordingConfig, RecordingNames, WriterPlacement};
use scanfmt::datastream::LabelNames;
use stream::results::{RecvReport, RecvStatus, RelayReport, RelayStatus};
use stream_session::recv::{BoundReceiver, RecvConfig};
use stream_session::relay::{BoundRelay, RelayRunConfig};
use stream_session::StreamSessionError;
use thiserror::Error;
use vsis::command::Protocol;

use crate::counts::{CountsOutlet, TransferCounts};
use crate::settings::{seq_format, vsi_word, Settings, SettingsError};

/// What the daemon was started with that every transfer uses.
#[derive(Debug, Clone)]
pub struct TransferEnv {
    /// Where recordings, `net2file` and `disk2file` may go.
    pub paths: crate::paths::StationPaths,
    /// Where file writes run.
    pub writer: WriterPlacement,
    /// How often a transfer publishes its counts.
    pub interval: Duration,
}

/// A transfer's kind, as `status?`, `tstat?` and the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `record = on`.
    Record,
    /// `net2file = open`.
    Net2File,
    /// `net2net`.
    Net2Net,
    /// `net2sfxc`: a receiver whose output is SFXC's `mk5://` socket.
    Net2Sfxc,
    /// `fill2net`.
    Fill2Net,
    /// `disk2file`.
    Disk2File,
}

impl Kind {
    /// jive5ab's name of the transfer mode.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Record => "record",
            Kind::Net2File => "net2file",
            Kind::Net2Net => "net2net",
            Kind::Net2Sfxc => "net2sfxc",
            Kind::Fill2Net => "fill2net",
            Kind::Disk2File => "disk2file",
        }
    }
}

/// A recording running on its thread.
pub struct Recording {
    /// `record` or `net2file`.
    pub kind: Kind,
    /// The scan label (or file name) it was given a directory for.
    pub name: String,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<RecvReport, TransferError>>,
}

/// A relay: bound (`connect`) or sending (`on`).
pub enum Relay {
    /// Sockets bound, not started.
    Connected {
        /// Destination.
        to: SocketAddr,
        /// The bound relay.
        bound: Box<BoundRelay>,
    },
    /// Running on its thread.
    Running {
        /// Destination.
        to: SocketAddr,
        /// Set to stop it.
        stop: Arc<AtomicBool>,
        /// Its thread.
        handle: JoinHandle<Result<RelayReport, TransferError>>,
    },
}

/// Why a transfer could not start; [`StartError::return_code`] is the reply's code (6
/// conflicting settings, 4 failed).
#[derive(Debug, Error)]
pub enum StartError {
    /// The settings cannot receive or relay.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// `fill2net` and `net2net` need a mode.
    #[error("mode not set{needed_for}")]
    ModeNotSet {
        /// What needs it (": fill2net sends data of the mode"), or empty.
        needed_for: &'static str,
    },
    /// One datagram of the mode does not fit the MTU.
    #[error("{datagram}-byte datagrams (IP header included) exceed mtu {mtu}: set mtu = {datagram} or more")]
    DatagramOverMtu {
        /// Datagram bytes, IP and UDP headers included.
        datagram: usize,
        /// The `mtu` setting.
        mtu: u32,
    },
    /// One datagram of the mode is larger than any `mtu` (at most 9000): a relay sends each
    /// frame whole in one datagram (Mark5B's 10016-byte frames; jive5ab cuts them instead).
    #[error(
        "net2net sends each frame whole: {datagram}-byte datagrams (IP header included), more than any mtu (at most 9000) \
         carries (Mark5B: feed SFXC with net2sfxc, or relay with evlbi stream relay --frames mark5b where the path takes {datagram} bytes)"
    )]
    FrameOverAnyMtu {
        /// Datagram bytes, IP and UDP headers included.
        datagram: usize,
    },
    /// `fill2net` generates real 1- or 2-bit VDIF only (no Mark5B: the correlator input
    /// host's `net2sfxc` is the Mark5B path).
    #[error("fill2net generates real 1- or 2-bit VDIF, not mode {mode}{}", if *.mark5b { " (Mark5B data goes to SFXC through net2sfxc)" } else { "" })]
    FillMode {
        /// The mode as set.
        mode: String,
        /// It is a Mark5B mode (the reply then says where Mark5B goes).
        mark5b: bool,
    },
    /// `fill2net` holds one second of data in memory: the mode's rate is capped.
    #[error("fill2net generates at most {max_gbps} Gb/s")]
    FillTooFast {
        /// The cap, Gb/s.
        max_gbps: f64,
    },
    /// The station code is not one VDIF can carry.
    #[error(transparent)]
    Station(#[from] vdif::HeaderError),
    /// The destination does not resolve.
    #[error(transparent)]
    Resolve(#[from] netio::HostPortError),
    /// The receiver refused its settings, or could not bind its sockets or open its output.
    #[error("cannot receive: {}", in_vsi_words(.0))]
    Receive(StreamSessionError),
    /// The relay refused its settings, or could not bind its sockets.
    #[error("cannot relay: {}", in_vsi_words(.0))]
    Relay(StreamSessionError),
    /// The transfer's thread could not start.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory of a `record_format = vdif` recording.
    #[error(transparent)]
    Directory(#[from] crate::paths::PathsError),
    /// A directory could not be made below a disk.
    #[error(transparent)]
    Dir(#[from] safedir::DirError),
    /// Every name a recording may take exists.
    #[error("{label} and {label}a to {label}Z exist in {disk}")]
    NamesTaken {
        /// The label.
        label: String,
        /// The disk.
        disk: String,
    },
}

/// A stream session's error, its settings named by the VSI-S keywords that set them
/// ([`vsi_word`]).
fn in_vsi_words(e: &StreamSessionError) -> String {
    match e {
        StreamSessionError::Config(c) => c.describe(&vsi_word),
        other => other.to_string(),
    }
}

impl StartError {
    /// The VSI-S return code the refusal carries: the one table from why a transfer could not
    /// start to the reply's code (6: the settings conflict, 4: it failed).
    pub fn return_code(&self) -> vsis::ReturnCode {
        match self {
            StartError::Receive(e) | StartError::Relay(e) if e.is_usage() => vsis::ReturnCode::Conflict,
            StartError::Resolve(_)
            | StartError::Receive(_)
            | StartError::Relay(_)
            | StartError::Thread { .. }
            | StartError::Directory(_)
            | StartError::Dir(_)
            | StartError::NamesTaken { .. } => vsis::ReturnCode::Failed,
            _ => vsis::ReturnCode::Conflict,
        }
    }
}

/// Why a running transfer ended in failure.
#[derive(Debug, Error)]
pub enum TransferError {
    /// The stream session failed.
    #[error(transparent)]
    Session(#[from] StreamSessionError),
    /// `fill2net` could not generate its second of data.
    #[error("fill2net cannot generate the mode's data: {0}")]
    Generate(#[from] GenerateError),
    /// The transfer's thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Why `fill2net` could not generate its data.
#[derive(Debug, Error)]
pub enum GenerateError {
    /// The mode gives no VDIF frame layout.
    #[error(transparent)]
    Layout(#[from] vdif::LayoutError),
    /// The clock is before 1970 or outside the VDIF epochs.
    #[error("the clock is outside the VDIF epochs")]
    Clock,
    /// The station code.
    #[error(transparent)]
    Station(#[from] vdif::HeaderError),
    /// Writing into memory.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn thread_error(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Thread { what, source }
}

/// Where a recording goes.
#[derive(Debug)]
pub enum Target {
    /// A vbs or Mark6 scan over the set disks (`record = on`).
    Scan(RecordingConfig),
    /// VDIF files per station in a new directory (`record = on` with `record_format = vdif`),
    /// made and opened below the set disks through no link: the writers resolve no path.
    Files(safedir::Dir),
    /// One file (`net2file = open : PATH,mode`): its directory (opened below the roots through no
    /// link), name and mode.
    OneFile(safedir::Dir, String, FileMode),
    /// SFXC's reader on a socket (`net2sfxc = open : SOCK`), not a recording.
    Live(stream_session::live::LiveTarget),
}

/// Start receiving into `target`; `name` is what `record?` and the metrics call it.
pub fn start_recording(
    kind: Kind,
    name: &str,
    target: Target,
    settings: &Settings,
    env: &TransferEnv,
    outlet: CountsOutlet,
) -> Result<Recording, StartError> {
    let (out_dir, out_file, recording, live) = match target {
        Target::Scan(r) => (None, None, Some(r), None),
        Target::Files(d) => (Some(OutputDir::Opened(Arc::new(d))), None, None, None),
        Target::OneFile(d, n, m) => (Some(OutputDir::Opened(Arc::new(d))), Some((n, m)), None, None),
        Target::Live(t) => (None, None, None, Some(stream_session::live::LiveConfig::new(vec![t]))),
    };
    let base = settings.recv_config()?;
    // A live output: one station, its reorder window short (the rules and clamps are the
    // session's `validate()`).
    let base = match live {
        Some(l) => base.with_live(l),
        None => base,
    };
    let cfg = RecvConfig {
        out_dir,
        out_file,
        recording,
        interval: env.interval,
        writer: env.writer.clone(),
        // The backend streams before `record = on` and after: the recording begins once its
        // writers are up, not with a socket buffer's worth and then a gap while they start.
        output_before_bind: true,
        ..base
    };
    let bound = BoundReceiver::bind(cfg).map_err(StartError::Receive)?;
    outlet.clear();
    let o = outlet.clone();
    let bound = bound.observe(Box::new(move |s: RecvStatus| {
        o.offer(TransferCounts::Recv(s));
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name(format!("{}-{name}", kind.name()))
        .spawn(move || {
            let r = bound.run(&flag, |_| {}).map_err(TransferError::from);
            if let Ok(report) = &r {
                outlet.finish(TransferCounts::Recv(recv_status(report)));
            }
            r
        })
        .map_err(thread_error("receiver"))?;
    Ok(Recording {
        kind,
        name: name.to_string(),
        stop,
        handle,
    })
}

impl Recording {
    /// Stop and wait for the files to be complete.
    pub fn stop(self) -> Result<RecvReport, TransferError> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().map_err(|_| TransferError::Panicked("receiver"))?
    }

    /// It ended by itself (an error).
    pub fn has_ended(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Bind a relay from the data ports to `host:port`.
pub fn connect_relay(
    host: &str,
    port: Option<u16>,
    input: Option<Protocol>,
    settings: &Settings,
    env: &TransferEnv,
) -> Result<Relay, StartError> {
    let port = port
        .or(settings.ports.first().map(|p| p.port))
        .unwrap_or(crate::settings::DEFAULT_PORT);
    let to = resolve(host, port)?;
    // The relay's rules (a Mark5B mode among them) before the datagram's size is judged.
    let cfg = RelayRunConfig {
        writer: env.writer.clone(),
        interval: env.interval,
        ..settings.relay_config(to, input)?
    }
    .validate()
    .map_err(|e| StartError::Relay(e.into()))?;
    if let Some(m) = &settings.mode {
        let datagram = m.frame_len() as usize + cfg.relay.output.prefix_len() + 28;
        if datagram > vsis::command::MAX_MTU as usize {
            return Err(StartError::FrameOverAnyMtu { datagram });
        }
        if datagram > settings.mtu as usize {
            return Err(StartError::DatagramOverMtu {
                datagram,
                mtu: settings.mtu,
            });
        }
    }
    let bound = BoundRelay::bind(cfg).map_err(StartError::Relay)?;
    Ok(Relay::Connected {
        to,
        bound: Box::new(bound),
    })
}

impl Relay {
    /// Where it sends.
    pub fn to(&self) -> SocketAddr {
        match self {
            Relay::Connected { to, .. } | Relay::Running { to, .. } => *to,
        }
    }

    /// Start sending (a running relay stays as it is).
    pub fn start(self, outlet: CountsOutlet) -> Result<Relay, StartError> {
        let Relay::Connected { to, bound } = self else {
            return Ok(self);
        };
        outlet.clear();
        let o = outlet.clone();
        let bound = bound.observe(Box::new(move |s: RelayStatus| {
            o.offer(TransferCounts::Relay(s));
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("net2net".into())
            .spawn(move || {
                let r = bound.run(&flag, |_| {}).map_err(TransferError::from);
                if let Ok(report) = &r {
                    outlet.finish(TransferCounts::Relay(relay_status(report)));
                }
                r
            })
            .map_err(thread_error("relay"))?;
        Ok(Relay::Running { to, stop, handle })
    }

    /// It was running and ended by itself (an error).
    pub fn has_ended(&self) -> bool {
        matches!(self, Relay::Running { handle, .. } if handle.is_finished())
    }

    /// Stop (if running) and close.
    pub fn stop(self) -> Result<Option<RelayReport>, TransferError> {
        match self {
            Relay::Connected { .. } => Ok(None),
            Relay::Running { stop, handle, .. } => {
                stop.store(true, Ordering::Relaxed);
                handle.join().map_err(|_| TransferError::Panicked("relay"))?.map(Some)
            }
        }
    }
}

/// `fill2net`: synthetic VDIF of the mode sent to a host, bound (`connect`) or sending (`on`).
pub enum Fill {
    /// Destination chosen, nothing sent.
    Connected {
        /// Destination.
        to: SocketAddr,
        /// Station code in the headers.
        station: String,
    },
    /// Sending on its thread.
    Running {
        /// Destination.
        to: SocketAddr,
        /// Set to stop it.
        stop: Arc<AtomicBool>,
        /// Its thread.
        handle: JoinHandle<Result<stream_session::report::SendReport, TransferError>>,
    },
}

/// Resolve `host:port` to an IPv4 address.
fn resolve(host: &str, port: u16) -> Result<SocketAddr, StartError> {
    let hp = netio::HostPort {
        host: host.to_string(),
        port,
    };
    Ok(hp.resolve_ipv4()?)
}

/// Choose where `fill2net` sends; the mode must say what to generate.
pub fn connect_fill(
    host: &str,
    port: Option<u16>,
    station: Option<String>,
    settings: &Settings,
) -> Result<Fill, StartError> {
    let mode = settings.mode.as_ref().ok_or(StartError::ModeNotSet {
        needed_for: ": fill2net sends data of the mode",
    })?;
    settings.frames_per_second()?;
    if mode.format == vdif::FrameFormat::Mark5b || mode.bits > 2 || mode.complex || mode.legacy {
        return Err(StartError::FillMode {
            mode: mode.text.clone(),
            mark5b: mode.format == vdif::FrameFormat::Mark5b,
        });
    }
    let port = port
        .or(settings.ports.first().map(|p| p.port))
        .unwrap_or(crate::settings::DEFAULT_PORT);
    let station = station.unwrap_or_else(|| "FL".into());
    vdif::StationId::parse(&station)?;
    Ok(Fill::Connected {
        to: resolve(host, port)?,
        station,
    })
}

/// Most data rate `fill2net` generates (one second of it is held in memory).
const FILL_MAX_BPS: f64 = 4.096e9;

impl Fill {
    /// Where it sends.
    pub fn to(&self) -> SocketAddr {
        match self {
            Fill::Connected { to, .. } | Fill::Running { to, .. } => *to,
        }
    }

    /// It was sending and ended by itself (an error).
    pub fn has_ended(&self) -> bool {
        matches!(self, Fill::Running { handle, .. } if handle.is_finished())
    }

    /// Start sending: one second of the mode's data is generated on the sender's thread, then
    /// sent in a loop, each frame at its VDIF time (a backend simulator), until `off`.
    pub fn start(self, settings: &Settings, outlet: CountsOutlet) -> Result<Fill, StartError> {
        let Fill::Connected { to, station } = self else {
            return Ok(self);
        };
        let mode = settings.mode.clone().ok_or(StartError::ModeNotSet { needed_for: "" })?;
        if mode.rate_bps() > FILL_MAX_BPS {
            return Err(StartError::FillTooFast {
                max_gbps: FILL_MAX_BPS / 1e9,
            });
        }
        let (threads, format) = (settings.threads.unwrap_or(1), seq_format(settings.protocol));
        let fps = settings.frame_rate()?;
        outlet.clear();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("fill2net".into())
            .spawn(move || {
                let data = generate(&mode, threads, &station)?;
                let input = stream_session::send::Input::Memory {
                    name: format!("fill2net:{station}"),
                    data,
                };
                let cfg = stream_session::send::SendConfig {
                    fps,
                    rate_bps: vdif::BitRate::new(mode.rate_bps().round() as u64),
                    format,
                    loop_files: true,
                    realtime: true,
                    ..stream_session::send::SendConfig::new(to, vec![input])
                };
                let o = outlet.clone();
                let observer: stream_session::Observer<stream::results::SendStatus> = Box::new(move |s| {
                    o.offer(TransferCounts::Send(s));
                });
                let r =
                    stream_session::send::run_sender_observed(cfg, &flag, Some(observer)).map_err(TransferError::from);
                if let Ok(report) = &r {
                    outlet.finish(TransferCounts::Send(stream::results::SendStatus {
                        elapsed_s: report.duration_s,
                        stations: report.stations.clone(),
                        senders: report.senders.clone(),
                        arq: report.arq,
                    }));
                }
                r
            })
            .map_err(thread_error("fill2net"))?;
        Ok(Fill::Running { to, stop, handle })
    }

    /// Stop (if sending) and close.
    pub fn stop(self) -> Result<(), TransferError> {
        match self {
            Fill::Connected { .. } => Ok(()),
            Fill::Running { stop, handle, .. } => {
                stop.store(true, Ordering::Relaxed);
                handle
                    .join()
                    .map_err(|_| TransferError::Panicked("fill2net"))?
                    .map(|_| ())
            }
        }
    }
}

/// One second of `mode` for `station` over `threads` threads, starting this second.
fn generate(mode: &vsis::mode::Mode, threads: u16, station: &str) -> Result<Vec<u8>, GenerateError> {
    let layout = vdif::layout::FrameLayout::new(
        mode.rate_bps(),
        mode.bits as u8,
        mode.channels,
        u32::from(threads),
        mode.payload as usize,
    )?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| GenerateError::Clock)?;
    let (ref_epoch, start_seconds) = vdif::time::to_epoch(now.as_secs() as i64).ok_or(GenerateError::Clock)?;
    let id = vdif::StationId::parse(station)?;
    let config = vdif::gen::GenConfig {
        layout,
        stations: vec![vdif::gen::StationSpec {
            name: id.to_string(),
            id,
            delay_s: 0.0,
        }],
        seconds: 1,
        ref_epoch,
        start_seconds,
        snr: 0.0,
        tone_hz: None,
        tone_amplitude: 0.0,
        seed: 1,
    };
    let mut data = Vec::new();
    vdif::gen::Generator::new(config).write_station(0, &mut data, |_| {})?;
    Ok(data)
}

/// `record = on : LABEL` in vbs or Mark6: the scan over every set disk, named as a FlexBuff
/// names it (the label, or `LABEL_ds<stream>` per data stream).
pub fn scan_target(
    label: &scanfmt::name::ScanName,
    layout: scanfmt::Layout,
    disks: Vec<(PathBuf, safedir::Dir)>,
    settings: &Settings,
) -> Result<Target, StartError> {
    let names = LabelNames::new(label, settings.datastreams.clone());
    let (disks, opened) = disks.into_iter().map(|(p, d)| (p, std::sync::Arc::new(d))).unzip();
    Ok(Target::Scan(RecordingConfig {
        layout,
        disks,
        opened,
        names: RecordingNames::Label(names),
        // jive5ab records a block of the chain (net_protocol's work block) per chunk; its
        // 128 KiB default is no chunk size, so smaller blocks take the recorder's default.
        block_bytes: (settings.workbuf >= 1 << 20).then_some(settings.workbuf),
        direct: true,
    }))
}

/// The status a finished receiver leaves: its report's totals.
pub fn recv_status(r: &RecvReport) -> RecvStatus {
    let written: u64 = r.files.iter().map(|f| f.frames).sum::<u64>()
        + r.recording.iter().flat_map(|x| &x.scans).map(|s| s.frames).sum::<u64>();
    let filled: u64 = r.stations.iter().map(|s| s.window.written_filled).sum();
    RecvStatus {
        elapsed_s: r.duration_s,
        rate_bps: 0.0,
        datagrams: r.datagrams,
        stations: r.stations.clone(),
        frames_written: written,
        frames_filled: filled,
        kernel_drops: r.socket_drops,
        writer_stall_s: r.writer_stall_s,
        writer_stalls: r.writer_stalls,
        naks_sent: r.naks_sent,
        disks_dropped: r.recording.as_ref().map_or(0, |x| x.disks_dropped),
        frames_not_written: r.frames_not_written,
        live: r.live.clone(),
    }
}

/// The status a finished relay leaves.
pub fn relay_status(r: &RelayReport) -> RelayStatus {
    RelayStatus {
        elapsed_s: r.duration_s,
        in_rate_bps: 0.0,
        datagrams: r.datagrams,
        senders: r.senders.clone(),
        other_senders: r.other_senders,
        stations: r.stations.clone(),
        output: r.output.clone(),
        arq: r.arq,
        kernel_drops: r.socket_drops,
        handover_dropped: r.handover_dropped,
        queued: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream_session::{ConfigError, Setting};

    /// A session's refusal of its settings is the Field System's conflict (6), said in the
    /// keywords that set them; a failure (a socket) stays 4.
    #[test]
    fn a_sessions_refusal_is_a_conflict_in_vsi_s_words() {
        let listen = StartError::Relay(ConfigError::ListenCount { count: 65 }.into());
        assert_eq!(listen.return_code(), vsis::ReturnCode::Conflict);
        assert_eq!(
            listen.to_string(),
            "cannot relay: net_port: 1 to 64 addresses (65 given)"
        );
        let framing = StartError::Receive(ConfigError::ArqNeedsNative { setting: Setting::Arq }.into());
        assert_eq!(framing.return_code(), vsis::ReturnCode::Conflict);
        assert_eq!(
            framing.to_string(),
            "cannot receive: arq needs net_protocol native (NAKs name native sequence numbers)"
        );
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "in use");
        let bind = StartError::Relay(netio::io_err("bind 0.0.0.0:2630")(io).into());
        assert_eq!(bind.return_code(), vsis::ReturnCode::Failed);
    }
}
