//! A small FX correlator: enough to find the fringe between two stations and measure its S/N,
//! which is how we check end to end what the network did to the science (S/N ∝ √(1−f)).
//!
//! Per channel, each station's samples are cut into segments of `fft_len` samples aligned on
//! VDIF time, Fourier transformed (F), multiplied as X_A·X_B* and accumulated (X); the inverse
//! transform of the accumulated cross-spectrum is the lag function, whose peak gives the delay
//! and whose peak over the RMS of the other lags gives the S/N (Thompson, Moran & Swenson,
//! "Interferometry and Synthesis in Radio Astronomy", §8–9). Frames flagged invalid on either
//! side contribute nothing (weight 0), so the S/N falls as √(valid fraction).
//!
//! Real and complex samples go through the same complex FFT: a real sample is a complex one
//! with zero imaginary part, a complex sample is I + iQ. The delay is in samples of the data
//! (complex samples for complex data), the amplitude is the modulus of the lag function at its
//! peak, and a peak whose S/N is below `min_snr` is reported as no fringe.

use std::io::Read;

use rustfft::num_complex::Complex32;
use rustfft::FftPlanner;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use vdif::inspect::{InspectError, InspectReport};
use vdif::{CheckedFrames, ScanEvent, VdifHeader};

/// Why two streams cannot be correlated.
#[derive(Debug, Error)]
pub enum CorrelateError {
    /// Reading a stream failed.
    #[error("reading station {station}: {source}")]
    Io {
        /// Station letter.
        station: char,
        /// The read error.
        source: std::io::Error,
    },
    /// The stations' frames differ in a way that prevents pairing them.
    #[error("stations differ: {0}")]
    Mismatch(String),
    /// The data cannot be decoded (1, 2, 4 and 8-bit samples, real or complex, can).
    #[error("cannot decode: {0}")]
    Codec(#[from] vdif::CodecError),
    /// Bad parameters.
    #[error("{0}")]
    Parameter(String),
    /// A stream is not VDIF (by the check every reader of VDIF applies; the format is named
    /// when its first bytes show a known one).
    #[error("station {station}: {source}")]
    NotVdif {
        /// Station letter.
        station: char,
        /// What the check found.
        source: InspectError,
    },
    /// A stream holds no frames of the thread asked for.
    #[error("station {station} has no thread {thread}{}: its threads are {}", .of.as_ref().map_or(String::new(), |s| format!(" of station {s}")), list(.present))]
    NoThread {
        /// Station letter.
        station: char,
        /// The thread asked for.
        thread: u16,
        /// The station id chosen, as text, if one was.
        of: Option<String>,
        /// The threads it has (of the chosen station, if one was).
        present: Vec<u16>,
    },
    /// The station asked for is not in a stream.
    #[error("station {station} has no frames of station {wanted}: the file holds {}", list(.present))]
    NoStation {
        /// Station letter.
        station: char,
        /// The station asked for.
        wanted: String,
        /// The stations it holds.
        present: Vec<String>,
    },
    /// A stream holds frames of several stations and none was chosen.
    #[error("station {station} holds frames of several stations ({first}, then {other} at offset {offset}): choose one (--station-{})", station.to_ascii_lowercase())]
    SeveralStations {
        /// Station letter.
        station: char,
        /// The first station of the thread.
        first: String,
        /// Another one.
        other: String,
        /// Offset of its first frame.
        offset: u64,
    },
    /// Nothing overlapped in time.
    #[error("no frames of the two stations overlap in time ({0})")]
    NoOverlap(String),
}

/// Items of a list, comma separated.
fn list<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// What to correlate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CorrelateConfig {
    /// Thread to use.
    pub thread: u16,
    /// Channel within the thread.
    pub channel: u32,
    /// FFT length in samples (a power of two); the lag search covers ±fft_len/2.
    pub fft_len: usize,
    /// Stop after this many paired frames (0 = all).
    pub max_frames: u64,
    /// A peak below this S/N is reported as no fringe (`detected` false).
    pub min_snr: f64,
    /// Station id to take from stream A; `None`: the only one it holds (several are an error).
    #[serde(default)]
    pub station_a: Option<vdif::StationId>,
    /// Station id to take from stream B, likewise.
    #[serde(default)]
    pub station_b: Option<vdif::StationId>,
}

