//! The frame rate of a VDIF thread: the one type every crate uses for "frames per second per
//! thread", and the one rule for each of its sources.
//!
//! VDIF numbers frames within a second from 0 (VDIF 1.1.1 §3, word 1 bits 23–0), so a thread's
//! rate is a whole number from 1 to 2^24. It comes from one of three places:
//! - the header, where its bits say it: EDV 1 (NICT) and EDV 3 (VLBA) state a sample rate
//!   ([`FrameRate::from_header`]);
//! - a bit rate and a framing: bits per second over the data bytes of the frames of all threads
//!   ([`FrameRate::from_bit_rate`], [`FrameRate::from_bits_per_period`]; jive5ab's modes count
//!   Mb over a period of whole seconds);
//! - an operator's number (`--fps`, a native prefix), checked by [`FrameRate::new`].
//!
//! All arithmetic is on integers: a rate that does not divide into whole frames is refused with
//! the numbers, never rounded.
//!
//! Where several sources say a rate, one order decides ([`RateSource`], used through
//! [`SourcedRate`] by the stream receiver and relay, `vdif inspect` and `scan_check?`): what the
//! sender announces, then the operator's number, then the header's bits, then what the frame
//! numbers showed.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where a frame rate came from, the most believable first (the order of the variants is the
/// order of belief): a sender's own announcement (a native prefix) knows its stream; an
/// operator's number (`--fps`, a VSI-S mode) is the setup; the header's bits (EDV 1 and 3) are
/// the backend's word; the frame numbers seen at a second boundary are a lower bound, believed
/// only when nothing else says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RateSource {
    /// A native prefix's frames per second.
    #[serde(rename = "announced")]
    Announced,
    /// The operator's (`--fps`, a mode's rate).
    #[serde(rename = "given")]
    Given,
    /// The header's sample rate ([`FrameRate::from_header`]).
    #[serde(rename = "header")]
    Header,
    /// The highest frame number before a second boundary, plus one.
    #[serde(rename = "frame numbers")]
    FrameNumbers,
}

impl std::fmt::Display for RateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RateSource::Announced => "announced",
            RateSource::Given => "given",
            RateSource::Header => "header",
            RateSource::FrameNumbers => "frame numbers",
        })
    }
}

/// A frame rate (frames per second per thread, > 0) and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcedRate {
    /// Frames per second per thread.
    pub fps: FrameRate,
    /// Who said so.
    pub source: RateSource,
}

impl SourcedRate {
    /// The most believable of the rates the sources give (`None` says nothing), whatever the
    /// order they are listed in.
    pub fn most_believable(
        candidates: impl IntoIterator<Item = (RateSource, Option<FrameRate>)>,
    ) -> Option<SourcedRate> {
        candidates
            .into_iter()
            .filter_map(|(source, fps)| fps.map(|fps| SourcedRate { fps, source }))
            .min_by_key(|r| r.source)
    }

    /// Learn a rate as it comes: `source`'s `fps` replaces `current` only when more believable
    /// (a rate already in use is never replaced by an equal or lesser source).
    pub fn offer(current: &mut Option<SourcedRate>, source: RateSource, fps: Option<FrameRate>) {
        let better =
            SourcedRate::most_believable([(source, fps)]).filter(|c| current.is_none_or(|now| c.source < now.source));
        if let Some(c) = better {
            *current = Some(c);
        }
    }
}

/// The most frames a thread can send per second: frame numbers have 24 bits (0..2^24).
pub const MAX_FRAMES_PER_SECOND: u32 = 1 << 24;

/// Why a number is not a VDIF frame rate.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RateError {
    /// Zero frames per second.
    #[error("0 frames per second: a VDIF thread sends at least one frame a second")]
    Zero,
    /// More frames than the 24-bit frame number counts.
    #[error("{0} frames per second exceed the 24-bit frame-number field")]
    TooMany(u64),
    /// The framing carries no data bits (0 data bytes or 0 threads, or a 0-second period).
    #[error("{data_len}-byte frames over {threads} thread(s) per {period_s} s carry no data")]
    NoData {
        /// Data bytes per frame.
        data_len: u64,
        /// Threads.
        threads: u32,
        /// Seconds the bits are counted over.
        period_s: u64,
    },
    /// The bit rate is not a whole number of frames per second.
    #[error(
        "{bits} b per {period_s} s over {threads} thread(s) with {data_len}-byte frames is not a whole number of frames per second per thread"
    )]
    Fractional {
        /// Data bits per period (all threads).
        bits: u64,
        /// Seconds of the period.
        period_s: u64,
        /// Threads the bits are spread over.
        threads: u32,
        /// Data bytes per frame.
        data_len: u64,
    },
    /// A bit rate given as a real number that is not a whole number of bits per second.
    #[error("{0} b/s is not a whole number of bits per second")]
    NotWholeBits(f64),
    /// Mark5B, one stream of frames, asked for over several threads.
    #[error("Mark5B is one stream of frames, not {threads} threads")]
    Mark5bOneStream {
        /// Threads asked for.
        threads: u32,
    },
}

