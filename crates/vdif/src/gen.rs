//! Synthetic multi-station VLBI data: per channel, each station records
//! `x = √ρ·sky(t − τ_station) + √(1−ρ)·noise_station(t) [+ tone]`, quantised by an optimal
//! sampler. `sky` is common to all stations (so baselines correlate with coefficient ρ, the
//! `--snr`), delayed per station by a whole number of samples; `noise` is independent per
//! station. A tone (like a phase-cal tone) can be injected per station, undelayed.
//!
//! Complex sampling draws I and Q as independent Gaussians (circular complex noise) and
//! delays both by whole complex samples; the tone is `A·e^{iωt}` (I = cos, Q = sin).
//!
//! Speed: the generator must outpace a disk (≥ 1 GB/s of 2-bit data is 4 G samples/s) on two
//! cores, and drawing a fresh Gaussian per sample costs several ns. So a pool of Gaussian
//! values is made once from the seed and every stream reads it in blocks of
//! [`BLOCK`] samples at offsets chosen by hashing (seed, stream, block index). Every sample is
//! Gaussian distributed; two streams share a block at the same lag only with probability
//! 1/[`POOL_LEN`] per block, so spurious correlations stay below 1e-5 — far under any ρ used.
//! Streams are pure functions of the sample index, so stations, threads and chunks can be
//! generated independently and in parallel, deterministically.

use std::io::{self, Write};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::gauss::{normal_quantile, OPTIMAL_2BIT_THRESHOLD_SIGMA};
use crate::header::{VdifHeader, HEADER_LEN};
use crate::layout::FrameLayout;
use crate::mark5b::{Mark5bError, Mark5bHeader, MARK5B_DATA_LEN, MARK5B_HEADER_LEN, MARK5B_MAX_FRAMES_PER_SECOND};
use crate::station::StationId;

/// Gaussian draws in the pool: 2^17 i16 = 256 KiB per scaled copy, so both copies stay in
/// the L2 cache (an 8 MiB pool ran at half the speed, bound by cache misses).
pub const POOL_LEN: usize = 1 << 17;
/// Samples read contiguously from one pool offset.
pub const BLOCK: usize = 4096;
/// Fixed-point scale: one σ of the unit Gaussian is this many counts.
const SCALE: f64 = 2048.0;
/// Index offset so that delayed (negative) sample indexes stay positive.
const INDEX_BIAS: i64 = 1 << 50;

/// One station to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationSpec {
    /// Station code as written in the header (e.g. "Ef").
    pub name: String,
    /// VDIF station id.
    pub id: StationId,
    /// Requested geometric delay of the sky signal at this station, seconds.
    pub delay_s: f64,
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenConfig {
    /// Frame layout (rate, bits, channels, threads, frame size).
    pub layout: FrameLayout,
    /// Stations, one output stream each.
    pub stations: Vec<StationSpec>,
    /// Whole seconds of data.
    pub seconds: u32,
    /// VDIF reference epoch of the first frame.
    pub ref_epoch: u8,
    /// Seconds since the reference epoch of the first frame.
    pub start_seconds: u32,
    /// Fraction of each station's power that is common sky signal (correlation coefficient ρ).
    pub snr: f64,
    /// Tone frequency in Hz within each channel's baseband (0 < f < sample_rate/2), if any.
    pub tone_hz: Option<f64>,
    /// Tone amplitude relative to the noise σ.
    pub tone_amplitude: f64,
    /// Seed of every random draw.
    pub seed: u64,
}

/// Per-station result of generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationOutput {
    /// Station code.
    pub station: String,
    /// Delay applied, in whole samples.
    pub delay_samples: i64,
    /// Delay applied, seconds (the request rounded to a whole sample).
    pub delay_applied_s: f64,
    /// Frames written (all threads).
    pub frames: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Per-worker buffers for one frame.
struct Scratch {
    /// Un-quantised values, time-major with channels interleaved.
    values: Vec<i16>,
    /// One 16-bit code per sample, read as u64 words when packing.
    codes: Vec<u64>,
    /// The tone over one frame, already interleaved like `values`.
    tone: Vec<i16>,
    /// Fixed-point start phase `tone` was built for.
    tone_phase: Option<u32>,
}

/// Pools of pre-scaled Gaussian draws shared by every station of one run.
pub struct Generator {
    config: GenConfig,
    sky: Vec<i16>,
    noise: Vec<i16>,
    threshold: i16,
    tone_table: Vec<i16>,
}

