//! The text views of `stream send`, `stream recv` and `stream relay`: their live lines and
//! closing lines on stderr, apart from the commands (which only translate flags into a session
//! and run it). JSON is the result; these are views of it.

use stream_session::recv::LiveLine;
use stream_session::relay::RelayLiveLine;
use stream_session::report::{RecvReport, RelayReport, SendReport};

use crate::units::{si_fmt, us_fmt};

/// One live line of `stream send`; `last` holds the elapsed time and bytes of the line before.
pub fn send_live_line(s: &stream::results::SendStatus, last: &mut (f64, u64)) -> String {
    let frames: u64 = s.stations.iter().map(|t| t.frames_sent).sum();
    let bytes: u64 = s.stations.iter().map(|t| t.bytes_sent).sum();
    let slipped: f64 = s.stations.iter().map(|t| t.slipped_s).sum();
    let span = s.elapsed_s - last.0;
    let rate = if span > 0.0 {
        (bytes - last.1.min(bytes)) as f64 * 8.0 / span
    } else {
        0.0
    };
    *last = (s.elapsed_s, bytes);
    let arq = s
        .arq
        .as_ref()
        .map_or(String::new(), |q| format!("  resent {}", q.resent));
    format!(
        "{:7.1} s  {:>9}b/s  {} station(s)  frames sent {:>8}  time given up {:.1} ms{arq}",
        s.elapsed_s,
        si_fmt(rate),
        s.stations.len(),
        frames,
        slipped * 1e3
    )
}

/// What a held-up sender gave up, per station, on stderr whatever the output format: time (a
/// slip of the timeline) or frames (skipped by a backend simulator fixed to the clock).
pub fn held_up_notes(r: &SendReport) {
    for s in &r.stations {
        if s.slips > 0 {
            status!(
                "{}: fell more than --max-lag behind {} times and gave up {:.1} ms of its timeline (the sender was held up, not the network)",
                s.station,
                s.slips,
                s.slipped_s * 1e3
            );
        }
        if s.skipped_late > 0 {
            status!(
                "{}: skipped {} frames whose VDIF time had passed by more than --max-lag (the sender was held up, not the network)",
                s.station,
                s.skipped_late
            );
        }
    }
}

