//! A station of the receiver: its boards, its reorder window and its counts, and how a frame
//! goes into it (checked against the rate its threads were given, see [`crate::rate_check`]).

use std::time::Instant;

use vdif::{FrameRate, StationId, VdifHeader};

use super::admission::Held;
use super::boards::Member;
use super::{ReceiverConfig, SenderChange, StationSummary};
use crate::arq::NakScheduler;
use crate::rate_check::{RateCheck, Verdict};
use crate::window::{FrameSink, Placement, StationWindow, WindowConfig};

/// Largest reorder window per station (memory), bytes.
const MAX_WINDOW_BYTES: u64 = 1 << 30;

/// A station: its boards, its window, its counts.
pub(super) struct Station {
    pub(super) key: u32,
    /// The sources feeding it (see the `boards` module): never empty; the first is the one whose
    /// run made the station, and the one NAKs go to (native framing has one sender per stream).
    pub(super) members: Vec<Member>,
    /// When its first frame arrived (its source's, held while it was being admitted).
    pub(super) first_seen: Instant,
    /// Its latest frame from any of its sources.
    pub(super) last_seen: Instant,
    pub(super) stream: Option<u16>,
    pub(super) station_id: StationId,
    pub(super) window: StationWindow,
    pub(super) arq: Option<NakScheduler>,
    pub(super) retransmits: u64,
    pub(super) changes: u64,
    pub(super) change_log: Vec<SenderChange>,
    pub(super) lost_at_end: u64,
    /// Its rate per thread was split from the station's (a VSI-S mode's): checked against the
    /// frames' own count at its first second boundaries.
    pub(super) rate_check: Option<RateCheck>,
    /// The station's rate (all threads) its rate per thread was split from, if it was.
    pub(super) split_from: Option<u32>,
    /// Since it went quiet ([`super::Receiver::fill_silence`]): its latest frame's arrival then,
    /// and its newest slot then.
    pub(super) silence: Option<(Instant, u64)>,
    /// Its window was written out while quiet, since its latest frame's arrival then.
    pub(super) flushed: Option<Instant>,
}

/// Window shape of a stream of `fps` frames a second per thread in `threads` threads of
/// `frame_len` bytes: the reorder latency's worth of frames, within [`MAX_WINDOW_BYTES`].
pub(super) fn window_config(cfg: &ReceiverConfig, fps: FrameRate, threads: u16, frame_len: usize) -> WindowConfig {
    let slots_per_s = f64::from(fps) * f64::from(threads);
    let window = (cfg.latency.as_secs_f64() * slots_per_s)
        .ceil()
        .clamp(4.0, (MAX_WINDOW_BYTES as f64 / frame_len as f64).max(4.0)) as u64;
    WindowConfig {
        frames_per_second: fps,
        threads,
        window,
        max_fill: (cfg.max_fill.as_secs_f64() * slots_per_s).ceil() as u64,
        confirm: cfg.confirm,
    }
}

/// Give station `st` another rate per thread and thread count (see [`crate::rate_check`]): what its
/// window holds is written as it was placed, and a window of the new shape goes on from the
/// frame `header` (the first of a second), in the same output (time continues). What to tell
/// the operator.
fn reshape(
    st: &mut Station,
    cfg: &ReceiverConfig,
    fps: FrameRate,
    threads: u16,
    header: &VdifHeader,
    sink: &mut impl FrameSink,
) -> String {
    let old = *st.window.config();
    let mut window = StationWindow::new(window_config(cfg, fps, threads, st.window.frame_len()), header)
        .with_format(cfg.frame_format);
    st.window.finish(sink);
    window.take_over_from(&st.window);
    st.window = window;
    crate::rate_check::corrected(
        &st.station_id.to_string(),
        (old.frames_per_second, old.threads),
        (fps, threads),
        header.seconds,
    )
}