/// S/N a peak needs to count as a fringe: the highest of 256 lags of pure noise reaches about
/// 4σ, and 7 is the usual fringe-detection threshold of VLBI fringe searches.
pub const DEFAULT_MIN_SNR: f64 = 7.0;

/// The fringe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fringe {
    /// The configuration used.
    pub config: CorrelateConfig,
    /// The station correlated from stream A (as text: "Ef" or a number).
    #[serde(default)]
    pub station_a: String,
    /// The station correlated from stream B.
    #[serde(default)]
    pub station_b: String,
    /// Frames of the thread paired on time.
    pub frames_paired: u64,
    /// Paired frames with valid data on both sides (weight 1).
    pub frames_used: u64,
    /// frames_used / frames_paired.
    pub valid_fraction: f64,
    /// Samples correlated (complex samples for complex data).
    pub samples: u64,
    /// The stations' samples are complex (I + iQ).
    pub complex: bool,
    /// Delay of station B relative to A at the peak, samples (positive: B lags A).
    pub delay_samples: i64,
    /// Delay in seconds, when the sample rate is known.
    pub delay_s: Option<f64>,
    /// Normalised correlation amplitude |r| at the peak (quantised data), corrected for the
    /// part of each segment that does not overlap at that lag (n − |lag| of n samples).
    pub amplitude: f64,
    /// Peak modulus over the RMS modulus of the lag function away from the peak.
    pub snr: f64,
    /// The peak's S/N reaches `config.min_snr`: a fringe. When false, delay and amplitude are
    /// those of the highest noise peak.
    pub detected: bool,
}

/// Samples of one channel from one valid frame (real ones with zero imaginary part), or
/// nothing for an invalid one.
fn channel_samples(h: &VdifHeader, data: &[u8], channel: u32) -> Result<Option<Vec<Complex32>>, CorrelateError> {
    if h.invalid {
        return Ok(None);
    }
    let v = vdif::codec::decode_values(data, h.bits_per_sample, h.complex)?;
    let per = h.values_per_time_sample() as usize;
    let spf = h.samples_per_frame() as usize;
    let samples = v.chunks_exact(per).take(spf);
    Ok(Some(if h.complex {
        let at = 2 * channel as usize;
        samples.map(|t| Complex32::new(t[at], t[at + 1])).collect()
    } else {
        samples.map(|t| Complex32::new(t[channel as usize], 0.0)).collect()
    }))
}

/// The frames of one thread of one station of a stream, checked as every VDIF reader checks.
struct Stream<R: std::io::Read> {
    frames: CheckedFrames<R>,
    name: char,
    thread: u16,
    /// The station chosen, or the first one seen of the thread.
    station: Option<vdif::StationId>,
    chosen: bool,
}

impl<R: std::io::Read> Stream<R> {
    fn new(reader: R, name: char, thread: u16, station: Option<vdif::StationId>) -> Self {
        Stream {
            frames: CheckedFrames::new(reader, None),
            name,
            thread,
            station,
            chosen: station.is_some(),
        }
    }

    /// Next frame of the chosen thread and station: (time key, header, data array).
    fn next(&mut self) -> Result<Option<(u64, VdifHeader, Vec<u8>)>, CorrelateError> {
        while let Some(ev) = self.frames.next() {
            let ScanEvent::Frame {
                header,
                mut bytes,
                offset,
            } = ev.map_err(|source| CorrelateError::Io {
                station: self.name,
                source,
            })?
            else {
                continue;
            };
            if header.thread_id != self.thread {
                continue;
            }
            match self.station {
                None => self.station = Some(header.station_id),
                Some(s) if s == header.station_id => {}
                Some(_) if self.chosen => continue,
                Some(s) => {
                    return Err(CorrelateError::SeveralStations {
                        station: self.name,
                        first: s.to_string(),
                        other: header.station_id.to_string(),
                        offset,
                    })
                }
            }
            bytes.drain(..header.header_len());
            let key = (u64::from(header.seconds) << 24) | u64::from(header.frame_number);
            return Ok(Some((key, header, bytes)));
        }
        Ok(None)
    }

