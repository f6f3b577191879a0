//! One writer and the receiver's side of it: the queue of records, the shared ring (with the
//! writer process), the buffers being gathered, and the waits when the writer is behind. A
//! VDIF recording has one lane; a vbs or Mark6 recording one per disk.

// unsafe: writes into a ring slot the lane owns (SharedRing::slot_mut).
#![allow(unsafe_code)]

use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::child::{exited, spawn_writer_process, ChildPipe};
use super::direct::check_direct;
use super::files::{writer, Shared, Written};
use super::{flush_bytes, slot_bytes, FileKey, WriteOp, WriterPlacement, DIRECT_ALIGN};
use crate::ring::SharedRing;
use safedir::Dir;

/// The writer process's side of a lane: the shared ring, the slots this process holds, and how
/// to tell that the process is gone.
pub(super) struct RingSide {
    pub(super) ring: Arc<SharedRing>,
    pub(super) held: Vec<bool>,
    /// The process and the pipe its records go down (taken at the finish).
    pipe: Option<ChildPipe>,
    child: u32,
    /// The process can take no more records.
    gone: bool,
}

/// A buffer of whole frames being gathered for one file.
pub(super) enum Gather {
    /// In memory, for the writer thread.
    Heap(Vec<u8>),
    /// In a slot of the ring (`None` until the next frame needs one), `len` bytes from byte
    /// `at`: the offset the data has within its block in the file, which lets the writer move
    /// it with direct I/O.
    Slot { slot: Option<u32>, at: usize, len: usize },
}

/// What is being gathered for one file.
pub(super) struct Pending {
    pub(super) buf: Gather,
    pub(super) frames: u64,
    pub(super) filled: u64,
    pub(super) frame_len: u64,
    /// Bytes of the file before the next frame (headers included), for the data's placement.
    pub(super) bytes_in_file: u64,
    pub(super) rotate: bool,
}

/// One writer: a thread of this process (its queue) or a writer process with its ring.
pub(super) struct Lane {
    ops: Option<SyncSender<WriteOp>>,
    ring: Option<RingSide>,
    thread: Option<JoinHandle<Written>>,
    pub(super) shared: Arc<Shared>,
    /// Hand a buffer over at this many bytes ([`flush_bytes`]).
    pub(super) flush: usize,
    /// Time the caller waited because the writer had all the buffers, and how often.
    pub(super) stalled: std::time::Duration,
    pub(super) stalls: u64,
    /// Most bytes of slots the writer process had at once (handed over, not yet written).
    pub(super) backlog_peak: u64,
}

impl Lane {
    /// Whether its writer is a process fed through a ring (which tells its backlog).
    pub(super) fn has_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Wait until its ring's memory is allocated (a writer thread has none), or `deadline`.
    pub(super) fn wait_populated(&self, deadline: std::time::Instant) -> bool {
        self.ring.as_ref().is_none_or(|r| r.ring.wait_populated(deadline))
    }

