//! Link configuration: what one direction of a WAN path does to packets.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest one-way delay or jitter a [`LinkConfig`] accepts.
///
/// Real paths are below a second; the cap keeps `Instant + delay` far from
/// overflow whatever a configuration file says.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);

/// A configuration value is out of range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// A probability is NaN or outside `[0, 1]`.
    #[error("{name} = {value} is not a probability in [0, 1]")]
    InvalidProbability {
        /// Field name, e.g. `"duplicate"`.
        name: &'static str,
        /// The offending value.
        value: f64,
    },
    /// `rate_bps` is `Some(0)`: a link that never sends anything.
    #[error("rate_bps must be > 0 (use None for an unlimited link)")]
    ZeroRate,
    /// `delay` or `jitter` exceeds [`MAX_DELAY`].
    #[error("{name} = {value:?} exceeds the maximum of {MAX_DELAY:?}")]
    DelayTooLarge {
        /// Field name, `"delay"` or `"jitter"`.
        name: &'static str,
        /// The offending value.
        value: Duration,
    },
    /// A mean burst length below one packet (or NaN) was requested.
    #[error("mean burst length {0} must be >= 1 packet")]
    InvalidBurstLength(f64),
    /// The requested mean loss cannot be reached with the requested burst length.
    #[error("mean loss {mean_loss} is unreachable with mean burst length {mean_burst_len}")]
    UnreachableMeanLoss {
        /// Requested stationary loss fraction.
        mean_loss: f64,
        /// Requested mean burst length in packets.
        mean_burst_len: f64,
    },
}

/// How packets are lost on the wire (after the bottleneck).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability per packet.
        p: f64,
    },
    /// Two-state Markov chain (bursty loss), see [`GilbertElliott`].
    GilbertElliott(GilbertElliott),
}

impl LossModel {
    /// The loss model of a mean loss and a mean burst length in packets: none at 0, Bernoulli
    /// for bursts of 1, Gilbert–Elliott above (see [`GilbertElliott::from_mean_loss_and_burst`]).
    /// What `evlbi linkemu --loss --burst` and `evlbi model vlbi-loss --burst` both mean.
    pub fn from_mean_loss_and_burst(mean_loss: f64, mean_burst_len: f64) -> Result<Self, ConfigError> {
        if !mean_burst_len.is_finite() || mean_burst_len < 1.0 {
            return Err(ConfigError::InvalidBurstLength(mean_burst_len));
        }
        check_probability("mean_loss", mean_loss)?;
        Ok(if mean_loss == 0.0 {
            LossModel::None
        } else if mean_burst_len > 1.0 {
            LossModel::GilbertElliott(GilbertElliott::from_mean_loss_and_burst(mean_loss, mean_burst_len)?)
        } else {
            LossModel::Bernoulli { p: mean_loss }
        })
    }
}

/// Gilbert–Elliott loss: a Good and a Bad state with their own loss probabilities.
///
/// Before each packet the chain makes one transition; the packet is then lost
/// with the loss probability of the new state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GilbertElliott {
    /// Probability of moving Good → Bad at a packet.
    pub p_good_to_bad: f64,
    /// Probability of moving Bad → Good at a packet.
    pub p_bad_to_good: f64,
    /// Loss probability while Good (usually 0).
    pub loss_in_good: f64,
    /// Loss probability while Bad (1 in the simple Gilbert model).
    pub loss_in_bad: f64,
}

