//! How to run a receiver: its settings, their defaults and their rules.

use std::time::Duration;

use recording::write::{OutputDir, RecordingConfig, WriterPlacement};
use stream::{ReceiverConfig, SeqFormat};
use vdif::FrameFormat;

use crate::live::{LiveConfig, LIVE_LATENCY};
use crate::socket::{check_listen, DEFAULT_RCVBUF};
use crate::{ConfigError, Setting};

/// How to run a receiver: [`RecvConfig::new`] gives the defaults, [`RecvConfig::validate`] the
/// rules; [`BoundReceiver::bind`] validates again, so no caller runs an unchecked one.
#[derive(Debug, Clone)]
pub struct RecvConfig {
    /// Addresses (or multicast groups) to listen on; several are read by one thread in turn.
    pub listen: Vec<netio::ListenSpec>,
    /// Output directory; `None` discards frames after accounting (memory sink).
    pub out_dir: Option<OutputDir>,
    /// Every frame into this one file of `out_dir`, opened so (`net2file`), not a file per
    /// station.
    pub out_file: Option<(String, recording::write::FileMode)>,
    /// A vbs or Mark6 recording over many disks instead of files in `out_dir`.
    pub recording: Option<RecordingConfig>,
    /// Start a new file after this many bytes.
    pub chunk: Option<u64>,
    /// Receive socket buffer to ask for ([`DEFAULT_RCVBUF`]).
    pub rcvbuf: usize,
    /// The sans-IO receiver's settings.
    pub receiver: ReceiverConfig,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no datagram came for this long, once the first has.
    pub idle_timeout: Option<Duration>,
    /// Stop when no first datagram came for this long from the start (`None`: no deadline).
    pub first_datagram_timeout: Option<Duration>,
    /// Live line cadence (at least 50 ms).
    pub interval: Duration,
    /// Where the file writes run (a child process keeps files whole-framed across a SIGKILL).
    pub writer: WriterPlacement,
    /// Memory between the receiver and the file writer, bytes ([`recording::write::DEFAULT_WRITE_BUFFER`]).
    pub write_buffer: u64,
    /// Write the files with direct I/O (O_DIRECT, past the page cache; writer process only).
    pub direct_io: bool,
    /// One file per VDIF thread of each station, not one per station.
    pub split_threads: bool,
    /// Set up the output (its writer processes) before the socket is bound, not after: for a
    /// recording started into a stream already flowing (`evlbi serve`'s `record = on`), which
    /// then begins when it can be written. Bound first (`stream recv`), the frames of a sender
    /// started at once queue in the socket meanwhile — or, into a flowing stream, overflow it:
    /// four disks' writer processes took long enough on a host with both cores busy to drop
    /// 54–980 frames at the start of a scan, which the recording then showed as lost.
    pub output_before_bind: bool,
    /// Live outputs to a correlator's reader instead of a recording (`out_dir`, `recording` and
    /// `out_file` are then unset).
    pub live: Option<LiveConfig>,
}

impl RecvConfig {
    /// Receive native framing on `listen` into the memory sink (counted, not written) until
    /// stopped, with the receiver's defaults ([`ReceiverConfig::default`]).
    pub fn new(listen: Vec<netio::ListenSpec>) -> RecvConfig {
        RecvConfig {
            listen,
            out_dir: None,
            out_file: None,
            recording: None,
            chunk: None,
            rcvbuf: DEFAULT_RCVBUF,
            receiver: ReceiverConfig::default(),
            duration: None,
            idle_timeout: None,
            first_datagram_timeout: None,
            interval: Duration::from_secs(1),
            writer: WriterPlacement::default(),
            write_buffer: recording::write::DEFAULT_WRITE_BUFFER,
            direct_io: false,
            split_threads: false,
            output_before_bind: false,
            live: None,
        }
    }

    /// Live outputs instead of a recording, with their reorder window ([`LIVE_LATENCY`]: a
    /// caller's own latency is set after this).
    pub fn with_live(mut self, live: LiveConfig) -> RecvConfig {
        self.live = Some(live);
        self.receiver.latency = LIVE_LATENCY;
        self
    }

