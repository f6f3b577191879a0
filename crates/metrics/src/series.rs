//! Every [`Status`] as named, labelled samples: the metric names a Prometheus server stores and
//! Grafana queries. Counters are totals since the command (or the daemon's transfer) started —
//! a restart shows as a counter reset, which `rate()` and `increase()` handle. Every sample
//! carries `source` (the command, or the daemon's transfer kind).
//!
//! The names follow the Prometheus conventions: `evlbi_` prefix, base units (seconds, bytes,
//! bits per second), `_total` on counters (added by the OpenMetrics encoder).

use serde::Serialize;
use stream::results::{RecvStatus, RelayStatus, SendStatus};

use crate::status::Status;
use linkemu::LinkemuStatus;
use probe::results::ProbeServerStatus;
use transfer::results::{TransferRecvStatus, TransferSendStatus};
use vsis::status::ServeStatus;

/// Counter or gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Kind {
    /// Only grows (resets when the command restarts).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A metric: its name (without `_total`), help and kind.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Metric {
    /// Name, `evlbi_…`.
    pub name: &'static str,
    /// One line for `# HELP`.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
}

/// A sample's value: counts stay integers on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Value {
    /// A count.
    Int(u64),
    /// A rate, a fraction, seconds.
    Float(f64),
}

/// One sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Which metric.
    pub metric: &'static Metric,
    /// Its labels (`source` first).
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: Value,
}

macro_rules! metrics {
    ($($id:ident $name:literal $kind:ident $help:literal;)*) => {
        $(
            #[doc = $help]
            pub static $id: Metric = Metric { name: $name, help: $help, kind: Kind::$kind };
        )*
        /// Every metric this crate exports, for documentation and tests.
        pub static ALL: &[&Metric] = &[$(&$id),*];
    };
}

