//! The writer's side of a vbs or Mark6 recording on one disk: chunk files and Mark6 files with
//! their headers, blocks ended (a short Mark6 block gets its true length in its header), and the
//! first write error taking the whole disk out.
//!
//! On that error every file on this disk is cut back to the whole frames it holds (a Mark6 block
//! header is corrected to them, or the block dropped), the frames that did not make it are
//! counted as not written, and nothing more is written here: the receiver sees the failure in
//! the ring and sends later blocks to the other disks.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use safedir::{Create, Dir, DirError};

use scanfmt::mk6::{BlockHeader, FileHeader, FILE_HEADER_LEN};
use scanfmt::{name, vbs, Layout};
use serde::{Deserialize, Serialize};

use super::direct::{append_bytes, end_direct, finish_direct, patch, write_direct, Carry};
use super::FileKey;

/// What one disk's writer wrote of one recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct LaneScan {
    pub(super) key: FileKey,
    pub(super) scan: String,
    pub(super) blocks: u64,
    pub(super) bytes: u64,
    pub(super) frames: u64,
    pub(super) filled: u64,
    pub(super) frame_len: u64,
}

/// The block being written.
struct OpenBlock {
    number: u32,
    /// Where its Mark6 header is, and where its data starts.
    header_at: u64,
    data_start: u64,
    planned: u64,
    written: u64,
    filled: u64,
}

/// A recording's open file on this disk (a vbs chunk, or the Mark6 file).
struct ScanOpen {
    layout: Layout,
    scan: String,
    frame_len: u64,
    path: PathBuf,
    file: File,
    carry: Option<Carry>,
    /// Bytes given to the file (on disk, plus the carry with direct I/O).
    pos: u64,
    block: Option<OpenBlock>,
}

/// The recordings on one disk.
pub(super) struct ScanFiles {
    /// The disk's directory (or why it could not be opened).
    disk: Result<Dir, DirError>,
    direct: bool,
    open: HashMap<FileKey, ScanOpen>,
    stats: HashMap<FileKey, LaneScan>,
    failed: Option<String>,
    /// Frames given and not on disk.
    pub(super) not_written: u64,
}

fn create(dir: &Dir, name: &str, direct: bool) -> std::io::Result<(File, PathBuf)> {
    // A Mark6 header patched on disk is read back first with direct I/O.
    let how = Create { read: direct, direct };
    let f = dir.create_file(name, how).map_err(DirError::into_io)?;
    Ok((f, dir.display(name)))
}

impl ScanOpen {
    /// Append header bytes (not from a slot).
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.carry.as_mut() {
            Some(c) => append_bytes(&mut self.file, c, bytes)?,
            None => self.file.write_all(bytes)?,
        }
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// End the open block: a Mark6 block shorter than planned gets its length in its header.
    fn end_block(&mut self) -> std::io::Result<()> {
        let Some(b) = self.block.take() else { return Ok(()) };
        if self.layout == Layout::Mk6 && b.written < b.planned {
            let h = BlockHeader::emit_v2(u64::from(b.number), b.written).map_err(std::io::Error::other)?;
            patch(&self.file, self.carry.as_mut(), self.pos, b.header_at, &h)?;
        }
        Ok(())
    }

    /// Write what the carry holds and close.
    fn close(mut self) -> std::io::Result<()> {
        self.end_block()?;
        match self.carry.as_mut() {
            Some(c) => finish_direct(&mut self.file, c),
            None => Ok(()),
        }
    }
}

impl ScanFiles {
    pub(super) fn new(disk: Result<Dir, DirError>, direct: bool) -> ScanFiles {
        ScanFiles {
            disk,
            direct,
            open: HashMap::new(),
            stats: HashMap::new(),
            failed: None,
            not_written: 0,
        }
    }

