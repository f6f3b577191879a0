//! The receiving side of `evlbi stream`, sans IO: datagrams in (with arrival time and source),
//! frames out to a [`FrameSink`] in time order per station, NAKs out when ARQ is on.
//!
//! Stations are told apart by the native stream index, or for jive5ab and bare framing by the
//! VDIF station id. Every datagram that is not a usable frame is counted by reason and dropped.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::arq::{NakConfig, NakScheduler, NakStats};
use crate::window::{FrameSink, Placement, StationWindow, WindowConfig, WindowStats};
use crate::wire::{parse_data, Nak, SeqFormat, WireError};

/// Frame numbers have 24 bits (VDIF 1.1.1 §3, word 1).
const MAX_FPS: u32 = 1 << 24;
/// Thread ids have 10 bits (word 3).
const MAX_THREADS: u16 = 1024;
/// Largest reorder window per station (memory), bytes.
const MAX_WINDOW_BYTES: u64 = 1 << 30;

/// How to receive.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverConfig {
    /// Framing the sender uses.
    pub format: SeqFormat,
    /// Frames per second per thread, when the framing and headers do not say (jive5ab, none).
    pub frames_per_second: Option<u32>,
    /// VDIF threads per station, when the framing does not say; default 1.
    pub threads: Option<u16>,
    /// Reorder latency: a frame is written this long (in stream time) after it is due.
    pub latency: Duration,
    /// Longest gap filled with invalid frames; longer gaps start a new segment.
    pub max_fill: Duration,
    /// Most stations accepted; datagrams of further ones are counted and dropped.
    pub max_stations: usize,
    /// Accept data only from this address (others are counted as foreign).
    pub from: Option<SocketAddr>,
    /// Ask for missing frames (native framing only).
    pub arq: bool,
    /// Consistent frames needed to accept a jump of a stream's time.
    pub confirm: u32,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            format: SeqFormat::Native,
            frames_per_second: None,
            threads: None,
            latency: Duration::from_millis(50),
            max_fill: Duration::from_secs(2),
            max_stations: 16,
            from: None,
            arq: false,
            confirm: 4,
        }
    }
}

/// Datagrams that never reached a station's window, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatagramCounters {
    /// Datagrams seen.
    pub datagrams: u64,
    /// Bytes seen.
    pub bytes: u64,
    /// Too short for a frame.
    pub too_short: u64,
    /// Larger than the receive buffer (truncated by the kernel).
    pub oversized: u64,
    /// Wrong magic (native framing).
    pub bad_magic: u64,
    /// Unsupported native version.
    pub bad_version: u64,
    /// VDIF header rejected.
    pub bad_header: u64,
    /// Header length differs from the bytes carried.
    pub length_mismatch: u64,
    /// From an address other than the station's (or `--from`).
    pub foreign_source: u64,
    /// A station beyond `max_stations`.
    pub too_many_stations: u64,
    /// Frame rate unknown (jive5ab/bare framing without `--fps` and no rate in the header).
    pub no_frame_rate: u64,
    /// A native stream whose VDIF station id changed.
    pub wrong_station: u64,
    /// A first datagram announcing a frame rate or thread count VDIF cannot have (frame numbers
    /// have 24 bits, thread ids 10): it would size the window.
    pub implausible_stream: u64,
}

impl DatagramCounters {
    /// Datagrams dropped for any reason.
    pub fn rejected(&self) -> u64 {
        self.too_short
            + self.oversized
            + self.bad_magic
            + self.bad_version
            + self.bad_header
            + self.length_mismatch
            + self.foreign_source
            + self.too_many_stations
            + self.no_frame_rate
            + self.wrong_station
            + self.implausible_stream
    }
}

/// Per-station results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationSummary {
    /// Two-letter station code or number.
    pub station: String,
    /// VDIF station id.
    pub station_id: u16,
    /// Native stream index, if native framing.
    pub stream: Option<u16>,
    /// Where its datagrams came from.
    pub source: String,
    /// Frames per second per thread used for placement.
    pub frames_per_second: u32,
    /// VDIF threads.
    pub threads: u16,
    /// Frame length, header included.
    pub frame_len: usize,
    /// Window counters.
    pub window: WindowStats,
    /// First and last sequence number seen (native, jive5ab).
    pub seq_first: Option<u64>,
    /// Last (highest) sequence number seen.
    pub seq_last: Option<u64>,
    /// Retransmitted datagrams received.
    pub retransmits_received: u64,
    /// ARQ counters, if on.
    pub arq: Option<NakStats>,
    /// Fraction of written frames that are filled invalid (f).
    pub loss_fraction: f64,
    /// S/N factor √(1 − f) for this station's data.
    pub snr_factor: f64,
}

