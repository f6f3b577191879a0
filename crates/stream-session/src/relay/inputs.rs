//! The relay's input sockets, read on the relay's own thread: recvmmsg straight into buffers of
//! a pool per input, each filled buffer handed to the relay shared — its frames are queued as
//! slices of it and sent from there, never copied — and back in the pool when its last frame has
//! left.
//!
//! One thread, no reader thread handing batches over: the wake-up and context switch per batch
//! on both sides of that hand-over were a third of the relay's CPU (issue 30, `perf record` of
//! the relay at 4 Gb/s: `finish_task_switch` under the channel's futex wait, 33 %). While the
//! relay sends, datagrams wait in the socket buffer (64 MB by default: 60 ms at 8 Gb/s); when it
//! overflows, the kernel's drops are counted at that socket — loss is reported where it
//! happened.

use std::net::UdpSocket;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use netio::batch::RecvBatch;
use stream::relay::{Relay, KEEPALIVE};

use super::{Marks, ReaderError, Tally};
use recording::write::Recorder;

/// Datagrams per recvmmsg call.
const BATCH: usize = 64;
/// Largest datagram read whole (larger ones are counted as oversized).
const MAX_DATAGRAM: usize = 65_536;
/// Most recvmmsg calls per input per pass, so one busy input never keeps the others (or the
/// departures) waiting long: 8 × 64 datagrams.
const ROUNDS: usize = 8;
/// Frame length the pool is sized for (see [`pool_buffers`]).
const MIN_FRAME_FOR_POOL: usize = 4096;

/// Receive buffers an input may have lent to the relay at once: enough for the relay's whole
/// queue (`buffer_bytes` of frames of at least [`MIN_FRAME_FOR_POOL`] bytes; a frame pins its
/// whole buffer of [`BATCH`] slots until it leaves). Past that the input is not read until
/// buffers come back, and the kernel's drops at its socket show it.
fn pool_buffers(buffer_bytes: usize) -> usize {
    (buffer_bytes / (BATCH * MIN_FRAME_FOR_POOL)).clamp(64, 4096)
}

/// A receive buffer lent to the relay: back to its input's pool when the last frame in it has
/// left (or was dropped), so the steady state allocates nothing.
struct Pooled {
    buf: Vec<u8>,
    home: mpsc::Sender<Vec<u8>>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // The pool may be gone (the run ended): the buffer is then simply freed.
        let _ = self.home.send(std::mem::take(&mut self.buf));
    }
}

/// One input socket, its receive batch and its buffer pool.
struct Input {
    sock: UdpSocket,
    batch: RecvBatch,
    home: mpsc::Sender<Vec<u8>>,
    returned: mpsc::Receiver<Vec<u8>>,
    /// Buffers made so far (the batch's own included), at most `most`.
    made: usize,
    most: usize,
    /// Its socket failed: not read any more.
    failed: bool,
}

impl Input {
    /// A buffer to receive into next: one the relay gave back, or a new one while fewer than
    /// `most` exist; `None` when all are lent.
    fn fresh_buffer(&mut self) -> Option<Vec<u8>> {
        if let Ok(b) = self.returned.try_recv() {
            return Some(b);
        }
        if self.made >= self.most {
            return None;
        }
        self.made += 1;
        // Zeroed by the allocator (pages mapped on first touch), not written here.
        Some(vec![0; self.batch.buffer_len()])
    }
}

/// The relay's inputs; see the module docs.
pub(super) struct Inputs {
    inputs: Vec<Input>,
    error: Option<ReaderError>,
}

impl Inputs {
    /// Read `socks` (made non-blocking reads by the calls' flags), with pools sized for a
    /// relay queue of `buffer_bytes`.
    pub(super) fn new(socks: Vec<UdpSocket>, buffer_bytes: usize) -> Inputs {
        let inputs = socks
            .into_iter()
            .map(|sock| {
                let (home, returned) = mpsc::channel();
                let mut batch = RecvBatch::new(BATCH, MAX_DATAGRAM);
                // UDP GRO (udp(7)): the kernel hands a run of one sender's equal datagrams over
                // as one buffer — one copy and one socket-queue entry per run, not per datagram.
                // The batch cuts them apart again (spans into the same buffer: still no copy).
                // A kernel without it just delivers datagrams one by one.
                let _ = batch.enable_gro(&sock);
                Input {
                    sock,
                    batch,
                    home,
                    returned,
                    made: 1,
                    most: pool_buffers(buffer_bytes),
                    failed: false,
                }
            })
            .collect();
        Inputs { inputs, error: None }
    }

