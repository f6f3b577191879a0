//! A reader thread per input too large to hold in memory: whole frames read in batches (a
//! frame scanner skips what is not one), handed over a bounded queue to the sender's
//! [`FrameSource`], the input opened again for each pass when looping.

use std::io::BufReader;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use stream::sender::{Frame, FrameSource};
use vdif::{FrameScanner, ScanEvent};

use super::input::Opener;

/// Frames per batch handed from a reader thread to the sender.
const BATCH_FRAMES: usize = 64;
/// Batches queued per reader (64 × 64 frames of 8 KB = 32 MB).
const QUEUE_BATCHES: usize = 64;

/// What a reader thread did.
#[derive(Default)]
pub(crate) struct ReaderStats {
    /// Passes over the input after the first.
    pub loops: u64,
    /// Bytes that were no frame of the stream's length.
    pub garbage_bytes: u64,
    /// What failed ("open" or "read") and why.
    pub error: Option<(&'static str, std::io::Error)>,
}

/// A batch of whole frames from a reader thread, with the pass over the file it came from (a
/// batch never spans two passes).
struct Batch {
    pass: u32,
    frames: Vec<u8>,
}

/// Start reading `open`'s frames of `frame_len` bytes on a thread of their own: the source
/// the sender takes them from, and the thread.
pub(crate) fn spawn(
    open: Opener,
    frame_len: usize,
    loop_seconds: u32,
) -> (ReaderSource, std::io::Result<JoinHandle<ReaderStats>>) {
    let (tx, rx) = sync_channel(QUEUE_BATCHES);
    let looping = loop_seconds > 0;
    let thread = std::thread::Builder::new()
        .name("stream-reader".into())
        .spawn(move || read(open, frame_len, looping, tx));
    let source = ReaderSource {
        rx,
        batch: Batch {
            pass: 0,
            frames: Vec::new(),
        },
        pos: 0,
        frame_len,
        loop_seconds,
        underruns: 0,
    };
    (source, thread)
}

/// Read whole frames in batches; at the end restart when looping (the sender advances the time
/// of later passes).
fn read(open: Opener, frame_len: usize, looping: bool, tx: SyncSender<Batch>) -> ReaderStats {
    let mut st = ReaderStats::default();
    let mut pass = 0u32;
    loop {
        let f = match open.open() {
            Ok(f) => f,
            Err(e) => {
                st.error = Some(("open", e));
                return st;
            }
        };
        let mut batch = Vec::with_capacity(BATCH_FRAMES * frame_len);
        for ev in FrameScanner::new(BufReader::with_capacity(1 << 20, f)) {
            match ev {
                Ok(ScanEvent::Frame { bytes, .. }) => {
                    if bytes.len() != frame_len {
                        st.garbage_bytes += bytes.len() as u64;
                        continue;
                    }
                    batch.extend_from_slice(&bytes);
                    if batch.len() >= BATCH_FRAMES * frame_len {
                        let frames = std::mem::take(&mut batch);
                        if tx.send(Batch { pass, frames }).is_err() {
                            return st;
                        }
                        batch.reserve(BATCH_FRAMES * frame_len);
                    }
                }
                Ok(ScanEvent::Garbage { len, .. }) | Ok(ScanEvent::Truncated { len, .. }) => st.garbage_bytes += len,
                Err(e) => {
                    st.error = Some(("read", e));
                    return st;
                }
            }
        }
        if !batch.is_empty() && tx.send(Batch { pass, frames: batch }).is_err() {
            return st;
        }
        if !looping {
            return st;
        }
        pass = pass.saturating_add(1);
        st.loops += 1;
    }
}

/// Frames from a reader thread; waits (counting an underrun) when the reader is behind.
pub(crate) struct ReaderSource {
    rx: Receiver<Batch>,
    batch: Batch,
    pos: usize,
    frame_len: usize,
    loop_seconds: u32,
    underruns: u64,
}

impl FrameSource for ReaderSource {
    fn next_frame(&mut self) -> Option<Frame<'_>> {
        if self.pos >= self.batch.frames.len() {
            self.batch = match self.rx.try_recv() {
                Ok(b) => b,
                Err(TryRecvError::Empty) => {
                    self.underruns += 1;
                    self.rx.recv().ok()?
                }
                Err(TryRecvError::Disconnected) => return None,
            };
            self.pos = 0;
        }
        let at = self.pos;
        self.pos += self.frame_len;
        Some(Frame {
            bytes: self.batch.frames.get(at..self.pos)?,
            add_seconds: self.batch.pass.saturating_mul(self.loop_seconds),
        })
    }

    fn underruns(&self) -> u64 {
        self.underruns
    }
}