    /// Apply every rule and clamp of a receiver's settings.
    pub fn validate(mut self) -> Result<RecvConfig, ConfigError> {
        check_listen(&self.listen)?;
        if self.receiver.arq && self.receiver.format != SeqFormat::Native {
            return Err(ConfigError::ArqNeedsNative { setting: Setting::Arq });
        }
        if let Some(live) = &self.live {
            let given = [
                (self.recording.is_some(), Setting::Recording),
                (self.out_dir.is_some() || self.out_file.is_some(), Setting::Out),
                (self.chunk.is_some(), Setting::Chunk),
                (self.direct_io, Setting::DirectIo),
                (self.split_threads, Setting::SplitThreads),
            ];
            if let Some((_, files)) = given.into_iter().find(|(g, _)| *g) {
                return Err(ConfigError::LiveAndRecording { files });
            }
            // One station per output, as jive5ab's net2sfxc carries one stream (further ones
            // are counted and dropped); a station gone quiet goes on as filled frames, so its
            // reader is never left waiting.
            self.receiver.max_stations = live.targets.len().max(1);
            self.receiver.fill_silence_after = Some(live.fill_silence_after);
        } else if self.recording.is_some() {
            let given = [
                (self.out_dir.is_some(), Setting::Out),
                (self.chunk.is_some(), Setting::Chunk),
                (self.direct_io, Setting::DirectIo),
            ];
            if let Some((_, files)) = given.into_iter().find(|(g, _)| *g) {
                return Err(ConfigError::RecordingAndFiles { files });
            }
        } else if self.out_dir.is_none() && self.split_threads {
            return Err(ConfigError::SplitNeedsOutput { output: Setting::Out });
        }
        if let Some(output) = self.output_refusing_frames() {
            return Err(ConfigError::Mark5bNeedsLive { output });
        }
        self.interval = self.interval.max(crate::setting::MIN_INTERVAL);
        Ok(self)
    }

