//! Sampler statistics: how often each quantiser state occurs, per thread and channel.
//!
//! For a Gaussian signal sampled with optimally set 2-bit thresholds (±0.98 σ) the four states
//! occur 16.3 / 33.7 / 33.7 / 16.3 % of the time; a station whose fractions differ has its
//! levels set wrongly, a DC offset, or a dead/stuck bit — the first check an operator makes.
//! Counting is one increment per byte: a byte-value histogram per byte position within the
//! channel pattern, expanded into per-channel state counts at the end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::gauss::{expected_2bit_fractions, normal_quantile, OPTIMAL_2BIT_THRESHOLD_SIGMA};
use crate::header::VdifHeader;

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

/// State counts of one channel of one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelStates {
    /// VDIF thread id.
    pub thread: u16,
    /// Channel within the thread.
    pub channel: u32,
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
    /// Frames counted.
    pub frames: u64,
    /// Frames skipped because their invalid bit was set.
    pub invalid_frames_skipped: u64,
    /// Per thread and channel.
    pub channels: Vec<ChannelStates>,
    /// Worst verdict over all channels.
    pub verdict: Verdict,
}

/// Accumulates state counts frame by frame.
#[derive(Debug, Default)]
pub struct StateCounter {
    bits: u8,
    channels: u32,
    /// Per thread: one 256-bin byte histogram per byte phase of the channel pattern.
    hist: BTreeMap<u16, Vec<[u64; 256]>>,
    frames: u64,
    invalid: u64,
}

impl StateCounter {
    /// Counter for frames of `bits` (1 or 2) and `channels` per thread.
    pub fn new(bits: u8, channels: u32) -> Self {
        StateCounter {
            bits,
            channels,
            ..Default::default()
        }
    }

    fn phases(&self) -> usize {
        let per_byte = 8 / u32::from(self.bits);
        (self.channels / per_byte).max(1) as usize
    }

    /// Count the samples of one frame (its data array). Invalid frames are skipped.
    pub fn add(&mut self, header: &VdifHeader, data: &[u8]) {
        if header.invalid {
            self.invalid += 1;
            return;
        }
        self.frames += 1;
        let phases = self.phases();
        let h = self
            .hist
            .entry(header.thread_id)
            .or_insert_with(|| vec![[0u64; 256]; phases]);
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
        for (&thread, hist) in &self.hist {
            let mut counts = vec![vec![0u64; states]; self.channels as usize];
            for (p, h) in hist.iter().enumerate() {
                for (v, &n) in h.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    for j in 0..per_byte {
                        let ch = ((per_byte * p as u32 + j) % self.channels) as usize;
                        let code = ((v as u8) >> (j * bits)) & mask;
                        counts[ch][code as usize] += n;
                    }
                }
            }
            for (channel, c) in counts.into_iter().enumerate() {
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
                    thread,
                    channel: channel as u32,
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
            frames: self.frames,
            invalid_frames_skipped: self.invalid,
            channels: out,
            verdict,
        }
    }
}