/// The closing lines of `stream send`: per station, per sender, ARQ, CPU.
pub fn send_summary(r: &SendReport) {
    for s in &r.stations {
        let g = &s.departure_gap_ns;
        status!(
            "{} ({}): {} frames in {:.2} s, {}b/s of data (asked {}b/s), gap p50 {} µs p99 {} µs σ {} µs (nominal {:.3} µs){}",
            s.station,
            s.file,
            s.frames_sent,
            r.duration_s,
            si_fmt(s.achieved_rate_bps),
            si_fmt(s.rate_bps.get() as f64),
            us_fmt(g.p50),
            us_fmt(g.p99),
            us_fmt(g.stdev.map(|v| v.round() as u64)),
            s.spacing_us,
            if s.injected_drops > 0 {
                format!(", {} dropped on purpose", s.injected_drops)
            } else {
                String::new()
            }
        );
    }
    if r.senders.len() > 1 {
        for (i, b) in r.senders.iter().enumerate() {
            status!(
                "sender {} from {} to {}: threads {:?}, {} frames, {}b/s of data",
                i + 1,
                b.local_addr,
                b.to,
                b.threads,
                b.frames_sent,
                si_fmt(b.achieved_rate_bps)
            );
        }
    }
    if let Some(q) = &r.arq {
        status!(
            "ARQ: {} NAKs asked for {} frames, {} resent ({} B), {} no longer kept",
            q.naks,
            q.asked,
            q.resent,
            q.resent_bytes,
            q.unavailable
        );
    }
    if r.rejected_control > 0 {
        status!(
            "the destination sent back {} datagrams that were not NAKs (a jive5ab's keep-alives, or strays): read and counted",
            r.rejected_control
        );
    }
    status!(
        "sender CPU {:.0} % user + {:.0} % system of one core",
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}

/// One live line of `stream recv` (every --interval).
pub fn recv_live_line(l: &LiveLine) -> String {
    let mut stall = if l.writer_stall.is_zero() {
        String::new()
    } else {
        format!("  writer stall {:.0} ms", l.writer_stall.as_secs_f64() * 1e3)
    };
    if l.duplicate_mismatch > 0 {
        stall += &format!("  dup differing {}", l.duplicate_mismatch);
    }
    if l.sender_changes > 0 {
        stall += &format!("  sender changes {}", l.sender_changes);
    }
    if l.disks_dropped > 0 {
        stall += &format!("  DISKS DROPPED {}", l.disks_dropped);
    }
    format!(
            "{:7.1} s  {:>9}b/s  {} station(s)  frames written {:>7}  filled {:>5}  reordered {:>4}  late {:>4}  dup {:>4}  rejected {:>4}  kernel drops {}{stall}",
            l.elapsed_s,
            si_fmt(l.rate_bps),
            l.stations,
            l.frames,
            l.filled,
            l.reordered,
            l.late,
            l.duplicates,
            l.rejected,
            l.kernel_drops
        )
}

/// The closing lines of `stream recv`: per station, per file, and what went wrong where.
pub fn recv_summary(r: &RecvReport) {
    for s in &r.stations {
        recv_station_lines(s);
    }
    for f in &r.files {
        status!("  {}: {} frames, {} bytes", f.path, f.frames, f.bytes);
    }
    if let Some(rec) = &r.recording {
        recording_lines(rec);
    }
    rejected_lines(&r.datagrams, r.first_problem.as_deref());
    if r.socket_drops > 0 {
        status!(
            "kernel dropped {} datagrams at this socket, its receive buffer full{}",
            r.socket_drops,
            if r.gro_most_coalesced > 1 {
                format!(
                    "; with UDP GRO one of them held up to {} frames (the filled counts above are exact)",
                    r.gro_most_coalesced
                )
            } else {
                String::new()
            }
        );
    }
    if r.dropped_after_last > 0 {
        status!(
            "{} of them after the last datagram received: frames lost at the end of the stream, {}",
            r.dropped_after_last,
            if r.stations.iter().any(|s| s.lost_at_end > 0) {
                "counted in f as lost at the end"
            } else {
                "in no station's f (several stations: whose they were is not known)"
            }
        );
    }
    if r.writer_stalls > 0 {
        status!(
            "the file writer held the receiver up {} times, {:.2} s in all: the output takes less than the \
             stream's rate (or stalled); datagrams the kernel dropped meanwhile are the disk's loss, not the network's",
            r.writer_stalls,
            r.writer_stall_s
        );
    }
    buffers_line(r);
    let writer = r.writer_cpu.map_or(String::new(), |w| {
        format!("; file writer {:.0} % + {:.0} %", w.user_pct, w.system_pct)
    });
    if r.datagrams.datagrams == 0 && r.stopped_by == "idle timeout" {
        status!("no datagram arrived within the first-datagram timeout");
    }
    status!(
        "stopped by {}; receiver CPU {:.0} % user + {:.0} % system of one core{writer}",
        r.stopped_by,
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}

/// Which buffer took the output's stalls: the write buffer, then the socket's.
fn buffers_line(r: &RecvReport) {
    if let (Some(size), Some(peak)) = (r.write_buffer, r.write_buffer_peak) {
        let socket = match r.socket_queue_peak {
            Some(q) if r.rcvbuf.granted_rcv > 0 => format!(
                ", the socket buffer {:.0} % of {} bytes at most",
                q as f64 * 100.0 / r.rcvbuf.granted_rcv as f64,
                r.rcvbuf.granted_rcv
            ),
            _ => String::new(),
        };
        status!(
            "buffers: the write buffer held {:.0} % of its {size} bytes at most{socket}",
            peak as f64 * 100.0 / size.max(1) as f64
        );
    }
}

/// The closing lines of one station of `stream recv`: its window's counts, its boards, its
/// sender changes.
fn recv_station_lines(s: &stream::StationSummary) {
    let w = &s.window;
    status!(
            "{}: {} frames written ({} filled invalid{}, f = {:.3e}, S/N factor {:.5}), {} reordered, {} late, {} duplicate, {} out of range{}{}",
            s.station,
            w.written_valid + w.written_filled,
            w.written_filled,
            if w.filled_at_end > 0 {
                format!(
                    ", {} of them after their thread's last frame at the end: not counted lost",
                    w.filled_at_end
                )
            } else {
                String::new()
            },
            s.loss_fraction,
            s.snr_factor,
            w.reordered,
            w.late,
            w.duplicates,
            w.out_of_range,
            if w.duplicate_mismatch > 0 {
                format!(
                    ", {} duplicate(s) differing from the frame kept (forged or corrupt; the first copy was written)",
                    w.duplicate_mismatch
                )
            } else {
                String::new()
            },
            s.arq.map_or(String::new(), |q| format!(", ARQ recovered {} of {} missing", q.recovered, q.missing_seen))
        );
    if s.boards.len() > 1 {
        for b in &s.boards {
            let seq = match (b.seq_first, b.seq_last) {
                (Some(f), Some(l)) => format!(", sequence numbers {f}-{l}"),
                _ => String::new(),
            };
            status!(
                "{}: board {} threads {:?}: {} frames{seq}",
                s.station,
                b.source,
                b.threads,
                b.frames
            );
        }
    }
    for c in &s.sender_change_log {
        status!(
            "{}: sender {} from {} to {}",
            s.station,
            if c.restarted { "restarted" } else { "changed" },
            c.from,
            c.to
        );
    }
    if s.sender_changes > s.sender_change_log.len() as u64 {
        status!("{}: {} sender changes in all", s.station, s.sender_changes);
    }
}

pub fn relay_live_line(l: &RelayLiveLine) -> String {
    format!(
        "{:7.1} s  in {:>9}b/s  {} sender(s)  frames in {:>7}  out {:>7}  queued {:>5}  lost in input {:>4}  \
         overflow {:>4}  rejected {:>4}  kernel drops {}{}",
        l.elapsed_s,
        si_fmt(l.in_rate_bps),
        l.senders,
        l.frames_in,
        l.frames_out,
        l.queued,
        l.lost_in_input,
        l.overflow_dropped,
        l.rejected,
        l.kernel_drops,
        if l.handover_dropped > 0 {
            format!("  hand-over full {}", l.handover_dropped)
        } else {
            String::new()
        }
    )
}

/// The closing lines: per sender, per station, the tee, what went wrong where.
pub fn relay_summary(r: &RelayReport) {
    for s in &r.senders {
        let seq = match (s.seq_first, s.seq_last) {
            (Some(f), Some(l)) => format!(
                ", serial numbers {f}..{l}: {} lost, {} reordered (extent ≤ {})",
                s.lost, s.reordered, s.reorder_extent_max
            ),
            _ => String::new(),
        };
        status!(
            "sender {} (input {}): {} datagrams, {} frames of {} thread(s) {:?}{seq}",
            s.source,
            s.input,
            s.datagrams,
            s.frames,
            s.threads.len(),
            s.threads
        );
    }
    let o = &r.other_senders;
    if o.senders > 0 || r.untracked_datagrams > 0 {
        status!(
            "{} other sender(s) (fewer frames than those above, or quiet and no longer listed): {} datagrams, {} frames{}",
            o.senders,
            o.datagrams + r.untracked_datagrams,
            o.frames,
            if r.untracked_datagrams > 0 {
                format!(" ({} datagrams from senders beyond the 256 counted while all were live)", r.untracked_datagrams)
            } else {
                String::new()
            }
        );
    }
    for s in &r.stations {
        let q = &s.queue_delay_ns;
        status!(
            "{}: {} frames in ({} lost in the input, {} reordered, {} duplicate), {} out{}; threads {:?}; time in the relay p50 {} µs p99 {} µs",
            s.station,
            s.frames_in,
            s.lost_in_input,
            s.reordered_in,
            s.duplicates_in,
            s.frames_out,
            if s.overflow_dropped + s.unexpected_thread > 0 {
                format!(", {} dropped at a full buffer, {} of unexpected threads", s.overflow_dropped, s.unexpected_thread)
            } else {
                String::new()
            },
            s.thread_ids,
            q.p50.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3)),
            q.p99.map_or("-".into(), |v| format!("{:.0}", v as f64 / 1e3)),
        );
    }
    if let Some(a) = &r.arq {
        status!(
            "ARQ: {} NAKs, {} frames asked, {} repeated, {} no longer held",
            a.naks,
            a.asked,
            a.resent,
            a.unavailable
        );
    }
    if let Some(t) = &r.live_out {
        difx_out_lines(t, r.live_out_error.as_deref());
    }
    if let Some(t) = &r.tee {
        for f in &t.files {
            status!("  tee {}: {} frames, {} bytes", f.path, f.frames, f.bytes);
        }
        if let Some(rec) = &t.recording {
            recording_lines(rec);
        }
    }
    rejected_lines(&r.datagrams, r.first_problem.as_deref());
    if r.socket_drops > 0 {
        status!(
            "kernel dropped {} datagrams at the input sockets, their buffers full",
            r.socket_drops
        );
    }
    if r.handover_dropped > 0 {
        status!(
            "the receive thread dropped {} datagrams: its hand-over to the relay's thread was full (--buffer)",
            r.handover_dropped
        );
    }
    if r.datagrams.datagrams == 0 && r.stopped_by == "idle timeout" {
        status!("no datagram arrived within the first-datagram timeout");
    }
    status!(
        "stopped by {}; relay CPU {:.0} % user + {:.0} % system of one core",
        r.stopped_by,
        r.cpu.user_pct,
        r.cpu.system_pct
    );
}

