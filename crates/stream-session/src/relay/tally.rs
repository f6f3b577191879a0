//! What a relay tells: a live line per interval (the interval's counts against the totals at
//! the line before), the counts an observer takes, and the report at the end.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use netio::counters::{clock_ticks_per_second, read_process_cpu, ProcessCpu};
use recording::write::WriterPlacement;
use stream::relay::Relay;
use stream::results::{RelayReport, RelayStatus, TeeReport};

use super::{Marks, ReaderError, RelayRunConfig};

/// One live line: the interval's figures and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RelayLiveLine {
    /// Seconds since the first datagram.
    pub elapsed_s: f64,
    /// Input datagram bytes per second over the interval, bits.
    pub in_rate_bps: f64,
    /// Frames taken in the interval.
    pub frames_in: u64,
    /// Frames sent in the interval (first transmissions).
    pub frames_out: u64,
    /// Frames missing from the input in the interval.
    pub lost_in_input: u64,
    /// Frames dropped at a full buffer in the interval.
    pub overflow_dropped: u64,
    /// Datagrams refused in the interval.
    pub rejected: u64,
    /// Datagrams the kernel dropped at the input sockets in the interval.
    pub kernel_drops: u64,
    /// Datagrams read but dropped in the interval: the hand-over to the relay thread was full.
    pub handover_dropped: u64,
    /// Frames waiting now.
    pub queued: u64,
    /// Senders seen.
    pub senders: u64,
}

/// The counts so far, for an observer.
pub(super) fn relay_status(line: &RelayLiveLine, relay: &Relay, (drops, handover): (u64, u64)) -> RelayStatus {
    RelayStatus {
        elapsed_s: line.elapsed_s,
        in_rate_bps: line.in_rate_bps,
        datagrams: *relay.counters(),
        senders: relay.senders(),
        other_senders: relay.other_senders(),
        stations: relay.stations(),
        output: relay.output(),
        arq: relay.arq_stats(),
        kernel_drops: drops,
        handover_dropped: handover,
        queued: line.queued,
    }
}

/// The clock and the host's counters when the run started.
pub(super) struct Baseline {
    pub(super) started: Instant,
    pub(super) cpu0: ProcessCpu,
    pub(super) udp0: netio::UdpCounters,
}

impl Baseline {
    pub(super) fn now() -> Baseline {
        Baseline {
            started: Instant::now(),
            cpu0: read_process_cpu().unwrap_or_default(),
            udp0: netio::read_udp_counters().unwrap_or_default(),
        }
    }
}

/// What the run ends with, for its report.
pub(super) struct RelayEnd {
    pub(super) base: Baseline,
    pub(super) marks: Marks,
    pub(super) readers: Vec<UdpSocket>,
    pub(super) socket_drops: u64,
    pub(super) handover_dropped: u64,
    pub(super) grants: Vec<netio::BufferGrant>,
    pub(super) reader_error: Option<ReaderError>,
    pub(super) stopped_by: &'static str,
}

impl RelayEnd {
    pub(super) fn report(
        self,
        cfg: &RelayRunConfig,
        relay: &Relay,
        send_would_block: u64,
        out: recording::write::SinkOutcome,
    ) -> RelayReport {
        let (base, t) = (&self.base, &self.marks);
        let tee_dir = tee_dir(cfg);
        let tees = tee_dir.is_some();
        let wall = base.started.elapsed();
        let cpu1 = read_process_cpu().unwrap_or_default();
        let duration_s = t.first.map_or(0.0, |f| (t.last_in - f).as_secs_f64());
        RelayReport {
            listen: self
                .readers
                .iter()
                .map(|r| r.local_addr().map(|a| a.to_string()).unwrap_or_default())
                .collect(),
            to: cfg.to.to_string(),
            input_format: cfg.relay.input,
            output_format: cfg.relay.output,
            duration_s,
            datagrams: *relay.counters(),
            first_problem: relay
                .first_problem()
                .map(str::to_string)
                .or(self.reader_error.map(|e| e.to_string())),
            untracked_datagrams: relay.untracked_datagrams(),
            senders: relay.senders(),
            other_senders: relay.other_senders(),
            stations: relay.stations(),
            output: relay.output(),
            arq: relay.arq_stats(),
            returned_datagrams: relay.returned_datagrams(),
            rejected_control: relay.rejected_control(),
            tee: tee_dir.map(|dir| TeeReport {
                dir,
                files: out.files,
                recording: out.recording,
                frames_not_written: out.not_written,
                write_error: out.error,
            }),
            socket_drops: self.socket_drops,
            handover_dropped: self.handover_dropped,
            rcvbuf: self.grants,
            send_would_block,
            udp: netio::read_udp_counters().unwrap_or_default().delta(&base.udp0),
            cpu: cpu1.share_since(&base.cpu0, wall, clock_ticks_per_second()),
            writer_cpu: (tees && matches!(cfg.writer, WriterPlacement::ChildProcess { .. }))
                .then(|| cpu1.children_share_since(&base.cpu0, wall, clock_ticks_per_second())),
            stopped_by: self.stopped_by.to_string(),
            live_out: None,
            live_out_error: None,
        }
    }
}

/// Where the tee records: its directory, or its disks.
fn tee_dir(cfg: &RelayRunConfig) -> Option<String> {
    match (&cfg.tee, &cfg.tee_recording) {
        (Some(d), _) => Some(d.display().to_string()),
        (None, Some(r)) => Some(r.disks_joined(",")),
        (None, None) => None,
    }
}

/// Totals at the last live line.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) bytes: u64,
    pub(super) totals: stream::relay::RelayTotals,
    pub(super) rejected: u64,
    pub(super) drops: u64,
    pub(super) handover: u64,
}

impl Tally {
    pub(super) fn line(
        &mut self,
        now: Instant,
        first: Option<Instant>,
        interval: Duration,
        relay: &Relay,
        (drops, handover): (u64, u64),
    ) -> RelayLiveLine {
        let t = relay.totals();
        let rejected = relay.counters().rejected();
        let line = RelayLiveLine {
            elapsed_s: first.map_or(0.0, |f| now.saturating_duration_since(f).as_secs_f64()),
            in_rate_bps: self.bytes as f64 * 8.0 / interval.as_secs_f64(),
            frames_in: t.frames_in - self.totals.frames_in,
            frames_out: t.frames_out - self.totals.frames_out,
            lost_in_input: t.lost_in_input.saturating_sub(self.totals.lost_in_input),
            overflow_dropped: t.overflow_dropped - self.totals.overflow_dropped,
            rejected: rejected - self.rejected,
            kernel_drops: drops.saturating_sub(self.drops),
            handover_dropped: handover.saturating_sub(self.handover),
            queued: t.queued,
            senders: relay.sender_count(),
        };
        *self = Tally {
            bytes: 0,
            totals: t,
            rejected,
            drops,
            handover,
        };
        line
    }
}
