//! A scan found on a set of disks: its files, its pieces in order, and reads at any offset of
//! the continuous scan.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use scanfmt::index::{Piece, ScanIndex};
use scanfmt::info::FrameSpan;
use scanfmt::mk6::{FileWalker, FILE_HEADER_LEN};
use scanfmt::results::ScanInfo;
use scanfmt::{name, vbs, Layout};

use safedir::{Dir, DirError, EntryKind};

use crate::error::ScanError;

/// One file holding pieces of a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanFile {
    /// Its path.
    pub path: PathBuf,
    /// Index of its disk in [`Scan::disks`].
    pub disk: usize,
    /// Which recording it belongs to, when several are read as one (a label's data streams).
    pub stream: usize,
    /// Its length, bytes.
    pub len: u64,
}

/// vbs chunk files kept open at once (a scan can have thousands; reads go mostly in order).
const OPEN_CHUNKS: usize = 8;

/// A scan on a set of disks, ready to read.
pub struct Scan {
    layout: Layout,
    name: String,
    disks: Vec<PathBuf>,
    files: Vec<ScanFile>,
    index: ScanIndex,
    /// Mark6: every file, open. vbs: each disk's scan directory, to open chunks below it.
    mk6_files: Vec<File>,
    /// vbs: each (disk, stream)'s directory, at `disk · streams + stream`.
    vbs_dirs: Vec<Option<Dir>>,
    streams: usize,
    open_chunks: Mutex<Vec<(usize, Arc<File>)>>,
    truncated: u64,
    packet_bytes: Option<u64>,
    problems: Vec<String>,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{} ({} files, {} bytes)",
            self.layout,
            self.name,
            self.files.len(),
            self.len()
        )
    }
}

