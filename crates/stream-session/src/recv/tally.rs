//! What a receiver tells: a live line per interval (the interval's counts against the totals
//! at the line before), the counts an observer takes, and the report at the end.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use netio::counters::{clock_ticks_per_second, read_process_cpu, ProcessCpu, UdpCounters};
use recording::write::WriterPlacement;
use stream::results::RecvStatus;
use stream::Receiver;

use super::sink::Sink;
use super::{drops, RecvConfig};
use crate::report::RecvReport;

/// One live line: counts over the last interval and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveLine {
    /// Seconds since the first datagram.
    pub elapsed_s: f64,
    /// Datagram bytes per second over the interval, bits.
    pub rate_bps: f64,
    /// Frames written in the interval.
    pub frames: u64,
    /// Filled (invalid) frames written in the interval.
    pub filled: u64,
    /// Datagrams rejected in the interval.
    pub rejected: u64,
    /// Datagrams the kernel dropped at our socket (its buffer full) in the interval.
    pub kernel_drops: u64,
    /// Frames that arrived after a later frame of their thread, in the interval (placed all the
    /// same).
    pub reordered: u64,
    /// Frames that came after their time was written, in the interval (dropped).
    pub late: u64,
    /// Second copies, in the interval (dropped).
    pub duplicates: u64,
    /// Second copies whose bytes differed from the kept first copy, in the interval (dropped).
    pub duplicate_mismatch: u64,
    /// Times another source took a station over (a sender restarted), in the interval.
    pub sender_changes: u64,
    /// Stations seen.
    pub stations: usize,
    /// Time the receiver waited for the file writer in the interval (its buffer was full).
    pub writer_stall: Duration,
    /// Disks that have left a multi-disk recording (a write error), in all.
    pub disks_dropped: u32,
}

/// The counts so far, for an observer.
pub(super) fn status(line: &LiveLine, rx: &Receiver, sink: &Sink, dropped: u64, naks_sent: u64) -> RecvStatus {
    let (stall, stalls) = sink.stalled();
    RecvStatus {
        elapsed_s: line.elapsed_s,
        rate_bps: line.rate_bps,
        datagrams: *rx.counters(),
        stations: rx.summaries(),
        frames_written: sink.frames(),
        frames_filled: sink.filled(),
        kernel_drops: dropped,
        writer_stall_s: stall.as_secs_f64(),
        writer_stalls: stalls,
        naks_sent,
        disks_dropped: line.disks_dropped.into(),
        frames_not_written: sink.not_written(),
        live: sink.live_status(),
    }
}

/// Totals at the last live line, so the next shows the interval's differences.
#[derive(Default)]
pub(super) struct LiveTally {
    /// Datagram bytes since the last line.
    pub(super) bytes: u64,
    pub(super) frames: u64,
    pub(super) filled: u64,
    pub(super) rejected: u64,
    /// Counted from the socket's creation: drops while the output was set up are this stream's
    /// too.
    pub(super) drops: u64,
    pub(super) changes: u64,
    pub(super) win: stream::WindowStats,
    pub(super) stall: Duration,
    /// Arrival time less VDIF time of the first datagram of each batch, ns (the whole run).
    pub(super) data_age: histogram::Hist,
    /// Which socket each sender's datagrams came to (several `--listen`), for its NAKs.
    pub(super) routes: Vec<(SocketAddr, usize)>,
    /// The most bytes seen queued in a receive socket (the whole run).
    pub(super) queue_peak: Option<u64>,
}

impl LiveTally {
    /// Note that `from` sends to socket `i` (bounded: the oldest of 1024 senders is forgotten).
    pub(super) fn route(&mut self, from: SocketAddr, i: usize) {
        match self.routes.iter_mut().find(|(a, _)| *a == from) {
            Some(r) => r.1 = i,
            None => {
                if self.routes.len() >= 1024 {
                    self.routes.remove(0);
                }
                self.routes.push((from, i));
            }
        }
    }

    /// The line for the interval ending `now`; the totals become the next line's base.
    pub(super) fn line(
        &mut self,
        now: Instant,
        first: Option<Instant>,
        interval: Duration,
        rx: &Receiver,
        sink: &mut Sink,
        dropped: u64,
    ) -> LiveLine {
        let changes = rx.sender_changes();
        let rejected = rx.counters().rejected();
        let win = rx.window_totals();
        let (stall, _) = sink.stalled();
        let line = LiveLine {
            elapsed_s: first.map_or(0.0, |f| (now - f).as_secs_f64()),
            rate_bps: self.bytes as f64 * 8.0 / interval.as_secs_f64(),
            frames: sink.frames() - self.frames,
            filled: sink.filled() - self.filled,
            rejected: rejected - self.rejected,
            kernel_drops: dropped.saturating_sub(self.drops),
            stations: rx.station_count(),
            reordered: win.reordered - self.win.reordered,
            late: win.late - self.win.late,
            duplicates: win.duplicates - self.win.duplicates,
            duplicate_mismatch: win.duplicate_mismatch - self.win.duplicate_mismatch,
            sender_changes: changes - self.changes,
            writer_stall: stall.saturating_sub(self.stall),
            disks_dropped: sink.disks_dropped(),
        };
        *self = LiveTally {
            bytes: 0,
            frames: sink.frames(),
            filled: sink.filled(),
            rejected,
            drops: dropped,
            changes,
            win,
            stall,
            data_age: std::mem::take(&mut self.data_age),
            routes: std::mem::take(&mut self.routes),
            queue_peak: self.queue_peak,
        };
        line
    }
}

