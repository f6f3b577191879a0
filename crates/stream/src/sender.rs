//! The sender as a state machine: stations' VDIF frames framed for the wire, one frame per
//! datagram on each station's departure schedule, NAKs answered from a repeat buffer.
//!
//! Sans-IO in the manner of quinn-proto: the caller reads the clock and owns the socket.
//!
//! - [`Sender::poll_timeout`]: when the next frames are due (the earliest station's release);
//!   `None` once every station ended or the run's duration passed.
//! - [`Sender::poll_transmit`]: at `now`, the next datagrams to send: repeats asked for by NAKs
//!   first, then the due frames of the earliest station (a batch of up to `burst` equal-sized
//!   datagrams for one GSO call).
//! - [`Sender::handle_nak`]: a datagram from the receiver (a NAK, or anything else to count).
//! - [`Sender::station_results`], [`Sender::arq_stats`]: the counters for the report.
//!
//! Frames come from a [`FrameSource`] per station ([`MemorySource`] here; the socket layer adds
//! one fed by a reader thread); departures follow a [`Schedule`] per station ([`crate::schedule`]:
//! the absolute-timeline pacer of a file or backend, or the relay's live queue). When a looped file starts over, the source says how many seconds to
//! add and the sender rewrites the frame's VDIF time on its way out. Injected loss (a lossy link
//! in the host, for tests and demos) drops datagrams here, before they reach the caller.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;

use histogram::{Hist, DEFAULT_MAX_BUCKETS};
use linkemu::{LossModel, LossProcess};
use thiserror::Error;
use vdif::{FrameRate, StationId};

use crate::arq::{RetransmitBuffer, RetransmitStats};
use crate::results::SentStation;
pub use crate::schedule::Schedule;
use crate::wire::SeqFormat;
use crate::wire::{encode_data, Nak, NativePrefix};

mod memory;

pub use memory::MemorySource;

/// Most of the repeat budget: at most this share of the data rate is spent on repeats.
pub const REPEAT_SHARE: f64 = 0.1;

/// One frame from a [`FrameSource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The whole VDIF frame, header included.
    pub bytes: &'a [u8],
    /// Seconds to add to the frame's VDIF time on the way out (a looped file's later passes).
    pub add_seconds: u32,
}

/// Where a station's frames come from, in order.
pub trait FrameSource {
    /// The next frame; `None` at the end of the source.
    fn next_frame(&mut self) -> Option<Frame<'_>>;
    /// Times the source started over (looping), as far as it counts them.
    fn loops(&self) -> u64 {
        0
    }
    /// Times the sender had to wait for data (a reader that did not keep up).
    fn underruns(&self) -> u64 {
        0
    }
    /// A live source (a relay's input queue) with no frame at the moment: the station is
    /// skipped until frames come, not ended.
    fn paused(&self) -> bool {
        false
    }
    /// Whether the source hands its frames out as shared buffers
    /// ([`FrameSource::next_shared_frame`]), which the sender sends from where they lie instead
    /// of copying them into its datagrams. Such a source's frames of one station are all of one
    /// length (a GSO batch cuts equal segments) and need no time rewrite.
    fn shares_frames(&self) -> bool {
        false
    }
    /// The next frame as a shared buffer (see [`FrameSource::shares_frames`]); `None` at the end
    /// of the source, or when it does not share.
    fn next_shared_frame(&mut self) -> Option<Bytes> {
        None
    }
}

/// What a station streams, as learned from its input.
#[derive(Debug, Clone, PartialEq)]
pub struct StationSpec {
    /// Shown as the source in reports (a file name).
    pub name: String,
    /// VDIF station id.
    pub station_id: StationId,
    /// VDIF threads (ids 0..threads).
    pub threads: u16,
    /// Frame length, header included.
    pub frame_len: usize,
    /// Data bytes per frame (frame length less the header).
    pub data_len: usize,
    /// Frames per second per thread.
    pub fps: FrameRate,
    /// Data rate paced at (sample bits, headers excluded).
    pub rate_bps: vdif::BitRate,
}

impl StationSpec {
    /// Frames per second over all threads at the paced rate.
    pub fn frames_per_second(&self) -> f64 {
        self.rate_bps.get() as f64 / (self.data_len as f64 * 8.0)
    }
}