    /// A writer for files in `dir` (opened by the caller: every file is made below this
    /// descriptor, and a writer process inherits it, so no path is resolved again) with about
    /// `write_buffer` bytes of buffers, writing with direct I/O when `direct` (writer process
    /// only).
    pub(super) fn new(dir: Dir, placement: &WriterPlacement, write_buffer: u64, direct: bool) -> std::io::Result<Lane> {
        let shared = Arc::new(Shared::default());
        let flush = flush_bytes(write_buffer, direct);
        if direct {
            if matches!(placement, WriterPlacement::Thread) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "direct I/O needs the writer process (its buffers are aligned shared memory)",
                ));
            }
            check_direct(&dir)?;
        }
        // The disk's free space now, before its writer first looks: the first blocks are
        // placed knowing it too.
        let free = dir.space().ok().map(|s| s.free);
        let buffers = usize::try_from(write_buffer / flush as u64)
            .unwrap_or(usize::MAX)
            .max(1);
        let mut ring = None;
        let (tx, handle) = match placement {
            WriterPlacement::Thread => {
                let (tx, rx) = sync_channel(buffers);
                let sh = shared.clone();
                (
                    Some(tx),
                    Some(std::thread::spawn(move || writer(dir, rx, sh, None, false))),
                )
            }
            WriterPlacement::ChildProcess { program } => {
                let slots = u32::try_from(buffers).unwrap_or(u32::MAX).min(crate::ring::MAX_SLOTS);
                let r =
                    Arc::new(SharedRing::create(slots, slot_bytes(flush)).map_err(|e| {
                        std::io::Error::new(e.kind(), format!("shared memory for the file writer: {e}"))
                    })?);
                let child = spawn_writer_process(program, &dir, &r, direct).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("starting the file writer process {}: {e}", program.display()),
                    )
                })?;
                let pipe = ChildPipe::new(child)?;
                ring = Some(RingSide {
                    held: vec![false; r.slots() as usize],
                    ring: r,
                    child: pipe.id(),
                    pipe: Some(pipe),
                    gone: false,
                });
                (None, None)
            }
        };
        if let Some(free) = free {
            match &ring {
                Some(side) => side.ring.publish_space(free, 0),
                None => shared.publish_space(free, 0),
            }
        }
        Ok(Lane {
            ops: tx,
            ring,
            thread: handle,
            shared,
            flush,
            stalled: std::time::Duration::ZERO,
            stalls: 0,
            backlog_peak: 0,
        })
    }

    /// An empty buffer for a file at `bytes_in_file`, of frames of `frame_len`.
    pub(super) fn pending(&self, frame_len: u64, bytes_in_file: u64) -> Pending {
        let buf = if self.ring.is_some() {
            Gather::Slot {
                slot: None,
                at: 0,
                len: 0,
            }
        } else {
            Gather::Heap(Vec::with_capacity(self.flush + frame_len as usize))
        };
        Pending {
            buf,
            frames: 0,
            filled: 0,
            frame_len,
            bytes_in_file,
            rotate: false,
        }
    }

    /// Why the writer stopped writing (a multi-disk recorder's writer does at its first write
    /// error), once it has.
    pub(super) fn failed(&self) -> Option<String> {
        match &self.ring {
            Some(side) => side
                .ring
                .failed()
                .or_else(|| side.gone.then(|| "the file writer process ended".to_string())),
            None => self.shared.lane_failed(),
        }
    }

    /// The writer's last look at its disk, `(free bytes, data bytes written in all then)`;
    /// `None` before its first.
    pub(super) fn space(&self) -> Option<(u64, u64)> {
        match &self.ring {
            Some(side) => side.ring.space(),
            None => self.shared.space(),
        }
    }

    /// Bytes handed to the writer and not yet written (0 for a writer thread, which does not
    /// tell).
    pub(super) fn backlog(&self) -> u64 {
        self.ring
            .as_ref()
            .map_or(0, |s| u64::from(s.ring.handed_count()) * s.ring.slot_bytes() as u64)
    }

    pub(super) fn send(&mut self, op: WriteOp) {
        if let Some(side) = self.ring.as_mut() {
            let sent = match side.pipe.as_mut() {
                Some(pipe) if !side.gone => pipe.send(&op),
                _ => Err(std::io::ErrorKind::BrokenPipe.into()),
            };
            match sent {
                Ok(waited) if waited.is_zero() => {}
                Ok(waited) => {
                    // The pipe was full: the child is behind on records, a stall like a full
                    // ring.
                    self.stalled += waited;
                    self.stalls += 1;
                }
                Err(e) => {
                    if !side.gone {
                        self.shared.fail(format!("the file writer process stopped: {e}"));
                        side.gone = true;
                    }
                    if let WriteOp::Slot { frames, .. } = op {
                        self.shared.not_written.fetch_add(frames, Ordering::Relaxed);
                    }
                }
            }
            return;
        }
        let Some(tx) = &self.ops else { return };
        let unsent = match tx.try_send(op) {
            Ok(()) => return,
            Err(TrySendError::Full(op)) => {
                // The writer's queue is full: waiting here is a stall.
                let t = std::time::Instant::now();
                let sent = tx.send(op);
                self.stalled += t.elapsed();
                self.stalls += 1;
                match sent {
                    Ok(()) => return,
                    Err(e) => e.0,
                }
            }
            Err(TrySendError::Disconnected(op)) => op,
        };
        // The writer is gone (it cannot panic on I/O; this is defensive): count the loss.
        if let WriteOp::Data { frames, .. } | WriteOp::Slot { frames, .. } = unsent {
            self.shared.not_written.fetch_add(frames, Ordering::Relaxed);
        }
    }

    /// A free slot of the ring, waiting (and counting the wait as a stall) while the writer has
    /// them all; `None` once the writer process is gone.
    fn take_slot(&mut self) -> Option<u32> {
        let side = self.ring.as_mut()?;
        if let Some(s) = side.ring.try_take(&mut side.held) {
            return Some(s);
        }
        let t = std::time::Instant::now();
        let mut checked = t;
        let got = loop {
            // A slot frees about every 2 ms at 4 Gb/s; polling much faster only takes CPU from
            // the writer it waits for (on a 2-core host the two share a core), and the socket
            // buffer holds the wait.
            std::thread::sleep(std::time::Duration::from_micros(500));
            if let Some(s) = side.ring.try_take(&mut side.held) {
                break Some(s);
            }
            if checked.elapsed() >= std::time::Duration::from_millis(10) {
                checked = std::time::Instant::now();
                if side.gone || exited(side.child) {
                    self.shared.fail("the file writer process ended early".into());
                    break None;
                }
            }
        };
        self.stalled += t.elapsed();
        self.stalls += 1;
        got
    }

    /// Give back a slot a buffer holds without handing it over (the file it was for ended).
    pub(super) fn return_slot(&mut self, p: &Pending) {
        if let (Gather::Slot { slot: Some(s), .. }, Some(side)) = (&p.buf, self.ring.as_mut()) {
            side.held[*s as usize] = false;
        }
    }

    /// Hand what `p` gathered for file `key` to the writer.
    pub(super) fn hand_over(&mut self, key: FileKey, p: &mut Pending) {
        let (frames, filled) = (std::mem::take(&mut p.frames), std::mem::take(&mut p.filled));
        let frame_len = p.frame_len;
        let op = match &mut p.buf {
            Gather::Heap(buf) => {
                if buf.is_empty() {
                    return;
                }
                WriteOp::Data {
                    station: key,
                    buf: std::mem::replace(buf, Vec::with_capacity(self.flush + frame_len as usize)),
                    frames,
                    filled,
                    frame_len,
                }
            }
            Gather::Slot { slot, at, len } => {
                let (Some(s), true) = (*slot, *len > 0) else { return };
                let n = std::mem::take(len);
                *slot = None;
                let at = std::mem::take(at) as u32;
                if let Some(side) = self.ring.as_mut() {
                    side.ring.hand_over(s);
                    side.held[s as usize] = false;
                    // How deep a stall reached into the ring (one look along the slots' state
                    // bytes per handed buffer: 0.03 µs a frame at 256 KiB buffers).
                    let backlog = u64::from(side.ring.handed_count()) * self.flush as u64;
                    self.backlog_peak = self.backlog_peak.max(backlog);
                }
                WriteOp::Slot {
                    station: key,
                    slot: s,
                    at,
                    len: n as u32,
                    frames,
                    filled,
                    frame_len,
                }
            }
        };
        self.send(op);
    }

    /// Add one frame to `p` (a slot of the ring or memory): `Some(full)`, or `None` when it
    /// could not be kept (counted as not written).
    pub(super) fn gather(&mut self, p: &mut Pending, frame: &[u8]) -> Option<bool> {
        let needs_slot = matches!(p.buf, Gather::Slot { slot: None, .. });
        let fresh = if needs_slot { self.take_slot() } else { None };
        let kept = match &mut p.buf {
            Gather::Heap(buf) => {
                buf.extend_from_slice(frame);
                Some(buf.len() >= self.flush)
            }
            Gather::Slot { slot, at, len } => {
                if slot.is_none() {
                    *slot = fresh;
                    *at = (p.bytes_in_file % DIRECT_ALIGN as u64) as usize;
                }
                match (*slot, self.ring.as_ref()) {
                    (Some(s), Some(side)) => {
                        // SAFETY: this process holds slot `s` (taken, not handed over) and this
                        // is the only slice of it alive.
                        let dst = unsafe { side.ring.slot_mut(s) };
                        let (start, end) = (*at + *len, *at + *len + frame.len());
                        // Frames come from datagrams (≤ 64 KiB) and a slot is handed over once
                        // it holds a flush's worth, so a frame always fits; refuse rather than
                        // overrun if not.
                        dst.get_mut(start..end).map(|room| {
                            room.copy_from_slice(frame);
                            *len += frame.len();
                            *len >= self.flush
                        })
                    }
                    _ => None,
                }
            }
        };
        if kept.is_none() {
            self.shared.not_written.fetch_add(1, Ordering::Relaxed);
        }
        kept
    }

    /// Close the queue (or the pipe) and wait for the writer: what it wrote.
    pub(super) fn finish(&mut self) -> Written {
        self.ops = None;
        if let Some(side) = self.ring.as_mut() {
            let written = side.pipe.take().map(|p| p.finish(&self.shared)).unwrap_or_default();
            side.gone = true;
            return written;
        }
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}
