//! A live output's writer thread: a reader at a time, chunks written with `writev` from a
//! time step on, each write bounded so a reader that stops reading never holds it past a stop.

use std::io::{IoSlice, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::output::{add, Chunk, Shared};
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
    // What follows a filled frame's header: the fill pattern, as the window fills (DiFX's
    // INTERLACEDVDIF readers skip it; zeros they correlated as samples).
    let mut fill = vec![0u8; 65_536];
    stream::feed::fill_data(&mut fill, 0);
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(mut conn) = connector.next_reader(&shared.stop, &shared.counts) else {
            break;
        };
        if conn.set_write_timeout(WRITE_TIMEOUT).is_err() {
            continue;
        }
        conn.size_buffer();
        add(&shared.counts.clients, 1);
        shared.connected.store(true, Ordering::Relaxed);
        let why = serve_reader(shared, &mut conn, connector, rule, &fill);
        shared.connected.store(false, Ordering::Relaxed);
        let mut q = shared.lock();
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
fn serve_reader(
    shared: &Shared,
    conn: &mut LiveConn,
    connector: &mut dyn Connector,
    rule: StartRule,
    zeros: &[u8],
) -> ReaderEnd {
    let mut at_start = true;
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
                    break Some(c);
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
        let Some(mut chunk) = chunk else {
            if shared.stop.load(Ordering::Relaxed) {
                return ReaderEnd::Stopped;
            }
            continue;
        };
        let r = write_chunk(shared, conn, &chunk, &mut at_start, rule, zeros);
        chunk.clear();
        shared.lock().free.push(chunk);
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
    zeros: &[u8],
) -> Result<(), ReaderEnd> {
    *at_start |= chunk.resync;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(chunk.marks.len() * 2);
    let (mut frames, mut filled, mut bytes, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    for m in &chunk.marks {
        if *at_start {
            if !m.step || (rule.valid_only && m.filled) {
                skipped += 1;
                continue;
            }
            *at_start = false;
        }
        let (start, stored) = (m.start as usize, m.stored as usize);
        slices.push(IoSlice::new(&chunk.data[start..start + stored]));
        let mut pad = (m.len - m.stored) as usize;
        while pad > 0 {
            let n = pad.min(zeros.len());
            slices.push(IoSlice::new(&zeros[..n]));
            pad -= n;
        }
        frames += 1;
        filled += u64::from(m.filled);
        bytes += u64::from(m.len);
    }
    add(&shared.counts.skipped_at_start, skipped);
    if let Err(why) = write_all(shared, conn, &mut slices) {
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