/// SplitMix64 finaliser: a fast, well-mixed hash of the block coordinates.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Generator {
    /// Draw the pools. Costs ~50 ms once per run.
    pub fn new(config: GenConfig) -> Self {
        // The pool holds the N quantiles Φ⁻¹((i + ½)/N) in a seeded random order: its
        // distribution is Gaussian to within 1/N, where N random draws would be off by
        // ~1/√N — enough to bias the sampler statistics of every channel alike by 0.03 %.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(config.seed);
        let mut base: Vec<f64> = (0..POOL_LEN)
            .map(|i| normal_quantile((i as f64 + 0.5) / POOL_LEN as f64))
            .collect();
        base.shuffle(&mut rng);
        let rho = config.snr.clamp(0.0, 1.0);
        let (a, b) = (rho.sqrt() * SCALE, (1.0 - rho).sqrt() * SCALE);
        let sky = base.iter().map(|g| (g * a).round() as i16).collect();
        let noise = base.iter().map(|g| (g * b).round() as i16).collect();
        let amp = if config.tone_hz.is_some() {
            config.tone_amplitude.abs().min(2.0)
        } else {
            0.0
        };
        // A sampler's level control sets thresholds against the total power, tone included.
        let sigma = (1.0 + amp * amp / 2.0).sqrt();
        let threshold = (OPTIMAL_2BIT_THRESHOLD_SIGMA * sigma * SCALE).round() as i16;
        let tone_table = (0..TONE_TABLE)
            .map(|k| (amp * SCALE * (2.0 * std::f64::consts::PI * k as f64 / TONE_TABLE as f64).cos()).round() as i16)
            .collect();
        Generator {
            config,
            sky,
            noise,
            threshold,
            tone_table,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.config
    }

    /// Delay of station `s` in whole samples.
    pub fn delay_samples(&self, s: usize) -> i64 {
        (self.config.stations[s].delay_s * self.config.layout.sample_rate_hz).round() as i64
    }

    /// Copy (or add) `out.len()` samples of stream `stream` starting at interleaved index `start`.
    #[inline(always)]
    fn stream(&self, pool: &[i16], stream: u64, start: i64, out: &mut [i16], add: bool) {
        let mut idx = (start + INDEX_BIAS) as u64;
        let mut done = 0;
        while done < out.len() {
            let block = idx / BLOCK as u64;
            let within = (idx % BLOCK as u64) as usize;
            let off = (mix(self.config.seed ^ mix(stream ^ mix(block))) % (POOL_LEN - BLOCK) as u64) as usize;
            let n = (BLOCK - within).min(out.len() - done);
            let src = &pool[off + within..off + within + n];
            let dst = &mut out[done..done + n];
            if add {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = d.wrapping_add(*s);
                }
            } else {
                dst.copy_from_slice(src);
            }
            done += n;
            idx += n as u64;
        }
    }

    /// Fill `values` with the un-quantised samples of frame `k` (counted from the start) of
    /// `thread` at station `s`.
    #[inline(always)]
    fn frame_values(
        &self,
        s: usize,
        thread: u32,
        k: u64,
        values: &mut [i16],
        tone_cache: (&mut [i16], &mut Option<u32>),
    ) {
        let l = &self.config.layout;
        // Values per time sample: one per channel, or I and Q per channel.
        let nct = i64::from(l.channels_per_thread) * if l.complex { 2 } else { 1 };
        let n = values.len() as i64;
        let i0 = k as i64 * n;
        let sky_stream = mix(0x736b_7900 ^ u64::from(thread));
        let noise_stream = mix(0x6e6f_6973_6500 ^ ((s as u64) << 16) ^ u64::from(thread));
        self.stream(&self.sky, sky_stream, i0 - self.delay_samples(s) * nct, values, false);
        self.stream(&self.noise, noise_stream, i0, values, true);
        if let Some(f) = self.config.tone_hz {
            let spf = l.samples_per_frame;
            // Phase of the first sample as an exact fraction of a cycle, then a fixed step.
            let cycles_per_sample = f / l.sample_rate_hz;
            let phase0 = (cycles_per_sample * (k * spf) as f64).fract();
            let phase0 = (phase0 * TWO_POW_32) as u64 as u32;
            // The tone is the same at every station and thread, and often the same in every
            // frame (a whole number of cycles per frame), so the interleaved tone of a frame
            // is built only when its start phase changes, then added as one flat vector.
            if *tone_cache.1 != Some(phase0) {
                // 32-bit fixed-point phase accumulator: wrapping adds are exact modulo one
                // cycle; the step's rounding (2^-33 cycle/sample) drifts by < 1e-5 cycle over
                // a frame before the next frame restarts from the exact phase.
                let step = ((cycles_per_sample.fract() * TWO_POW_32).round() as u64) as u32;
                let mut phase = phase0;
                let cos = |p: u32| self.tone_table[(p >> (32 - TONE_TABLE_BITS)) as usize];
                for chunk in tone_cache.0.chunks_exact_mut(nct as usize) {
                    if l.complex {
                        // sin φ = cos(φ − quarter cycle).
                        let (i, q) = (cos(phase), cos(phase.wrapping_sub(1 << 30)));
                        for pair in chunk.chunks_exact_mut(2) {
                            pair[0] = i;
                            pair[1] = q;
                        }
                    } else {
                        chunk.fill(cos(phase));
                    }
                    phase = phase.wrapping_add(step);
                }
                *tone_cache.1 = Some(phase0);
            }
            for (x, t) in values.iter_mut().zip(tone_cache.0.iter()) {
                *x = x.wrapping_add(*t);
            }
        }
    }

    /// Quantise and pack one frame's values into `data`, using `codes` as scratch.
    ///
    /// Written as two flat loops the compiler vectorises: one code per 16-bit lane, then the
    /// lanes of each 64-bit word folded into one byte (2-bit: 4 lanes per byte; 1-bit: two
    /// words per byte). The per-sample shift-and-or packing this replaced ran ~8x slower.
    #[inline(always)]
    fn quantise_into(&self, values: &[i16], codes: &mut [u64], data: &mut [u8]) {
        let thr = self.threshold;
        let lanes: &mut [u16] = bytemuck::cast_slice_mut(codes);
        let lanes = &mut lanes[..values.len()];
        let words = values.len() / 4;
        match self.config.layout.bits {
            1 => {
                for (c, &x) in lanes.iter_mut().zip(values) {
                    *c = u16::from(x >= 0);
                }
                for (o, w) in data.iter_mut().zip(codes[..words].chunks_exact(2)) {
                    // Lane k (bit 16k) of word 0 goes to bit k, of word 1 to bit 4 + k.
                    let fold = |w: u64| {
                        let w = u64::from_le(w);
                        (w | (w >> 15) | (w >> 30) | (w >> 45)) & 0xf
                    };
                    *o = (fold(w[0]) | (fold(w[1]) << 4)) as u8;
                }
            }
            _ => {
                for (c, &x) in lanes.iter_mut().zip(values) {
                    *c = u16::from(x >= -thr) + u16::from(x >= 0) + u16::from(x >= thr);
                }
                for (o, &w) in data.iter_mut().zip(&codes[..words]) {
                    // Code k sits at bits 16k..16k+1 and moves to 2k..2k+1.
                    let w = u64::from_le(w);
                    *o = (w | (w >> 14) | (w >> 28) | (w >> 42)) as u8;
                }
            }
        }
    }

    /// Un-quantised values, quantisation and packing of one frame's data array.
    #[inline(always)]
    fn fill_frame(&self, s: usize, thread: u32, k: u64, scratch: &mut Scratch, data: &mut [u8]) {
        let Scratch {
            values,
            codes,
            tone,
            tone_phase,
        } = scratch;
        self.frame_values(s, thread, k, values, (tone, tone_phase));
        self.quantise_into(values, codes, data);
    }

    /// [`Self::fill_frame`] compiled for AVX2: the same loops vectorise twice as wide.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn fill_frame_avx2(&self, s: usize, thread: u32, k: u64, scratch: &mut Scratch, data: &mut [u8]) {
        self.fill_frame(s, thread, k, scratch, data);
    }

    // The one unsafe call of the core crates: calling an AVX2-compiled function needs the CPU
    // check to be promised by hand (the 2-bit generator runs twice as fast with it, which is
    // what lets `vdif gen` feed a 4 Gb/s stream live).
    #[allow(unsafe_code)]
    fn fill_frame_best(&self, s: usize, thread: u32, k: u64, scratch: &mut Scratch, data: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked at run time just above.
            unsafe { self.fill_frame_avx2(s, thread, k, scratch, data) };
            return;
        }
        self.fill_frame(s, thread, k, scratch, data);
    }

    /// Write station `s`'s whole stream to `out` as VDIF, calling `progress(bytes)` after each
    /// chunk.
    pub fn write_station<W: Write>(
        &self,
        s: usize,
        out: &mut W,
        progress: impl FnMut(u64),
    ) -> io::Result<StationOutput> {
        let l = &self.config.layout;
        let mut header = l.header(self.config.stations[s].id);
        header.ref_epoch = self.config.ref_epoch;
        let fps = u64::from(l.frames_per_second);
        let frame = |kk: u64, thread: u32, bytes: &mut [u8]| -> io::Result<usize> {
            header.seconds = self.config.start_seconds + (kk / fps) as u32;
            header.frame_number = (kk % fps) as u32;
            header.thread_id = thread as u16;
            header
                .emit(bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            Ok(HEADER_LEN)
        };
        self.write_frames(s, out, progress, HEADER_LEN, frame, |_| {})
    }

    /// Write station `s`'s whole stream to `out` as Mark5B (one stream: the layout must pass
    /// [`mark5b_layout`]): the same samples as [`Self::write_station`] writes, each 10 000-byte
    /// payload under a header with the VLBA time code of the frame's start (the first frame's
    /// time is the configuration's VDIF start) and its CRC, the two bits of each 2-bit sample
    /// swapped from VDIF's order into Mark5B's ([`vdif_to_mark5b_2bit`]).
    pub fn write_station_mark5b<W: Write>(
        &self,
        s: usize,
        out: &mut W,
        progress: impl FnMut(u64),
    ) -> io::Result<StationOutput> {
        let l = &self.config.layout;
        let bad = |e: Mark5bGenError| io::Error::new(io::ErrorKind::InvalidInput, e);
        mark5b_layout(l).map_err(bad)?;
        let fps = l.frames_per_second;
        let start = mark5b_cycle_seconds(self.config.ref_epoch, self.config.start_seconds);
        let rate = u64::from(fps.get());
        let frame = |kk: u64, _thread: u32, bytes: &mut [u8]| -> io::Result<usize> {
            let h = Mark5bHeader::at_cycle_seconds(start + kk / rate, kk % rate, fps)
                .map_err(|e| bad(Mark5bGenError::Header(e)))?;
            h.emit(bytes).map_err(|e| bad(Mark5bGenError::Header(e)))?;
            Ok(MARK5B_HEADER_LEN)
        };
        self.write_frames(s, out, progress, MARK5B_HEADER_LEN, frame, vdif_to_mark5b_2bit)
    }

    /// The writer of both formats: frames of `header_len` + the layout's data bytes, each
    /// header written by `header(frame index, thread, bytes)` and each payload, as VDIF packs
    /// it, then passed through `recode`.
    fn write_frames<W: Write>(
        &self,
        s: usize,
        out: &mut W,
        mut progress: impl FnMut(u64),
        header_len: usize,
        mut header: impl FnMut(u64, u32, &mut [u8]) -> io::Result<usize>,
        recode: impl Fn(&mut [u8]),
    ) -> io::Result<StationOutput> {
        let l = &self.config.layout;
        let spec = &self.config.stations[s];
        let frame_len = header_len + l.data_len;
        let samples = l.samples_per_frame as usize * l.channels_per_thread as usize * if l.complex { 2 } else { 1 };
        let mut scratch = Scratch {
            values: vec![0i16; samples],
            codes: vec![0u64; samples.div_ceil(4)],
            tone: vec![0i16; samples],
            tone_phase: None,
        };
        let frames_total = u64::from(self.config.seconds) * u64::from(l.frames_per_second);
        // Write in chunks of ~256 KiB: still few syscalls, and the chunk is still in the L2
        // cache when the kernel copies it into the page cache (4 MiB chunks ran at 2/3 speed).
        let frames_per_chunk = ((256 << 10) / (frame_len * l.threads as usize)).max(1) as u64;
        let mut chunk = Vec::with_capacity(frames_per_chunk as usize * frame_len * l.threads as usize);
        let mut written = 0u64;
        let mut k = 0u64;
        while k < frames_total {
            chunk.clear();
            let end = (k + frames_per_chunk).min(frames_total);
            for kk in k..end {
                for thread in 0..l.threads {
                    let at = chunk.len();
                    chunk.resize(at + frame_len, 0);
                    let data = at + header(kk, thread, &mut chunk[at..at + header_len])?;
                    self.fill_frame_best(s, thread, kk, &mut scratch, &mut chunk[data..at + frame_len]);
                    recode(&mut chunk[data..at + frame_len]);
                }
            }
            out.write_all(&chunk)?;
            written += chunk.len() as u64;
            progress(chunk.len() as u64);
            k = end;
        }
        out.flush()?;
        let delay_samples = self.delay_samples(s);
        Ok(StationOutput {
            station: spec.name.clone(),
            delay_samples,
            delay_applied_s: delay_samples as f64 / l.sample_rate_hz,
            frames: frames_total * u64::from(l.threads),
            bytes: written,
        })
    }
}