/// How a [`Sender`] frames and sends.
#[derive(Debug, Clone, PartialEq)]
pub struct SenderConfig {
    /// Framing.
    pub format: SeqFormat,
    /// Sender session carried by the native prefix (not 0; differs between runs).
    pub session: u16,
    /// First sequence number of every stream (jive5ab's udps starts at a random value, native at 0).
    pub first_seq: u64,
    /// Frames released together (one GSO call) every `burst` spacings; 1 sends one by one.
    pub burst: usize,
    /// Keep this much of each stream to answer NAKs (native framing only); `None`: no ARQ.
    pub arq_latency: Option<Duration>,
    /// Datagrams dropped on purpose before they are handed out (repeats included).
    pub inject_loss: LossModel,
    /// Seed of the injected loss.
    pub seed: u64,
    /// When the run started (the schedules' time 0), for `duration`.
    pub start: Instant,
    /// Stop once the next frame is due this long after `start`.
    pub duration: Option<Duration>,
}

/// Why the sender cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SenderError {
    /// A looped file's time no longer fits the VDIF header.
    #[error("VDIF time overflows its 30-bit seconds field while looping")]
    LoopTimeOverflow,
}

/// Datagrams to hand to the socket, from [`Sender::poll_transmit`]. Two forms: whole datagrams
/// back to back in `contents` (`frames` empty), or gathered (`frames` not empty): datagram `i`
/// is the `i`-th framing prefix of `contents` followed by `frames[i]`, sent from where the frame
/// lies (a relay's frames stay in its receive buffers: no copy, [`Transmit::parts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// Stream index of the station the datagrams belong to.
    pub stream: u16,
    /// The datagrams back to back: one, or `contents.len() / segment_size` of equal size; in
    /// the gathered form, the datagrams' framing prefixes back to back (all one length).
    pub contents: &'a [u8],
    /// `Some(size)`: datagrams of `size` bytes each (UDP GSO; the last may be shorter); `None`:
    /// one datagram.
    pub segment_size: Option<usize>,
    /// The gathered form's frames, one per datagram; empty in the whole-datagram form.
    pub frames: &'a [Bytes],
}

/// The datagrams of a [`Transmit`], one by one.
impl<'a> Transmit<'a> {
    /// How many datagrams the transmit holds.
    pub fn datagram_count(&self) -> usize {
        if self.frames.is_empty() {
            let size = self.segment_size.unwrap_or(self.contents.len()).max(1);
            self.contents.len().div_ceil(size)
        } else {
            self.frames.len()
        }
    }

    /// Each datagram as (prefix, rest): in the gathered form its framing prefix and its frame;
    /// else the whole datagram and nothing. A socket layer gathers the two (sendmsg iovecs).
    pub fn parts(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let (contents, frames) = (self.contents, self.frames);
        let size = if frames.is_empty() {
            self.segment_size.unwrap_or(contents.len()).max(1)
        } else {
            contents.len() / frames.len()
        };
        (0..self.datagram_count()).map(move |i| {
            let at = (i * size).min(contents.len());
            let head = contents.get(at..(at + size).min(contents.len())).unwrap_or_default();
            (head, frames.get(i).map_or(&[][..], |f| &f[..]))
        })
    }

    /// Each datagram of the transmit, joined where it is gathered (tests and simulations; a
    /// socket layer sends [`Transmit::parts`]).
    pub fn datagrams(&self) -> impl Iterator<Item = Cow<'a, [u8]>> + 'a {
        self.parts().map(|(p, f)| {
            if f.is_empty() {
                Cow::Borrowed(p)
            } else {
                Cow::Owned([p, f].concat())
            }
        })
    }
}

/// One station's state at the sender.
struct StationTx<P> {
    spec: StationSpec,
    source: Box<dyn FrameSource>,
    schedule: P,
    seq: u64,
    gaps: Hist,
    lateness: Hist,
    last_send: Option<Instant>,
    first_send: Option<Instant>,
    frames: u64,
    bytes: u64,
    injected: u64,
    /// Frames skipped because their time had passed (a schedule fixed to the clock).
    skipped_late: u64,
    repeats: Option<RetransmitBuffer>,
    done: bool,
    /// (frames per second, threads) its native prefixes announce: the spec's, or the station's
    /// rate with threads 0 while the split is a guess ([`Sender::announce_station_rate`]): the
    /// prefix's integers, as a station's total may exceed the 2^24 a [`FrameRate`] holds.
    announced: (u32, u16),
}

