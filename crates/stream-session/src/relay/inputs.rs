//! The relay's input sockets, read on a receive thread of their own (issue 37): recvmmsg straight
//! into buffers of a pool per input, each filled buffer handed over whole — the batch, its
//! receive time and where each datagram lies in it — through a bounded channel to the relay's
//! thread, which queues the frames as slices of it and sends them from there, never copied; the
//! buffer is back in its pool when its last frame has left.
//!
//! Why a thread apart: the relay's one thread both read and paced; held up (descheduled on a
//! busy host, sending a backlog, writing a live line to a stalled stderr) it left the input
//! unread, and at 8.192 Gb/s on one port the socket buffer overflowed (issue 37: 91 000 to
//! 240 000 frames lost where jive5ab, a reader thread per port, lost fewer). The receive thread
//! does nothing else, so the socket is emptied while the relay thread is busy. The hand-over
//! costs no wake-up per batch on the relay's side while frames wait to leave: the relay thread
//! then sleeps to their departure and takes what came when it wakes (issue 30's reader thread
//! woke it for every batch: a third of its CPU). Admission and ordering stay in the relay's
//! state machine, which takes each datagram with the time the receive thread read it.
//!
//! What does not fit the hand-over (its `--buffer` worth of bytes waiting, or
//! [`HANDOVER_BATCHES`]) is dropped by the receive thread and counted (`handover_dropped`);
//! what the kernel drops at a full socket is counted at that socket. Loss is reported where it
//! happened.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
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
/// Most recvmmsg calls per input per pass, so one busy input never keeps the others waiting
/// long: 8 × 64 datagrams.
const ROUNDS: usize = 8;
/// Frame length the pool is sized for (see [`pool_buffers`]).
const MIN_FRAME_FOR_POOL: usize = 4096;
/// Most batches waiting in the hand-over (its bytes are bounded too, by the relay's buffer).
pub(super) const HANDOVER_BATCHES: usize = 16_384;
/// Longest the receive thread waits for input before it looks at its stop flag again.
const IDLE_WAIT: Duration = Duration::from_millis(5);
/// While datagrams flow, the receive thread sleeps this long after emptying its sockets rather
/// than waking for the next one: a wake-up costs more than a frame (issue 30), and the socket
/// buffer holds far more than this (250 µs of 8 Gb/s: 250 KB, 31 frames, taken in one call).
const COALESCE: Duration = Duration::from_micros(250);

/// Receive buffers an input may have lent at once: enough for the relay's whole queue
/// (`buffer_bytes` of frames of at least [`MIN_FRAME_FOR_POOL`] bytes; a frame pins its whole
/// buffer of [`BATCH`] slots until it leaves). Past that a batch is copied into a buffer of its
/// own size (one allocation per batch, the pool's buffers all lent: a held-up relay thread).
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

/// Where one datagram of a handed-over batch lies in its buffer.
struct Span {
    from: SocketAddr,
    truncated: bool,
    offset: usize,
    len: usize,
}

/// One recvmmsg call's datagrams, handed from the receive thread to the relay thread.
struct Batch {
    input: u16,
    /// When the receive thread read them.
    at: Instant,
    buf: Bytes,
    spans: Vec<Span>,
    /// Datagram bytes (what the hand-over's byte bound counts).
    bytes: usize,
}

/// What both threads share: the stop word, the hand-over's bytes, and its drops.
#[derive(Default)]
struct Shared {
    quit: AtomicBool,
    /// Datagram bytes in the channel now.
    waiting: AtomicUsize,
    /// Datagrams read but dropped: the hand-over was full.
    dropped: AtomicU64,
}

/// One input socket, its receive batch and its buffer pool (owned by the receive thread).
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

    /// The last receive's datagrams as a batch: its buffer itself (a fresh one swapped in), or,
    /// every pooled buffer lent, a copy of just the datagrams.
    fn take(&mut self, input: u16, at: Instant) -> Batch {
        let n = self.batch.len();
        let mut spans: Vec<Span> = (0..n)
            .filter_map(|i| Some((self.batch.get(i)?, self.batch.span(i)?)))
            .map(|(d, (offset, len))| Span {
                from: d.from,
                truncated: d.truncated,
                offset,
                len,
            })
            .collect();
        let bytes = spans.iter().map(|s| s.len).sum();
        let buf = match self.fresh_buffer() {
            Some(fresh) => Bytes::from_owner(Pooled {
                buf: self.batch.swap_buffer(fresh),
                home: self.home.clone(),
            }),
            None => {
                let mut copy = Vec::with_capacity(bytes);
                for (i, s) in spans.iter_mut().enumerate() {
                    if let Some(d) = self.batch.get(i) {
                        s.offset = copy.len();
                        copy.extend_from_slice(d.data);
                    }
                }
                Bytes::from(copy)
            }
        };
        Batch {
            input,
            at,
            buf,
            spans,
            bytes,
        }
    }
}

