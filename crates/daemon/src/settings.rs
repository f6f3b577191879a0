//! What the Field System sets before a scan (`mode`, `net_protocol`, `net_port`, …) and how
//! each is reported back; the receiver and relay configurations built from them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use scanfmt::datastream::DataStreams;
use stream::{ReceiverConfig, SeqFormat};
use stream_session::recv::RecvConfig;
use stream_session::relay::RelayRunConfig;
use stream_session::ConfigError;
use stream_session::Setting as S;
use thiserror::Error;
use vsis::command::{NetProtocolSet, PortSpec, Protocol, RecordFormat};
use vsis::mode::Mode;

/// Why the settings cannot receive or relay (return code 6, conflicting settings).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingsError {
    /// A `net_port` host that is neither a local address nor a group.
    #[error("net_port host '{host}' is not an IP address")]
    PortHostNotIp {
        /// The host as set.
        host: String,
    },
    /// A `net_port` that is no listen spec.
    #[error("net_port {spec}: {source}")]
    Listen {
        /// The spec built from the setting.
        spec: String,
        /// Why it does not parse.
        source: netio::ListenSpecError,
    },
    /// A `net_port` list the session cannot listen on (a port given twice), in VSI-S words.
    #[error("{}", .0.describe(&vsi_word))]
    Ports(ConfigError),
    /// The mode's data rate gives no whole number of frames per second over the threads.
    #[error("mode {mode} over {threads} thread(s) is not a whole number of frames per second")]
    NoWholeFrameRate {
        /// The mode as set.
        mode: String,
        /// Threads per station.
        threads: u16,
    },
    /// Datagrams of this framing carry no frame rate and no mode gives it.
    #[error(
        "mode not set: {protocol} datagrams carry no frame rate (mode = VDIF_<payload>-<Mb/s>-<channels>-<bits> ;)"
    )]
    ModeNotSet {
        /// The framing's name.
        protocol: &'static str,
    },
}

/// jive5ab's default data port.
pub const DEFAULT_PORT: u16 = 2630;

/// The recorder's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `mode`; `None` is `mode = none` (frame rate from the data, native framing only).
    pub mode: Option<Mode>,
    /// VDIF threads per station when set (`threads = N`); unset, a recording counts them from
    /// the data (the Field System never says: a DBBC3 sends one thread per board).
    pub threads: Option<u16>,
    /// `net_protocol`'s framing.
    pub protocol: Protocol,
    /// Socket buffer, bytes.
    pub socbuf: u64,
    /// jive5ab's work block size: the block (vbs chunk, Mark6 block) of a vbs/Mark6 recording
    /// when 1 MiB or more, as jive5ab records its blocks (the recorder's default otherwise).
    pub workbuf: u64,
    /// jive5ab's number of blocks (reported only).
    pub nblock: u32,
    /// `net_port`.
    pub ports: Vec<PortSpec>,
    /// `mtu`: the largest datagram `net2net` may send, IP header included.
    pub mtu: u32,
    /// `ipd`, ns: `net2net`'s packet spacing (0 or -1: at the data rate).
    pub ipd_ns: i64,
    /// `ack`: `net2net` sends a keep-alive back to each sender every this many of its datagrams
    /// (jive5ab's, so switches on the way learn the recorder's address); 0 none (evlbi's
    /// default: jive5ab's is 10), below 0 every datagram (as jive5ab).
    pub ack: i32,
    /// `arq_latency`, ms: `net2net` keeps each stream this long to answer NAKs (0: no ARQ).
    pub arq_latency_ms: u32,
    /// `record_format` (FlexBuff vbs unless the Field System or the operator says otherwise).
    pub record_format: RecordFormat,
    /// `datastream`: how a recording's frames split into recordings.
    pub datastreams: DataStreams,
    /// `record = nthread`: jive5ab's parallel readers and writers (kept and reported; evlbi
    /// writes with one writer per disk).
    pub nthread: (u32, u32),
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            mode: None,
            threads: None,
            protocol: Protocol::Udps,
            socbuf: 64 << 20,
            workbuf: 131_072,
            nblock: 8,
            ports: vec![PortSpec {
                host: None,
                port: DEFAULT_PORT,
            }],
            mtu: 1500,
            ipd_ns: 0,
            ack: 0,
            arq_latency_ms: 0,
            record_format: RecordFormat::Vbs,
            datastreams: DataStreams::default(),
            nthread: (1, 1),
        }
    }
}