/// The disks a scan is read from: paths, opened here (a link in them is followed: the
/// operator's mount points), or directories the caller opened (a daemon opens its disks below
/// its roots through no link: no path is resolved again between that check and the read).
#[derive(Clone, Copy)]
enum Disks<'a> {
    Paths(&'a [PathBuf]),
    Opened(&'a [Dir]),
}

impl Disks<'_> {
    fn paths(&self) -> Vec<PathBuf> {
        match self {
            Disks::Paths(p) => p.to_vec(),
            Disks::Opened(d) => d.iter().map(|d| d.path().to_path_buf()).collect(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Disks::Paths(p) => p.len(),
            Disks::Opened(d) => d.len(),
        }
    }

    /// Each disk's path and its directory (or why it cannot be opened).
    fn open_each(&self) -> Vec<(PathBuf, Result<Dir, DirError>)> {
        match self {
            Disks::Paths(p) => p.iter().map(|p| (p.clone(), Dir::open(p))).collect(),
            Disks::Opened(d) => d.iter().map(|d| (d.path().to_path_buf(), d.try_clone())).collect(),
        }
    }
}

impl Scan {
    /// Find scan `scan` in `layout` on `disks` and order its pieces. Unreadable disks and
    /// files are noted as problems (the rest is read); no piece at all is an error.
    pub fn open(layout: Layout, scan: &str, disks: &[PathBuf]) -> Result<Scan, ScanError> {
        name::check(scan)?;
        Scan::open_names(layout, scan, &[scan.to_string()], Disks::Paths(disks))
    }

    /// [`Scan::open`] on disks the caller opened (below its roots, through no link).
    pub fn open_in(layout: Layout, scan: &str, disks: &[Dir]) -> Result<Scan, ScanError> {
        name::check(scan)?;
        Scan::open_names(layout, scan, &[scan.to_string()], Disks::Opened(disks))
    }

    /// A recording as jive5ab's `scan_set` opens a name: the recording of that name and every
    /// data stream of it (`<name>_ds<stream>`), read as one — their pieces in order of block
    /// number, the streams of one number by name (jive5ab's `libvbs` sorts by block number,
    /// then by the order it first saw each stream). A name that holds `_ds` is that recording
    /// alone.
    pub fn open_with_streams(layout: Layout, scan: &str, disks: &[PathBuf]) -> Result<Scan, ScanError> {
        Scan::open_streams(layout, scan, Disks::Paths(disks))
    }

    /// [`Scan::open_with_streams`] on disks the caller opened (below its roots, through no link).
    pub fn open_with_streams_in(layout: Layout, scan: &str, disks: &[Dir]) -> Result<Scan, ScanError> {
        Scan::open_streams(layout, scan, Disks::Opened(disks))
    }

    fn open_streams(layout: Layout, scan: &str, disks: Disks<'_>) -> Result<Scan, ScanError> {
        name::check(scan)?;
        let names = if scan.contains("_ds") {
            vec![scan.to_string()]
        } else {
            let mut names = data_streams(layout, scan, disks);
            names.insert(0, scan.to_string());
            names
        };
        Scan::open_names(layout, scan, &names, disks)
    }

    /// The recordings [`Scan::open_with_streams`] reads as `scan`: `scan` itself (when some disk
    /// holds it) and its data streams, by name.
    pub fn recordings_of(layout: Layout, scan: &str, disks: &[PathBuf]) -> Vec<String> {
        Scan::recordings(layout, scan, Disks::Paths(disks))
    }

    /// [`Scan::recordings_of`] on disks the caller opened (below its roots, through no link).
    pub fn recordings_of_in(layout: Layout, scan: &str, disks: &[Dir]) -> Vec<String> {
        Scan::recordings(layout, scan, Disks::Opened(disks))
    }

    fn recordings(layout: Layout, scan: &str, disks: Disks<'_>) -> Vec<String> {
        if scan.contains("_ds") {
            return vec![scan.to_string()];
        }
        let mut names = data_streams(layout, scan, disks);
        let itself = disks
            .open_each()
            .into_iter()
            .filter_map(|(_, d)| d.ok())
            .any(|d| matches!(d.kind(scan), Ok(Some(_))));
        if itself || names.is_empty() {
            names.insert(0, scan.to_string());
        }
        names
    }

    fn open_names(layout: Layout, scan: &str, names: &[String], disks: Disks<'_>) -> Result<Scan, ScanError> {
        let mut s = Scan {
            layout,
            name: scan.to_string(),
            disks: disks.paths(),
            files: Vec::new(),
            index: ScanIndex::default(),
            mk6_files: Vec::new(),
            vbs_dirs: Vec::new(),
            streams: names.len(),
            open_chunks: Mutex::new(Vec::new()),
            truncated: 0,
            packet_bytes: None,
            problems: Vec::new(),
        };
        let mut pieces = Vec::new();
        for (d, (disk, root)) in disks.open_each().into_iter().enumerate() {
            let root = match root {
                Ok(r) => r,
                Err(e) => {
                    s.problems.push(format!("disk {}: {e}", disk.display()));
                    s.vbs_dirs.extend(names.iter().map(|_| None));
                    continue;
                }
            };
            for (k, name) in names.iter().enumerate() {
                let from = pieces.len();
                match layout {
                    Layout::Vbs => {
                        let dir = s.find_chunks(&root, d, k, name, &mut pieces);
                        s.vbs_dirs.push(dir);
                    }
                    Layout::Mk6 => s.find_blocks(&root, d, k, name, &mut pieces),
                }
                // Several streams: block n of stream k goes to place n·K + k.
                if names.len() > 1 {
                    for p in &mut pieces[from..] {
                        p.number = p.number * names.len() as u64 + k as u64;
                    }
                }
            }
        }
        if pieces.is_empty() && !(s.problems.is_empty() && s.files.is_empty()) {
            // Files of the scan are there (a Mark6 file's sync word was seen) but hold nothing.
            let mut problems = s.problems;
            if problems.is_empty() {
                problems.push(format!(
                    "{} Mark6 file(s) with a file header and no block",
                    s.files.len()
                ));
            }
            return Err(ScanError::Unreadable {
                layout,
                scan: scan.to_string(),
                problems,
            });
        }
        if pieces.is_empty() {
            return Err(ScanError::NotFound {
                layout,
                scan: scan.to_string(),
                disks: disks.len(),
                hint: if names.len() > 1 {
                    String::new()
                } else {
                    data_stream_hint(layout, scan, disks)
                },
            });
        }
        s.index = ScanIndex::build(pieces);
        Ok(s)
    }

    /// The chunk files of this scan on one disk; their directory, to open them later.
    fn find_chunks(
        &mut self,
        root: &Dir,
        disk: usize,
        stream: usize,
        name: &str,
        pieces: &mut Vec<Piece>,
    ) -> Option<Dir> {
        let dir = match root.subdir(name) {
            Ok(d) => d?,
            Err(e) => {
                self.problems.push(e.to_string());
                return None;
            }
        };
        let entries = match dir.entries() {
            Ok(e) => e,
            Err(e) => {
                self.problems.push(e.to_string());
                return None;
            }
        };
        for (entry, kind) in entries {
            let Some(n) = vbs::parse_chunk_name(name, &entry) else {
                continue;
            };
            let path = dir.path().join(&entry);
            let len = match (kind, dir.stat(&entry)) {
                (EntryKind::File, Ok(Some(st))) => st.len,
                (_, Err(e)) => {
                    self.problems.push(e.to_string());
                    continue;
                }
                _ => {
                    self.problems
                        .push(format!("{}: not a regular file; left out", path.display()));
                    continue;
                }
            };
            pieces.push(Piece {
                number: u64::from(n),
                file: self.files.len(),
                offset: 0,
                len,
            });
            self.files.push(ScanFile {
                path,
                disk,
                stream,
                len,
            });
        }
        Some(dir)
    }

    /// The blocks of this scan's Mark6 file on one disk.
    fn find_blocks(&mut self, root: &Dir, disk: usize, stream: usize, name: &str, pieces: &mut Vec<Piece>) {
        let path = root.path().join(name);
        let f = match root.open_file(name) {
            Ok(f) => f,
            Err(DirError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                self.problems.push(e.to_string());
                return;
            }
        };
        let walked = walk_mk6(&f, self.files.len(), pieces);
        match walked {
            Ok(w) => {
                self.truncated += w.truncated;
                self.packet_bytes.get_or_insert(w.packet_bytes);
                if let Some(p) = w.problem {
                    self.problems
                        .push(format!("{}: {p}; the rest of the file is not read", path.display()));
                }
                self.files.push(ScanFile {
                    path,
                    disk,
                    stream,
                    len: w.len,
                });
                self.mk6_files.push(f);
            }
            Err(e) => self.problems.push(format!("{}: {e}", path.display())),
        }
    }

    /// Layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Scan name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The disks searched.
    pub fn disks(&self) -> &[PathBuf] {
        &self.disks
    }

    /// The files holding its pieces.
    pub fn files(&self) -> &[ScanFile] {
        &self.files
    }

    /// Its pieces in order.
    pub fn index(&self) -> &ScanIndex {
        &self.index
    }

    /// Bytes of the continuous scan.
    pub fn len(&self) -> u64 {
        self.index.len()
    }

    /// No data.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// What was wrong while finding the pieces (unreadable disks and files, bad headers).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Read bytes of the continuous scan at `offset` (from one piece: a short read is normal);
    /// 0 at the end.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some((i, within)) = self.index.locate(offset) else {
            return Ok(0);
        };
        let p = self.index.pieces()[i];
        let n = usize::try_from(p.len - within).unwrap_or(usize::MAX).min(buf.len());
        let buf = &mut buf[..n];
        let got = match self.layout {
            Layout::Mk6 => {
                let f = self.mk6_file(p.file)?;
                f.read_at(buf, p.offset + within)?
            }
            Layout::Vbs => self.chunk(p.file)?.read_at(buf, within)?,
        };
        if got == 0 && n > 0 {
            // The file is shorter than when the scan was opened.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} ended early", self.files[p.file].path.display()),
            ));
        }
        Ok(got)
    }

    fn mk6_file(&self, file: usize) -> io::Result<&File> {
        // Mark6 files are numbered in the order opened, one per ScanFile.
        self.mk6_files
            .get(file)
            .ok_or_else(|| io::Error::other("no such Mark6 file"))
    }

    /// vbs chunk file `file`, opened below its disk's scan directory (kept among the last few).
    fn chunk(&self, file: usize) -> io::Result<Arc<File>> {
        let mut open = self
            .open_chunks
            .lock()
            .map_err(|_| io::Error::other("chunk cache poisoned"))?;
        if let Some(pos) = open.iter().position(|(i, _)| *i == file) {
            let hit = open.remove(pos);
            let f = hit.1.clone();
            open.push(hit);
            return Ok(f);
        }
        let sf = &self.files[file];
        let dir = self
            .vbs_dirs
            .get(sf.disk * self.streams + sf.stream)
            .and_then(Option::as_ref)
            .ok_or_else(|| io::Error::other("chunk directory not open"))?;
        let name = sf.path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let f = Arc::new(dir.open_file(name).map_err(DirError::into_io)?);
        if open.len() >= OPEN_CHUNKS {
            open.remove(0);
        }
        open.push((file, f.clone()));
        Ok(f)
    }

    /// Bytes at `offset`, as many as fit `len` and the scan (for headers).
    fn bytes_at(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match self.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        buf.truncate(got);
        buf
    }

    /// What an operator wants to know: size, pieces, what is missing, station and time span.
    pub fn info(&self) -> ScanInfo {
        let idx = &self.index;
        let first = self.bytes_at(0, 32);
        let last = FrameSpan::from_frames(&first, None)
            .and_then(|s| FrameSpan::last_frame_offset(idx.len(), s.frame_bytes))
            .map(|at| self.bytes_at(at, 32));
        let span = FrameSpan::from_frames(&first, last.as_deref());
        let mut problems = Vec::new();
        if idx.missing_count() > 0 {
            let runs: Vec<String> = idx
                .missing()
                .iter()
                .take(8)
                .map(|r| {
                    if r.end - r.start == 1 {
                        r.start.to_string()
                    } else {
                        format!("{}-{}", r.start, r.end - 1)
                    }
                })
                .collect();
            problems.push(format!(
                "{} block(s) missing ({}{}): their data was lost (a disk failed or is not mounted)",
                idx.missing_count(),
                runs.join(", "),
                if idx.missing().len() > 8 { ", …" } else { "" }
            ));
        }
        if !idx.duplicates().is_empty() {
            problems.push(format!(
                "{} block number(s) found twice (the first copy is read)",
                idx.duplicates().len()
            ));
        }
        if self.truncated > 0 {
            problems.push(format!(
                "{} block(s) cut short by the end of their file (whole frames kept)",
                self.truncated
            ));
        }
        if span.is_none() && !idx.is_empty() {
            problems.push("the data does not start with a VDIF frame".into());
        }
        problems.extend(self.problems.iter().cloned());
        let mut disks: Vec<usize> = self.files.iter().map(|f| f.disk).collect();
        disks.sort_unstable();
        disks.dedup();
        ScanInfo {
            scan: self.name.clone(),
            layout: Some(self.layout),
            url: format!("{}://{}", self.layout, self.name),
            disks: disks.iter().map(|&d| self.disks[d].display().to_string()).collect(),
            files: self.files.len() as u64,
            bytes: idx.len(),
            blocks: idx.pieces().len() as u64,
            last_block: idx.pieces().last().map(|p| p.number),
            missing_blocks: idx.missing_count(),
            missing: idx.missing().iter().map(|r| [r.start, r.end]).collect(),
            duplicate_blocks: idx.duplicates().len() as u64,
            truncated_blocks: self.truncated,
            largest_block: idx.pieces().iter().map(|p| p.len).max().unwrap_or(0),
            packet_bytes: self.packet_bytes,
            span,
            problems,
        }
    }
}