struct Station {
    key: u32,
    source: SocketAddr,
    stream: Option<u16>,
    station_id: u16,
    window: StationWindow,
    arq: Option<NakScheduler>,
    seq_first: Option<u64>,
    seq_last: Option<u64>,
    retransmits: u64,
}

/// The receiver state machine.
pub struct Receiver {
    cfg: ReceiverConfig,
    stations: Vec<Station>,
    counters: DatagramCounters,
    first_problem: Option<String>,
}

impl Receiver {
    /// A receiver with no stations yet.
    pub fn new(cfg: ReceiverConfig) -> Self {
        Receiver {
            cfg,
            stations: Vec::new(),
            counters: DatagramCounters::default(),
            first_problem: None,
        }
    }

    /// Datagram counters.
    pub fn counters(&self) -> &DatagramCounters {
        &self.counters
    }

    /// The first reason a datagram was dropped, in words (for the operator).
    pub fn first_problem(&self) -> Option<&str> {
        self.first_problem.as_deref()
    }

    /// Stations seen so far.
    pub fn station_count(&self) -> usize {
        self.stations.len()
    }

    /// The window counters summed over all stations (for live lines).
    pub fn window_totals(&self) -> crate::window::WindowStats {
        let mut t = crate::window::WindowStats::default();
        for st in &self.stations {
            t.add(st.window.stats());
        }
        t
    }