/// The relay thread's side of its inputs; see the module docs.
pub(super) struct Inputs {
    /// The input sockets (the same sockets the receive thread reads): keep-alives go out from
    /// them, their kernel drops are read from them, the report names them.
    socks: Vec<UdpSocket>,
    rx: mpsc::Receiver<Batch>,
    /// A batch taken while waiting, not handed to the relay yet.
    pending: Option<Batch>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<ReaderError>>>,
    /// The receive thread has ended (every socket failed).
    ended: bool,
    /// Its first receive error, once it has ended.
    error: Option<ReaderError>,
}

impl Inputs {
    /// Start the receive thread reading `socks`, with pools sized for a relay queue of
    /// `buffer_bytes` and a hand-over of as many bytes.
    pub(super) fn new(socks: Vec<UdpSocket>, buffer_bytes: usize) -> std::io::Result<Inputs> {
        let mut mine = Vec::with_capacity(socks.len());
        let mut inputs = Vec::with_capacity(socks.len());
        for sock in socks {
            mine.push(sock.try_clone()?);
            let (home, returned) = mpsc::channel();
            let mut batch = RecvBatch::new(BATCH, MAX_DATAGRAM);
            // UDP GRO (udp(7)): the kernel hands a run of one sender's equal datagrams over
            // as one buffer — one copy and one socket-queue entry per run, not per datagram.
            // The batch cuts them apart again (spans into the same buffer: still no copy).
            // A kernel without it just delivers datagrams one by one.
            let _ = batch.enable_gro(&sock);
            inputs.push(Input {
                sock,
                batch,
                home,
                returned,
                made: 1,
                most: pool_buffers(buffer_bytes),
                failed: false,
            });
        }
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::sync_channel(HANDOVER_BATCHES);
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("relay-rx".into())
            .spawn(move || receive(inputs, &tx, &theirs, buffer_bytes))?;
        Ok(Inputs {
            socks: mine,
            rx,
            pending: None,
            shared,
            thread: Some(thread),
            ended: false,
            error: None,
        })
    }

    /// Whether an input is still read (not every socket failed).
    pub(super) fn any_open(&self) -> bool {
        !self.ended || self.pending.is_some()
    }

    /// Wait until a batch has come or `until` (5 ms at most).
    pub(super) fn wait(&mut self, until: Instant) {
        if self.pending.is_some() || self.ended {
            return;
        }
        let left = until.saturating_duration_since(Instant::now()).min(IDLE_WAIT);
        if left.is_zero() {
            return;
        }
        match self.rx.recv_timeout(left) {
            Ok(b) => self.pending = Some(b),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => self.ended = true,
        }
    }