/// The sender of several stations over one destination; see the module docs.
pub struct Sender<P> {
    cfg: SenderConfig,
    stations: Vec<StationTx<P>>,
    loss: LossProcess,
    /// Datagrams of the last transmit (their prefixes when `shared` holds their frames).
    out: Vec<u8>,
    /// Frames of the last transmit in the gathered form (see [`Transmit`]).
    shared: Vec<Bytes>,
    /// One datagram being framed.
    scratch: Vec<u8>,
    /// Station whose repeats are being sent.
    repeat_from: usize,
    /// Next sequence number of the destination port (jive5ab framing numbers datagrams per port).
    port_seq: u64,
    /// The data batch returned by the last `poll_transmit` and not yet stamped as sent:
    /// (station, frames).
    unstamped: Option<(usize, u64)>,
    rejected_control: u64,
    /// Datagrams the destination sent back.
    returned: u64,
}

/// Add `seconds` to the time of the VDIF or Mark5B frame at the start of `frame` (in place). A
/// frame whose header does not parse is left alone (the receiver judges it).
pub fn advance_time(frame: &mut [u8], seconds: u32) -> Result<(), SenderError> {
    if seconds == 0 {
        return Ok(());
    }
    if vdif::mark5b_file::starts_mark5b(frame) {
        return advance_mark5b_time(frame, seconds);
    }
    let Ok(mut h) = vdif::VdifHeader::parse(frame) else {
        return Ok(());
    };
    h.seconds = h.seconds.checked_add(seconds).ok_or(SenderError::LoopTimeOverflow)?;
    let hl = h.header_len();
    let header = frame.get_mut(..hl).ok_or(SenderError::LoopTimeOverflow)?;
    h.emit(header).map_err(|_| SenderError::LoopTimeOverflow)
}

/// [`advance_time`] of a Mark5B frame: its time code `seconds` later (modulo its 1000-day
/// cycle), frame number and fraction kept, the CRC recomputed.
fn advance_mark5b_time(frame: &mut [u8], seconds: u32) -> Result<(), SenderError> {
    let Ok(h) = vdif::Mark5bHeader::parse(frame) else {
        return Ok(());
    };
    let s = (h.cycle_seconds() + u64::from(seconds)) % vdif::mark5b::MARK5B_TIME_CODE_SECONDS;
    let mut later = vdif::Mark5bHeader {
        // Both fit: s / 86 400 < 1000, s % 86 400 < 86 400.
        mjd_mod_1000: (s / 86_400) as u16,
        second_of_day: (s % 86_400) as u32,
        ..h
    };
    later.crc = later.computed_crc();
    later.emit(frame).map_err(|_| SenderError::LoopTimeOverflow)
}

impl<P: Schedule> Sender<P> {
    /// A sender without stations yet.
    pub fn new(cfg: SenderConfig) -> Sender<P> {
        Sender {
            loss: LossProcess::new(cfg.inject_loss, cfg.seed),
            port_seq: cfg.first_seq,
            cfg,
            stations: Vec::new(),
            out: Vec::with_capacity(65_536 * 2),
            shared: Vec::new(),
            scratch: Vec::with_capacity(65_536),
            repeat_from: 0,
            unstamped: None,
            rejected_control: 0,
            returned: 0,
        }
    }

    /// Add a station; it streams as the next stream index (0, 1, ...).
    pub fn add_station(&mut self, spec: StationSpec, source: Box<dyn FrameSource>, schedule: P) -> u16 {
        let repeats = self.cfg.arq_latency.map(|l| {
            RetransmitBuffer::new(
                (l.as_secs_f64() * spec.frames_per_second()).ceil() as usize + 1,
                REPEAT_SHARE,
            )
        });
        self.stations.push(StationTx {
            announced: (spec.fps.get(), spec.threads),
            spec,
            source,
            schedule,
            seq: self.cfg.first_seq,
            gaps: Hist::new(),
            lateness: Hist::new(),
            last_send: None,
            first_send: None,
            frames: 0,
            bytes: 0,
            injected: 0,
            skipped_late: 0,
            repeats,
            done: false,
        });
        (self.stations.len() - 1) as u16
    }