    /// The output asked for that cannot take the frames received, if one is: a live output
    /// (SFXC's reader, as jive5ab's `net2sfxc`, and DiFX's feed) takes Mark5B as it came,
    /// recordings and files take VDIF only. One arm per format, to widen as an output learns
    /// Mark5B.
    fn output_refusing_frames(&self) -> Option<Setting> {
        match (self.receiver.frame_format, &self.live) {
            (FrameFormat::Vdif, _) | (FrameFormat::Mark5b, Some(_)) => None,
            (FrameFormat::Mark5b, None) if self.recording.is_some() => Some(Setting::Recording),
            (FrameFormat::Mark5b, None) => Some(Setting::Out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RecvConfig {
        RecvConfig::new(vec!["127.0.0.1:0".parse().unwrap()])
    }

    /// Every rule of a receiver's settings, one case each, and its clamp.
    #[test]
    fn each_rule_of_a_receivers_settings_names_its_setting() {
        let bad = |f: &dyn Fn(&mut RecvConfig)| {
            let mut c = cfg();
            f(&mut c);
            c.validate().unwrap_err()
        };
        // Its addresses counted (the receiver's and the relay's one rule, in `socket`).
        assert_eq!(bad(&|c| c.listen.clear()), ConfigError::ListenCount { count: 0 });
        assert_eq!(
            bad(&|c| {
                c.receiver.arq = true;
                c.receiver.format = SeqFormat::Jive5ab;
            }),
            ConfigError::ArqNeedsNative { setting: Setting::Arq }
        );
        for (f, files) in [
            (
                &(|c: &mut RecvConfig| c.out_dir = Some(OutputDir::Path("o".into()))) as &dyn Fn(&mut RecvConfig),
                Setting::Out,
            ),
            (&|c: &mut RecvConfig| c.chunk = Some(1 << 30), Setting::Chunk),
            (&|c: &mut RecvConfig| c.direct_io = true, Setting::DirectIo),
        ] {
            let e = bad(&|c| {
                c.recording = Some(crate::testing::scan());
                f(c);
            });
            assert_eq!(e, ConfigError::RecordingAndFiles { files });
        }
        assert_eq!(
            bad(&|c| c.split_threads = true),
            ConfigError::SplitNeedsOutput { output: Setting::Out }
        );
        let sfxc = || {
            let addr = crate::live::sfxc::SfxcAddr::Tcp("127.0.0.1:0".parse().unwrap());
            LiveConfig::new(vec![crate::live::LiveTarget::Sfxc { addr, station: None }])
        };
        for (f, files) in [
            (
                &(|c: &mut RecvConfig| c.recording = Some(crate::testing::scan())) as &dyn Fn(&mut RecvConfig),
                Setting::Recording,
            ),
            (
                &|c: &mut RecvConfig| c.out_dir = Some(OutputDir::Path("o".into())),
                Setting::Out,
            ),
            (&|c: &mut RecvConfig| c.chunk = Some(1 << 30), Setting::Chunk),
            (&|c: &mut RecvConfig| c.direct_io = true, Setting::DirectIo),
            (&|c: &mut RecvConfig| c.split_threads = true, Setting::SplitThreads),
        ] {
            let e = bad(&|c| {
                c.live = Some(sfxc());
                f(c);
            });
            assert_eq!(e, ConfigError::LiveAndRecording { files });
        }
        // A live output: one station, a quiet one filled, the live reorder window by default.
        let mut c = cfg().with_live(sfxc());
        c.receiver.max_stations = 16;
        let c = c.validate().unwrap();
        assert_eq!(c.receiver.max_stations, 1);
        assert_eq!(c.receiver.fill_silence_after, Some(Duration::from_secs(1)));
        assert_eq!(c.receiver.latency, LIVE_LATENCY);
        let mut c = cfg();
        c.interval = Duration::from_millis(1);
        assert_eq!(c.validate().unwrap().interval, Duration::from_millis(50));
        let mut c = cfg();
        c.split_threads = true;
        c.recording = Some(crate::testing::scan());
        assert!(c.validate().is_ok());
    }

    /// Mark5B goes to live outputs only (SFXC's reader, DiFX's feed); each output that takes
    /// VDIF alone is named.
    #[test]
    fn mark5b_frames_go_to_live_outputs_only_and_the_refusal_names_the_output_given() {
        let mark5b = |f: &dyn Fn(RecvConfig) -> RecvConfig| {
            let mut c = f(cfg());
            c.receiver.frame_format = FrameFormat::Mark5b;
            c.validate()
        };
        let sfxc = || crate::live::LiveTarget::Sfxc {
            addr: crate::live::sfxc::SfxcAddr::Tcp("127.0.0.1:0".parse().unwrap()),
            station: None,
        };
        let difx = || crate::live::LiveTarget::Difx {
            to: "127.0.0.1:9".parse().unwrap(),
            station: None,
            connect_wait: Duration::from_secs(1),
        };
        for live in [vec![sfxc()], vec![difx()], vec![sfxc(), difx()]] {
            assert!(mark5b(&|c| c.with_live(LiveConfig::new(live.clone()))).is_ok());
        }
        for (f, output) in [
            (&(|c: RecvConfig| c) as &dyn Fn(RecvConfig) -> RecvConfig, Setting::Out),
            (
                &|c: RecvConfig| RecvConfig {
                    out_dir: Some(OutputDir::Path("o".into())),
                    ..c
                },
                Setting::Out,
            ),
            (
                &|c: RecvConfig| RecvConfig {
                    recording: Some(crate::testing::scan()),
                    ..c
                },
                Setting::Recording,
            ),
        ] {
            assert_eq!(mark5b(f).unwrap_err(), ConfigError::Mark5bNeedsLive { output });
        }
        let e = ConfigError::Mark5bNeedsLive {
            output: Setting::Recording,
        };
        assert_eq!(e.settings(), [Setting::Frames, Setting::Recording, Setting::Live]);
        assert_eq!(
            e.to_string(),
            "frame_format mark5b needs live (recordings take VDIF, not Mark5B)"
        );
        // VDIF goes everywhere.
        assert!(RecvConfig {
            out_dir: Some(OutputDir::Path("o".into())),
            ..cfg()
        }
        .validate()
        .is_ok());
    }
}
