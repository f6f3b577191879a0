//! A transfer's live counts, held by the daemon itself: `evlbi?`, `tstat?`, `net2net?`,
//! `record?` and `fill2net?` answer from the counts a transfer's thread hands to its
//! [`CountsOutlet`], never from the metrics view. The same counts go on to the view (`metrics`),
//! which only renders them.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use metrics::{Publisher, Status};
use stream::results::{RecvStatus, RelayStatus, SendStatus};
use vsis::evlbi::EvlbiStats;

/// The latest counts of one transfer, as its session hands them out.
#[derive(Debug, Clone)]
pub enum TransferCounts {
    /// A recording (`record`, `net2file`): the receiver's.
    Recv(RecvStatus),
    /// `net2net`: the relay's.
    Relay(RelayStatus),
    /// `fill2net`: the sender's.
    Send(SendStatus),
}

impl TransferCounts {
    /// The same counts as the metrics view shows them.
    fn status(&self) -> Status {
        match self {
            TransferCounts::Recv(s) => Status::StreamRecv(s.clone()),
            TransferCounts::Relay(s) => Status::StreamRelay(s.clone()),
            TransferCounts::Send(s) => Status::StreamSend(s.clone()),
        }
    }

    /// `evlbi?`'s statistics (a sender has none: it takes no packets in).
    pub fn evlbi(&self) -> EvlbiStats {
        match self {
            TransferCounts::Recv(s) => evlbi_of_recv(s),
            TransferCounts::Relay(s) => evlbi_of_relay(s),
            TransferCounts::Send(_) => EvlbiStats::default(),
        }
    }

    /// Seconds since the transfer started.
    pub fn elapsed_s(&self) -> f64 {
        match self {
            TransferCounts::Recv(s) => s.elapsed_s,
            TransferCounts::Relay(s) => s.elapsed_s,
            TransferCounts::Send(s) => s.elapsed_s,
        }
    }

    /// Datagram bytes taken in (`tstat?`'s NetReader; 0 for a sender).
    pub fn bytes_in(&self) -> u64 {
        match self {
            TransferCounts::Recv(s) => s.datagrams.bytes,
            TransferCounts::Relay(s) => s.datagrams.bytes,
            TransferCounts::Send(_) => 0,
        }
    }

    /// Bytes given out: written to files, relayed, or sent.
    pub fn bytes_out(&self) -> u64 {
        match self {
            // A live output (net2sfxc): what its readers took.
            TransferCounts::Recv(s) if !s.live.is_empty() => s.live.iter().map(|l| l.bytes_sent).sum(),
            TransferCounts::Recv(s) => written_bytes(s),
            TransferCounts::Relay(s) => s.output.iter().map(|o| o.bytes_sent).sum(),
            TransferCounts::Send(s) => s.stations.iter().map(|x| x.bytes_sent).sum(),
        }
    }
}

/// Where one kind of transfer hands its counts over: the daemon's own slot and the metrics
/// view's. Cloned into the transfer's thread; the daemon keeps the other copy.
#[derive(Debug, Clone)]
pub struct CountsOutlet {
    latest: Arc<Mutex<Option<Arc<TransferCounts>>>>,
    view: Publisher,
}

impl CountsOutlet {
    /// An empty outlet that also shows what it is given on `view`.
    pub fn new(view: Publisher) -> CountsOutlet {
        CountsOutlet {
            latest: Arc::default(),
            view,
        }
    }

    /// A new transfer of this kind starts: the previous one's counts are forgotten.
    pub fn clear(&self) {
        *lock(&self.latest) = None;
        self.view.clear();
    }

    /// A live interval's counts, from the transfer's own thread: never waits (`try_lock`, as
    /// the metrics view does); when the daemon holds the slot at this instant, the next
    /// interval's counts go in instead.
    pub fn offer(&self, counts: TransferCounts) {
        self.view.publish(counts.status());
        let counts = Arc::new(counts);
        match self.latest.try_lock() {
            Ok(mut slot) => *slot = Some(counts),
            Err(TryLockError::Poisoned(p)) => *p.into_inner() = Some(counts),
            Err(TryLockError::WouldBlock) => {}
        }
    }