/// The stream framing of a protocol.
pub fn seq_format(p: Protocol) -> SeqFormat {
    match p {
        Protocol::Udps | Protocol::Udpsnor | Protocol::Vtp => SeqFormat::Jive5ab,
        Protocol::Pudp => SeqFormat::None,
        Protocol::Native => SeqFormat::Native,
    }
}

impl Settings {
    /// Take what a `net_protocol` command gives.
    pub fn apply_protocol(&mut self, set: &NetProtocolSet) {
        if let Some(p) = set.protocol {
            self.protocol = p;
        }
        if let Some(b) = set.socbuf {
            self.socbuf = b;
        }
        if let Some(w) = set.workbuf {
            self.workbuf = w;
        }
        if let Some(n) = set.nblock {
            self.nblock = n;
        }
    }

    /// `net_protocol?`'s fields: protocol, socket buffer, work block, blocks.
    pub fn protocol_fields(&self) -> Vec<String> {
        vec![
            self.protocol.name().into(),
            self.socbuf.to_string(),
            self.workbuf.to_string(),
            self.nblock.to_string(),
        ]
    }

    /// Take a `net_port` list (jive5ab's: a lone port 0 is the default port) once the session
    /// can listen on it: every host an address, each port once (the session's one rule).
    pub fn set_ports(&mut self, ports: Vec<PortSpec>) -> Result<(), SettingsError> {
        let ports = match ports.as_slice() {
            [one] if one.port == 0 => Settings::default().ports,
            _ => ports,
        };
        let candidate = Settings {
            ports,
            ..Settings::default()
        };
        stream_session::socket::check_listen(&candidate.listen()?).map_err(|e| match e {
            // Named as the Field System wrote it, not as the socket address it became.
            ConfigError::ListenTwice { index, .. } => SettingsError::Ports(ConfigError::ListenTwice {
                spec: candidate.port_fields().swap_remove(index),
                index,
            }),
            e => SettingsError::Ports(e),
        })?;
        self.ports = candidate.ports;
        Ok(())
    }

    /// `net_port?`'s fields.
    pub fn port_fields(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| match &p.host {
                Some(h) => format!("{h}@{}", p.port),
                None => p.port.to_string(),
            })
            .collect()
    }

    /// `ipd?`'s field: µs, fractional when not whole (jive5ab prints `%f` then).
    pub fn ipd_field(&self) -> String {
        if self.ipd_ns % 1000 == 0 {
            (self.ipd_ns / 1000).to_string()
        } else {
            format!("{:.6}", self.ipd_ns as f64 / 1000.0)
        }
    }

    /// The data ports as listen specs (jive5ab's `host@port` is a local address, or a group to
    /// join when it is a multicast address).
    pub fn listen(&self) -> Result<Vec<netio::ListenSpec>, SettingsError> {
        self.ports
            .iter()
            .map(|p| {
                let text = match &p.host {
                    None => format!("0.0.0.0:{}", p.port),
                    Some(h) => match h.parse::<IpAddr>() {
                        Ok(ip) if ip.is_multicast() => format!("{ip}@{}", p.port),
                        Ok(ip) => SocketAddr::new(ip, p.port).to_string(),
                        Err(_) => return Err(SettingsError::PortHostNotIp { host: h.clone() }),
                    },
                };
                text.parse::<netio::ListenSpec>()
                    .map_err(|source| SettingsError::Listen { spec: text, source })
            })
            .collect()
    }

    /// Frames per second per thread the mode gives, if a mode is set (over one thread when
    /// the threads are not set); an error when it gives no whole number for the threads set.
    pub fn frames_per_second(&self) -> Result<Option<u32>, SettingsError> {
        Ok(self.frame_rate()?.map(vdif::FrameRate::get))
    }

    /// [`Settings::frames_per_second`] as the typed rate (what a sender's config takes).
    pub fn frame_rate(&self) -> Result<Option<vdif::FrameRate>, SettingsError> {
        let Some(m) = &self.mode else { return Ok(None) };
        let threads = self.threads.unwrap_or(1);
        m.frame_rate(threads)
            .map(Some)
            .map_err(|_| SettingsError::NoWholeFrameRate {
                mode: m.text.clone(),
                threads,
            })
    }

    /// `threads?`'s field: the number set, or `auto` (counted from the data).
    pub fn threads_field(&self) -> String {
        self.threads.map_or_else(|| "auto".into(), |t| t.to_string())
    }

    /// Whether data in `format` can be received with these settings: jive5ab and bare framing
    /// carry no frame rate, the mode must give it.
    pub fn check_receivable(&self, format: SeqFormat) -> Result<(), SettingsError> {
        if format != SeqFormat::Native && self.mode.is_none() {
            return Err(SettingsError::ModeNotSet {
                protocol: self.protocol.name(),
            });
        }
        self.frames_per_second().map(|_| ())
    }
}

