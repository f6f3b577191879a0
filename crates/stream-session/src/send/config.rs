//! How to run a sender: its settings, their defaults and their rules.

use std::net::SocketAddr;
use std::time::Duration;

use stream::SeqFormat;

use super::Input;
use crate::error::in_range;
use crate::setting::{CATCH_UP_RANGE, MAX_BURST, MAX_SENDERS};
use crate::socket::DEFAULT_SNDBUF;
use crate::{ConfigError, Setting};

/// Default catch-up bound of the stream sender. A station's data arrive at a fixed rate: time a
/// sender gives up is data it will never send. A VM or a busy host deschedules a sender for
/// milliseconds now and then (this VM: 10–30 ms gaps beside disk writes), and the probe's 1 ms
/// bound then cost 15 % of the rate at 4.096 Gb/s; 100 ms is covered by the receiver's
/// buffers and well inside an ARQ latency.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(100);

/// Default catch-up speed: twice the rate, so a backlog is cleared in as long as it took to
/// build, without line-rate bursts that would overrun a router queue.
pub const DEFAULT_CATCH_UP: f64 = 2.0;

/// How to run a sender: [`SendConfig::new`] gives the defaults, [`SendConfig::validate`] the
/// rules; [`run_sender`] validates again, so no caller runs an unchecked one.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Destination.
    pub to: SocketAddr,
    /// With `senders` K > 1: board k sends to `board_to[k]` (a backend's boards each configured
    /// with their own destination port); empty: every board sends to `to`.
    pub board_to: Vec<SocketAddr>,
    /// Inputs, one station each.
    pub inputs: Vec<Input>,
    /// Frames per second per thread, when the file does not show it (shorter than 1 s, no rate in
    /// the header) and `rate_bps` is not given.
    pub fps: Option<vdif::FrameRate>,
    /// Data rate per station (sample bits, headers excluded); default: from the files.
    pub rate_bps: Option<vdif::BitRate>,
    /// Framing.
    pub format: SeqFormat,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Restart each file at its end, advancing VDIF time (the file must hold whole seconds).
    pub loop_files: bool,
    /// Keep this much of each stream to answer NAKs (native framing only).
    pub arq_latency: Option<Duration>,
    /// Drop this fraction of datagrams at random before sending (a lossy link in the host, for
    /// tests and demos without namespaces): 0 to 1.
    pub inject_loss: f64,
    /// Seed of the injected loss.
    pub seed: u64,
    /// Send socket buffer to ask for ([`DEFAULT_SNDBUF`]).
    pub sndbuf: usize,
    /// Frames per system call (UDP GSO), released together every `burst` spacings: fewer
    /// system calls for rates beyond one core's per-datagram budget, at the cost of bursts.
    /// 1 to [`MAX_BURST`].
    pub burst: usize,
    /// How close to a departure the sender stops sleeping and spins
    /// ([`netio::pacer::DEFAULT_SPIN`]; at most 1 s); below the default the thread's timer
    /// slack is set to 1 ns so its sleeps end on time.
    pub spin: Duration,
    /// How far behind its timeline the sender may fall and still catch up; later than this the
    /// time is given up (the timeline re-anchored, a slip counted). [`DEFAULT_MAX_LAG`]; at
    /// most an hour.
    pub max_lag: Duration,
    /// While behind, release frames at up to this multiple of the rate ([`CATCH_UP_RANGE`](crate::setting::CATCH_UP_RANGE);
    /// [`DEFAULT_CATCH_UP`]).
    pub catch_up: f64,
    /// Sending sockets, each its own local port (the boards of a backend): 1 sends everything
    /// from one socket; K > 1 (at most [`MAX_SENDERS`]) splits every station's threads into K
    /// contiguous blocks, one per socket, each paced at its share of the rate with the frames
    /// of one time step leaving together. K > 1 needs inputs held in memory, bare or jive5ab
    /// framing, and at most as many senders as each station has threads.
    pub senders: usize,
    /// Frames leave at their own VDIF time, moved by whole seconds to just ahead of the clock
    /// (a backend simulator: `--generate` with `--start now`); else the timeline starts now.
    pub realtime: bool,
    /// Frames more than `max_lag` late are skipped (counted), never sent late: the timeline is
    /// fixed to the clock, as a backend's; else the timeline is re-anchored and every frame sent.
    pub skip_late: bool,
}

impl SendConfig {
    /// Send `inputs` to `to` as one native stream from one socket, at the files' own rate,
    /// once, with the defaults above.
    pub fn new(to: SocketAddr, inputs: Vec<Input>) -> SendConfig {
        SendConfig {
            to,
            board_to: Vec::new(),
            inputs,
            fps: None,
            rate_bps: None,
            format: SeqFormat::Native,
            duration: None,
            loop_files: false,
            arq_latency: None,
            inject_loss: 0.0,
            seed: 1,
            sndbuf: DEFAULT_SNDBUF,
            burst: 1,
            spin: netio::pacer::DEFAULT_SPIN,
            max_lag: DEFAULT_MAX_LAG,
            catch_up: DEFAULT_CATCH_UP,
            senders: 1,
            realtime: false,
            skip_late: false,
        }
    }