/// One frame of `member`, an accepted source of station `st`, which arrived at `arrived`, into
/// its window at `now`; what to tell the operator, if the frame showed the station's rate per
/// thread wrong (see [`crate::rate_check`]).
#[allow(clippy::too_many_arguments)] // one frame's fields, passed through
pub(super) fn feed(
    st: &mut Station,
    cfg: &ReceiverConfig,
    member: usize,
    arrived: Instant,
    now: Instant,
    seq: Option<u64>,
    retransmit: bool,
    header: &VdifHeader,
    frame: &[u8],
    sink: &mut impl FrameSink,
) -> Option<String> {
    let mut said = None;
    if let Some(check) = st.rate_check.as_mut() {
        match check.observe(header, arrived) {
            Verdict::Wait => {}
            Verdict::Keep => st.rate_check = None,
            Verdict::Rate { fps, threads } => {
                st.rate_check = None;
                said = Some(reshape(st, cfg, fps, threads, header, sink));
            }
        }
    }
    st.members[member].frames += 1;
    st.members[member].meter.frame(arrived);
    let placement = st.window.push_at(arrived, header, frame, seq, sink);
    // Earlier frames this one confirmed as the stream's start (or a jump's) were placed with it;
    // each is numbered for the board sending its thread (their numbers are that board's).
    for (n, slot) in st.window.take_confirmed() {
        let thread = st.window.thread_of(slot);
        let owner = thread.and_then(|id| st.members.iter().position(|m| m.threads.contains(id)));
        numbered(st, owner.unwrap_or(member), now, n, slot);
    }
    if let Placement::Placed { slot, .. } = placement {
        if let Some(seq) = seq {
            numbered(st, member, now, seq, slot);
        }
        if retransmit {
            st.retransmits += 1;
        }
    }
    said
}

/// [`feed`] of frame `h`, held while its source was admitted.
pub(super) fn feed_held(
    st: &mut Station,
    cfg: &ReceiverConfig,
    member: usize,
    h: &Held,
    now: Instant,
    sink: &mut impl FrameSink,
) -> Option<String> {
    feed(
        st,
        cfg,
        member,
        h.at,
        now,
        h.seq,
        h.retransmit,
        &h.header,
        &h.frame,
        sink,
    )
}

/// Frame `seq` of `member` of station `st` was placed at `slot`: its number counts for that
/// source's range and for ARQ.
fn numbered(st: &mut Station, member: usize, now: Instant, seq: u64, slot: u64) {
    st.members[member].numbered(seq);
    if let Some(arq) = st.arq.as_mut() {
        arq.on_frame(now, seq, slot);
    }
}

pub(super) fn finish_station(st: &mut Station, sink: &mut impl FrameSink) {
    st.window.finish(sink);
    if let (Some(arq), Some(base)) = (st.arq.as_mut(), st.window.base()) {
        // Everything still missing is now written invalid.
        arq.expire_before(base);
    }
}

pub(super) fn summarize(st: &Station) -> StationSummary {
    let w = *st.window.stats();
    let lost = w.filled_lost() + st.lost_at_end;
    let total = w.written_valid + lost;
    let f = if total == 0 { 0.0 } else { lost as f64 / total as f64 };
    let c = st.window.config();
    let first = &st.members[0];
    StationSummary {
        station: st.station_id.to_string(),
        station_id: st.station_id,
        stream: st.stream,
        source: first.source.to_string(),
        session: st.stream.map(|_| first.session),
        frames_per_second: c.frames_per_second.get(),
        threads: c.threads,
        frame_len: st.window.frame_len(),
        window: w,
        seq_first: first.seq_first,
        seq_last: first.seq_last,
        retransmits_received: st.retransmits,
        arq: st.arq.as_ref().map(|a| a.stats()),
        lost_at_end: st.lost_at_end,
        loss_fraction: f,
        snr_factor: (1.0 - f).sqrt(),
        boards: st.members.iter().map(|m| m.summary(st.stream.is_some())).collect(),
        sender_changes: st.changes,
        sender_change_log: st.change_log.clone(),
        retired: false,
        refused_sources: Vec::new(),
    }
}
