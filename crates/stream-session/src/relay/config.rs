//! How to run a relay: its settings, their defaults and their rules.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use recording::write::{RecordingConfig, WriterPlacement};
use stream::relay::RelayConfig;
use stream::SeqFormat;

use crate::error::in_range;
use crate::setting::{CATCH_UP_RANGE, MAX_BURST, MIN_INTERVAL};
use crate::socket::{check_listen, DEFAULT_RCVBUF, DEFAULT_SNDBUF};
use crate::{ConfigError, Setting};

/// How to run a relay: [`RelayRunConfig::new`] gives the defaults, [`RelayRunConfig::validate`]
/// the rules; [`BoundRelay::bind`] validates again, so no caller runs an unchecked one.
#[derive(Debug, Clone)]
pub struct RelayRunConfig {
    /// Addresses (or multicast groups) to listen on.
    pub listen: Vec<netio::ListenSpec>,
    /// Where the frames go.
    pub to: SocketAddr,
    /// Connect to `to` over TCP and write the frames back to back (DiFX's NETWORK datastream,
    /// [`crate::live::difx`]), not datagrams; the output framing is then bare.
    pub tcp: bool,
    /// With `tcp`: how long to wait for the job's port before saying so (it goes on trying;
    /// [`crate::live::difx::DEFAULT_CONNECT_WAIT`]).
    pub connect_wait: Duration,
    /// With `tcp`: bytes queued for the job at most ([`crate::live::DEFAULT_LIVE_BUFFER`]).
    pub live_buffer: u64,
    /// The relay's settings (`start` is set when the run starts). Clamped by `validate`:
    /// `arq_latency` to 10 s, `smoothing` to 1 s, `max_stations` to 1..=1024.
    pub relay: RelayConfig,
    /// Receive socket buffer per input ([`DEFAULT_RCVBUF`]).
    pub rcvbuf: usize,
    /// Send socket buffer ([`DEFAULT_SNDBUF`]).
    pub sndbuf: usize,
    /// Record what came in here (files per station, as `stream recv --out` writes them).
    pub tee: Option<PathBuf>,
    /// Or record it as a vbs/Mark6 scan over many disks.
    pub tee_recording: Option<RecordingConfig>,
    /// Start a new tee file after this many bytes.
    pub chunk: Option<u64>,
    /// One tee file per VDIF thread of each station, not one per station.
    pub split_threads: bool,
    /// Where the tee's file writes run.
    pub writer: WriterPlacement,
    /// Memory between the relay and the tee's writer, bytes.
    pub write_buffer: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no datagram came for this long, once the first has.
    pub idle_timeout: Option<Duration>,
    /// Stop when no first datagram came for this long from the start (`None`: no deadline).
    pub first_datagram_timeout: Option<Duration>,
    /// Live line cadence (at least 50 ms).
    pub interval: Duration,
}

/// Longest a relay keeps frames to answer NAKs: 10 s of 4 Gb/s is 5 GB, more than any buffer.
pub const MAX_ARQ_LATENCY: Duration = Duration::from_secs(10);

impl RelayRunConfig {
    /// Relay what comes to `listen` in `input` framing to `to` in `output` framing, with the
    /// relay's defaults ([`RelayConfig::new`]), no tee, until stopped.
    pub fn new(listen: Vec<netio::ListenSpec>, to: SocketAddr, input: SeqFormat, output: SeqFormat) -> RelayRunConfig {
        RelayRunConfig {
            listen,
            to,
            tcp: false,
            connect_wait: crate::live::difx::DEFAULT_CONNECT_WAIT,
            live_buffer: crate::live::DEFAULT_LIVE_BUFFER,
            relay: RelayConfig::new(input, output, Instant::now()),
            rcvbuf: DEFAULT_RCVBUF,
            sndbuf: DEFAULT_SNDBUF,
            tee: None,
            tee_recording: None,
            chunk: None,
            split_threads: false,
            writer: WriterPlacement::default(),
            write_buffer: recording::write::DEFAULT_WRITE_BUFFER,
            duration: None,
            idle_timeout: None,
            first_datagram_timeout: None,
            interval: Duration::from_secs(1),
        }
    }