    fn disk(&self) -> std::io::Result<&Dir> {
        self.disk.as_ref().map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn disk_path(&self) -> PathBuf {
        self.disk
            .as_ref()
            .map_or_else(|_| PathBuf::new(), |d| d.path().to_path_buf())
    }

    /// Whether `key` is a recording of this writer (its records come here).
    pub(super) fn has(&self, key: FileKey) -> bool {
        self.stats.contains_key(&key)
    }

    /// Why this disk stopped, once it has.
    pub(super) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Start block `number` of `scan` for `key`.
    pub(super) fn block(
        &mut self,
        key: FileKey,
        scan: &str,
        layout: Layout,
        number: u32,
        planned: u64,
        frame_len: u64,
    ) {
        let st = self.stats.entry(key).or_insert_with(|| LaneScan {
            key,
            scan: scan.to_string(),
            frame_len,
            ..LaneScan::default()
        });
        st.blocks += 1;
        if self.failed.is_some() {
            return;
        }
        // The pipe is checked like any input: a name that could leave the disk writes nothing.
        if !name::is_valid(scan) {
            return self.fail(format!("writer record: scan name {scan:?}"));
        }
        if let Err(e) = self.start(key, scan, layout, number, planned, frame_len) {
            self.fail(format!("{}: {e}", self.disk_path().join(scan).display()));
        }
    }

    fn start(
        &mut self,
        key: FileKey,
        scan: &str,
        layout: Layout,
        number: u32,
        planned: u64,
        frame_len: u64,
    ) -> std::io::Result<()> {
        let block = |header_at, data_start| OpenBlock {
            number,
            header_at,
            data_start,
            planned,
            written: 0,
            filled: 0,
        };
        match layout {
            Layout::Vbs => {
                if let Some(o) = self.open.remove(&key) {
                    o.close()?;
                }
                // The scan's directory on this disk, made when missing, never through a link:
                // a link planted at its name fails this disk rather than receive the chunks.
                let dir = self.disk()?.make_subdir(scan).map_err(DirError::into_io)?;
                let (file, path) = create(&dir, &vbs::chunk_name(scan, number), self.direct)?;
                self.open.insert(
                    key,
                    ScanOpen {
                        layout,
                        scan: scan.to_string(),
                        frame_len,
                        path,
                        file,
                        carry: self.direct.then(Carry::new),
                        pos: 0,
                        block: Some(block(0, 0)),
                    },
                );
            }
            Layout::Mk6 => {
                if self.open.get(&key).is_none_or(|o| o.scan != scan) {
                    if let Some(o) = self.open.remove(&key) {
                        o.close()?;
                    }
                    let (file, path) = create(self.disk()?, scan, self.direct)?;
                    let mut o = ScanOpen {
                        layout,
                        scan: scan.to_string(),
                        frame_len,
                        path,
                        file,
                        carry: self.direct.then(Carry::new),
                        pos: 0,
                        block: None,
                    };
                    let head = FileHeader::vdif(planned, frame_len).map_err(std::io::Error::other)?;
                    o.put(&head.emit())?;
                    debug_assert_eq!(o.pos, FILE_HEADER_LEN as u64);
                    self.open.insert(key, o);
                }
                let Some(o) = self.open.get_mut(&key) else {
                    return Ok(());
                };
                o.end_block()?;
                let header_at = o.pos;
                o.put(&BlockHeader::emit_v2(u64::from(number), planned).map_err(std::io::Error::other)?)?;
                o.block = Some(block(header_at, o.pos));
            }
        }
        Ok(())
    }

    /// Whole frames for `key`'s open block.
    pub(super) fn append(&mut self, key: FileKey, data: &[u8], frames: u64, filled: u64, frame_len: u64) {
        let fits = self.stats.get(&key).is_some_and(|s| s.frame_len == frame_len);
        let Some(o) = self
            .open
            .get_mut(&key)
            .filter(|o| self.failed.is_none() && fits && o.block.is_some())
        else {
            self.not_written += frames;
            return;
        };
        let written = match o.carry.as_mut() {
            Some(c) => write_direct(&mut o.file, c, data),
            None => o.file.write_all(data),
        };
        match written {
            Ok(()) => {
                o.pos += data.len() as u64;
                if let Some(b) = o.block.as_mut() {
                    b.written += data.len() as u64;
                    b.filled += filled;
                }
                if let Some(st) = self.stats.get_mut(&key) {
                    st.bytes += data.len() as u64;
                    st.frames += frames;
                    st.filled += filled;
                }
            }
            Err(e) => {
                let msg = format!("writing {}: {e}", o.path.display());
                self.not_written += frames;
                self.fail(msg);
            }
        }
    }

    /// `key`'s block on this disk is complete.
    pub(super) fn end_block(&mut self, key: FileKey) {
        if self.failed.is_some() {
            return;
        }
        let Some(o) = self.open.get_mut(&key) else { return };
        let ended = o.end_block();
        if o.layout == Layout::Vbs {
            // A chunk file is done with its block.
            if let Some(o) = self.open.remove(&key) {
                if let Err(e) = ended.and_then(|()| o.close()) {
                    self.fail(format!("closing a chunk of {}: {e}", self.disk_path().display()));
                }
            }
        } else if let Err(e) = ended {
            self.fail(format!("ending a block of {}: {e}", self.disk_path().display()));
        }
    }

    /// Close `key`'s file (the end of its recording).
    pub(super) fn close(&mut self, key: FileKey) {
        if let Some(o) = self.open.remove(&key) {
            if self.failed.is_none() {
                let path = o.path.clone();
                if let Err(e) = o.close() {
                    self.fail(format!("closing {}: {e}", path.display()));
                }
            }
        }
    }

    /// The first error: this disk writes no more. Every open file is cut back to the whole
    /// frames it holds and what that loses is counted.
    fn fail(&mut self, why: String) {
        if self.failed.is_some() {
            return;
        }
        self.failed = Some(why);
        for (key, mut o) in std::mem::take(&mut self.open) {
            let lost = salvage(&mut o);
            if let Some(st) = self.stats.get_mut(&key) {
                let fl = st.frame_len.max(1);
                st.frames -= lost.frames.min(st.frames);
                st.bytes -= (lost.frames * fl).min(st.bytes);
                st.filled -= lost.filled.min(st.filled);
            }
            self.not_written += lost.frames;
        }
    }

    /// Close everything (the end of the input): what was written.
    pub(super) fn finish(mut self) -> (Vec<LaneScan>, u64, Option<String>) {
        let keys: Vec<FileKey> = self.open.keys().copied().collect();
        for k in keys {
            self.close(k);
        }
        let mut out: Vec<LaneScan> = self.stats.into_values().collect();
        out.sort_by_key(|s| s.key);
        (out, self.not_written, self.failed)
    }
}

/// Frames of the open block that did not reach the disk.
#[derive(Default)]
struct Lost {
    frames: u64,
    filled: u64,
}

/// After a write error: keep the whole frames of the open block that are on disk (writing the
/// carry if the disk still takes it), cut the file there (dropping a Mark6 block, header and
/// all, or a vbs chunk that kept nothing), and correct a Mark6 header to what is kept.
fn salvage(o: &mut ScanOpen) -> Lost {
    let Some(b) = o.block.take() else {
        return Lost::default();
    };
    if let Some(c) = o.carry.as_mut() {
        let _ = finish_direct(&mut o.file, c);
        // Leave O_DIRECT for the header fix below (an 8-byte write).
        let _ = end_direct(&o.file);
    }
    let fl = o.frame_len.max(1);
    let on_disk = o.file.metadata().map_or(0, |m| m.len());
    let kept = on_disk.saturating_sub(b.data_start).min(b.written) / fl * fl;
    let lost = b.written / fl - kept / fl;
    let end = if o.layout == Layout::Mk6 && kept == 0 {
        b.header_at
    } else {
        b.data_start + kept
    };
    let _ = o.file.set_len(end);
    if o.layout == Layout::Mk6 && kept > 0 && kept < b.planned {
        if let Ok(h) = BlockHeader::emit_v2(u64::from(b.number), kept) {
            let _ = patch(&o.file, None, end, b.header_at, &h);
        }
    }
    if o.layout == Layout::Vbs && kept == 0 {
        let _ = std::fs::remove_file(&o.path);
    }
    Lost {
        frames: lost,
        filled: b.filled.min(lost),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::child::serve_in;
    use super::super::child::WriterOutcome;
    use super::super::tests::{encoded, place};
    use super::super::{slot_bytes, WriteOp, DIRECT_ALIGN, FLUSH_BYTES_DIRECT};
    use crate::ring::SharedRing;

    /// Records of a vbs or Mark6 recording on one disk: blocks `(number, frames, ended)` of
    /// `frame_len`-byte frames planned `planned` frames long, each frame's bytes its index,
    /// data placed in the ring as the receiver places it (at its offset within the file's
    /// block). The ring, the records, and each block's data.
    fn scan_records(
        layout: scanfmt::Layout,
        blocks: &[(u32, usize, bool)],
        frame_len: usize,
        planned: usize,
    ) -> (SharedRing, Vec<u8>, Vec<Vec<u8>>) {
        let records_per_block = 2;
        let ring = SharedRing::create(
            (blocks.len() * records_per_block) as u32,
            slot_bytes(FLUSH_BYTES_DIRECT),
        )
        .unwrap();
        let mut held = vec![false; ring.slots() as usize];
        let (mut ops, mut datas, mut pos, mut k) = (Vec::new(), Vec::new(), 0usize, 0u8);
        for &(number, n, ended) in blocks {
            ops.push(WriteOp::Block {
                station: 3,
                scan: "s_dsEf".into(),
                layout,
                number,
                planned: (planned * frame_len) as u64,
                frame_len: frame_len as u64,
            });
            pos = match layout {
                scanfmt::Layout::Vbs => 0,
                scanfmt::Layout::Mk6 => pos + if pos == 0 { 28 } else { 8 },
            };
            let mut data = Vec::new();
            for part in [n / 2, n - n / 2] {
                let bytes: Vec<u8> = (0..part * frame_len)
                    .map(|i| k.wrapping_add((i / frame_len) as u8))
                    .collect();
                k = k.wrapping_add(part as u8);
                ops.push(place(&ring, &mut held, pos % DIRECT_ALIGN, &bytes, part, frame_len));
                pos += bytes.len();
                data.extend_from_slice(&bytes);
            }
            if ended {
                ops.push(WriteOp::EndBlock { station: 3 });
            }
            datas.push(data);
        }
        (ring, encoded(&ops), datas)
    }

    fn read_scan(layout: scanfmt::Layout, dir: &Path) -> (Vec<u8>, scanfmt::results::ScanInfo) {
        use std::io::Read;
        let scan = crate::Scan::open(layout, "s_dsEf", &[dir.to_path_buf()]).unwrap();
        let info = scan.info();
        let mut out = Vec::new();
        crate::ScanReader::new(std::sync::Arc::new(scan))
            .read_to_end(&mut out)
            .unwrap();
        (out, info)
    }

    #[test]
    fn the_writer_process_writes_scan_blocks_in_both_layouts_direct_or_not() {
        // Blocks 0, 4 and 9 of a scan spread over other disks too; the last ends short.
        for layout in [scanfmt::Layout::Vbs, scanfmt::Layout::Mk6] {
            for direct in [false, true] {
                let dir = tempfile::tempdir().unwrap();
                let (ring, records, datas) = scan_records(layout, &[(0, 9, true), (4, 9, true), (9, 5, true)], 1000, 9);
                let report = serve_in(dir.path(), &ring, direct, &records[..]);
                let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
                assert_eq!(
                    (outcome.error.as_deref(), outcome.not_written),
                    (None, 0),
                    "{layout} direct {direct}"
                );
                assert_eq!(outcome.scans[0].frames, 23);
                assert_eq!(outcome.scans[0].blocks, 3);
                let (back, info) = read_scan(layout, dir.path());
                assert!(back == datas.concat(), "{layout} direct {direct}: the data differs");
                assert_eq!(info.missing_blocks, 7, "blocks 1-3 and 5-8 are on other disks");
                assert_eq!(info.truncated_blocks, 0, "the short block's header says its length");
            }
        }
    }

    #[test]
    fn a_receiver_killed_mid_block_leaves_a_block_that_says_what_it_holds() {
        for direct in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (ring, records, datas) = scan_records(scanfmt::Layout::Mk6, &[(0, 9, true), (1, 8, false)], 1000, 9);
            // The input ends inside block 1's second record: its first 4 frames are written.
            let cut = records.len() - 10;
            serve_in(dir.path(), &ring, direct, &records[..cut]);
            let (back, info) = read_scan(scanfmt::Layout::Mk6, dir.path());
            assert_eq!(back.len(), 13 * 1000, "direct {direct}");
            assert!(back[..] == datas.concat()[..13000]);
            assert_eq!(
                (info.truncated_blocks, info.blocks),
                (0, 2),
                "block 1's header was corrected"
            );
        }
    }

    /// Issue 28 (1), the writer's own guard (the recorder also names a recording around any
    /// entry already on a disk, so this meets only a link planted after that look): a link at
    /// the scan's name receives nothing; the disk fails with the reason.
    #[test]
    fn a_link_at_the_scan_name_is_refused_not_followed() {
        for layout in [scanfmt::Layout::Vbs, scanfmt::Layout::Mk6] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let target = match layout {
                scanfmt::Layout::Vbs => outside.path().to_path_buf(),
                scanfmt::Layout::Mk6 => outside.path().join("victim"),
            };
            std::os::unix::fs::symlink(&target, dir.path().join("s_dsEf")).unwrap();
            let (ring, records, _) = scan_records(layout, &[(0, 9, true), (4, 9, true)], 1000, 9);
            let report = serve_in(dir.path(), &ring, false, &records[..]);
            let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
            let why = outcome.error.unwrap_or_default();
            assert!(
                why.contains("symbolic link") || why.contains("exists already"),
                "{layout}: {why}"
            );
            assert_eq!(outcome.not_written, 18, "{layout}: both blocks counted as not written");
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "{layout}");
        }
    }
}