    /// The rest of the stream, checked: its report, or why it is not VDIF, lacks the station or
    /// the thread (when `paired` found nothing).
    fn finish(mut self, paired: bool) -> Result<InspectReport, CorrelateError> {
        if !paired {
            // Read to the end: what the stream holds decides which error is the true one.
            for ev in self.frames.by_ref() {
                ev.map_err(|source| CorrelateError::Io {
                    station: self.name,
                    source,
                })?;
            }
        }
        let report = self.frames.finish().map_err(|source| CorrelateError::NotVdif {
            station: self.name,
            source,
        })?;
        if paired {
            return Ok(report);
        }
        if let Some(s) = self
            .station
            .filter(|s| !report.stations.iter().any(|x| x.station_id == *s))
        {
            return Err(CorrelateError::NoStation {
                station: self.name,
                wanted: s.to_string(),
                present: report.stations.iter().map(|x| x.station.clone()).collect(),
            });
        }
        let present: Vec<u16> = match self.station {
            Some(s) => report
                .stations
                .iter()
                .filter(|x| x.station_id == s)
                .flat_map(|x| x.threads.iter().copied())
                .collect(),
            None => report.threads.clone(),
        };
        if !present.contains(&self.thread) {
            return Err(CorrelateError::NoThread {
                station: self.name,
                thread: self.thread,
                of: self.station.filter(|_| self.chosen).map(|s| s.to_string()),
                present,
            });
        }
        Ok(report)
    }
}

/// "A from X to Y, B from Z to W": the time spans of two streams that do not overlap.
fn spans(a: &InspectReport, b: &InspectReport) -> String {
    let span = |r: &InspectReport| match (&r.start_utc, &r.end_utc, &r.first_second_utc) {
        (Some(s), Some(e), _) => format!("{s} .. {e}"),
        (_, _, Some(s)) => format!("the second from {s}"),
        _ => "?".into(),
    };
    format!("A spans {}, B {}", span(a), span(b))
}

/// Correlate stations A and B. `sample_rate_hz` converts the delay to seconds; without it the
/// rate found in A (its header or frame numbers) does. Both streams are checked as every VDIF
/// reader checks them (over the bytes read): one that is not VDIF is an error naming what it is.
pub fn correlate<A: Read, B: Read>(
    a: A,
    b: B,
    config: CorrelateConfig,
    sample_rate_hz: Option<f64>,
) -> Result<Fringe, CorrelateError> {
    let n = config.fft_len;
    if !n.is_power_of_two() || n < 8 {
        return Err(CorrelateError::Parameter(format!(
            "FFT length {n} must be a power of two >= 8"
        )));
    }
    if !(config.min_snr.is_finite() && config.min_snr >= 0.0) {
        return Err(CorrelateError::Parameter(format!(
            "minimum S/N {} must be a number >= 0",
            config.min_snr
        )));
    }
    let mut sa = Stream::new(a, 'A', config.thread, config.station_a);
    let mut sb = Stream::new(b, 'B', config.thread, config.station_b);
    let mut planner = FftPlanner::<f32>::new();
    // Zero-padded to 2n so the lag function is linear (not circular) over ±n/2.
    let fwd2 = planner.plan_fft_forward(2 * n);
    let inv2 = planner.plan_fft_inverse(2 * n);
    let mut acc = vec![Complex32::new(0.0, 0.0); 2 * n];
    let (mut paired, mut used, mut samples) = (0u64, 0u64, 0u64);
    let mut complex = false;
    let (mut pa, mut pb) = (0f64, 0f64);
    let mut next_a = sa.next()?;
    let mut next_b = sb.next()?;
    let mut buf_a = vec![Complex32::new(0.0, 0.0); 2 * n];
    let mut buf_b = vec![Complex32::new(0.0, 0.0); 2 * n];
    while let (Some((ka, ha, da)), Some((kb, hb, db))) = (&next_a, &next_b) {
        if ka < kb {
            next_a = sa.next()?;
            continue;
        }
        if kb < ka {
            next_b = sb.next()?;
            continue;
        }
        check_pair(ha, hb, &config)?;
        complex = ha.complex;
        paired += 1;
        if let (Some(xa), Some(xb)) = (
            channel_samples(ha, da, config.channel)?,
            channel_samples(hb, db, config.channel)?,
        ) {
            used += 1;
            for (ca, cb) in xa.chunks_exact(n).zip(xb.chunks_exact(n)) {
                for i in 0..n {
                    buf_a[i] = ca[i];
                    buf_b[i] = cb[i];
                    pa += f64::from(ca[i].norm_sqr());
                    pb += f64::from(cb[i].norm_sqr());
                }
                for i in n..2 * n {
                    buf_a[i] = Complex32::new(0.0, 0.0);
                    buf_b[i] = Complex32::new(0.0, 0.0);
                }
                fwd2.process(&mut buf_a);
                fwd2.process(&mut buf_b);
                for ((s, x), y) in acc.iter_mut().zip(&buf_a).zip(&buf_b) {
                    // Conjugate on A: the lag function peaks at +d when B = A delayed by d.
                    *s += x.conj() * y;
                }
                samples += n as u64;
            }
        }
        if config.max_frames > 0 && paired >= config.max_frames {
            break;
        }
        next_a = sa.next()?;
        next_b = sb.next()?;
    }
    let (station_a, station_b) = (sa.station, sb.station);
    let report_a = sa.finish(paired > 0)?;
    let report_b = sb.finish(paired > 0)?;
    if paired == 0 {
        return Err(CorrelateError::NoOverlap(spans(&report_a, &report_b)));
    }
    inv2.process(&mut acc);
    let power = (pa * pb).sqrt();
    let rate = sample_rate_hz.or(report_a.sample_rate_hz);
    let mut f = fringe(&acc, n, power, config, paired, used, samples, rate);
    f.complex = complex;
    f.station_a = station_a.map(|s| s.to_string()).unwrap_or_default();
    f.station_b = station_b.map(|s| s.to_string()).unwrap_or_default();
    Ok(f)
}