    /// Whether an input is still read (not every socket failed).
    pub(super) fn any_open(&self) -> bool {
        self.inputs.iter().any(|i| !i.failed)
    }

    /// Wait until an input has datagrams or `until` (ppoll; a signal ends it early).
    pub(super) fn wait(&self, until: Instant) {
        let socks: Vec<&UdpSocket> = self.inputs.iter().filter(|i| !i.failed).map(|i| &i.sock).collect();
        let left = until.saturating_duration_since(Instant::now());
        if socks.is_empty() || left.is_zero() {
            return;
        }
        // An error here shows again at the receive, which records it.
        let _ = netio::wait_any_readable(&socks, left.min(Duration::from_millis(5)));
    }

    /// Hand what the inputs hold to the relay (up to [`ROUNDS`] recvmmsg calls each, none
    /// waiting), each datagram as a slice of the buffer it was received into.
    pub(super) fn read(&mut self, relay: &mut Relay, t: &mut Marks, tally: &mut Tally, tee: &mut Recorder) {
        for (k, input) in self.inputs.iter_mut().enumerate() {
            for _ in 0..ROUNDS {
                if input.failed {
                    break;
                }
                let n = match input.batch.recv_batch(&input.sock, Some(Duration::ZERO)) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                        ) =>
                    {
                        0
                    }
                    Err(source) => {
                        input.failed = true;
                        self.error.get_or_insert(ReaderError {
                            input: k as u16,
                            source,
                        });
                        0
                    }
                };
                if n == 0 {
                    break;
                }
                // Fewer messages than asked for: the socket is empty (GRO may make each a run).
                let drained = input.batch.messages() < BATCH;
                let at = Instant::now();
                t.first.get_or_insert(at);
                t.last_in = at;
                let Some(fresh) = input.fresh_buffer() else {
                    // Every buffer is lent: this batch's datagrams go the slow way (copied),
                    // and the input waits for buffers to come back.
                    for d in input.batch.iter() {
                        tally.bytes += d.data.len() as u64;
                        relay.handle_datagram(at, k as u16, d.from, d.data, d.truncated, tee);
                    }
                    break;
                };
                let spans: Vec<_> = (0..n)
                    .filter_map(|i| Some((input.batch.get(i)?, input.batch.span(i)?)))
                    .map(|(d, span)| (d.from, d.truncated, span))
                    .collect();
                let filled = Bytes::from_owner(Pooled {
                    buf: input.batch.swap_buffer(fresh),
                    home: input.home.clone(),
                });
                for (from, truncated, (at_byte, len)) in spans {
                    // The spans come from the receive into this very buffer; one past its end
                    // (never) hands over nothing rather than panicking in `slice`.
                    let d = if at_byte + len <= filled.len() {
                        filled.slice(at_byte..at_byte + len)
                    } else {
                        Bytes::new()
                    };
                    tally.bytes += len as u64;
                    relay.handle_shared_datagram(at, k as u16, from, &d, truncated, tee);
                }
                if drained {
                    break;
                }
            }
        }
    }

    /// The keep-alives due (`--ack`), each from the input its sender sent to.
    pub(super) fn send_keepalives(&self, relay: &mut Relay) {
        while let Some((input, to)) = relay.poll_ack() {
            if let Some(i) = self.inputs.get(usize::from(input)) {
                // A keep-alive that cannot be sent is only a missed courtesy.
                let _ = i.sock.send_to(KEEPALIVE, to);
            }
        }
    }

    /// Kernel drops at every input socket since it was made.
    pub(super) fn drops(&self) -> u64 {
        self.inputs
            .iter()
            .map(|i| netio::counters::socket_drops(&i.sock).unwrap_or(0))
            .sum()
    }

    /// The sockets (for the report) and the first receive error.
    pub(super) fn finish(self) -> (Vec<UdpSocket>, Option<ReaderError>) {
        (self.inputs.into_iter().map(|i| i.sock).collect(), self.error)
    }
}