    /// Stream `stream`'s rate per thread is the station's rate `station_fps` split over threads
    /// counted at its start, not confirmed yet: its datagrams announce that rate without threads
    /// (0), so a receiver counts the threads and checks the split itself (see
    /// [`crate::rate_check`]) rather than placing every frame by a guess.
    pub fn announce_station_rate(&mut self, stream: u16, station_fps: u32) {
        if let Some(st) = self.stations.get_mut(usize::from(stream)) {
            st.announced = (station_fps, 0);
        }
    }

    /// Stream `stream` has `threads` threads of `fps` frames a second each (the split confirmed,
    /// or corrected): reported and announced from its next datagram on. Its pacing is unchanged
    /// (the station's rate is).
    pub fn set_split(&mut self, stream: u16, fps: FrameRate, threads: u16) {
        if let Some(st) = self.stations.get_mut(usize::from(stream)) {
            (st.spec.fps, st.spec.threads) = (fps, threads);
            st.announced = (fps.get(), threads);
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// The station that sends next: the earliest due among those not ended, unless the run's
    /// duration has passed by then.
    fn next_station(&self) -> Option<usize> {
        let i = (0..self.stations.len())
            .filter(|i| !self.stations[*i].done && !self.stations[*i].source.paused())
            .min_by_key(|i| self.stations[*i].schedule.next_deadline())?;
        let over = self
            .cfg
            .duration
            .is_some_and(|d| self.stations[i].schedule.next_deadline() >= self.cfg.start + d);
        (!over).then_some(i)
    }

    fn burst(&self) -> u64 {
        self.cfg.burst.max(1) as u64
    }

    /// When the next frames are due; `None` once every station ended or the duration passed
    /// (repeats may still be asked for: keep calling [`Sender::handle_nak`] for a latency).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let i = self.next_station()?;
        Some(self.stations[i].schedule.release_deadline(self.burst()))
    }

    /// Whether every station ended or the duration passed (or, with live sources, none has a
    /// frame waiting).
    pub fn is_done(&self) -> bool {
        self.next_station().is_none()
    }

    /// A datagram from the receiver: a NAK queues the repeats it asks for (sent by the next
    /// [`Sender::poll_transmit`] calls, within each station's repeat budget); anything else is
    /// counted as rejected control.
    pub fn handle_nak(&mut self, _now: Instant, datagram: &[u8]) {
        self.returned += 1;
        let Ok(nak) = Nak::parse(datagram) else {
            self.rejected_control += 1;
            return;
        };
        match self
            .stations
            .get_mut(usize::from(nak.stream))
            .and_then(|s| s.repeats.as_mut())
        {
            Some(r) => {
                r.on_nak(&nak);
                self.repeat_from = 0;
            }
            None => self.rejected_control += 1,
        }
    }

    /// The next datagrams to send at `now`: a repeat asked for, else the due frames of the
    /// earliest station; `None` when nothing is due. Call until `None`, then wait for
    /// [`Sender::poll_timeout`]. Datagrams the injected loss takes are counted, not returned; a
    /// batch it took whole also ends a round with `None` (one batch per call at most, so the
    /// caller gets control back even when everything is lost), and `poll_timeout` then says
    /// when the next is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Result<Option<Transmit<'_>>, SenderError> {
        // A batch returned before and not stamped by `on_transmitted` left now.
        self.on_transmitted(now);
        if let Some(stream) = self.next_repeat() {
            return Ok(Some(Transmit {
                stream,
                contents: &self.out,
                segment_size: None,
                frames: &[],
            }));
        }
        loop {
            let Some(i) = self.next_station() else {
                return Ok(None);
            };
            let overdue = self.stations[i].schedule.overdue(now);
            if overdue > 0 {
                self.skip_overdue(i, overdue);
                // Its next frame, or another station's, is the next to look at.
                continue;
            }
            if now < self.stations[i].schedule.release_deadline(self.burst()) {
                return Ok(None);
            }
            let (taken, segment) = self.frame_batch(i, now)?;
            if taken == 0 {
                // The source ended: the next station's turn.
                continue;
            }
            if self.out.is_empty() && self.shared.is_empty() {
                // Every frame of the batch was dropped by the injected loss: nothing to send,
                // it "left" now.
                self.record_departure(i, now, taken);
                return Ok(None);
            }
            self.unstamped = Some((i, taken));
            let several = if self.shared.is_empty() {
                self.out.len() > segment
            } else {
                self.shared.len() > 1
            };
            return Ok(Some(Transmit {
                stream: i as u16,
                contents: &self.out,
                // One datagram needs no segmentation offload.
                segment_size: (self.burst() > 1 && several).then_some(segment),
                frames: &self.shared,
            }));
        }
    }