impl Settings {
    /// The receiver these settings give (`record = on`, `net2file`): the data ports, the socket
    /// buffer, the framing of `net_protocol` and the mode's frame rate; where it writes is the
    /// caller's.
    pub fn recv_config(&self) -> Result<RecvConfig, SettingsError> {
        let format = seq_format(self.protocol);
        self.check_receivable(format)?;
        let native = format == SeqFormat::Native;
        let frame_format = self.mode.as_ref().map_or(vdif::FrameFormat::Vdif, |m| m.format);
        if frame_format == vdif::FrameFormat::Mark5b {
            // One stream, no threads to count: the mode's rate is its frame rate.
            return Ok(RecvConfig {
                rcvbuf: usize::try_from(self.socbuf).unwrap_or(usize::MAX),
                receiver: ReceiverConfig {
                    format,
                    frame_format,
                    frames_per_second: self.frame_rate()?,
                    threads: Some(1),
                    ..ReceiverConfig::default()
                },
                ..RecvConfig::new(self.listen()?)
            });
        }
        Ok(RecvConfig {
            rcvbuf: usize::try_from(self.socbuf).unwrap_or(usize::MAX),
            receiver: ReceiverConfig {
                format,
                // Threads set: the mode's rate split over them. Not set (the FS never sets
                // them): counted from each stream's first frames, the mode's rate split over
                // those.
                frames_per_second: match (native, self.threads) {
                    (false, Some(_)) => self.frame_rate()?,
                    _ => None,
                },
                threads: self.threads.filter(|_| !native),
                station_frames_per_second: if native { None } else { self.frame_rate()? },
                ..ReceiverConfig::default()
            },
            ..RecvConfig::new(self.listen()?)
        })
    }

    /// The relay these settings give (`net2net = connect`) to `to`, taking `input` framing
    /// (default: `net_protocol`'s) and sending `net_protocol`'s: the data ports, the socket
    /// buffer, the mode's frame rate and data rate, `ipd`'s spacing.
    pub fn relay_config(&self, to: SocketAddr, input: Option<Protocol>) -> Result<RelayRunConfig, SettingsError> {
        let input = seq_format(input.unwrap_or(self.protocol));
        let output = seq_format(self.protocol);
        if input != SeqFormat::Native {
            self.check_receivable(input)?;
        }
        let mut cfg = RelayRunConfig {
            rcvbuf: usize::try_from(self.socbuf).unwrap_or(usize::MAX),
            ..RelayRunConfig::new(self.listen()?, to, input, output)
        };
        let relay = &mut cfg.relay;
        relay.frame_format = self.mode.as_ref().map_or(vdif::FrameFormat::Vdif, |m| m.format);
        if input != SeqFormat::Native {
            // Threads set: the mode's rate split over them. Not set (the FS never sets them):
            // the relay learns each station's threads and splits the mode's rate over those.
            match self.threads {
                Some(t) => {
                    relay.frames_per_second = self.frame_rate()?;
                    relay.threads = Some(t);
                }
                None => relay.station_frames_per_second = self.frame_rate()?,
            }
        }
        // `ipd` set: the FS asked for a spacing between packets, so every frame leaves alone at
        // its time; else frames share departures (see DEFAULT_BURST).
        relay.burst = if self.ipd_ns > 0 {
            1
        } else {
            stream::relay::DEFAULT_BURST
        };
        // `ack`: jive5ab's keep-alive period (0 none here; below 0 every datagram, as jive5ab).
        relay.ack_every = match self.ack {
            0 => None,
            n => Some(u32::try_from(n).unwrap_or(1)),
        };
        relay.arq_latency = (self.arq_latency_ms > 0).then(|| Duration::from_millis(u64::from(self.arq_latency_ms)));
        relay.rate_bps = match (&self.mode, self.ipd_ns) {
            // ipd: one datagram of every station's stream per spacing (whole b/s, rounded down;
            // at least 1).
            (Some(m), ipd) if ipd > 0 => {
                let bps = u128::from(m.payload) * 8 * 1_000_000_000 / u128::from(ipd.unsigned_abs());
                vdif::BitRate::new(u64::try_from(bps).unwrap_or(u64::MAX).max(1))
            }
            (Some(m), _) => vdif::BitRate::new(m.rate_bps().round() as u64),
            (None, _) => None,
        };
        Ok(cfg)
    }
}

