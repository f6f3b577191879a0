//! What the Field System sets before a scan (`mode`, `net_protocol`, `net_port`, …) and how
//! each is reported back; the receiver and relay configurations built from them.

use std::net::{IpAddr, SocketAddr};

use scanfmt::datastream::DataStreams;
use stream::SeqFormat;
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
        let Some(m) = &self.mode else { return Ok(None) };
        let threads = self.threads.unwrap_or(1);
        m.frame_rate(threads)
            .map(|r| Some(r.get()))
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