    /// Put the next queued repeat (retransmit flag set) in `out`; its stream index.
    fn next_repeat(&mut self) -> Option<u16> {
        while self.repeat_from < self.stations.len() {
            let i = self.repeat_from;
            let Some(r) = self.stations[i].repeats.as_mut() else {
                self.repeat_from += 1;
                continue;
            };
            let Some(rep) = r.next_repeat() else {
                self.repeat_from += 1;
                continue;
            };
            self.out.clear();
            self.shared.clear();
            self.out.extend_from_slice(rep);
            if let Some(flags) = self.out.get_mut(5) {
                *flags |= 1;
            }
            if self.loss.lose() {
                continue;
            }
            return Some(i as u16);
        }
        None
    }

    /// Skip `n` frames of station `i` whose time has passed: they are never sent, as a backend
    /// that lost them, and take their sequence numbers along (a receiver counts them lost).
    fn skip_overdue(&mut self, i: usize, n: u64) {
        let st = &mut self.stations[i];
        let mut skipped = 0;
        while skipped < n {
            if st.source.paused() || st.source.next_frame().is_none() {
                st.done = !st.source.paused();
                break;
            }
            skipped += 1;
        }
        if self.cfg.format == SeqFormat::Jive5ab {
            self.port_seq = self.port_seq.wrapping_add(skipped);
        } else {
            st.seq = st.seq.wrapping_add(skipped);
        }
        st.skipped_late += skipped;
        st.schedule.on_skipped(skipped);
        if skipped < n && !st.done {
            // A live source has nothing more now: its schedule moves past what was asked.
            st.schedule.on_skipped(n - skipped);
        }
    }

    /// Frame up to `burst` frames of station `i` into `out` (less those the injected loss takes);
    /// returns how many frames were taken from the source and the datagram size. A source that
    /// shares its frames gets only their prefixes framed into `out`, the frames kept in
    /// `shared` (sent from where they lie); the repeat buffer, if any, keeps a copy.
    fn frame_batch(&mut self, i: usize, now: Instant) -> Result<(u64, usize), SenderError> {
        let burst = self.burst();
        let format = self.cfg.format;
        let session = self.cfg.session;
        let pre = format.prefix_len();
        let st = &mut self.stations[i];
        self.out.clear();
        self.shared.clear();
        let gather = st.source.shares_frames();
        let mut segment = 0;
        let mut taken = 0u64;
        while taken < burst {
            if st.source.paused() {
                // A live source ran dry mid-batch: send what there is.
                break;
            }
            if taken > 0 && st.schedule.batches_only_due() && st.schedule.next_deadline() > now {
                break;
            }
            // jive5ab's udps numbers the datagrams arriving at one port: with several stations
            // to one destination they share one sequence (each its own would look like 2^64
            // losses to jive5ab). Native numbers each stream apart (it carries the stream index).
            let seq = if format == SeqFormat::Jive5ab {
                self.port_seq
            } else {
                st.seq
            };
            let p = NativePrefix {
                retransmit: false,
                stream: i as u16,
                seq,
                frames_per_second: st.announced.0,
                threads: st.announced.1,
                session,
            };
            let shared = if gather {
                let Some(frame) = st.source.next_shared_frame() else {
                    st.done = true;
                    break;
                };
                encode_data(format, &p, &[], &mut self.scratch);
                if st.repeats.is_some() {
                    // The repeat buffer keeps whole datagrams: the one copy ARQ costs.
                    self.scratch.extend_from_slice(&frame);
                }
                Some(frame)
            } else {
                let Some(frame) = st.source.next_frame() else {
                    st.done = true;
                    break;
                };
                let add = frame.add_seconds;
                encode_data(format, &p, frame.bytes, &mut self.scratch);
                if let Some(f) = self.scratch.get_mut(pre..) {
                    advance_time(f, add)?;
                }
                None
            };
            taken += 1;
            let d = &self.scratch;
            let len = pre + shared.as_ref().map_or(d.len() - pre.min(d.len()), Bytes::len);
            st.frames += 1;
            st.bytes += len as u64;
            if let Some(r) = st.repeats.as_mut() {
                r.on_sent(seq, d);
            }
            if format == SeqFormat::Jive5ab {
                self.port_seq = seq.wrapping_add(1);
            } else {
                st.seq = seq.wrapping_add(1);
            }
            if self.loss.lose() {
                st.injected += 1;
                continue;
            }
            segment = len;
            match shared {
                Some(frame) => {
                    self.out.extend_from_slice(d.get(..pre).unwrap_or_default());
                    self.shared.push(frame);
                }
                None if burst == 1 => std::mem::swap(&mut self.out, &mut self.scratch),
                None => self.out.extend_from_slice(d),
            }
        }
        Ok((taken, segment))
    }

