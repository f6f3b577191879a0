//! Sampler statistics: how often each quantiser state occurs, per thread and channel.
//!
//! For a Gaussian signal sampled with optimally set 2-bit thresholds (±0.98 σ) the four states
//! occur 16.3 / 33.7 / 33.7 / 16.3 % of the time; a station whose fractions differ has its
//! levels set wrongly, a DC offset, or a dead/stuck bit — the first check an operator makes.
//! Counting is one increment per byte: a byte-value histogram per byte position within the
//! channel pattern, expanded into per-channel state counts at the end. Complex data are counted
//! per channel and per half (I and Q come from two samplers, each of which can be set wrongly).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::gauss::{expected_2bit_fractions, normal_quantile, OPTIMAL_2BIT_THRESHOLD_SIGMA};
use crate::header::VdifHeader;
use crate::station::StationId;

/// Quality of a channel's state distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every state within 2 percentage points of the Gaussian expectation.
    Good,
    /// Within 5 points: usable, but the sampler levels deserve a look.
    Marginal,
    /// Further off: wrong levels, DC offset, dead channel or not Gaussian noise.
    Bad,
}

/// Which values of a channel a row counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Real samples.
    Real,
    /// In-phase half of complex samples.
    I,
    /// Quadrature half of complex samples.
    Q,
}

/// State counts of one channel (or one half of a complex channel) of one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelStates {
    /// Station (two characters or the number), for files holding several.
    pub station: String,
    /// VDIF thread id.
    pub thread: u16,
    /// Channel within the thread.
    pub channel: u32,
    /// Real samples, or the I or Q half of complex ones.
    pub part: Part,
    /// Samples counted.
    pub samples: u64,
    /// Count of each state, code 0 (most negative) first.
    pub counts: Vec<u64>,
    /// `counts` as fractions of `samples`.
    pub fractions: Vec<f64>,
    /// Expected fractions for Gaussian noise with optimal levels.
    pub expected: Vec<f64>,
    /// 2-bit only: the threshold in units of σ that these fractions imply (optimum 0.98).
    pub implied_threshold_sigma: Option<f64>,
    /// Mean sample value in decoded units, a measure of DC offset / asymmetry.
    pub mean_code_offset: f64,
    /// Verdict for this channel.
    pub verdict: Verdict,
}

/// Result of `evlbi vdif stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerStats {
    /// Bits per sample of the data.
    pub bits: u8,
    /// Complex samples (each channel counted as I and Q rows).
    pub complex: bool,
    /// Frames counted.
    pub frames: u64,
    /// Frames skipped because their invalid bit was set.
    pub invalid_frames_skipped: u64,
    /// Per thread and channel.
    pub channels: Vec<ChannelStates>,
    /// Worst verdict over all channels.
    pub verdict: Verdict,
    /// Bytes of the input that were not frames (skipped garbage, a truncated last frame).
    pub bytes_skipped: u64,
    /// Problems of the input besides the state counts (garbage, truncation, missing frames),
    /// as `evlbi vdif inspect` words them.
    pub problems: Vec<String>,
}

/// Accumulates state counts frame by frame.
#[derive(Debug, Default)]
pub struct StateCounter {
    bits: u8,
    channels: u32,
    complex: bool,
    /// Per station and thread: one 256-bin byte histogram per byte phase of the channel pattern.
    hist: BTreeMap<(StationId, u16), Vec<[u64; 256]>>,
    frames: u64,
    invalid: u64,
    uncounted: u64,
}

/// Byte-value histograms (2 KiB each) kept over all station/thread streams: bounds memory at
/// 16 MiB whatever the headers claim.
pub const MAX_HISTOGRAMS: usize = 8192;

/// Data whose states cannot be counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatsError {
    /// Samples wider than 2 bits have no quantiser states to compare with a Gaussian.
    #[error("state counts need 1- or 2-bit samples; these are {bits}-bit {} (`evlbi vdif dump` shows their values)", if *complex { "complex" } else { "real" })]
    Width {
        /// Bits per sample.
        bits: u8,
        /// Complex samples.
        complex: bool,
    },
    /// More values per time sample than the histogram bound allows.
    #[error("{values} values per time sample exceed what state counts hold in bounded memory")]
    TooManyChannels {
        /// Values (channels, or twice the channels if complex) per time sample.
        values: u64,
    },
}

impl StateCounter {
    /// Counter for frames of real samples of `bits` (1 or 2) and `channels` per thread.
    pub fn new(bits: u8, channels: u32) -> Self {
        StateCounter {
            bits,
            channels,
            ..Default::default()
        }
    }