/// Frames of A and B with the same time can be correlated only if they sample alike.
fn check_pair(ha: &VdifHeader, hb: &VdifHeader, config: &CorrelateConfig) -> Result<(), CorrelateError> {
    if ha.channels() != hb.channels()
        || ha.bits_per_sample != hb.bits_per_sample
        || ha.frame_len() != hb.frame_len()
        || ha.complex != hb.complex
    {
        let kind = |h: &VdifHeader| if h.complex { "complex" } else { "real" };
        return Err(CorrelateError::Mismatch(format!(
            "A has {}-bit {} x {} ch in {} B frames, B has {}-bit {} x {} ch in {} B frames",
            ha.bits_per_sample,
            kind(ha),
            ha.channels(),
            ha.frame_len(),
            hb.bits_per_sample,
            kind(hb),
            hb.channels(),
            hb.frame_len()
        )));
    }
    if config.channel >= ha.channels() {
        return Err(CorrelateError::Parameter(format!(
            "channel {} does not exist ({} channels)",
            config.channel,
            ha.channels()
        )));
    }
    Ok(())
}

/// The fringe of an accumulated, inverse-transformed cross spectrum `acc` (2n points) of
/// signals whose powers multiply to `power²`.
#[allow(clippy::too_many_arguments)]
fn fringe(
    acc: &[Complex32],
    n: usize,
    power: f64,
    config: CorrelateConfig,
    paired: u64,
    used: u64,
    samples: u64,
    sample_rate_hz: Option<f64>,
) -> Fringe {
    // Lags 0..n/2 sit at the start, negative lags −n/2..−1 at the end of the 2n array.
    let half = n as i64 / 2;
    let lag_value = |lag: i64| -> f64 {
        let idx = if lag >= 0 {
            lag as usize
        } else {
            (2 * n as i64 + lag) as usize
        };
        f64::from(acc[idx].norm())
    };
    let lags: Vec<(i64, f64)> = (-half..half).map(|l| (l, lag_value(l))).collect();
    let (peak_lag, peak) = lags
        .iter()
        .copied()
        .fold((0, 0.0f64), |best, (l, v)| if v > best.1 { (l, v) } else { best });
    let off: Vec<f64> = lags
        .iter()
        .filter(|(l, _)| (l - peak_lag).abs() > 2)
        .map(|(_, v)| *v)
        .collect();
    let rms = (off.iter().map(|v| v * v).sum::<f64>() / off.len().max(1) as f64).sqrt();
    // The inverse FFT is unnormalised: divide by 2n, then by the power of both signals.
    let norm = power.max(f64::MIN_POSITIVE);
    let snr = if rms > 0.0 { peak / rms } else { 0.0 };
    Fringe {
        config,
        station_a: String::new(),
        station_b: String::new(),
        frames_paired: paired,
        frames_used: used,
        valid_fraction: used as f64 / paired as f64,
        samples,
        delay_samples: peak_lag,
        delay_s: sample_rate_hz.map(|r| peak_lag as f64 / r),
        amplitude: peak / (2 * n) as f64 / norm * n as f64 / (n as f64 - peak_lag.unsigned_abs() as f64),
        snr,
        complex: false,
        detected: snr >= config.min_snr,
    }
}