    /// Hand what the receive thread has read to the relay (up to [`ROUNDS`] × [`BATCH`]
    /// datagrams per input, none waited for), each datagram as a slice of its buffer, with the
    /// time it was read. Returns the datagrams taken.
    pub(super) fn read(&mut self, relay: &mut Relay, t: &mut Marks, tally: &mut Tally, tee: &mut Recorder) -> usize {
        let most = ROUNDS * BATCH * self.socks.len().max(1);
        let mut taken = 0;
        while taken < most {
            let b = match self.pending.take() {
                Some(b) => b,
                None => match self.rx.try_recv() {
                    Ok(b) => b,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.ended = true;
                        break;
                    }
                },
            };
            self.shared.waiting.fetch_sub(b.bytes, Ordering::Relaxed);
            taken += b.spans.len();
            t.first.get_or_insert(b.at);
            t.last_in = t.last_in.max(b.at);
            for s in &b.spans {
                // The spans come from the receive into this very buffer; one past its end
                // (never) hands over nothing rather than panicking in `slice`.
                let d = if s.offset + s.len <= b.buf.len() {
                    b.buf.slice(s.offset..s.offset + s.len)
                } else {
                    Bytes::new()
                };
                tally.bytes += s.len as u64;
                relay.handle_shared_datagram(b.at, b.input, s.from, &d, s.truncated, tee);
            }
        }
        taken
    }

    /// The keep-alives due (`--ack`), each from the input its sender sent to.
    pub(super) fn send_keepalives(&self, relay: &mut Relay) {
        while let Some((input, to)) = relay.poll_ack() {
            if let Some(s) = self.socks.get(usize::from(input)) {
                // A keep-alive that cannot be sent is only a missed courtesy.
                let _ = s.send_to(KEEPALIVE, to);
            }
        }
    }

    /// Kernel drops at every input socket since it was made.
    pub(super) fn drops(&self) -> u64 {
        self.socks
            .iter()
            .map(|s| netio::counters::socket_drops(s).unwrap_or(0))
            .sum()
    }

    /// Datagrams read but dropped so far because the hand-over was full.
    pub(super) fn handover_dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Stop the receive thread and hand the relay what it had read: those datagrams were taken
    /// from the station (as the relay's queue still leaves after a stop). Returns the first
    /// receive error.
    pub(super) fn stop(&mut self, relay: &mut Relay, t: &mut Marks, tally: &mut Tally, tee: &mut Recorder) {
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            self.error = thread.join().ok().flatten();
        }
        // The thread is gone: the channel holds at most HANDOVER_BATCHES, each taken once.
        for _ in 0..=HANDOVER_BATCHES {
            if self.read(relay, t, tally, tee) == 0 {
                break;
            }
        }
    }

    /// The sockets (for the report) and the first receive error.
    pub(super) fn finish(mut self) -> (Vec<UdpSocket>, Option<ReaderError>) {
        (std::mem::take(&mut self.socks), self.error.take())
    }
}

impl Drop for Inputs {
    fn drop(&mut self) {
        // An early return (a send error) must not leave the thread reading.
        self.shared.quit.store(true, Ordering::Relaxed);
    }
}

/// The receive thread: read every input until told to stop or every socket failed, handing
/// each batch over (or counting it dropped); the first receive error is its result.
fn receive(
    mut inputs: Vec<Input>,
    tx: &mpsc::SyncSender<Batch>,
    shared: &Shared,
    most_bytes: usize,
) -> Option<ReaderError> {
    let mut error = None;
    while !shared.quit.load(Ordering::Relaxed) {
        let (mut got, mut more) = (false, false);
        for (k, input) in inputs.iter_mut().enumerate() {
            for round in 0..ROUNDS {
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
                        error.get_or_insert(ReaderError {
                            input: k as u16,
                            source,
                        });
                        0
                    }
                };
                if n == 0 {
                    break;
                }
                got = true;
                // Fewer messages than asked for: the socket is empty (GRO may make each a run).
                let drained = input.batch.messages() < BATCH;
                let batch = input.take(k as u16, Instant::now());
                if !hand_over(batch, tx, shared, most_bytes) {
                    return error;
                }
                if drained {
                    break;
                }
                more |= round + 1 == ROUNDS;
            }
        }
        let open: Vec<&UdpSocket> = inputs.iter().filter(|i| !i.failed).map(|i| &i.sock).collect();
        if open.is_empty() {
            break;
        }
        if more {
            continue;
        }
        if got {
            std::thread::sleep(COALESCE);
        } else {
            // An error here shows again at the receive, which records it.
            let _ = netio::wait_any_readable(&open, IDLE_WAIT);
        }
    }
    error
}

/// Hand `batch` over, or count its datagrams dropped when the hand-over holds `most_bytes`
/// already or is full; `false` when the relay thread is gone.
fn hand_over(batch: Batch, tx: &mpsc::SyncSender<Batch>, shared: &Shared, most_bytes: usize) -> bool {
    let (n, bytes) = (batch.spans.len() as u64, batch.bytes);
    if shared.waiting.load(Ordering::Relaxed) + bytes > most_bytes {
        shared.dropped.fetch_add(n, Ordering::Relaxed);
        return true;
    }
    shared.waiting.fetch_add(bytes, Ordering::Relaxed);
    match tx.try_send(batch) {
        Ok(()) => true,
        Err(mpsc::TrySendError::Full(_)) => {
            shared.waiting.fetch_sub(bytes, Ordering::Relaxed);
            shared.dropped.fetch_add(n, Ordering::Relaxed);
            true
        }
        Err(mpsc::TrySendError::Disconnected(_)) => false,
    }
}