    /// The batch the last [`Sender::poll_transmit`] returned has been handed to the socket at
    /// `now` (read after the send call returned): its departure advances the station's schedule
    /// and is recorded in the gap and lateness histograms. Without this call the next
    /// `poll_transmit` stamps it with its own `now` (what a simulation wants).
    pub fn on_transmitted(&mut self, now: Instant) {
        // The frames sent go back to their buffers' owner now, not at the next batch.
        self.shared.clear();
        if let Some((i, taken)) = self.unstamped.take() {
            self.record_departure(i, now, taken);
        }
    }

    /// `taken` frames of station `i` left at `now`: advance its schedule, record lateness and gap.
    fn record_departure(&mut self, i: usize, now: Instant, taken: u64) {
        let st = &mut self.stations[i];
        let late = st.schedule.on_sent_batch(now, taken as usize);
        st.lateness.record((late.as_nanos() as u64).max(1));
        if let Some(prev) = st.last_send {
            st.gaps
                .record((now.saturating_duration_since(prev).as_nanos() as u64).max(1));
        }
        st.last_send = Some(now);
        st.first_send.get_or_insert(now);
    }

    /// Datagrams from the receiver that were not valid NAKs for a stream with ARQ.
    pub fn rejected_control(&self) -> u64 {
        self.rejected_control
    }

    /// Every datagram the destination sent back ([`Sender::handle_nak`] calls).
    pub fn returned_datagrams(&self) -> u64 {
        self.returned
    }

    /// Repeat counters of all stations together; `None` without ARQ.
    pub fn arq_stats(&self) -> Option<RetransmitStats> {
        let mut arq: Option<RetransmitStats> = None;
        for r in self.stations.iter().filter_map(|s| s.repeats.as_ref()) {
            arq.get_or_insert_with(Default::default).add(r.stats());
        }
        arq
    }