impl GilbertElliott {
    /// Simple Gilbert model (loss only in Bad, always lost there) with the given
    /// stationary loss fraction and mean loss-burst length in packets.
    ///
    /// With `loss_in_good = 0` and `loss_in_bad = 1`, loss bursts are exactly the
    /// sojourns in Bad, which are geometric: `P(len = k) = (1 − p_bg)^(k−1) · p_bg`,
    /// so the mean burst length is `1 / p_bg`. The stationary probability of Bad,
    /// hence the mean loss, is `π_B = p_gb / (p_gb + p_bg)`. Solving both:
    /// `p_bg = 1 / burst`, `p_gb = loss · p_bg / (1 − loss)`.
    /// (Gilbert 1960, "Capacity of a burst-noise channel"; the same
    /// parametrisation is used by netem's `loss gemodel p r`.)
    pub fn from_mean_loss_and_burst(mean_loss: f64, mean_burst_len: f64) -> Result<Self, ConfigError> {
        // NaN is not finite, so it is rejected here too.
        if !mean_burst_len.is_finite() || mean_burst_len < 1.0 {
            return Err(ConfigError::InvalidBurstLength(mean_burst_len));
        }
        check_probability("mean_loss", mean_loss)?;
        let p_bad_to_good = 1.0 / mean_burst_len;
        if mean_loss >= 1.0 {
            return Err(ConfigError::UnreachableMeanLoss {
                mean_loss,
                mean_burst_len,
            });
        }
        let p_good_to_bad = mean_loss * p_bad_to_good / (1.0 - mean_loss);
        if p_good_to_bad > 1.0 {
            // Even switching to Bad after every good packet cannot reach this loss.
            return Err(ConfigError::UnreachableMeanLoss {
                mean_loss,
                mean_burst_len,
            });
        }
        Ok(Self {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        })
    }

    /// Stationary probability of the Bad state, `p_gb / (p_gb + p_bg)`.
    ///
    /// A chain that never moves (both transition probabilities 0) stays in
    /// its initial state, Good.
    pub fn stationary_bad(&self) -> f64 {
        let sum = self.p_good_to_bad + self.p_bad_to_good;
        if sum > 0.0 {
            self.p_good_to_bad / sum
        } else {
            0.0
        }
    }

    /// Long-run loss fraction: `π_G · loss_in_good + π_B · loss_in_bad`.
    pub fn mean_loss(&self) -> f64 {
        let bad = self.stationary_bad();
        (1.0 - bad) * self.loss_in_good + bad * self.loss_in_bad
    }
}

/// One direction of a path: bottleneck queue, wire delay, jitter, loss, duplication.
///
/// Packets go through these stages in order:
/// 1. **Bottleneck** (`rate_bps`, `buffer_bytes`): a drop-tail FIFO served at
///    `rate_bps`. This is where congestion loss happens.
/// 2. **Wire loss** (`loss`): random loss after the bottleneck, so a packet that
///    is later lost still used bottleneck capacity, as on a real path where
///    corruption or a lossy hop sits downstream of the narrow link.
/// 3. **Duplication** (`duplicate`): the surviving packet may be delivered twice;
///    the copy does not consume bottleneck capacity.
/// 4. **Propagation** (`delay`, `jitter`, `reorder`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Bottleneck rate in bits per second (counting the bytes passed as `len`
    /// to `push`). `None` means infinitely fast: no queueing at all.
    pub rate_bps: Option<u64>,
    /// Capacity of the drop-tail queue in front of the bottleneck, in bytes,
    /// including the packet currently being serialised. A packet is dropped
    /// when `occupancy + len > buffer_bytes`. Ignored when `rate_bps` is `None`.
    pub buffer_bytes: u64,
    /// Fixed one-way propagation delay added after serialisation.
    pub delay: Duration,
    /// Extra random delay per packet, uniform on `[0, jitter]`
    /// (mean `jitter / 2`).
    pub jitter: Duration,
    /// Whether jitter may reorder packets. When `false`, each release time is
    /// raised to at least the previous one, so packets leave in order (at the
    /// cost of a delay distribution skewed upwards when packets are closer
    /// together than `jitter`).
    pub reorder: bool,
    /// Random loss on the wire.
    pub loss: LossModel,
    /// Probability that a packet surviving the wire is delivered twice.
    pub duplicate: f64,
}

impl Default for LinkConfig {
    /// A perfect link: unlimited rate, no delay, no loss.
    fn default() -> Self {
        Self {
            rate_bps: None,
            // Enough for 10 ms at 10 Gb/s, a sensible default when a rate is set.
            buffer_bytes: 12_500_000,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: false,
            loss: LossModel::None,
            duplicate: 0.0,
        }
    }
}