/// Frames per second per thread: a whole number 1..=2^24.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct FrameRate(u32);

impl TryFrom<u32> for FrameRate {
    type Error = RateError;
    fn try_from(fps: u32) -> Result<Self, RateError> {
        FrameRate::new(fps)
    }
}

impl From<FrameRate> for u32 {
    fn from(r: FrameRate) -> u32 {
        r.0
    }
}

impl From<FrameRate> for u64 {
    fn from(r: FrameRate) -> u64 {
        u64::from(r.0)
    }
}

impl From<FrameRate> for i64 {
    fn from(r: FrameRate) -> i64 {
        i64::from(r.0)
    }
}

/// Exact: every rate fits a double's 53-bit mantissa.
impl From<FrameRate> for f64 {
    fn from(r: FrameRate) -> f64 {
        f64::from(r.0)
    }
}

impl std::fmt::Display for FrameRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} frames/s", self.0)
    }
}

impl FrameRate {
    /// A rate given as a number (an option, a native prefix): 1..=2^24.
    pub fn new(fps: u32) -> Result<Self, RateError> {
        match fps {
            0 => Err(RateError::Zero),
            f if f > MAX_FRAMES_PER_SECOND => Err(RateError::TooMany(u64::from(f))),
            f => Ok(FrameRate(f)),
        }
    }

    /// Frames per second per thread.
    pub fn get(self) -> u32 {
        self.0
    }

    /// A station's `total` frames per second shared by `threads` threads: the rate per thread
    /// when it is whole and one VDIF can number (a station's total may exceed 2^24).
    pub fn per_thread(total: u32, threads: u32) -> Option<Self> {
        if threads == 0 || !total.is_multiple_of(threads) {
            return None;
        }
        Self::new(total / threads).ok()
    }

    /// From a data rate in bits per second (sample bits, headers excluded, all threads) and the
    /// framing: `bits_per_second / (data_len × 8 × threads)`, refused unless whole.
    pub fn from_bit_rate(bits_per_second: u64, data_len: u64, threads: u32) -> Result<Self, RateError> {
        Self::from_bits_per_period(bits_per_second, 1, data_len, threads)
    }

    /// From `bits` of data per `period_s` seconds (jive5ab's `<Mb/s>/<period>` modes) and the
    /// framing: `bits / (period_s × data_len × 8 × threads)`, refused unless whole.
    pub fn from_bits_per_period(bits: u64, period_s: u64, data_len: u64, threads: u32) -> Result<Self, RateError> {
        let per_frame = u128::from(data_len) * 8 * u128::from(threads) * u128::from(period_s);
        if per_frame == 0 {
            return Err(RateError::NoData {
                data_len,
                threads,
                period_s,
            });
        }
        let bits_wide = u128::from(bits);
        if !bits_wide.is_multiple_of(per_frame) {
            return Err(RateError::Fractional {
                bits,
                period_s,
                threads,
                data_len,
            });
        }
        let fps = bits_wide / per_frame;
        if fps > u128::from(MAX_FRAMES_PER_SECOND) {
            return Err(RateError::TooMany(u64::try_from(fps).unwrap_or(u64::MAX)));
        }
        FrameRate::new(fps as u32)
    }

    /// The data rate of this frame rate with the framing, bits per second (all threads): the
    /// inverse of [`FrameRate::from_bit_rate`] (saturating past 2^64 − 1, which no framing VDIF
    /// can describe reaches in practice).
    pub fn bit_rate(self, data_len: u64, threads: u32) -> u64 {
        u64::from(self.0)
            .saturating_mul(data_len)
            .saturating_mul(8)
            .saturating_mul(u64::from(threads))
    }
}