metrics! {
    BUILD_INFO "evlbi_build_info" Gauge "Always 1; labels say the program and its version.";
    STREAM_FRAMES "evlbi_stream_frames" Counter "Frames received per station (first copies taken into the reorder window).";
    STREAM_FILLED "evlbi_stream_frames_filled" Counter "Frames written invalid in place of frames that never arrived in time.";
    STREAM_LOST "evlbi_stream_frames_lost" Counter "Frames lost per station: filled, plus those lost after the last frame received (evlbi? loss).";
    STREAM_REORDERED "evlbi_stream_frames_reordered" Counter "Frames that arrived after a later frame of their thread (placed all the same).";
    STREAM_LATE "evlbi_stream_frames_late" Counter "Frames that arrived after their time was written (dropped).";
    STREAM_DUPLICATE "evlbi_stream_frames_duplicate" Counter "Second copies of a frame (dropped).";
    STREAM_ARQ_REPAIRED "evlbi_stream_arq_repaired" Counter "Frames recovered by retransmission (ARQ) before their deadline.";
    STREAM_BYTES "evlbi_stream_bytes" Counter "Frame bytes received per station.";
    STREAM_LOSS "evlbi_stream_loss_fraction" Gauge "Data loss f per station: lost over lost plus received frames, since the start.";
    STREAM_SENDER_CHANGES "evlbi_stream_sender_changes" Counter "Times another source took a station over (a sender restarted).";
    STREAM_BOARD_FRAMES "evlbi_stream_board_frames" Counter "Datagrams per station and board (each source feeding it, its own threads) taken into its window.";
    STREAM_REFUSED_SOURCE "evlbi_stream_refused_source_datagrams" Counter "Datagrams per station and source refused as a board of it (beside a live board, beyond its threads, not in step with its boards), counted from its refusal.";
    STREAM_DATAGRAMS "evlbi_stream_datagrams" Counter "Datagrams received.";
    STREAM_DATAGRAM_BYTES "evlbi_stream_datagram_bytes" Counter "Datagram bytes received.";
    STREAM_REJECTED "evlbi_stream_datagrams_rejected" Counter "Datagrams refused, by reason.";
    STREAM_RATE "evlbi_stream_rate_bits_per_second" Gauge "Datagram bits per second received over the last interval.";
    STREAM_KERNEL_DROPS "evlbi_stream_kernel_drops" Counter "Datagrams the kernel dropped at the receive sockets (buffer full).";
    STREAM_FRAMES_WRITTEN "evlbi_stream_frames_written" Counter "Frames written to the recording, filled ones included.";
    STREAM_FRAMES_NOT_WRITTEN "evlbi_stream_frames_not_written" Counter "Frames that reached the receiver but no file or disk (a disk dropped mid-scan, a write error): lost, though the network delivered them.";
    STREAM_WRITER_STALL "evlbi_stream_writer_stall_seconds" Counter "Time the receiver waited for the file writer (its buffer full).";
    STREAM_WRITER_STALLS "evlbi_stream_writer_stalls" Counter "Times the receiver waited for the file writer.";
    STREAM_DISKS_DROPPED "evlbi_stream_disks_dropped" Gauge "Disks that have left the multi-disk recording (vbs, Mark6) after a write error; the scan goes on over the others.";
    STREAM_NAKS "evlbi_stream_naks_sent" Counter "NAK datagrams sent asking for repeats (ARQ).";
    LIVE_FRAMES_SENT "evlbi_live_frames_sent" Counter "Frames written to a correlator's reader (net2sfxc, --out sfxc:), filled ones included.";
    LIVE_FILLED_SENT "evlbi_live_filled_sent" Counter "Filled invalid frames written to a correlator's reader.";
    LIVE_BYTES_SENT "evlbi_live_bytes_sent" Counter "Bytes written to a correlator's reader.";
    LIVE_DROPPED "evlbi_live_frames_dropped" Counter "Frames a live output did not send, by reason (slow_reader: the reader took less than the station sent; no_reader; at_start: before a time step at a reader's start; behind: time went back).";
    LIVE_CONNECTED "evlbi_live_reader_connected" Gauge "1 while a correlator's reader is connected.";
    LIVE_CLIENTS "evlbi_live_readers" Counter "Readers connected, and refused (busy) or closed for a bad request.";
    LIVE_QUEUED "evlbi_live_queued_bytes" Gauge "Bytes queued for the reader.";
    STREAM_ARQ_NAKS "evlbi_stream_arq_naks" Counter "NAKs a sender or relay received.";
    STREAM_ARQ_RESENT "evlbi_stream_arq_resent" Counter "Frames a sender or relay sent again on NAK.";
    RELAY_SENDER_DATAGRAMS "evlbi_relay_sender_datagrams" Counter "Datagrams per input sender (backend board).";
    RELAY_SENDER_LOST "evlbi_relay_sender_lost" Counter "Sequence numbers missing per input sender.";
    RELAY_SENDER_REORDERED "evlbi_relay_sender_reordered" Counter "Datagrams per input sender below a sequence number already seen.";
    RELAY_FRAMES_IN "evlbi_relay_frames_in" Counter "Frames taken from the input per station.";
    RELAY_LOST_IN_INPUT "evlbi_relay_frames_lost_in_input" Counter "Frames missing from the input per station, by VDIF time.";
    RELAY_REORDERED_IN "evlbi_relay_frames_reordered_in" Counter "Frames that came after a later frame of their thread.";
    RELAY_OVERFLOW "evlbi_relay_frames_overflow_dropped" Counter "Frames dropped at the relay's full buffer.";
    RELAY_FRAMES_OUT "evlbi_relay_frames_out" Counter "Frames sent on per station (first transmissions).";
    RELAY_QUEUED "evlbi_relay_queued_frames" Gauge "Frames waiting to be sent.";
    RELAY_HANDOVER_DROPPED "evlbi_relay_handover_dropped" Counter "Datagrams the relay's receive thread read but dropped: its hand-over to the relay's thread was full (that thread held up longer than --buffer holds).";
    SEND_FRAMES "evlbi_send_frames" Counter "Frames handed to the socket per station (injected drops included).";
    SEND_BYTES "evlbi_send_bytes" Counter "Datagram bytes sent per station.";
    SEND_INJECTED "evlbi_send_injected_drops" Counter "Frames dropped on purpose (--inject-loss).";
    SEND_SLIPS "evlbi_send_slips" Counter "Times the sender fell more than --max-lag behind and gave time up.";
    SEND_RATE "evlbi_send_rate_bits_per_second" Gauge "Achieved data rate per station since the start.";
    SEND_SENDER_FRAMES "evlbi_send_sender_frames" Counter "Frames sent per sending socket (backend board).";
    TRANSFER_SESSIONS "evlbi_transfer_sessions" Counter "Transfer sessions, by outcome.";
    TRANSFER_FILES "evlbi_transfer_files" Counter "Files, by outcome.";
    TRANSFER_BYTES "evlbi_transfer_bytes" Counter "Bytes delivered (sender) or of verified files (receiver).";
    TRANSFER_TOTAL "evlbi_transfer_total_bytes" Gauge "Bytes of all files of the transfer.";
    TRANSFER_RETRANSMITTED "evlbi_transfer_retransmitted_bytes" Counter "Payload bytes sent again.";
    TRANSFER_RTT "evlbi_transfer_rtt_seconds" Gauge "Smoothed round-trip time.";
    TRANSFER_RATE "evlbi_transfer_rate_bits_per_second" Gauge "Pacing rate (sender) or the last file's goodput (receiver).";
    TRANSFER_DATAGRAMS "evlbi_transfer_datagrams" Counter "DATA datagrams received.";
    TRANSFER_DUPLICATES "evlbi_transfer_duplicate_datagrams" Counter "DATA datagrams repeating a chunk already held.";
    TRANSFER_REJECTED "evlbi_transfer_rejected_datagrams" Counter "Datagrams refused (bad MAC, foreign, oversized).";
    TRANSFER_ROUNDS "evlbi_transfer_rounds" Counter "Transfer rounds over all files.";
    PROBE_TRIALS "evlbi_probe_trials" Counter "Probe trials, by outcome.";
    PROBE_PACKETS "evlbi_probe_packets" Counter "Probe packets received (UDP trials).";
    PROBE_LOST "evlbi_probe_lost" Counter "Probe packets lost (UDP trials).";
    PROBE_TCP_BYTES "evlbi_probe_tcp_bytes" Counter "Bytes received in TCP tests.";
    PROBE_LOSS "evlbi_probe_last_loss_fraction" Gauge "The last UDP trial's loss fraction.";
    PROBE_RATE "evlbi_probe_last_rate_bits_per_second" Gauge "The last trial's user rate.";
    LINK_PACKETS "evlbi_linkemu_packets" Counter "Packets per direction, by what happened to them.";
    LINK_BYTES "evlbi_linkemu_bytes" Counter "Bytes per direction, received and forwarded.";
    SERVE_TRANSFER "evlbi_serve_transfer" Gauge "1 for the transfer evlbi serve is running (no_transfer when idle); runtime=NAME for each runtime besides the default.";
    SERVE_SCANS "evlbi_serve_scans" Counter "Scans recorded.";
    SERVE_STATEMENTS "evlbi_serve_statements" Counter "VSI-S statements answered, by outcome (ok: return code 0 or 1).";
    SERVE_OVERLONG "evlbi_serve_overlong_lines" Counter "VSI-S lines longer than the limit (dropped).";
    SERVE_CONNECTIONS "evlbi_serve_connections" Counter "VSI-S connections accepted.";
    SERVE_CONNECTIONS_REFUSED "evlbi_serve_connections_refused" Counter "VSI-S connections closed at once: the peer is neither loopback nor allowed (--vsi-allow).";
    SERVE_INTERNAL_ERRORS "evlbi_serve_internal_errors" Counter "VSI-S statements whose handling failed inside the daemon (a bug), answered with return code 4; the daemon went on.";
    SERVE_DISK_FREE "evlbi_serve_disk_free_bytes" Gauge "Free space of each set disk's file system.";
    SERVE_DISK_SIZE "evlbi_serve_disk_size_bytes" Gauge "Size of each set disk's file system.";
    SERVE_TIME_LEFT "evlbi_serve_time_left_seconds" Gauge "Time until the set disks are full (each file system counted once) at evlbi_serve_fill_rate_bits_per_second.";
    SERVE_FILL_RATE "evlbi_serve_fill_rate_bits_per_second" Gauge "Rate the set disks fill at: a running recording's measured rate after its first second, else the mode's (headers included).";
    SERVE_FILL_RATE_MEASURED "evlbi_serve_fill_rate_measured" Gauge "1 while evlbi_serve_fill_rate_bits_per_second is a running recording's measured rate, 0 while it is the mode's.";
}