/// The one table from a stream session's settings to the VSI-S keywords that set them, so a
/// session's refusal reads in the Field System's words (`net_port: 1 to 64 addresses`); the
/// settings no keyword sets are named as the session names them (the daemon set them itself).
pub fn vsi_word(s: S) -> &'static str {
    match s {
        S::Listen => "net_port",
        S::Format => "net_protocol",
        S::InputFormat => "net2net = connect's input protocol",
        S::To => "net2net = connect's host",
        S::Fps | S::Rate | S::Frames => "mode",
        S::Threads => "threads",
        S::Burst => "ipd",
        S::Ack => "ack",
        S::Recording => "record_format",
        S::Out => "net2file",
        S::Live => "net2sfxc",
        other => other.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_become_listen_specs() {
        let mut s = Settings {
            ports: vec![
                PortSpec {
                    host: None,
                    port: 46227,
                },
                PortSpec {
                    host: Some("127.0.0.1".into()),
                    port: 46228,
                },
                PortSpec {
                    host: Some("239.1.2.3".into()),
                    port: 46229,
                },
            ],
            ..Settings::default()
        };
        let l = s.listen().unwrap();
        assert_eq!(l[0], netio::ListenSpec::Unicast("0.0.0.0:46227".parse().unwrap()));
        assert_eq!(l[1], netio::ListenSpec::Unicast("127.0.0.1:46228".parse().unwrap()));
        assert!(matches!(l[2], netio::ListenSpec::Multicast { port: 46229, .. }));
        s.ports = vec![PortSpec {
            host: Some("somehost".into()),
            port: 1,
        }];
        assert_eq!(
            s.listen(),
            Err(SettingsError::PortHostNotIp {
                host: "somehost".into()
            })
        );
        assert_eq!(s.port_fields(), vec!["somehost@1"]);
    }

    #[test]
    fn ack_sets_the_relays_keep_alives() {
        let to = "127.0.0.1:9".parse().unwrap();
        let every = |ack| {
            let s = Settings {
                ack,
                ..Settings::default()
            };
            s.relay_config(to, Some(Protocol::Native)).map(|c| c.relay.ack_every)
        };
        assert_eq!(every(0), Ok(None));
        assert_eq!(every(50), Ok(Some(50)));
        assert_eq!(every(-1), Ok(Some(1)), "below 0: every datagram, as jive5ab");
    }

    #[test]
    fn the_mode_gives_the_frame_rate() {
        let mut s = Settings::default();
        assert_eq!(
            s.check_receivable(SeqFormat::Jive5ab),
            Err(SettingsError::ModeNotSet { protocol: "udps" })
        );
        assert!(s.check_receivable(SeqFormat::Native).is_ok());
        s.mode = Mode::parse("VDIF_8000-512-16-2").unwrap();
        assert_eq!(s.frames_per_second(), Ok(Some(8000)));
        s.threads = Some(3);
        assert!(matches!(
            s.check_receivable(SeqFormat::Jive5ab),
            Err(SettingsError::NoWholeFrameRate { threads: 3, .. })
        ));
        s.ipd_ns = 1500;
        assert_eq!(s.ipd_field(), "1.500000");
        s.ipd_ns = 10_000;
        assert_eq!(s.ipd_field(), "10");
    }
}