    /// Counter for frames shaped like `h`: state counts need 1- or 2-bit samples, real or
    /// complex (wider samples have no quantiser states to speak of), and at most
    /// [`MAX_HISTOGRAMS`] byte phases.
    pub fn for_header(h: &VdifHeader) -> Result<Self, StatsError> {
        if !matches!(h.bits_per_sample, 1 | 2) {
            return Err(StatsError::Width {
                bits: h.bits_per_sample,
                complex: h.complex,
            });
        }
        let c = StateCounter {
            complex: h.complex,
            ..Self::new(h.bits_per_sample, h.channels())
        };
        if c.phases() > MAX_HISTOGRAMS {
            return Err(StatsError::TooManyChannels {
                values: u64::from(c.values()),
            });
        }
        Ok(c)
    }

    /// Frames not counted because their station/thread stream would have exceeded the
    /// [`MAX_HISTOGRAMS`] memory bound.
    pub fn uncounted_frames(&self) -> u64 {
        self.uncounted
    }

    /// Values per time sample: one per channel, two (I, Q) per complex channel.
    fn values(&self) -> u32 {
        self.channels * if self.complex { 2 } else { 1 }
    }

    fn phases(&self) -> usize {
        let per_byte = 8 / u32::from(self.bits);
        (self.values() / per_byte).max(1) as usize
    }

    /// Count the samples of one frame (its data array). Invalid frames are skipped.
    pub fn add(&mut self, header: &VdifHeader, data: &[u8]) {
        if header.invalid {
            self.invalid += 1;
            return;
        }
        let phases = self.phases();
        let key = (header.station_id, header.thread_id);
        if !self.hist.contains_key(&key) && (self.hist.len() + 1) * phases > MAX_HISTOGRAMS {
            self.uncounted += 1;
            return;
        }
        self.frames += 1;
        let h = self.hist.entry(key).or_insert_with(|| vec![[0u64; 256]; phases]);
        if phases == 1 {
            let h0 = &mut h[0];
            for &b in data {
                h0[b as usize] += 1;
            }
        } else {
            for row in data.chunks_exact(phases) {
                for (p, &b) in row.iter().enumerate() {
                    h[p][b as usize] += 1;
                }
            }
        }
    }

    /// Expand histograms into per-channel state counts and verdicts.
    pub fn finish(&self) -> SamplerStats {
        let bits = u32::from(self.bits);
        let states = 1usize << bits;
        let per_byte = 8 / bits;
        let mask = (1u8 << bits) - 1;
        let expected: Vec<f64> = if bits == 2 {
            expected_2bit_fractions(OPTIMAL_2BIT_THRESHOLD_SIGMA).to_vec()
        } else {
            vec![0.5, 0.5]
        };
        let levels: &[f64] = if bits == 2 {
            &[-3.316_505, -1.0, 1.0, 3.316_505]
        } else {
            &[-1.0, 1.0]
        };
        let mut out = Vec::new();
        let values = self.values();
        let halves = if self.complex { 2 } else { 1 };
        for (&(station, thread), hist) in &self.hist {
            // One row per value of a time sample: channel c is value c (real) or 2c, 2c+1 (I, Q).
            let mut counts = vec![vec![0u64; states]; values as usize];
            for (p, h) in hist.iter().enumerate() {
                for (v, &n) in h.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    for j in 0..per_byte {
                        let row = ((per_byte * p as u32 + j) % values) as usize;
                        let code = ((v as u8) >> (j * bits)) & mask;
                        counts[row][code as usize] += n;
                    }
                }
            }
            for (row, c) in counts.into_iter().enumerate() {
                let channel = row / halves;
                let part = match (self.complex, row % 2) {
                    (false, _) => Part::Real,
                    (true, 0) => Part::I,
                    (true, _) => Part::Q,
                };
                let samples: u64 = c.iter().sum();
                let fractions: Vec<f64> = c
                    .iter()
                    .map(|&n| if samples == 0 { 0.0 } else { n as f64 / samples as f64 })
                    .collect();
                let dev = fractions
                    .iter()
                    .zip(&expected)
                    .map(|(f, e)| (f - e).abs())
                    .fold(0.0, f64::max);
                let verdict = if dev <= 0.02 {
                    Verdict::Good
                } else if dev <= 0.05 {
                    Verdict::Marginal
                } else {
                    Verdict::Bad
                };
                let implied_threshold_sigma = (bits == 2 && samples > 0).then(|| {
                    let outer = (fractions[0] + fractions[3]) / 2.0;
                    normal_quantile(1.0 - outer)
                });
                let mean_code_offset = fractions.iter().zip(levels).map(|(f, l)| f * l).sum();
                out.push(ChannelStates {
                    station: station.to_string(),
                    thread,
                    channel: channel as u32,
                    part,
                    samples,
                    counts: c,
                    fractions,
                    expected: expected.clone(),
                    implied_threshold_sigma,
                    mean_code_offset,
                    verdict,
                });
            }
        }
        let verdict = out.iter().map(|c| c.verdict).max().unwrap_or(Verdict::Bad);
        SamplerStats {
            bits: self.bits,
            complex: self.complex,
            frames: self.frames,
            invalid_frames_skipped: self.invalid,
            channels: out,
            verdict,
            bytes_skipped: 0,
            problems: Vec::new(),
        }
    }
}
