//! Tail protection: the send opportunities that would go unused once every chunk has left
//! resend the newest chunks not yet known to have arrived.
//!
//! A chunk lost in the last round trip of a stream is otherwise repaired only after the
//! receiver NAKs it (it sees a later chunk or its report interval ends), which adds up to one
//! round trip to the transfer: through 100 ms and 0.1 % loss the final BDP holds ~1.5 losses
//! on average. Resending, newest first, what was sent in the last half round trip before the
//! sender fell idle bounds that to half a round trip, and costs nothing but otherwise idle
//! pacing slots (the controller's rate and inflight cap still apply, and a NAKed chunk always
//! comes first). The idea is RACK-TLP's tail loss probe (RFC 8985 §7), extended from one
//! segment to the last half round trip because on a long fat path that holds a thousand
//! datagrams.

use std::time::Duration;

/// Which chunks the tail may still resend: `[floor, cursor)` newest first, each once, only
/// those first sent at or after `oldest_us`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct TailResend {
    /// `next_chunk` when armed: a tail is armed once per end of the data sent so far.
    armed_for: Option<u64>,
    cursor: u64,
    oldest_us: u64,
}

impl TailResend {
    /// Whether [`TailResend::next`] may still find a chunk (it may find none: the rest can be
    /// older than half a round trip or queued for repair).
    pub(super) fn may_resend(&self, next_chunk: u64, known_below: u64) -> bool {
        self.armed_for != Some(next_chunk) || self.cursor > known_below
    }

    /// The next chunk to resend, if any. `next_chunk` is one past the newest chunk sent,
    /// `known_below` the chunk below which the receiver's last report accounted for every chunk
    /// (received or NAKed), `last_sent_us` the sender clock of the newest transmission and
    /// `srtt` the smoothed RTT; `sent_us(c)` says when chunk `c` last left and whether it is
    /// queued for repair already.
    pub(super) fn next(
        &mut self,
        next_chunk: u64,
        known_below: u64,
        last_sent_us: u64,
        srtt: Duration,
        mut sent_us: impl FnMut(u64) -> Option<(u64, bool)>,
    ) -> Option<u64> {
        if self.armed_for != Some(next_chunk) {
            let half = u64::try_from((srtt / 2).as_micros()).unwrap_or(u64::MAX);
            *self = TailResend {
                armed_for: Some(next_chunk),
                cursor: next_chunk,
                oldest_us: last_sent_us.saturating_sub(half),
            };
        }
        while self.cursor > known_below {
            let c = self.cursor - 1;
            let (sent, pending) = sent_us(c)?;
            if sent < self.oldest_us {
                // Older than half a round trip: NAKs repair these at least as soon.
                self.cursor = known_below;
                return None;
            }
            self.cursor = c;
            if !pending {
                return Some(c);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resends_the_last_half_round_trip_newest_first_once() {
        let mut t = TailResend::default();
        // Chunk c left at 1000·c µs; the newest (9) at 9000; SRTT 8 ms: from 5000 on.
        let sent = |c: u64| Some((1000 * c, c == 7));
        let srtt = Duration::from_millis(8);
        let mut got = Vec::new();
        while let Some(c) = t.next(10, 2, 9000, srtt, sent) {
            got.push(c);
        }
        assert_eq!(got, [9, 8, 6, 5], "7 is queued for repair already");
        assert_eq!(t.next(10, 2, 9500, srtt, sent), None, "each once");
        // New data sent (next_chunk 12): a new tail.
        assert_eq!(t.next(12, 2, 11_000, srtt, |c| Some((1000 * c, false))), Some(11));
    }

    #[test]
    fn stops_at_what_the_receiver_accounted_for() {
        let mut t = TailResend::default();
        let sent = |c: u64| Some((1000 * c, false));
        let got: Vec<u64> = std::iter::from_fn(|| t.next(10, 8, 9000, Duration::from_secs(1), sent)).collect();
        assert_eq!(got, [9, 8]);
    }
}
