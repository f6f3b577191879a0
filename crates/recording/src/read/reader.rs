//! [`ScanReader`]: a scan as `std::io::Read` + `Seek`, and positional reads that any number of
//! threads can share (the transfer's sender and hasher read the same scan at once).

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;

use super::Scan;

/// Reads the continuous scan from a position.
#[derive(Debug, Clone)]
pub struct ScanReader {
    scan: Arc<Scan>,
    pos: u64,
}

impl ScanReader {
    /// Read `scan` from its start.
    pub fn new(scan: Arc<Scan>) -> ScanReader {
        ScanReader { scan, pos: 0 }
    }

    /// The scan.
    pub fn scan(&self) -> &Arc<Scan> {
        &self.scan
    }

    /// Read at `offset` without moving the position (as `FileExt::read_at`).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.scan.read_at(buf, offset)
    }

    /// Fill `buf` from `offset`, or fail with `UnexpectedEof` (as `FileExt::read_exact_at`).
    pub fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.scan.read_at(buf, offset)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
            offset += n as u64;
        }
        Ok(())
    }
}

impl Read for ScanReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.scan.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ScanReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let len = self.scan.len() as i128;
        let target = match to {
            SeekFrom::Start(o) => i128::from(o),
            SeekFrom::End(d) => len + i128::from(d),
            SeekFrom::Current(d) => i128::from(self.pos) + i128::from(d),
        };
        self.pos = u64::try_from(target).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(self.pos)
    }
}
