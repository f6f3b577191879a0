//! The flags of `evlbi vdif` that other modules share: the synthetic signal (`vdif gen` and
//! `stream send --generate`), `vdif correlate`'s arguments and the per-file report its text
//! view prints, and the byte progress bar of `vdif` commands.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use vdif::gen::{GenConfig, StationSpec};
use vdif::inspect::InspectReport;
use vdif::FrameLayout;

use crate::flags::JsonOutput;
use crate::scan_args::DisksArg;
use crate::units::{parse_frequency, parse_seconds};
use crate::{usage, usage_in, usage_of};

/// Progress-bar layout for work measured in bytes.
pub const BYTES_BAR: &str = "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}";

/// Largest sky delay `--delay` takes, seconds either way.
pub const MAX_SKY_DELAY_S: f64 = 3600.0;

/// What to synthesise: shared by `vdif gen` and `stream send --generate`.
#[derive(Args)]
pub struct SignalArgs {
    /// Station codes, comma separated: two ASCII characters each (Ef, Wb, Jb) or numeric ids.
    #[arg(long, value_delimiter = ',')]
    pub stations: Vec<String>,
    /// Bits per sample: 1 or 2 (of each of I and Q with --complex).
    #[arg(long, default_value_t = 2)]
    pub(crate) bits: u8,
    /// Complex sampling: each sample is I and Q (`bits` each), the band per channel equals the
    /// sample rate, and sky delays are whole complex samples.
    #[arg(long)]
    pub(crate) complex: bool,
    /// Channels per station (split evenly over threads; a power of two per thread).
    #[arg(long, default_value_t = 8)]
    pub(crate) channels: u32,
    /// VDIF threads per station.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: u32,
    /// Data bytes per frame (header excluded), a multiple of 8.
    #[arg(long, default_value_t = 8000)]
    pub(crate) frame: usize,
    /// Sky-signal delay per station, STATION=TIME (e.g. Wb=1.5us); rounded to whole samples. Repeatable or comma separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) delay: Vec<String>,
    /// Correlated (sky) fraction of each station's power, i.e. the correlation coefficient of every baseline.
    #[arg(long, default_value_t = 0.01)]
    pub(crate) snr: f64,
    /// Inject a tone (like phase-cal) at this baseband frequency in every channel: 1.2MHz. It is
    /// undelayed and common to all stations, so it correlates on every baseline like a
    /// phase-cal spur; leave it out when a clean fringe is wanted.
    #[arg(long, value_parser = parse_frequency)]
    pub(crate) tone: Option<f64>,
    /// Tone amplitude relative to the noise σ.
    #[arg(long, default_value_t = 0.1)]
    pub(crate) tone_amp: f64,
    /// Seed of all random draws.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// UTC time of the first frame (RFC 3339, e.g. 2026-01-01T00:00:00Z) or `now`.
    #[arg(long, default_value = "now")]
    pub(crate) start: String,
}

impl SignalArgs {
    /// Check the options and build the generator's configuration for `rate` b/s per station and
    /// `seconds` of data.
    /// `--start now` (the default): a backend simulator then sends each frame at its time.
    pub fn start_is_now(&self) -> bool {
        self.start.trim().eq_ignore_ascii_case("now")
    }

    pub fn to_config(&self, rate: f64, seconds: u32) -> Result<GenConfig> {
        let layout = FrameLayout::with_complex(rate, self.bits, self.channels, self.threads, self.frame, self.complex)
            .map_err(usage_of)?;
        if self.stations.is_empty() {
            return Err(usage("--stations is required (e.g. --stations Ef,Wb)"));
        }
        if !(0.0..=1.0).contains(&self.snr) {
            return Err(usage(format!(
                "--snr {} must be within 0..=1 (the correlated fraction of the power)",
                self.snr
            )));
        }
        if seconds == 0 {
            return Err(usage("--seconds must be at least 1"));
        }
        if let Some(f) = self.tone {
            // A complex channel's band is as wide as its sample rate, a real one's half that.
            let band = layout.sample_rate_hz / if layout.complex { 1.0 } else { 2.0 };
            if !(f > 0.0 && f < band) {
                return Err(usage(format!(
                    "--tone {f} Hz must lie inside the channel band (0, {band} Hz)"
                )));
            }
        }
        let mut stations = Vec::new();
        for s in &self.stations {
            let id = vdif::StationId::parse(s).map_err(usage_of)?;
            if stations.iter().any(|x: &StationSpec| x.id == id) {
                return Err(usage(format!("station {s} given twice")));
            }
            stations.push(StationSpec {
                name: id.to_string(),
                id,
                delay_s: 0.0,
            });
        }
        for d in &self.delay {
            let (name, t) = d
                .split_once('=')
                .ok_or_else(|| usage(format!("--delay {d:?}: expected STATION=TIME, e.g. Wb=1.5us")))?;
            let secs = parse_seconds(t).map_err(|e| usage(format!("--delay {d:?}: {e}")))?;
            // Geometric delays are below 50 ms; a bound keeps samples x channels within an i64.
            if secs.abs() > MAX_SKY_DELAY_S {
                return Err(usage(format!("--delay {d:?}: at most {MAX_SKY_DELAY_S} s either way")));
            }
            let st = stations
                .iter_mut()
                .find(|s| s.name == name)
                .ok_or_else(|| usage(format!("--delay {d:?}: station {name} is not in --stations")))?;
            st.delay_s = secs;
        }
        // The clock is read here, in the binary: vdif is sans-IO.
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let start_unix = vdif::time::parse_start(&self.start, now_unix).map_err(|e| usage_in("--start", e))?;
        let (ref_epoch, start_seconds) = vdif::time::to_epoch(start_unix)
            .ok_or_else(|| usage("--start must lie between 2000 and 2031 (VDIF epochs)"))?;
        Ok(GenConfig {
            layout,
            stations,
            seconds,
            ref_epoch,
            start_seconds,
            snr: self.snr,
            tone_hz: self.tone,
            tone_amplitude: self.tone_amp,
            seed: self.seed,
        })
    }
}

#[derive(Args)]
pub struct CorrelateArgs {
    /// Station A (a file, or vbs://SCAN, mk6://SCAN).
    pub(crate) a: PathBuf,
    /// Station B (its delay is reported relative to A).
    pub(crate) b: PathBuf,
    #[command(flatten)]
    pub(crate) disks: DisksArg,
    /// VDIF thread.
    #[arg(long, default_value_t = 0)]
    pub(crate) thread: u16,
    /// Station to take from A when its file holds several (Ef, or a numeric id).
    #[arg(long, value_name = "STATION")]
    pub(crate) station_a: Option<String>,
    /// Station to take from B when its file holds several.
    #[arg(long, value_name = "STATION")]
    pub(crate) station_b: Option<String>,
    /// Channel within the thread.
    #[arg(long, default_value_t = 0)]
    pub(crate) channel: u32,
    /// FFT length (power of two); delays up to ±half of it are found.
    #[arg(long, default_value_t = 256)]
    pub(crate) fft: usize,
    /// Stop after this many frames of the thread (0 = all).
    #[arg(long, default_value_t = 0)]
    pub(crate) max_frames: u64,
    /// S/N a peak needs to count as a fringe; below it the result says "no fringe" (exit 1).
    #[arg(long, default_value_t = fxcorr::DEFAULT_MIN_SNR)]
    pub(crate) min_snr: f64,
    #[command(flatten)]
    pub(crate) output: JsonOutput,
}

#[derive(Serialize)]
pub(crate) struct FileReport {
    pub(crate) file: PathBuf,
    #[serde(flatten)]
    pub(crate) report: InspectReport,
}