    /// Apply every rule and clamp of a relay's settings.
    pub fn validate(mut self) -> Result<RelayRunConfig, ConfigError> {
        check_listen(&self.listen)?;
        self.check_mark5b()?;
        let r = &mut self.relay;
        if self.tcp {
            if r.arq_latency.is_some() {
                return Err(ConfigError::TcpCarriesBareFrames {
                    setting: Setting::ArqLatency,
                });
            }
            if r.output != SeqFormat::None {
                return Err(ConfigError::TcpCarriesBareFrames {
                    setting: Setting::Format,
                });
            }
        }
        if r.arq_latency.is_some() && r.output != SeqFormat::Native {
            return Err(ConfigError::ArqNeedsNative {
                setting: Setting::ArqLatency,
            });
        }
        in_range(Setting::Burst, r.burst, 1..=MAX_BURST, "1 to 64")?;
        in_range(Setting::CatchUp, r.catch_up, CATCH_UP_RANGE, "1 to 16")?;
        if r.ack_every == Some(0) {
            return Err(ConfigError::OutOfRange {
                setting: Setting::Ack,
                value: "0".into(),
                range: "1 or more; none sends no keep-alive",
            });
        }
        if self.tee_recording.is_some() {
            for (given, files) in [
                (self.tee.is_some(), Setting::Tee),
                (self.chunk.is_some(), Setting::Chunk),
            ] {
                if given {
                    return Err(ConfigError::RecordingAndFiles { files });
                }
            }
        } else if self.tee.is_none() && self.split_threads {
            return Err(ConfigError::SplitNeedsOutput { output: Setting::Tee });
        }
        r.arq_latency = r.arq_latency.map(|l| l.min(MAX_ARQ_LATENCY));
        r.smoothing = r.smoothing.min(Duration::from_secs(1));
        r.max_stations = r.max_stations.clamp(1, 1024);
        self.interval = self.interval.max(MIN_INTERVAL);
        Ok(self)
    }