    /// Apply every rule and clamp of a sender's settings (what the inputs hold is checked
    /// when they are read: [`InputProblem`]).
    pub fn validate(mut self) -> Result<SendConfig, ConfigError> {
        if self.inputs.is_empty() {
            return Err(ConfigError::NoInputs);
        }
        if self.inputs.len() > usize::from(u16::MAX) {
            return Err(ConfigError::TooManyStations {
                count: self.inputs.len(),
            });
        }
        if self.arq_latency.is_some() && self.format != SeqFormat::Native {
            return Err(ConfigError::ArqNeedsNative {
                setting: Setting::ArqLatency,
            });
        }
        in_range(Setting::Senders, self.senders, 1..=MAX_SENDERS, "1 to 64")?;
        in_range(Setting::Burst, self.burst, 1..=MAX_BURST, "1 to 64")?;
        in_range(Setting::CatchUp, self.catch_up, CATCH_UP_RANGE, "1 to 16")?;
        in_range(Setting::InjectLoss, self.inject_loss, 0.0..=1.0, "0 to 1")?;
        if !self.board_to.is_empty() && self.board_to.len() != self.senders {
            return Err(ConfigError::BoardDestinations {
                destinations: self.board_to.len(),
                senders: self.senders,
            });
        }
        if self.senders > 1 && self.format == SeqFormat::Native {
            return Err(ConfigError::BoardsNeedBoardFraming { senders: self.senders });
        }
        self.spin = self.spin.min(Duration::from_secs(1));
        self.max_lag = self.max_lag.min(Duration::from_secs(3600));
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SendConfig {
        let input = Input::Memory {
            name: "x".into(),
            data: Vec::new(),
        };
        SendConfig::new("127.0.0.1:9".parse().unwrap(), vec![input])
    }

    /// Every rule of a sender's settings, one case each.
    #[test]
    fn each_rule_of_a_senders_settings_names_its_setting() {
        let bad = |f: fn(&mut SendConfig)| {
            let mut c = cfg();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.inputs.clear()), ConfigError::NoInputs);
        assert_eq!(
            bad(|c| c.inputs = vec![c.inputs[0].clone(); 65_536]),
            ConfigError::TooManyStations { count: 65_536 }
        );
        assert_eq!(
            bad(|c| {
                c.arq_latency = Some(Duration::from_millis(300));
                c.format = SeqFormat::Jive5ab;
            }),
            ConfigError::ArqNeedsNative {
                setting: Setting::ArqLatency
            }
        );
        let range = crate::testing::out_of_range;
        assert_eq!(bad(|c| c.senders = 0), range(Setting::Senders, "0", "1 to 64"));
        assert_eq!(bad(|c| c.senders = 65), range(Setting::Senders, "65", "1 to 64"));
        assert_eq!(bad(|c| c.burst = 0), range(Setting::Burst, "0", "1 to 64"));
        assert_eq!(bad(|c| c.catch_up = 0.5), range(Setting::CatchUp, "0.5", "1 to 16"));
        assert_eq!(
            bad(|c| c.inject_loss = 1.5),
            range(Setting::InjectLoss, "1.5", "0 to 1")
        );
        assert_eq!(
            bad(|c| {
                c.format = SeqFormat::Jive5ab;
                c.senders = 2;
                c.board_to = vec![c.to; 3];
            }),
            ConfigError::BoardDestinations {
                destinations: 3,
                senders: 2
            }
        );
        assert_eq!(
            bad(|c| c.senders = 2),
            ConfigError::BoardsNeedBoardFraming { senders: 2 }
        );
        // The message names the setting, in the library's words or a front door's.
        let e = bad(|c| c.senders = 2);
        assert!(e
            .to_string()
            .starts_with("senders 2 simulates a backend's boards: set format jive5ab"));
        let flags = |s: Setting| {
            if s == Setting::Senders {
                "--senders"
            } else {
                "--seq-format"
            }
        };
        assert!(e
            .describe(&flags)
            .starts_with("--senders 2 simulates a backend's boards: set --seq-format jive5ab"));
    }

    #[test]
    fn a_senders_clamps_are_applied_and_its_defaults_pass() {
        let c = cfg().validate().unwrap();
        assert_eq!((c.sndbuf, c.burst, c.senders, c.catch_up), (8 << 20, 1, 1, 2.0));
        let mut c = cfg();
        c.spin = Duration::from_secs(5);
        c.max_lag = Duration::from_secs(7200);
        let c = c.validate().unwrap();
        assert_eq!((c.spin, c.max_lag), (Duration::from_secs(1), Duration::from_secs(3600)));
    }
}
