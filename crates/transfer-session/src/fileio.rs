//! The transfer protocol's [`Source`] and [`Sink`] over a real file, through a [`Selection`];
//! [`ReadAt`], what a sender reads: a file, or anything read at offsets (a recorded scan).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Positional reads, shared by threads (the round's sender and the hasher read at once).
pub trait ReadAt: Send + Sync {
    /// Read at `offset` (a short read is normal; 0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Fill `buf` from `offset`, or fail with `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

use transfer::{Sink, Source};

use crate::blocks::Selection;

/// Reads the selected blocks of the sender's file as one virtual file (positional reads, so
/// retransmissions read again from the page cache instead of being buffered).
pub struct FileSource<'a> {
    file: &'a dyn ReadAt,
    selection: Selection,
}

impl<'a> FileSource<'a> {
    /// Read `selection` of `file`.
    pub fn new(file: &'a dyn ReadAt, selection: Selection) -> Self {
        FileSource { file, selection }
    }
}

impl Source for FileSource<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        match self.selection.locate(offset) {
            Some((_, real)) => self.file.read_at(buf, real),
            None => Ok(0),
        }
    }
}

/// Writes arriving chunks into the `.part` file at their real offsets and notices when a
/// selected block has all its chunks.
pub struct PartSink<'a> {
    file: &'a File,
    selection: Selection,
    chunks_left: Vec<u64>,
    completed: Vec<u64>,
    /// Most recent write error, for the session to judge (disk full ends the round).
    pub last_error: Option<io::Error>,
}

impl<'a> PartSink<'a> {
    /// Write `selection` into `file`, chunks of `chunk_size` bytes.
    pub fn new(file: &'a File, selection: Selection, chunk_size: u32, block_size: u64) -> Self {
        let size = selection.virtual_size();
        let n = selection.blocks().len() as u64;
        let chunks_left = (0..n)
            .map(|i| {
                let len = (size - i * block_size).min(block_size);
                len.div_ceil(u64::from(chunk_size))
            })
            .collect();
        PartSink {
            file,
            selection,
            chunks_left,
            completed: Vec::new(),
            last_error: None,
        }
    }

    /// Real block indices completed since the last call.
    pub fn take_completed(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.completed)
    }
}

impl Sink for PartSink<'_> {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let (i, real) = self
            .selection
            .locate(offset)
            .ok_or_else(|| io::Error::other("chunk outside the selection"))?;
        if let Err(e) = self.file.write_all_at(data, real) {
            let copy = io::Error::new(e.kind(), e.to_string());
            self.last_error = Some(e);
            return Err(copy);
        }
        // The protocol hands each chunk to the sink once, so counting down is exact.
        if let Some(left) = self.chunks_left.get_mut(i) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.completed.push(self.selection.blocks()[i]);
            }
        }
        Ok(())
    }
}
