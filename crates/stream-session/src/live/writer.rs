//! A live output's writer thread: a reader at a time, chunks written with `writev` from a
//! time step on, each write bounded so a reader that stops reading never holds it past a stop.

use std::io::{IoSlice, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::output::{add, frame_slices, Chunk, Shared};
use super::{Connector, LiveConn};

/// Longest single write to a reader before the writer looks at its stop flag again.
const WRITE_TIMEOUT: Duration = Duration::from_millis(200);
/// How long the writer waits for a chunk before it looks at the stop flag and for other readers.
const POLL: Duration = Duration::from_millis(100);

/// Where a reader's first frame may be: always the first frame of a time step (every thread of
/// it follows in order); with `valid_only`, also one that is not filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartRule {
    /// The first frame must be a received one, not a filled invalid one.
    pub valid_only: bool,
}

/// Why a reader's connection ended.
#[derive(Debug, thiserror::Error)]
enum ReaderEnd {
    #[error("the reader closed the connection")]
    Closed,
    #[error("the output stopped")]
    Stopped,
    #[error("the output stopped while the reader was not reading")]
    NotReading,
    #[error("the reader went away: {0}")]
    Gone(std::io::Error),
}

/// The writer thread: a reader at a time, until stopped.
pub(super) fn writer(shared: &Shared, connector: &mut dyn Connector, rule: StartRule) {
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(mut conn) = connector.next_reader(&shared.stop, &shared.counts) else {
            break;
        };
        if conn.set_write_timeout(WRITE_TIMEOUT).is_err() {
            continue;
        }
        conn.size_buffer();
        add(&shared.counts.clients, 1);
        {
            let mut q = shared.lock();
            // Without a second handle every chunk goes through this thread, as it may.
            q.direct = conn.try_clone().ok();
            q.at_start = true;
        }
        shared.connected.store(true, Ordering::Relaxed);
        let why = serve_reader(shared, &mut conn, connector, rule);
        shared.connected.store(false, Ordering::Relaxed);
        let mut q = shared.lock();
        q.direct = None;
        q.writing = false;
        let left: u64 = q.chunks.iter().map(|c| c.marks.len() as u64).sum();
        add(&shared.counts.skipped_at_start, left);
        let chunks: Vec<Chunk> = q.chunks.drain(..).collect();
        for mut c in chunks {
            c.clear();
            q.free.push(c);
        }
        q.bytes = 0;
        q.last_disconnect = Some(why.to_string());
    }
}

/// Write chunks to one reader until it goes away or the output stops; why it ended.
fn serve_reader(shared: &Shared, conn: &mut LiveConn, connector: &mut dyn Connector, rule: StartRule) -> ReaderEnd {
    let mut looked = Instant::now();
    loop {
        // Other readers are turned away while this one reads, data flowing or not.
        if looked.elapsed() >= POLL {
            connector.while_connected(&shared.counts);
            looked = Instant::now();
        }
        let chunk = {
            let mut q = shared.lock();
            loop {
                if let Some(c) = q.chunks.pop_front() {
                    q.bytes -= c.data.len() as u64;
                    q.writing = true;
                    break Some((c, q.at_start));
                }
                if shared.stop.load(Ordering::Relaxed) {
                    break None;
                }
                q.writer_waiting = true;
                let (g, _) = shared.cv.wait_timeout(q, POLL).unwrap_or_else(|p| p.into_inner());
                q = g;
                q.writer_waiting = false;
                if q.chunks.is_empty() {
                    break None;
                }
            }
        };
        let Some((mut chunk, mut at_start)) = chunk else {
            if shared.stop.load(Ordering::Relaxed) {
                return ReaderEnd::Stopped;
            }
            continue;
        };
        let r = write_chunk(shared, conn, &chunk, &mut at_start, rule);
        chunk.clear();
        let mut q = shared.lock();
        q.free.push(chunk);
        q.at_start = at_start;
        q.writing = false;
        drop(q);
        if let Err(why) = r {
            return why;
        }
    }
}

/// One chunk to the reader, from a time step when it starts or resumes.
fn write_chunk(
    shared: &Shared,
    conn: &mut LiveConn,
    chunk: &Chunk,
    at_start: &mut bool,
    rule: StartRule,
) -> Result<(), ReaderEnd> {
    *at_start |= chunk.resync;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(chunk.marks.len() * 2);
    let (mut frames, mut filled, mut bytes, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    // A frame the receiver sent in part goes on where it stopped; a reader starting anew
    // never gets a frame's tail.
    let mut skip = chunk.skip as usize;
    for m in &chunk.marks {
        if *at_start {
            if skip > 0 || !m.step || (rule.valid_only && m.filled) {
                skip = 0;
                skipped += 1;
                continue;
            }
            *at_start = false;
        }
        frame_slices(&mut slices, &chunk.data, m, &shared.fill);
        frames += 1;
        filled += u64::from(m.filled);
        bytes += u64::from(m.len);
    }
    add(&shared.counts.skipped_at_start, skipped);
    let mut slices = &mut slices[..];
    IoSlice::advance_slices(&mut slices, skip);
    if let Err(why) = write_all(shared, conn, slices) {
        // Not (wholly) delivered: counted with those let go when a reader goes away.
        add(&shared.counts.skipped_at_start, frames);
        return Err(why);
    }
    let c = &shared.counts;
    add(&c.frames_sent, frames);
    add(&c.filled_sent, filled);
    add(&c.bytes_sent, bytes);
    Ok(())
}

/// Write every slice; a write that times out is retried until the output stops and its drain
/// time has passed.
fn write_all(shared: &Shared, conn: &mut LiveConn, mut slices: &mut [IoSlice<'_>]) -> Result<(), ReaderEnd> {
    while !slices.is_empty() {
        match conn.write_vectored(slices) {
            Ok(0) => return Err(ReaderEnd::Closed),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                let until = *shared.drain_until.lock().unwrap_or_else(|p| p.into_inner());
                if until.is_some_and(|u| Instant::now() >= u) {
                    return Err(ReaderEnd::NotReading);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReaderEnd::Gone(e)),
        }
    }
    Ok(())
}