    /// A Mark5B relay's rules: one stream, jive5ab udps in, udps or bare datagrams out, no
    /// recording (the stream crate's `relay::mark5b` module says why).
    fn check_mark5b(&self) -> Result<(), ConfigError> {
        if self.relay.frame_format != vdif::FrameFormat::Mark5b {
            return Ok(());
        }
        let refused = [
            (self.listen.len() > 1, Setting::Listen),
            (self.relay.input != SeqFormat::Jive5ab, Setting::InputFormat),
            (self.tcp, Setting::To),
            (self.relay.output == SeqFormat::Native, Setting::Format),
            (self.tee.is_some(), Setting::Tee),
            (self.tee_recording.is_some(), Setting::Recording),
        ];
        match refused.into_iter().find(|(bad, _)| *bad) {
            Some((_, setting)) => Err(ConfigError::Mark5bRelayed { setting }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RelayRunConfig {
        let listen = vec!["127.0.0.1:0".parse().unwrap()];
        RelayRunConfig::new(
            listen,
            "127.0.0.1:9".parse().unwrap(),
            SeqFormat::None,
            SeqFormat::Native,
        )
    }

    /// Every rule of a relay's settings, one case each.
    #[test]
    fn each_rule_of_a_relays_settings_names_its_setting() {
        let bad = |f: &dyn Fn(&mut RelayRunConfig)| {
            let mut c = cfg();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(
            bad(&|c| {
                c.relay.arq_latency = Some(Duration::from_millis(300));
                c.relay.output = SeqFormat::Jive5ab;
            }),
            ConfigError::ArqNeedsNative {
                setting: Setting::ArqLatency
            }
        );
        let range = crate::testing::out_of_range;
        assert_eq!(bad(&|c| c.relay.burst = 65), range(Setting::Burst, "65", "1 to 64"));
        assert_eq!(
            bad(&|c| c.relay.catch_up = 17.0),
            range(Setting::CatchUp, "17", "1 to 16")
        );
        assert_eq!(
            bad(&|c| c.relay.ack_every = Some(0)),
            range(Setting::Ack, "0", "1 or more; none sends no keep-alive")
        );
        let scan = crate::testing::scan();
        assert_eq!(
            bad(&|c| {
                c.tee_recording = Some(scan.clone());
                c.tee = Some("t".into());
            }),
            ConfigError::RecordingAndFiles { files: Setting::Tee }
        );
        assert_eq!(
            bad(&|c| {
                c.tee_recording = Some(scan.clone());
                c.chunk = Some(1);
            }),
            ConfigError::RecordingAndFiles { files: Setting::Chunk }
        );
        assert_eq!(
            bad(&|c| c.split_threads = true),
            ConfigError::SplitNeedsOutput { output: Setting::Tee }
        );
        assert_eq!(
            bad(&|c| c.tcp = true),
            ConfigError::TcpCarriesBareFrames {
                setting: Setting::Format
            }
        );
        assert_eq!(
            bad(&|c| {
                c.tcp = true;
                c.relay.output = SeqFormat::None;
                c.relay.arq_latency = Some(Duration::from_millis(300));
            }),
            ConfigError::TcpCarriesBareFrames {
                setting: Setting::ArqLatency
            }
        );
    }

    /// A Mark5B relay refuses, naming the setting, what it cannot do: several inputs, bare or
    /// native input, native output, TCP, a tee or recording; jive5ab in and udps or bare out
    /// pass.
    #[test]
    fn a_mark5b_relay_refuses_what_it_cannot_carry() {
        let mark5b = |f: &dyn Fn(&mut RelayRunConfig)| {
            let mut c = cfg();
            c.relay.frame_format = vdif::FrameFormat::Mark5b;
            c.relay.input = SeqFormat::Jive5ab;
            c.relay.output = SeqFormat::Jive5ab;
            f(&mut c);
            c.validate().map(|_| ())
        };
        let refused = |setting| Err(ConfigError::Mark5bRelayed { setting });
        assert_eq!(mark5b(&|_| {}), Ok(()));
        assert_eq!(mark5b(&|c| c.relay.output = SeqFormat::None), Ok(()));
        assert_eq!(
            mark5b(&|c| c.listen.push("127.0.0.1:1".parse().unwrap())),
            refused(Setting::Listen)
        );
        assert_eq!(
            mark5b(&|c| c.relay.input = SeqFormat::None),
            refused(Setting::InputFormat)
        );
        assert_eq!(
            mark5b(&|c| c.relay.input = SeqFormat::Native),
            refused(Setting::InputFormat)
        );
        assert_eq!(
            mark5b(&|c| c.relay.output = SeqFormat::Native),
            refused(Setting::Format)
        );
        assert_eq!(
            mark5b(&|c| {
                c.tcp = true;
                c.relay.output = SeqFormat::None;
            }),
            refused(Setting::To)
        );
        assert_eq!(mark5b(&|c| c.tee = Some("t".into())), refused(Setting::Tee));
        assert_eq!(
            mark5b(&|c| c.tee_recording = Some(crate::testing::scan())),
            refused(Setting::Recording)
        );
        let e = ConfigError::Mark5bRelayed { setting: Setting::Tee };
        assert_eq!(e.settings(), [Setting::Tee, Setting::Frames]);
        assert!(e.to_string().contains("recordings take VDIF"), "{e}");
    }

    /// What the binary clamped alone before is clamped for every caller (`evlbi serve` too).
    #[test]
    fn a_relays_clamps_apply_to_every_caller() {
        let mut c = cfg();
        c.relay.arq_latency = Some(Duration::from_secs(60));
        c.relay.smoothing = Duration::from_secs(5);
        c.relay.max_stations = 0;
        c.interval = Duration::ZERO;
        let c = c.validate().unwrap();
        assert_eq!(c.relay.arq_latency, Some(MAX_ARQ_LATENCY));
        assert_eq!(c.relay.smoothing, Duration::from_secs(1));
        assert_eq!(c.relay.max_stations, 1);
        assert_eq!(c.interval, MIN_INTERVAL);
        let mut c = cfg();
        c.relay.max_stations = 1_000_000;
        assert_eq!(c.validate().unwrap().relay.max_stations, 1024);
        assert_eq!(cfg().validate().unwrap().sndbuf, 8 << 20);
    }
}