/// Collects the samples of one source.
struct Out<'a> {
    source: &'a str,
    /// The source's own labels, after `source` on every sample.
    own: &'a [(&'static str, String)],
    out: &'a mut Vec<Sample>,
}

impl Out<'_> {
    fn int(&mut self, m: &'static Metric, labels: &[(&'static str, &str)], v: u64) {
        self.push(m, labels, Value::Int(v));
    }

    fn float(&mut self, m: &'static Metric, labels: &[(&'static str, &str)], v: f64) {
        if v.is_finite() {
            self.push(m, labels, Value::Float(v));
        }
    }

    fn push(&mut self, metric: &'static Metric, labels: &[(&'static str, &str)], value: Value) {
        let mut l = vec![("source", self.source.to_string())];
        l.extend(self.own.iter().cloned());
        l.extend(labels.iter().map(|(k, v)| (*k, v.to_string())));
        self.out.push(Sample {
            metric,
            labels: l,
            value,
        });
    }
}

/// Append the samples of `status` (from `source`, whose samples carry `own` labels after
/// `source`) to `out`.
pub fn samples(source: &str, own: &[(&'static str, String)], status: &Status, out: &mut Vec<Sample>) {
    let mut o = Out { source, own, out };
    match status {
        Status::StreamRecv(s) => recv(&mut o, s),
        Status::StreamRelay(s) => relay(&mut o, s),
        Status::StreamSend(s) => send(&mut o, s),
        Status::TransferRecv(s) => transfer_recv(&mut o, s),
        Status::TransferSend(s) => transfer_send(&mut o, s),
        Status::ProbeServer(s) => probe(&mut o, s),
        Status::Linkemu(s) => link(&mut o, s),
        Status::Serve(s) => serve(&mut o, s),
    }
}

fn recv(o: &mut Out<'_>, s: &RecvStatus) {
    for st in &s.stations {
        let l = [("station", st.station.as_str())];
        let w = &st.window;
        o.int(&STREAM_FRAMES, &l, w.placed);
        o.int(&STREAM_FILLED, &l, w.written_filled);
        o.int(&STREAM_LOST, &l, st.frames_lost());
        o.int(&STREAM_REORDERED, &l, w.reordered);
        o.int(&STREAM_LATE, &l, w.late);
        o.int(&STREAM_DUPLICATE, &l, w.duplicates);
        o.int(&STREAM_BYTES, &l, w.placed * st.frame_len as u64);
        o.float(&STREAM_LOSS, &l, st.loss_fraction);
        o.int(&STREAM_SENDER_CHANGES, &l, st.sender_changes);
        for b in &st.boards {
            let l = [("station", st.station.as_str()), ("board", b.source.as_str())];
            o.int(&STREAM_BOARD_FRAMES, &l, b.frames);
        }
        for r in &st.refused_sources {
            let l = [("station", st.station.as_str()), ("sender", r.source.as_str())];
            o.int(&STREAM_REFUSED_SOURCE, &l, r.datagrams);
        }
        if let Some(q) = &st.arq {
            o.int(&STREAM_ARQ_REPAIRED, &l, q.recovered);
        }
    }
    datagrams(o, &s.datagrams, s.rate_bps, s.kernel_drops);
    o.int(&STREAM_FRAMES_WRITTEN, &[], s.frames_written);
    o.float(&STREAM_WRITER_STALL, &[], s.writer_stall_s);
    o.int(&STREAM_WRITER_STALLS, &[], s.writer_stalls);
    o.int(&STREAM_NAKS, &[], s.naks_sent);
    o.int(&STREAM_DISKS_DROPPED, &[], s.disks_dropped);
    o.int(&STREAM_FRAMES_NOT_WRITTEN, &[], s.frames_not_written);
    for l in &s.live {
        let at = [("endpoint", l.endpoint.as_str())];
        o.int(&LIVE_FRAMES_SENT, &at, l.frames_sent);
        o.int(&LIVE_FILLED_SENT, &at, l.filled_sent);
        o.int(&LIVE_BYTES_SENT, &at, l.bytes_sent);
        for (reason, n) in [
            ("slow_reader", l.dropped_slow_reader),
            ("no_reader", l.dropped_no_reader),
            ("at_start", l.skipped_at_start),
            ("behind", l.behind),
        ] {
            o.int(
                &LIVE_DROPPED,
                &[("endpoint", l.endpoint.as_str()), ("reason", reason)],
                n,
            );
        }
        o.int(&LIVE_CONNECTED, &at, u64::from(l.connected));
        for (what, n) in [
            ("connected", l.clients),
            ("refused", l.clients_refused),
            ("bad_request", l.bad_requests),
        ] {
            o.int(&LIVE_CLIENTS, &[("endpoint", l.endpoint.as_str()), ("what", what)], n);
        }
        o.int(&LIVE_QUEUED, &at, l.queued_bytes);
    }
}

/// The per-source datagram counts of a receiving command.
fn datagrams(o: &mut Out<'_>, d: &stream::DatagramCounters, rate_bps: f64, kernel_drops: u64) {
    o.int(&STREAM_DATAGRAMS, &[], d.datagrams);
    o.int(&STREAM_DATAGRAM_BYTES, &[], d.bytes);
    o.float(&STREAM_RATE, &[], rate_bps);
    o.int(&STREAM_KERNEL_DROPS, &[], kernel_drops);
    let reasons = [
        ("too_short", d.too_short),
        ("oversized", d.oversized),
        ("bad_magic", d.bad_magic),
        ("bad_version", d.bad_version),
        ("bad_header", d.bad_header),
        ("length_mismatch", d.length_mismatch),
        ("foreign_source", d.foreign_source),
        ("too_many_stations", d.too_many_stations),
        ("no_frame_rate", d.no_frame_rate),
        ("implausible_stream", d.implausible_stream),
        ("unconfirmed", d.unconfirmed),
    ];
    for (reason, n) in reasons {
        o.int(&STREAM_REJECTED, &[("reason", reason)], n);
    }
}

fn arq(o: &mut Out<'_>, q: &Option<stream::arq::RetransmitStats>) {
    if let Some(q) = q {
        o.int(&STREAM_ARQ_NAKS, &[], q.naks);
        o.int(&STREAM_ARQ_RESENT, &[], q.resent);
    }
}

fn relay(o: &mut Out<'_>, s: &RelayStatus) {
    for x in &s.senders {
        let input = x.input.to_string();
        let l = [("input", input.as_str()), ("sender", x.source.as_str())];
        o.int(&RELAY_SENDER_DATAGRAMS, &l, x.datagrams);
        o.int(&RELAY_SENDER_LOST, &l, x.lost);
        o.int(&RELAY_SENDER_REORDERED, &l, x.reordered);
    }
    for st in &s.stations {
        let l = [("station", st.station.as_str())];
        o.int(&RELAY_FRAMES_IN, &l, st.frames_in);
        o.int(&RELAY_LOST_IN_INPUT, &l, st.lost_in_input);
        o.int(&RELAY_REORDERED_IN, &l, st.reordered_in);
        o.int(&RELAY_OVERFLOW, &l, st.overflow_dropped);
        o.int(&RELAY_FRAMES_OUT, &l, st.frames_out);
    }
    datagrams(o, &s.datagrams, s.in_rate_bps, s.kernel_drops);
    o.int(&RELAY_QUEUED, &[], s.queued);
    o.int(&RELAY_HANDOVER_DROPPED, &[], s.handover_dropped);
    arq(o, &s.arq);
}

fn send(o: &mut Out<'_>, s: &SendStatus) {
    for st in &s.stations {
        let l = [("station", st.station.as_str())];
        o.int(&SEND_FRAMES, &l, st.frames_sent);
        o.int(&SEND_BYTES, &l, st.bytes_sent);
        o.int(&SEND_INJECTED, &l, st.injected_drops);
        o.int(&SEND_SLIPS, &l, st.slips);
        o.float(&SEND_RATE, &l, st.achieved_rate_bps);
    }
    if s.senders.len() > 1 {
        for b in &s.senders {
            o.int(&SEND_SENDER_FRAMES, &[("sender", b.local_addr.as_str())], b.frames_sent);
        }
    }
    arq(o, &s.arq);
}

fn transfer_recv(o: &mut Out<'_>, s: &TransferRecvStatus) {
    let ok = s.sessions.saturating_sub(s.sessions_failed);
    o.int(&TRANSFER_SESSIONS, &[("outcome", "ok")], ok);
    o.int(&TRANSFER_SESSIONS, &[("outcome", "failed")], s.sessions_failed);
    o.int(&TRANSFER_SESSIONS, &[("outcome", "refused")], s.refused);
    o.int(&TRANSFER_FILES, &[("outcome", "verified")], s.files_verified);
    o.int(&TRANSFER_FILES, &[("outcome", "failed")], s.files_failed);
    o.int(&TRANSFER_BYTES, &[], s.bytes);
    o.int(&TRANSFER_DATAGRAMS, &[], s.datagrams);
    o.int(&TRANSFER_DUPLICATES, &[], s.duplicate_datagrams);
    o.int(&TRANSFER_REJECTED, &[], s.rejected_datagrams);
    o.int(&TRANSFER_ROUNDS, &[], s.rounds);
    if let Some(r) = s.last_rate_bps {
        o.float(&TRANSFER_RATE, &[], r);
    }
}

fn transfer_send(o: &mut Out<'_>, s: &TransferSendStatus) {
    o.int(&TRANSFER_BYTES, &[], s.done_bytes);
    o.int(&TRANSFER_TOTAL, &[], s.total_bytes);
    o.int(&TRANSFER_RETRANSMITTED, &[], s.retransmitted_bytes);
    o.float(&TRANSFER_RATE, &[], s.rate_bps);
    if let Some(r) = s.srtt_s {
        o.float(&TRANSFER_RTT, &[], r);
    }
}

fn probe(o: &mut Out<'_>, s: &ProbeServerStatus) {
    o.int(&PROBE_TRIALS, &[("outcome", "ok")], s.trials.saturating_sub(s.failed));
    o.int(&PROBE_TRIALS, &[("outcome", "failed")], s.failed);
    o.int(&PROBE_PACKETS, &[], s.packets);
    o.int(&PROBE_LOST, &[], s.lost);
    o.int(&PROBE_TCP_BYTES, &[], s.tcp_bytes);
    if let Some(f) = s.last_loss_fraction {
        o.float(&PROBE_LOSS, &[], f);
    }
    if let Some(r) = s.last_rate_bps {
        o.float(&PROBE_RATE, &[], r);
    }
}

fn link(o: &mut Out<'_>, s: &LinkemuStatus) {
    for (dir, c) in [("a_to_b", &s.a_to_b), ("b_to_a", &s.b_to_a)] {
        for (fate, n) in [
            ("received", c.received_packets),
            ("forwarded", c.forwarded_packets),
            ("lost", c.dropped_loss),
            ("queue_dropped", c.dropped_queue),
            ("overflow", c.overflow),
            ("write_error", c.write_errors),
        ] {
            o.int(&LINK_PACKETS, &[("direction", dir), ("fate", fate)], n);
        }
        o.int(
            &LINK_BYTES,
            &[("direction", dir), ("fate", "received")],
            c.received_bytes,
        );
        o.int(
            &LINK_BYTES,
            &[("direction", dir), ("fate", "forwarded")],
            c.forwarded_bytes,
        );
    }
}

fn serve(o: &mut Out<'_>, s: &ServeStatus) {
    o.int(&SERVE_TRANSFER, &[("transfer", s.transfer.as_str())], 1);
    for r in &s.runtimes {
        o.int(
            &SERVE_TRANSFER,
            &[("transfer", r.transfer.as_str()), ("runtime", r.name.as_str())],
            1,
        );
    }
    o.int(&SERVE_SCANS, &[], s.scans);
    o.int(
        &SERVE_STATEMENTS,
        &[("outcome", "ok")],
        s.statements - s.refused.min(s.statements),
    );
    o.int(&SERVE_STATEMENTS, &[("outcome", "refused")], s.refused);
    o.int(&SERVE_OVERLONG, &[], s.overlong_lines);
    o.int(&SERVE_CONNECTIONS, &[], s.connections);
    o.int(&SERVE_CONNECTIONS_REFUSED, &[], s.connections_refused);
    o.int(&SERVE_INTERNAL_ERRORS, &[], s.internal_errors);
    for d in &s.disks {
        o.int(&SERVE_DISK_FREE, &[("disk", d.path.as_str())], d.free_bytes);
        o.int(&SERVE_DISK_SIZE, &[("disk", d.path.as_str())], d.total_bytes);
    }
    if let Some(t) = s.time_left_s {
        o.float(&SERVE_TIME_LEFT, &[], t);
    }
    if let Some(r) = s.fill_rate_bps {
        o.float(&SERVE_FILL_RATE, &[], r);
        o.int(&SERVE_FILL_RATE_MEASURED, &[], u64::from(s.fill_rate_measured));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_the_conventions() {
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a metric name is defined twice");
        for m in ALL {
            assert!(m.name.starts_with("evlbi_"), "{}", m.name);
            assert!(!m.name.ends_with("_total"), "{}: the encoder adds _total", m.name);
            assert!(
                m.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{}",
                m.name
            );
        }
    }
}