/// What a vbs/Mark6 recording wrote: per scan, per disk, and each disk that left the set.
pub fn recording_lines(rec: &scanfmt::results::RecordingReport) {
    let layout = rec.layout.map_or("?", |l| l.as_str());
    for s in &rec.scans {
        status!(
            "  {layout}://{}: {} frames ({} filled) in {} blocks, {} bytes",
            s.scan,
            s.frames,
            s.filled,
            s.blocks,
            s.bytes
        );
    }
    for d in &rec.disks {
        let free = d.free_bytes.map_or(String::new(), |f| format!(", {f} bytes free"));
        let full = if d.passed_over_full > 0 {
            format!(" (full: passed over for {} blocks)", d.passed_over_full)
        } else {
            String::new()
        };
        status!(
            "  disk {}: {} blocks, {} bytes{free}{full}{}",
            d.path,
            d.blocks,
            d.bytes,
            d.error
                .as_ref()
                .map_or(String::new(), |e| format!(" — DROPPED from the set: {e}"))
        );
    }
    if rec.disks_dropped > 0 || rec.frames_not_written > 0 {
        status!(
            "{} disk(s) dropped, {} frames not written; the scans are readable on the other disks",
            rec.disks_dropped,
            rec.frames_not_written
        );
    }
}

/// The lines on refused datagrams of a receiving command (`recv`, `relay`).
pub fn rejected_lines(d: &stream::DatagramCounters, first_problem: Option<&str>) {
    if d.rejected() > 0 {
        status!("rejected datagrams: {} ({})", d.rejected(), first_problem.unwrap_or(""));
    }
    if d.phantoms_dropped > 0 {
        // Not "never sent a run": a source refused beside a station's sender, or waiting for a
        // slot, is forgotten too, with a run (issue 36: "never sent a run (0 datagrams)").
        status!(
            "{} source(s) forgotten without becoming a station: {} datagrams never formed a run, {} refused \
             as a station's second sender or not its board, {} beyond --max-stations",
            d.phantoms_dropped,
            d.unconfirmed,
            d.foreign_source,
            d.too_many_stations
        );
    }
}

