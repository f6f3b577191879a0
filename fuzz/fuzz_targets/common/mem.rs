//! An in-memory file for the transfer fuzz targets: the sender's source and the receiver's sink.
use transfer::{Sink, Source};

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