/// Why a layout cannot be written as Mark5B.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mark5bGenError {
    /// Mark5B carries one stream: no threads.
    #[error("Mark5B carries one stream: {0} threads asked for (give --threads 1)")]
    Threads(u32),
    /// Only 2-bit real samples are written (the bit order mark5access decodes is mapped for them).
    #[error("Mark5B is written with 2-bit real samples only ({bits}-bit{} asked for)", if *complex { " complex" } else { "" })]
    Samples {
        /// Bits per sample asked for.
        bits: u8,
        /// Complex asked for.
        complex: bool,
    },
    /// The payload is 10 000 bytes.
    #[error("a Mark5B payload is {MARK5B_DATA_LEN} bytes, not {0}")]
    DataLen(usize),
    /// The rate gives more frames per second than the 15-bit frame number counts.
    #[error("{0} Mark5B frames per second: the frame number counts {MARK5B_MAX_FRAMES_PER_SECOND} at most")]
    TooFast(u32),
    /// A header field out of range.
    #[error(transparent)]
    Header(#[from] Mark5bError),
}

/// The layout can be written as Mark5B: one stream of 2-bit real samples in 10 000-byte
/// payloads, at most 2^15 frames a second.
pub fn mark5b_layout(l: &FrameLayout) -> Result<(), Mark5bGenError> {
    if l.threads != 1 {
        return Err(Mark5bGenError::Threads(l.threads));
    }
    if l.bits != 2 || l.complex {
        return Err(Mark5bGenError::Samples {
            bits: l.bits,
            complex: l.complex,
        });
    }
    if l.data_len != MARK5B_DATA_LEN {
        return Err(Mark5bGenError::DataLen(l.data_len));
    }
    if l.frames_per_second.get() > MARK5B_MAX_FRAMES_PER_SECOND {
        return Err(Mark5bGenError::TooFast(l.frames_per_second.get()));
    }
    Ok(())
}