    /// The transfer's final counts (off the data path: waits for the slot).
    pub fn finish(&self, counts: TransferCounts) {
        self.view.publish_final(counts.status());
        *lock(&self.latest) = Some(Arc::new(counts));
    }

    /// The latest counts, if this kind of transfer has run.
    pub fn latest(&self) -> Option<Arc<TransferCounts>> {
        lock(&self.latest).clone()
    }

    /// Where the metrics view gets the same counts.
    pub fn view(&self) -> &Publisher {
        &self.view
    }
}

/// A slot's lock; a panicked holder leaves a plain value behind, still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `evlbi?`'s counters from a receiver: frames taken are packets in, filled frames (and those
/// lost after the last) are lost, reordered are out of order, late and duplicate copies are
/// discarded, and so are the datagrams of sources refused as a station's boards (jive5ab records
/// every datagram on its port), jumps are discontinuities. A live output's frames dropped for a
/// reader slower than the station (`net2sfxc`) are discarded too. Frames taken that reached no
/// disk (one dropped mid-scan) are lost, not received: the recording does not hold them,
/// whatever the network did, and the loss percentage (lost of received + lost) says how much of
/// the scan is gone.
fn evlbi_of_recv(s: &RecvStatus) -> EvlbiStats {
    let mut e = EvlbiStats {
        pkt_disc: s.datagrams.foreign_source + s.live.iter().map(|l| l.dropped_slow_reader).sum::<u64>(),
        ..EvlbiStats::default()
    };
    for st in &s.stations {
        let w = &st.window;
        e.add(&EvlbiStats {
            pkt_in: w.placed,
            pkt_lost: st.frames_lost(),
            pkt_ooo: w.reordered,
            pkt_disc: w.late + w.duplicates + w.duplicate_mismatch + w.out_of_range + w.wrong_format,
            ooosum: w.reorder_extent_sum,
            gap_sum: 0,
            discont: w.discontinuities,
            discont_sz: w.unfilled_gap_frames,
        });
    }
    e.pkt_in = e.pkt_in.saturating_sub(s.frames_not_written);
    e.pkt_lost += s.frames_not_written;
    e
}

/// `evlbi?`'s counters from a relay's input, per station by VDIF time; the datagrams of sources
/// refused as a station's boards are discarded.
fn evlbi_of_relay(s: &RelayStatus) -> EvlbiStats {
    let mut e = EvlbiStats {
        pkt_disc: s.datagrams.foreign_source,
        ..EvlbiStats::default()
    };
    for st in &s.stations {
        e.add(&EvlbiStats {
            pkt_in: st.frames_in,
            pkt_lost: st.lost_in_input,
            pkt_ooo: st.reordered_in,
            pkt_disc: st.duplicates_in + st.wrong_format + st.overflow_dropped,
            ..EvlbiStats::default()
        });
    }
    e
}

/// Frame bytes a receiver has written (filled frames included).
fn written_bytes(s: &RecvStatus) -> u64 {
    s.stations
        .iter()
        .map(|st| (st.window.written_valid + st.window.written_filled) * st.frame_len as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics::Hub;

    #[test]
    fn the_daemon_reads_its_own_slot_and_the_view_gets_the_same_counts() {
        let hub = Hub::new("serve", "0");
        let out = CountsOutlet::new(hub.source("record").unwrap());
        assert!(out.latest().is_none());
        let recv = |bytes: u64| {
            let mut s = RecvStatus::default();
            s.datagrams.bytes = bytes;
            TransferCounts::Recv(s)
        };
        out.offer(recv(1000));
        assert_eq!(out.latest().map(|c| c.bytes_in()), Some(1000));
        assert!(matches!(&*hub.snapshot()[0].1, Status::StreamRecv(s) if s.datagrams.bytes == 1000));
        // The daemon holding its slot never holds the thread up: that interval is skipped.
        let held = out.latest.lock().unwrap();
        out.offer(recv(2000));
        drop(held);
        assert_eq!(out.latest().map(|c| c.bytes_in()), Some(1000));
        out.finish(recv(3000));
        assert_eq!(out.latest().map(|c| c.bytes_in()), Some(3000));
        out.clear();
        assert!(out.latest().is_none() && hub.snapshot().is_empty());
    }
}
