//! Frame layout: how a data rate, sample size, channel count and thread count map onto VDIF
//! frames, with every constraint checked up front so a user gets one clear message.

use serde::{Deserialize, Serialize};

use crate::error::LayoutError;
use crate::header::{VdifHeader, HEADER_LEN};
use crate::rate::{whole_bits_per_second, FrameRate, RateError};
use crate::scan::MAX_SCAN_FRAME_LEN;
use crate::station::StationId;

/// A validated layout of real- or complex-sampled VDIF data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FrameLayout {
    /// Total data rate over all threads, bits per second (headers excluded).
    pub rate_bps: f64,
    /// Bits per sample (1 or 2).
    pub bits: u8,
    /// Channels over all threads.
    pub channels: u32,
    /// Number of VDIF threads; channels are split evenly across them.
    pub threads: u32,
    /// Channels carried by each thread.
    pub channels_per_thread: u32,
    /// Data-array bytes per frame (header excluded).
    pub data_len: usize,
    /// Frame bytes, 32-byte header included.
    pub frame_len: usize,
    /// Time samples (of all channels of a thread) per frame.
    pub samples_per_frame: u64,
    /// Frames per second per thread.
    pub frames_per_second: FrameRate,
    /// Sample rate per channel, Hz (twice the channel bandwidth for real sampling, equal to
    /// it for complex sampling).
    pub sample_rate_hz: f64,
    /// Complex samples (I and Q, each `bits` wide) instead of real ones.
    #[serde(default)]
    pub complex: bool,
}

impl FrameLayout {
    /// Check and derive a layout of real samples. `rate_bps` counts sample bits only, as VLBI
    /// rates do ("512 Mb/s" = 8 channels × 32 MS/s × 2 bits).
    pub fn new(rate_bps: f64, bits: u8, channels: u32, threads: u32, data_len: usize) -> Result<Self, LayoutError> {
        Self::with_complex(rate_bps, bits, channels, threads, data_len, false)
    }

    /// [`FrameLayout::new`] for real (`complex` false) or complex samples: a complex sample
    /// carries I and Q of `bits` each, so "64 Mb/s, 2-bit, 4 channels" is 4 MS/s per channel
    /// complex (4 MHz of band) where it is 8 MS/s real.
    pub fn with_complex(
        rate_bps: f64,
        bits: u8,
        channels: u32,
        threads: u32,
        data_len: usize,
        complex: bool,
    ) -> Result<Self, LayoutError> {
        if !(1..=2).contains(&bits) {
            return Err(LayoutError::Bits(bits));
        }
        if !(1..=1024).contains(&threads) {
            return Err(LayoutError::Threads(threads));
        }
        // Frames longer than the scanner believes would make files no evlbi command can read.
        if data_len == 0 || data_len + HEADER_LEN > MAX_SCAN_FRAME_LEN {
            return Err(LayoutError::FrameSize(data_len));
        }
        if !data_len.is_multiple_of(8) {
            return Err(LayoutError::NotMultipleOf8(data_len));
        }
        if channels == 0 || !channels.is_multiple_of(threads) || !(channels / threads).is_power_of_two() {
            return Err(LayoutError::Channels { channels, threads });
        }
        let cpt = channels / threads;
        let bits_per_time = u64::from(bits) * u64::from(cpt) * if complex { 2 } else { 1 };
        if !(data_len as u64 * 8).is_multiple_of(bits_per_time) {
            return Err(LayoutError::IncompleteSamples {
                data_len,
                bits,
                channels: cpt,
            });
        }
        let samples_per_frame = data_len as u64 * 8 / bits_per_time;
        // One rule for a rate from bits (crate::rate): whole bits, whole frames, ≤ 2^24.
        let fractional = || LayoutError::FractionalFrameRate {
            rate_bps,
            threads,
            data_len,
            fps: rate_bps / f64::from(threads) / (data_len as f64 * 8.0),
        };
        let whole_bps = whole_bits_per_second(rate_bps).map_err(|_| fractional())?;
        let fps = FrameRate::from_bit_rate(whole_bps, data_len as u64, threads).map_err(|e| match e {
            RateError::TooMany(n) => LayoutError::TooManyFrames(n),
            _ => fractional(),
        })?;
        let fps_int = u64::from(fps.get());
        Ok(FrameLayout {
            rate_bps,
            bits,
            channels,
            threads,
            channels_per_thread: cpt,
            data_len,
            frame_len: data_len + HEADER_LEN,
            samples_per_frame,
            frames_per_second: fps,
            sample_rate_hz: (fps_int * samples_per_frame) as f64,
            complex,
        })
    }

    /// A header template for this layout (time, thread and station to be filled in).
    pub fn header(&self, station_id: impl Into<StationId>) -> VdifHeader {
        VdifHeader {
            invalid: false,
            legacy: false,
            seconds: 0,
            ref_epoch: 0,
            unassigned: 0,
            frame_number: 0,
            version: 0,
            log2_channels: self.channels_per_thread.trailing_zeros() as u8,
            frame_len_units: (self.frame_len / 8) as u32,
            complex: self.complex,
            bits_per_sample: self.bits,
            thread_id: 0,
            station_id: station_id.into(),
            extended: [0; 4],
        }
    }

    /// Bytes of VDIF (headers included) per second over all threads.
    pub fn bytes_per_second(&self) -> u64 {
        u64::from(self.frames_per_second) * u64::from(self.threads) * self.frame_len as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_512_mbps_8_channel_2_bit_layout_gives_8000_frames_a_second() {
        // 512 Mb/s, 2 bit, 8 channels, 1 thread, 8000-byte frames: 8000 frames/s, 32 MS/s.
        let l = FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
        assert_eq!(l.frames_per_second.get(), 8000);
        assert_eq!(l.samples_per_frame, 4000);
        assert_eq!(l.sample_rate_hz, 32e6);
        assert_eq!(l.frame_len, 8032);
    }

    #[test]
    fn complex_halves_the_sample_rate() {
        let l = FrameLayout::with_complex(64e6, 2, 4, 1, 8000, true).unwrap();
        assert_eq!(
            (l.frames_per_second.get(), l.samples_per_frame, l.sample_rate_hz),
            (1000, 4000, 4e6)
        );
        let h = l.header(StationId(1));
        assert!(h.complex);
        assert_eq!(h.samples_per_frame(), 4000);
    }

    #[test]
    fn layouts_that_cannot_be_framed_are_refused() {
        assert_eq!(
            FrameLayout::new(512e6, 2, 8, 1, 8001),
            Err(LayoutError::NotMultipleOf8(8001))
        );
        assert!(matches!(
            FrameLayout::new(512e6, 3, 8, 1, 8000),
            Err(LayoutError::Bits(3))
        ));
        assert!(matches!(
            FrameLayout::new(512e6, 2, 6, 1, 8000),
            Err(LayoutError::Channels { .. })
        ));
        assert!(matches!(
            FrameLayout::new(512e6, 2, 8, 3, 8000),
            Err(LayoutError::Channels { .. })
        ));
        assert!(matches!(
            FrameLayout::new(500e6, 2, 8, 1, 8192),
            Err(LayoutError::FractionalFrameRate { .. })
        ));
        assert!(matches!(
            FrameLayout::new(512e6, 2, 8, 1, 0),
            Err(LayoutError::FrameSize(0))
        ));
    }
}