/// Seconds since the Mark5B time code's cycle began (an MJD that is a multiple of 1000) at
/// VDIF time (`epoch`, `seconds`), leap seconds counted.
pub fn mark5b_cycle_seconds(epoch: u8, seconds: u32) -> u64 {
    /// MJD of 1970-01-01.
    const MJD_UNIX_EPOCH: i64 = 40_587;
    let (unix, _) = crate::time::frame_utc(epoch, seconds);
    let mjd = unix.div_euclid(86_400) + MJD_UNIX_EPOCH;
    // Both non-negative: rem_euclid.
    (mjd.rem_euclid(1000) * 86_400 + unix.rem_euclid(86_400)) as u64
}

/// 2-bit samples packed as VDIF (offset binary in bits 2k+1..2k: −H −1 +1 +H = 0 1 2 3)
/// recoded in place as Mark5B decodes them (mark5access, mark5_format_mark5b.c `initluts`:
/// bit 2k the sign, 1 = positive; bit 2k+1 the magnitude, 1 = high when positive, low when
/// negative; so −H −1 +1 +H = 0 2 1 3): the two bits of every sample swapped.
pub fn vdif_to_mark5b_2bit(data: &mut [u8]) {
    for b in data {
        *b = ((*b & 0x55) << 1) | ((*b >> 1) & 0x55);
    }
}

const TONE_TABLE_BITS: u32 = 12;
const TONE_TABLE: usize = 1 << TONE_TABLE_BITS;
const TWO_POW_32: f64 = 4_294_967_296.0;

/// Header of frame `k` of a layout (used by tests and readers to predict headers).
pub fn expected_header(config: &GenConfig, station: usize, thread: u32, k: u64) -> VdifHeader {
    let l = &config.layout;
    let mut h = l.header(config.stations[station].id);
    h.ref_epoch = config.ref_epoch;
    h.seconds = config.start_seconds + (k / u64::from(l.frames_per_second)) as u32;
    h.frame_number = (k % u64::from(l.frames_per_second)) as u32;
    h.thread_id = thread as u16;
    h
}