    /// Seconds from the first departure to the last, over all stations.
    pub fn duration_s(&self) -> f64 {
        let first = self.stations.iter().filter_map(|s| s.first_send).min();
        let last = self.stations.iter().filter_map(|s| s.last_send).max();
        match (first, last) {
            (Some(f), Some(l)) => l.saturating_duration_since(f).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Each station's results so far (loops and underruns as the sources counted them; garbage
    /// skipped in a file is the reader's to add).
    pub fn station_results(&self) -> Vec<SentStation> {
        self.stations
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let span = match (st.first_send, st.last_send) {
                    (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
                    _ => 0.0,
                };
                let data_bits =
                    (st.frames.saturating_sub(st.schedule.frames_per_release())) as f64 * st.spec.data_len as f64 * 8.0;
                SentStation {
                    file: st.spec.name.clone(),
                    station: st.spec.station_id.to_string(),
                    stream: i as u16,
                    frames_per_second: st.spec.fps,
                    threads: st.spec.threads,
                    frame_len: st.spec.frame_len,
                    rate_bps: st.spec.rate_bps,
                    spacing_us: st.spec.data_len as f64 * 8.0 / st.spec.rate_bps.get() as f64 * 1e6,
                    frames_sent: st.frames,
                    bytes_sent: st.bytes,
                    injected_drops: st.injected,
                    achieved_rate_bps: if span > 0.0 { data_bits / span } else { 0.0 },
                    loops: st.source.loops(),
                    source_underruns: st.source.underruns(),
                    garbage_bytes: 0,
                    departure_gap_ns: st.gaps.summary(DEFAULT_MAX_BUCKETS),
                    lateness_ns: st.lateness.summary(DEFAULT_MAX_BUCKETS),
                    slips: st.schedule.slips(),
                    slipped_s: st.schedule.slipped_total().as_secs_f64(),
                    skipped_late: st.skipped_late,
                }
            })
            .collect()
    }
}

/// The stations' results of several senders that each sent a share of every station's threads
/// (the boards of one backend, each its own socket): frames, bytes and drops add up, the
/// departure histograms are merged, the achieved rate is over the first to the last departure
/// of any board, the rate asked for is the boards' shares added up. Station `i` is stream `i` of
/// every sender; `None` without senders.
pub fn combined_results<P: Schedule>(boards: &[&Sender<P>]) -> Option<Vec<SentStation>> {
    let (first, rest) = boards.split_first()?;
    let mut out = first.station_results();
    for (i, r) in out.iter_mut().enumerate() {
        let txs = || boards.iter().filter_map(move |b| b.stations.get(i));
        let (mut gaps, mut lateness) = (Hist::new(), Hist::new());
        for st in txs() {
            gaps.merge(&st.gaps);
            lateness.merge(&st.lateness);
        }
        for b in rest {
            if let Some(o) = b.station_results().get(i) {
                r.frames_sent += o.frames_sent;
                r.bytes_sent += o.bytes_sent;
                r.injected_drops += o.injected_drops;
                r.loops = r.loops.max(o.loops);
                r.source_underruns += o.source_underruns;
                r.slips += o.slips;
                r.slipped_s += o.slipped_s;
                r.skipped_late += o.skipped_late;
                r.rate_bps =
                    vdif::BitRate::new(r.rate_bps.get().saturating_add(o.rate_bps.get())).unwrap_or(r.rate_bps);
            }
        }
        let span = match (
            txs().filter_map(|s| s.first_send).min(),
            txs().filter_map(|s| s.last_send).max(),
        ) {
            (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let data_len = first.stations.get(i).map_or(0, |s| s.spec.data_len);
        let last_release: u64 = txs().map(|s| s.schedule.frames_per_release()).sum();
        let data_bits = r.frames_sent.saturating_sub(last_release) as f64 * data_len as f64 * 8.0;
        r.achieved_rate_bps = if span > 0.0 { data_bits / span } else { 0.0 };
        r.spacing_us = data_len as f64 * 8.0 / r.rate_bps.get() as f64 * 1e6;
        r.departure_gap_ns = gaps.summary(DEFAULT_MAX_BUCKETS);
        r.lateness_ns = lateness.summary(DEFAULT_MAX_BUCKETS);
    }
    Some(out)
}

/// What one sender (one socket) handed out over all its stations: frames, datagram bytes, data
/// bits per second from its first departure to its last.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SenderTotals {
    /// Frames handed to the socket (injected drops included).
    pub frames: u64,
    /// Datagram bytes.
    pub bytes: u64,
    /// Achieved data rate, b/s.
    pub achieved_rate_bps: f64,
    /// Timeline slips of all its stations.
    pub slips: u64,
}

impl<P: Schedule> Sender<P> {
    /// This sender's totals over its stations.
    pub fn totals(&self) -> SenderTotals {
        let first = self.stations.iter().filter_map(|s| s.first_send).min();
        let last = self.stations.iter().filter_map(|s| s.last_send).max();
        let span = match (first, last) {
            (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let bits: f64 = self
            .stations
            .iter()
            .map(|s| s.frames.saturating_sub(s.schedule.frames_per_release()) as f64 * s.spec.data_len as f64 * 8.0)
            .sum();
        SenderTotals {
            frames: self.stations.iter().map(|s| s.frames).sum(),
            bytes: self.stations.iter().map(|s| s.bytes).sum(),
            achieved_rate_bps: if span > 0.0 { bits / span } else { 0.0 },
            slips: self.stations.iter().map(|s| s.schedule.slips()).sum(),
        }
    }
}

#[cfg(test)]
mod tests;