/// What walking one Mark6 file found.
struct Walked {
    len: u64,
    packet_bytes: u64,
    truncated: u64,
    problem: Option<String>,
}

/// Read a Mark6 file's headers and add its blocks (as file `file`) to `pieces`.
fn walk_mk6(f: &File, file: usize, pieces: &mut Vec<Piece>) -> io::Result<Walked> {
    let len = f.metadata()?.len();
    let mut head = [0u8; FILE_HEADER_LEN];
    f.read_exact_at(&mut head, 0)
        .map_err(|e| io::Error::new(e.kind(), format!("no Mark6 file header ({e})")))?;
    let mut w = FileWalker::new(&head, len).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut out = Walked {
        len,
        packet_bytes: u64::from(w.header().packet_size),
        truncated: 0,
        problem: None,
    };
    let mut buf = [0u8; 8];
    while let Some((at, n)) = w.next_header() {
        if let Err(e) = f.read_exact_at(&mut buf[..n], at) {
            out.problem = Some(format!("block header at byte {at}: {e}"));
            break;
        }
        match w.block(&buf[..n]) {
            Ok(b) => {
                out.truncated += u64::from(b.truncated);
                pieces.push(Piece {
                    number: u64::from(b.number),
                    file,
                    offset: b.data_offset,
                    len: b.data_len,
                });
            }
            Err(e) => {
                out.problem = Some(format!("block header at byte {at}: {e}"));
                break;
            }
        }
    }
    Ok(out)
}