/// A bit rate given as a real number (a parsed `512M`, a JSON field) as whole bits per second:
/// within 1e-9 of a whole number (what parsing a decimal leaves), else refused.
pub fn whole_bits_per_second(rate_bps: f64) -> Result<u64, RateError> {
    let whole = rate_bps.round();
    if !rate_bps.is_finite() || rate_bps < 0.0 || whole >= u64::MAX as f64 || (rate_bps - whole).abs() > 1e-9 * whole {
        return Err(RateError::NotWholeBits(rate_bps));
    }
    Ok(whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::VdifHeader;
    use proptest::prelude::*;

    #[test]
    fn a_station_total_splits_only_into_whole_numberable_rates() {
        assert_eq!(FrameRate::per_thread(32_000, 4).map(FrameRate::get), Some(8_000));
        assert_eq!(FrameRate::per_thread(32_001, 4), None, "not whole");
        assert_eq!(FrameRate::per_thread(32_000, 0), None, "no threads");
        assert_eq!(FrameRate::per_thread(3, 4), None, "below one frame a second");
        // A total past 2^24 is fine when each thread's share is not.
        assert_eq!(FrameRate::per_thread(1 << 25, 2).map(FrameRate::get), Some(1 << 24));
        assert_eq!(FrameRate::per_thread(1 << 26, 2), None, "a thread's share past 2^24");
    }

    #[test]
    fn bit_rates_that_divide_give_whole_rates() {
        // 512 Mb/s, 8000-byte frames, one thread: 8000 frames/s (the README's example).
        assert_eq!(
            FrameRate::from_bit_rate(512_000_000, 8000, 1).map(FrameRate::get),
            Ok(8000)
        );
        // jive5ab VDIF_8000-2048-16-2 over 4 threads: 8000 frames/s each.
        assert_eq!(
            FrameRate::from_bits_per_period(2_048_000_000, 1, 8000, 4).map(FrameRate::get),
            Ok(8000)
        );
        // 512 Mb per 2 s (vdifl_1024-512/2-8-2): 31250 frames/s of 1024 bytes.
        assert_eq!(
            FrameRate::from_bits_per_period(512_000_000, 2, 1024, 1).map(FrameRate::get),
            Ok(31_250)
        );
    }

    #[test]
    fn rates_that_do_not_divide_are_refused_with_the_numbers() {
        // 500 Mb/s in 8192-byte frames is 7629.39… frames/s.
        let e = FrameRate::from_bit_rate(500_000_000, 8192, 1).unwrap_err();
        assert_eq!(
            e,
            RateError::Fractional {
                bits: 500_000_000,
                period_s: 1,
                threads: 1,
                data_len: 8192
            }
        );
        assert!(e.to_string().contains("not a whole number"), "{e}");
        // 2048 Mb/s over 3 threads of 8000-byte frames.
        assert!(FrameRate::from_bit_rate(2_048_000_000, 8000, 3).is_err());
        assert_eq!(FrameRate::from_bit_rate(0, 8000, 1), Err(RateError::Zero));
        assert!(FrameRate::from_bit_rate(63_999, 8000, 1).is_err());
        assert!(matches!(
            FrameRate::from_bit_rate(1, 0, 1),
            Err(RateError::NoData { .. })
        ));
        assert_eq!(
            FrameRate::from_bit_rate((1 << 25) * 64, 8, 1),
            Err(RateError::TooMany(1 << 25))
        );
        assert_eq!(FrameRate::new(0), Err(RateError::Zero));
        assert_eq!(FrameRate::new(MAX_FRAMES_PER_SECOND).map(FrameRate::get), Ok(1 << 24));
        assert!(FrameRate::new(MAX_FRAMES_PER_SECOND + 1).is_err());
    }

    #[test]
    fn whole_bits_accepts_parse_noise_only() {
        assert_eq!(whole_bits_per_second(2.048e9), Ok(2_048_000_000));
        assert_eq!(whole_bits_per_second(2.048 * 1e9), Ok(2_048_000_000));
        assert!(whole_bits_per_second(1000.5).is_err());
        assert!(whole_bits_per_second(f64::NAN).is_err());
        assert!(whole_bits_per_second(-8.0).is_err());
    }

    #[test]
    fn serde_refuses_what_new_refuses() {
        let r: FrameRate = serde_json::from_str("8000").unwrap();
        assert_eq!(
            (r.get(), serde_json::to_string(&r).unwrap()),
            (8000, "8000".to_string())
        );
        assert!(serde_json::from_str::<FrameRate>("0").is_err());
        assert!(serde_json::from_str::<FrameRate>("16777217").is_err());
    }

    #[test]
    fn the_most_believable_source_wins_whatever_the_order() {
        let r = |n: u32| FrameRate::new(n).ok();
        let header = (RateSource::Header, r(25_600));
        let given = (RateSource::Given, r(32_000));
        let frames = (RateSource::FrameNumbers, r(12_800));
        for list in [
            [header, given, frames],
            [frames, header, given],
            [given, frames, header],
        ] {
            assert_eq!(
                SourcedRate::most_believable(list),
                Some(SourcedRate {
                    fps: FrameRate(32_000),
                    source: RateSource::Given
                })
            );
        }
        // None (what a 0 parses to) says nothing.
        let silent = [(RateSource::Announced, r(0)), (RateSource::Given, None), frames];
        assert_eq!(
            SourcedRate::most_believable(silent).map(|r| r.source),
            Some(RateSource::FrameNumbers)
        );
        // A rate in use is replaced only by a more believable source.
        let mut now = None;
        SourcedRate::offer(&mut now, RateSource::Header, r(25_600));
        SourcedRate::offer(&mut now, RateSource::FrameNumbers, r(12_800));
        SourcedRate::offer(&mut now, RateSource::Header, r(1));
        assert_eq!(now.map(|s| s.fps), r(25_600));
        SourcedRate::offer(&mut now, RateSource::Announced, r(16_000));
        assert_eq!(
            now,
            Some(SourcedRate {
                fps: FrameRate(16_000),
                source: RateSource::Announced
            })
        );
        assert_eq!(RateSource::FrameNumbers.to_string(), "frame numbers");
        assert_eq!(
            serde_json::to_string(&RateSource::FrameNumbers).unwrap(),
            "\"frame numbers\""
        );
    }

    proptest! {
        /// A rate made from frames round-trips through its bit rate.
        #[test]
        fn bit_rate_round_trips(fps in 1u32..=MAX_FRAMES_PER_SECOND, units in 1u64..8192, threads in 1u32..=1024) {
            let r = FrameRate::new(fps).unwrap();
            let data_len = units * 8;
            let bits = r.bit_rate(data_len, threads);
            prop_assert_eq!(FrameRate::from_bit_rate(bits, data_len, threads), Ok(r));
            prop_assert_eq!(FrameRate::from_bits_per_period(bits * 3, 3, data_len, threads), Ok(r));
        }

        /// Bits one short of, or one more than, a whole rate are refused, never rounded.
        #[test]
        fn off_by_one_bit_is_refused(fps in 1u32..=MAX_FRAMES_PER_SECOND, units in 1u64..8192, threads in 1u32..=1024) {
            let bits = FrameRate::new(fps).unwrap().bit_rate(units * 8, threads);
            let fractional = |e| matches!(e, Err(RateError::Fractional { .. }));
            prop_assert!(fractional(FrameRate::from_bit_rate(bits + 1, units * 8, threads)));
            prop_assert!(fractional(FrameRate::from_bit_rate(bits - 1, units * 8, threads)));
        }

        /// Any bit rate either divides exactly (and the rate gives the bits back) or is refused.
        #[test]
        fn any_bit_rate_is_exact_or_refused(bits: u64, units in 0u64..100_000, threads in 0u32..2000, period in 0u64..4) {
            let per_frame = u128::from(units * 8 * 8) * u128::from(threads) * u128::from(period);
            match FrameRate::from_bits_per_period(bits, period, units * 8, threads) {
                Ok(r) => prop_assert_eq!(u128::from(r.bit_rate(units * 8, threads)) * u128::from(period), u128::from(bits)),
                Err(_) => prop_assert!(
                    per_frame == 0
                        || u128::from(bits) % per_frame != 0
                        || !(1..=u128::from(MAX_FRAMES_PER_SECOND)).contains(&(u128::from(bits) / per_frame))
                ),
            }
        }

        /// The header's rule agrees with the float arithmetic it replaced wherever that was exact.
        #[test]
        fn header_rate_is_the_stated_rate_over_the_samples(value in 1u32..(1 << 23), mhz: bool, complex: bool, units in 5u32..2000, log2_channels in 0u8..5) {
            let h = VdifHeader {
                invalid: false, legacy: false, seconds: 0, ref_epoch: 0, unassigned: 0, frame_number: 0,
                version: 0, log2_channels, frame_len_units: units, complex, bits_per_sample: 2,
                thread_id: 0, station_id: crate::StationId(1),
                extended: [(3 << 24) | (u32::from(mhz) << 23) | value, 0, 0, 0],
            };
            let hz = f64::from(value) * if mhz { 1e6 } else { 1e3 } * if complex { 1.0 } else { 2.0 };
            let fps = hz / h.samples_per_frame().max(1) as f64;
            let float = (h.samples_per_frame() > 0 && fps >= 1.0 && fps.fract() == 0.0 && fps <= f64::from(MAX_FRAMES_PER_SECOND)).then_some(fps as u32);
            prop_assert_eq!(FrameRate::from_header(&h).map(FrameRate::get), float);
        }
    }
}