impl LinkConfig {
    /// Checks every field; [`crate::Link::new`] calls this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rate_bps == Some(0) {
            return Err(ConfigError::ZeroRate);
        }
        for (name, value) in [("delay", self.delay), ("jitter", self.jitter)] {
            if value > MAX_DELAY {
                return Err(ConfigError::DelayTooLarge { name, value });
            }
        }
        check_probability("duplicate", self.duplicate)?;
        match self.loss {
            LossModel::None => {}
            LossModel::Bernoulli { p } => check_probability("loss.p", p)?,
            LossModel::GilbertElliott(ge) => {
                check_probability("loss.p_good_to_bad", ge.p_good_to_bad)?;
                check_probability("loss.p_bad_to_good", ge.p_bad_to_good)?;
                check_probability("loss.loss_in_good", ge.loss_in_good)?;
                check_probability("loss.loss_in_bad", ge.loss_in_bad)?;
            }
        }
        Ok(())
    }
}

fn check_probability(name: &'static str, value: f64) -> Result<(), ConfigError> {
    // Written so that NaN fails.
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::InvalidProbability { name, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gilbert_from_mean_loss_and_burst_matches_formula() {
        let ge = GilbertElliott::from_mean_loss_and_burst(0.01, 4.0).unwrap();
        assert!((ge.p_bad_to_good - 0.25).abs() < 1e-12);
        assert!((ge.mean_loss() - 0.01).abs() < 1e-12);
        assert_eq!(ge.loss_in_bad, 1.0);
        assert_eq!(ge.loss_in_good, 0.0);
    }

    #[test]
    fn gilbert_rejects_impossible_parameters() {
        assert!(GilbertElliott::from_mean_loss_and_burst(0.1, 0.5).is_err());
        assert!(GilbertElliott::from_mean_loss_and_burst(f64::NAN, 2.0).is_err());
        assert!(GilbertElliott::from_mean_loss_and_burst(1.0, 2.0).is_err());
        // burst 1 => p_bg = 1; loss 0.6 needs p_gb = 1.5.
        assert!(GilbertElliott::from_mean_loss_and_burst(0.6, 1.0).is_err());
        assert!(GilbertElliott::from_mean_loss_and_burst(0.5, 1.0).is_ok());
    }

    #[test]
    fn validate_catches_bad_fields() {
        let ok = LinkConfig::default();
        assert_eq!(ok.validate(), Ok(()));
        let c = LinkConfig {
            rate_bps: Some(0),
            ..ok.clone()
        };
        assert_eq!(c.validate(), Err(ConfigError::ZeroRate));
        let c = LinkConfig {
            duplicate: f64::NAN,
            ..ok.clone()
        };
        assert!(c.validate().is_err());
        let c = LinkConfig {
            loss: LossModel::Bernoulli { p: 1.5 },
            ..ok.clone()
        };
        assert!(c.validate().is_err());
        let c = LinkConfig {
            delay: Duration::from_secs(u64::MAX),
            ..ok
        };
        assert!(matches!(c.validate(), Err(ConfigError::DelayTooLarge { .. })));
    }

    #[test]
    fn config_round_trips_through_json() {
        let c = LinkConfig {
            rate_bps: Some(1_000_000_000),
            delay: Duration::from_millis(100),
            loss: LossModel::GilbertElliott(GilbertElliott::from_mean_loss_and_burst(0.01, 3.0).unwrap()),
            ..LinkConfig::default()
        };
        let json = serde_json::to_string(&c).unwrap();
        let back: LinkConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        // Missing fields take their defaults.
        let partial: LinkConfig = serde_json::from_str(r#"{"loss": {"kind": "bernoulli", "p": 0.5}}"#).unwrap();
        assert_eq!(partial.loss, LossModel::Bernoulli { p: 0.5 });
    }
}