/// The recordings on `disks` named like jive5ab's data streams of `scan`, sorted.
fn data_streams(layout: Layout, scan: &str, disks: Disks<'_>) -> Vec<String> {
    let mut found: Vec<String> = disks
        .open_each()
        .into_iter()
        .filter_map(|(_, d)| d.ok())
        .filter_map(|d| d.entries().ok())
        .flatten()
        .filter(|(n, k)| {
            let kind_ok = match layout {
                Layout::Vbs => *k == EntryKind::Dir,
                Layout::Mk6 => *k == EntryKind::File,
            };
            kind_ok && name::is_data_stream_of(scan, n)
        })
        .map(|(n, _)| n)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// "; data streams of that name: X_dsEf, X_dsWb" when the disks hold recordings named like
/// jive5ab's data streams of `scan`.
fn data_stream_hint(layout: Layout, scan: &str, disks: Disks<'_>) -> String {
    let found = data_streams(layout, scan, disks);
    if found.is_empty() {
        String::new()
    } else {
        let shown: Vec<String> = found.iter().take(16).map(|n| format!("{layout}://{n}")).collect();
        format!("; its data streams are {} (name one)", shown.join(", "))
    }
}

/// A disk's name relative to the others: its path below the common directory of the disks'
/// parents (`/mnt/disk3` → `disk3`; `/mnt/disks/1/0` among modules 1 and 2 → `1/0`).
pub fn disk_label(disks: &[PathBuf], disk: &Path) -> PathBuf {
    let parents: Vec<&Path> = disks.iter().map(|d| d.parent().unwrap_or(d)).collect();
    let mut common: PathBuf = parents.first().map(|p| p.to_path_buf()).unwrap_or_default();
    while !parents.iter().all(|p| p.starts_with(&common)) {
        if !common.pop() {
            break;
        }
    }
    disk.strip_prefix(&common)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| disk.to_path_buf())
}
