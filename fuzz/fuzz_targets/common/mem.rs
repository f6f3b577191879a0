//! An in-memory file for the transfer fuzz targets: the sender's source and the receiver's sink.
use std::time::{Duration, Instant};

use transfer::{Receiver, Sender, Sink, Source};

/// The file's bytes.
pub struct Mem(pub Vec<u8>);

impl Source for Mem {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let start = (offset as usize).min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }
}

impl Sink for Mem {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let end = offset as usize + data.len();
        assert!(end <= self.0.len(), "write past the end of the file");
        self.0[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

/// Run a real exchange for 2 ms of virtual time so both machines are mid-transfer; the time
/// reached.
pub fn warm_up(tx: &mut Sender<Mem>, rx: &mut Receiver<Mem>, t0: Instant) -> Instant {
    let mut now = t0;
    for _ in 0..20 {
        now += Duration::from_micros(100);
        while let Some(d) = tx.poll_transmit(now) {
            rx.handle_datagram(now, &d);
        }
        while let Some(r) = rx.poll_transmit(now) {
            tx.handle_datagram(now, &r);
        }
    }
    now
}

/// The fuzz input as datagrams: each a 2-byte big-endian length, then that many bytes.
pub fn datagrams(mut rest: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if rest.len() < 2 {
            return None;
        }
        let n = (usize::from(rest[0]) << 8 | usize::from(rest[1])).min(rest.len() - 2);
        let d = &rest[2..2 + n];
        rest = &rest[2 + n..];
        Some(d)
    })
}