    fn problem(&mut self, what: String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(what);
        }
    }

    /// One datagram arrived at `now` from `from`; `truncated` when the kernel cut it.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        truncated: bool,
        sink: &mut impl FrameSink,
    ) {
        self.counters.datagrams += 1;
        self.counters.bytes += datagram.len() as u64;
        if truncated {
            self.counters.oversized += 1;
            self.problem(format!(
                "{} byte datagram from {from} larger than the receive buffer",
                datagram.len()
            ));
            return;
        }
        if self.cfg.from.is_some_and(|f| f != from) {
            self.counters.foreign_source += 1;
            self.problem(format!("datagram from {from}, not from the --from address"));
            return;
        }
        let d = match parse_data(self.cfg.format, datagram) {
            Ok(d) => d,
            Err(e) => {
                match e {
                    WireError::TooShort(_) => self.counters.too_short += 1,
                    WireError::BadMagic(_) => self.counters.bad_magic += 1,
                    WireError::BadVersion(_) => self.counters.bad_version += 1,
                    WireError::BadHeader(_) => self.counters.bad_header += 1,
                    WireError::LengthMismatch { .. } => self.counters.length_mismatch += 1,
                }
                self.problem(format!("datagram from {from}: {e}"));
                return;
            }
        };
        let key = match d.native {
            Some(n) => 0x1_0000 | u32::from(n.stream),
            None => u32::from(d.header.station_id),
        };
        let idx = match self.stations.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                if self.stations.len() >= self.cfg.max_stations {
                    self.counters.too_many_stations += 1;
                    self.problem(format!(
                        "station {} from {from} beyond --max-stations {}",
                        d.header.station_name(),
                        self.cfg.max_stations
                    ));
                    return;
                }
                let fps = d
                    .native
                    .map(|n| n.frames_per_second)
                    .filter(|f| *f > 0)
                    .or(self.cfg.frames_per_second)
                    .or_else(|| {
                        let rate = d.header.header_sample_rate_hz()?;
                        let fps = rate / d.header.samples_per_frame().max(1) as f64;
                        (fps >= 1.0 && fps.fract() == 0.0 && fps < f64::from(1u32 << 24)).then_some(fps as u32)
                    });
                let Some(fps) = fps else {
                    self.counters.no_frame_rate += 1;
                    self.problem(format!(
                        "station {}: frame rate unknown (no native framing, no sample rate in the header): pass --fps",
                        d.header.station_name()
                    ));
                    return;
                };
                let threads = d
                    .native
                    .map(|n| n.threads)
                    .filter(|t| *t > 0)
                    .or(self.cfg.threads)
                    .unwrap_or(1);
                // Untrusted numbers size the window: keep them within what VDIF can express.
                if fps > MAX_FPS || threads > MAX_THREADS || u32::from(d.header.thread_id) >= u32::from(threads) {
                    self.counters.implausible_stream += 1;
                    self.problem(format!(
                        "datagram from {from} announces {fps} frames/s over {threads} thread(s) (thread {}): not a VDIF stream",
                        d.header.thread_id
                    ));
                    return;
                }
                let slots_per_s = f64::from(fps) * f64::from(threads);
                let frame_len = d.header.frame_len() as f64;
                let window = (self.cfg.latency.as_secs_f64() * slots_per_s)
                    .ceil()
                    .clamp(4.0, (MAX_WINDOW_BYTES as f64 / frame_len).max(4.0)) as u64;
                let wcfg = WindowConfig {
                    frames_per_second: fps,
                    threads,
                    window,
                    max_fill: (self.cfg.max_fill.as_secs_f64() * slots_per_s).ceil() as u64,
                    confirm: self.cfg.confirm,
                };
                let arq = (self.cfg.arq && d.native.is_some()).then(|| {
                    NakScheduler::new(NakConfig {
                        stream: d.native.map(|n| n.stream).unwrap_or(0),
                        initial_rtt: self.cfg.latency / 3,
                        reorder_grace: Duration::from_micros(500),
                        max_tracked: window as usize,
                    })
                });
                self.stations.push(Station {
                    key,
                    source: from,
                    stream: d.native.map(|n| n.stream),
                    station_id: d.header.station_id,
                    window: StationWindow::new(wcfg, &d.header),
                    arq,
                    seq_first: None,
                    seq_last: None,
                    retransmits: 0,
                });
                self.stations.len() - 1
            }
        };
        let st = &mut self.stations[idx];
        if st.source != from {
            self.counters.foreign_source += 1;
            let msg = format!(
                "station {} data from {from}, expected {}",
                d.header.station_name(),
                st.source
            );
            self.problem(msg);
            return;
        }
        if d.header.station_id != st.station_id {
            self.counters.wrong_station += 1;
            let msg = format!(
                "stream {:?} carries station {} after {}",
                st.stream,
                d.header.station_name(),
                vdif::station_name(st.station_id)
            );
            self.problem(msg);
            return;
        }
        let placement = st.window.push(&d.header, d.frame, sink);
        if let Placement::Placed { slot, .. } = placement {
            if let Some(seq) = d.seq {
                st.seq_first = Some(st.seq_first.map_or(seq, |f| f.min(seq)));
                st.seq_last = Some(st.seq_last.map_or(seq, |l| l.max(seq)));
                if let Some(arq) = st.arq.as_mut() {
                    arq.on_frame(now, seq, slot);
                }
            }
            if d.native.is_some_and(|n| n.retransmit) {
                st.retransmits += 1;
            }
        }
    }

    /// NAKs to send now, with their destinations.
    pub fn poll_naks(&mut self, now: Instant) -> Vec<(SocketAddr, Nak)> {
        let mut out = Vec::new();
        for st in &mut self.stations {
            let (Some(arq), Some(base)) = (st.arq.as_mut(), st.window.base()) else {
                continue;
            };
            let c = st.window.config();
            let slots_per_s = f64::from(c.frames_per_second) * f64::from(c.threads);
            let front = st.window.highest().map_or(base, |h| (h + 1).saturating_sub(c.window));
            if let Some(nak) = arq.poll(now, base, front, slots_per_s) {
                out.push((st.source, nak));
            }
        }
        out
    }

    /// End of the stream: write out every window.
    pub fn finish(&mut self, sink: &mut impl FrameSink) {
        for st in &mut self.stations {
            st.window.finish(sink);
            if let (Some(arq), Some(base)) = (st.arq.as_mut(), st.window.base()) {
                // Everything still missing is now written invalid.
                arq.expire_before(base);
            }
        }
    }

    /// Per-station results so far.
    pub fn summaries(&self) -> Vec<StationSummary> {
        self.stations
            .iter()
            .map(|st| {
                let w = *st.window.stats();
                let f = w.loss_fraction();
                let c = st.window.config();
                StationSummary {
                    station: vdif::station_name(st.station_id),
                    station_id: st.station_id,
                    stream: st.stream,
                    source: st.source.to_string(),
                    frames_per_second: c.frames_per_second,
                    threads: c.threads,
                    frame_len: st.window.frame_len(),
                    window: w,
                    seq_first: st.seq_first,
                    seq_last: st.seq_last,
                    retransmits_received: st.retransmits,
                    arq: st.arq.as_ref().map(|a| a.stats()),
                    loss_fraction: f,
                    snr_factor: (1.0 - f).sqrt(),
                }
            })
            .collect()
    }
}