/// What the loop leaves for the report.
pub(super) struct RunEnd {
    pub(super) started: Instant,
    pub(super) first: Option<Instant>,
    pub(super) last_rx: Instant,
    pub(super) udp0: UdpCounters,
    pub(super) cpu0: ProcessCpu,
    pub(super) naks_sent: u64,
    pub(super) stopped_by: String,
    pub(super) data_age: histogram::Hist,
    pub(super) dropped_after_last: u64,
    pub(super) receive_calls: u64,
    pub(super) queue_peak: Option<u64>,
}

impl RunEnd {
    /// Close the output (waiting for the writer) and build the report.
    pub(super) fn report(
        self,
        cfg: &RecvConfig,
        (socks, grants, batch): (
            &[std::net::UdpSocket],
            Vec<netio::BufferGrant>,
            &netio::batch::RecvBatch,
        ),
        rx: &Receiver,
        mut sink: Sink,
    ) -> RecvReport {
        let (writer_stall, writer_stalls) = sink.stalled();
        let write_buffer_peak = sink.backlog_peak();
        let (out, live) = sink.finish(cfg.live.as_ref().map_or(Duration::ZERO, |l| l.drain));
        let out_direct = out.recording.as_ref().is_some_and(|r| r.direct_io);
        let wall = self.started.elapsed().as_secs_f64();
        // After finish(): the writer process has been waited for, so its CPU is in ours.
        let cpu1 = read_process_cpu().unwrap_or_default();
        let duration_s = self.first.map_or(0.0, |f| (self.last_rx - f).as_secs_f64());
        let c = *rx.counters();
        let cpu0 = self.cpu0;
        let socket_drops = drops(socks, batch);
        let out_dir = output_name(cfg);
        let records = out_dir.is_some();
        RecvReport {
            listen: socks
                .iter()
                .map(|s| s.local_addr().map(|a| a.to_string()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", "),
            format: cfg.receiver.format,
            out_dir,
            duration_s,
            datagrams: c,
            first_problem: rx.first_problem().map(str::to_string),
            stations: rx.summaries(),
            files: out.files,
            recording: out.recording,
            frames_not_written: out.not_written,
            write_error: out.error,
            received_rate_bps: if duration_s > 0.0 {
                c.bytes as f64 * 8.0 / duration_s
            } else {
                0.0
            },
            rcvbuf: grants.into_iter().next().unwrap_or_default(),
            udp: netio::read_udp_counters().unwrap_or_default().delta(&self.udp0),
            socket_drops,
            dropped_after_last: self.dropped_after_last,
            gro_most_coalesced: u32::try_from(batch.most_coalesced()).unwrap_or(u32::MAX),
            receive_calls: self.receive_calls,
            cpu: cpu1.share_since(&cpu0, Duration::from_secs_f64(wall), clock_ticks_per_second()),
            writer_cpu: (matches!(cfg.writer, WriterPlacement::ChildProcess { .. }) && records)
                .then(|| cpu1.children_share_since(&cpu0, Duration::from_secs_f64(wall), clock_ticks_per_second())),
            naks_sent: self.naks_sent,
            writer_stall_s: writer_stall.as_secs_f64(),
            writer_stalls,
            write_buffer: records.then_some(cfg.write_buffer),
            write_buffer_peak: write_buffer_peak.filter(|_| records),
            socket_queue_peak: self.queue_peak,
            direct_io: match &cfg.recording {
                Some(_) => out_direct,
                None => cfg.out_dir.is_some() && cfg.direct_io,
            },
            stopped_by: self.stopped_by,
            data_age_ns: (self.data_age.count() > 0).then(|| self.data_age.summary(histogram::DEFAULT_MAX_BUCKETS)),
            live,
        }
    }
}

/// Where the receiver records: its directory, or its disks; `None` for the memory sink.
fn output_name(cfg: &RecvConfig) -> Option<String> {
    match (&cfg.recording, &cfg.out_dir) {
        (Some(r), _) => Some(r.disks_joined(",")),
        (None, Some(d)) => Some(d.path().display().to_string()),
        (None, None) => None,
    }
}