/// The closing line of one file sent over TCP to a DiFX datastream.
pub fn difx_send_line(r: &stream::results::DifxFileReport) {
    status!(
        "{} to tcp:{}: {} frames read, {} written ({} invalid, sent with the fill pattern; {} before the first valid frame of a time step not sent), the job's port open {:.1} s after the start{}",
        r.file,
        r.to,
        r.frames_read,
        r.frames_sent,
        r.feed.invalid_filled,
        r.feed.skipped_before_start,
        r.connected_after_s,
        if r.garbage_bytes > 0 {
            format!(", {} bytes between frames skipped", r.garbage_bytes)
        } else {
            String::new()
        }
    );
}

/// What an output to a DiFX datastream did: connections, frames written, what could not be.
pub fn difx_out_lines(t: &stream::results::LiveOutputStatus, connect_error: Option<&str>) {
    status!(
        "{}: {} connection(s), {} frames written ({} invalid, sent with the fill pattern), {} not sent before a start, {} while no job had the port open, {} because the job read slower than the station sent, {} behind in time",
        t.endpoint,
        t.clients,
        t.frames_sent,
        t.filled_sent,
        t.skipped_at_start,
        t.dropped_no_reader,
        t.dropped_slow_reader,
        t.behind
    );
    if let Some(e) = connect_error.filter(|_| t.clients == 0) {
        status!("{}: no job accepted a connection; last attempt: {e}", t.endpoint);
    }
}
