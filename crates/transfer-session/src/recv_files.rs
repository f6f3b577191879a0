//! The receiver's files: each offered file from its `.part` (new or resumed) through its
//! blocks' hashes to the verdict, and the finisher thread that makes verified files durable
//! and gives them their names without stalling the receiving loop.

// unsafe: sync_file_range(2): start writeback without waiting; std has none.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

use transfer::blocks::{from_ranges, Geometry, ResumeState, RESUME_STATE_VERSION};
use transfer::blocktree::{root_of_blocks, Cv};
use transfer::results::FileRecvReport;

use crate::control::Offer;
use crate::error::{CommitError, PartError, Refusal};
use crate::hashing::{join_block_hashing, spawn_block_hashing, HeldHashes};
use crate::paths::Dir;
use crate::resume::ResumeFile;

/// One offered file being received. See the module docs.
pub(crate) struct RxFile {
    pub(crate) offer: Offer,
    dir: Option<Dir>,
    name: String,
    part_name: String,
    state_name: String,
    pub(crate) part_path: PathBuf,
    pub(crate) part: File,
    state: ResumeState,
    pub(crate) g: Geometry,
    /// Blocks completely on disk.
    pub(crate) have: BTreeSet<u64>,
    /// Blocks held from an earlier attempt: resumed once they verify.
    pub(crate) held_before: BTreeSet<u64>,
    /// Our hash of each block, once known.
    pub(crate) cvs: Vec<Option<Cv>>,
    /// The sender's hash of each block.
    pub(crate) expected: Vec<Option<Cv>>,
    pub(crate) file_hash: Option<Cv>,
    /// Hashing the held blocks from the `.part` (they are not sent, so not hashed on the way).
    held_job: Option<HeldHashes>,
    pub(crate) dirty: bool,
    /// Handed to the finisher.
    pub(crate) finishing: bool,
    pub(crate) report: FileRecvReport,
    pub(crate) started: Instant,
}

/// What a file's hashes say, once all are in.
pub(crate) enum Check {
    /// Not yet: blocks or hashes missing.
    Waiting,
    /// Every block and the file match.
    Good(Cv),
    /// These blocks differ from the sender's hashes.
    Bad(Vec<u64>),
    /// Every block matches but the file hash does not (a sender that contradicts itself).
    FileMismatch,
}

impl RxFile {
    /// Open (or resume) the copy of `o` as `name` in `dir`; `Err` is the refusal to send.
    pub(crate) fn open(dir: Dir, name: String, o: &Offer) -> Result<RxFile, Refusal> {
        let part_name = format!("{name}.part");
        let state_name = format!("{name}.part.evlbi");
        let part_path = dir.display(&part_name);
        let (part, state) = open_part(&dir, &part_name, &state_name, o).map_err(|why| Refusal::Part {
            part: part_path.clone(),
            why,
        })?;
        let g = Geometry {
            size: o.size,
            block_size: o.block_size,
        };
        let have: BTreeSet<u64> = from_ranges(&state.have).filter(|&b| b < g.blocks()).collect();
        let n = g.blocks() as usize;
        let report = FileRecvReport {
            path: o.path.clone(),
            size: o.size,
            rounds: 1,
            ..FileRecvReport::default()
        };
        let mut f = RxFile {
            offer: o.clone(),
            held_before: have.clone(),
            dir: Some(dir),
            name,
            part_name,
            state_name,
            part_path,
            part,
            state,
            g,
            have,
            cvs: vec![None; n],
            expected: vec![None; n],
            file_hash: None,
            held_job: None,
            dirty: false,
            finishing: false,
            report,
            started: Instant::now(),
        };
        f.start_held_hashing().map_err(|e| Refusal::Part {
            part: f.part_path.clone(),
            why: PartError::Io(e),
        })?;
        Ok(f)
    }

    fn start_held_hashing(&mut self) -> io::Result<()> {
        if !self.have.is_empty() {
            self.report.bytes_read_back += self.g.len_of(self.have.iter().copied());
            let reader: std::sync::Arc<dyn crate::fileio::ReadAt> = std::sync::Arc::new(self.part.try_clone()?);
            let held = self.have.iter().copied().collect();
            self.held_job = Some(spawn_block_hashing(reader, self.g, held));
        }
        Ok(())
    }

    /// Collect the held blocks' hashes if they are ready: those collected now (`(block, hash)`,
    /// in block order), the proof the sender waits for before it sends its own.
    pub(crate) fn poll_held(&mut self) -> io::Result<Vec<(u64, Cv)>> {
        if !self.held_job.as_ref().is_some_and(|j| j.is_finished()) {
            return Ok(Vec::new());
        }
        let Some(job) = self.held_job.take() else {
            return Ok(Vec::new());
        };
        let held = join_block_hashing(job)?;
        for &(b, h) in &held {
            if let Some(c) = self.cvs.get_mut(b as usize) {
                *c = Some(h);
            }
        }
        Ok(held)
    }

    /// Blocks to send: every block not held.
    pub(crate) fn missing(&self) -> Vec<u64> {
        (0..self.g.blocks()).filter(|b| !self.have.contains(b)).collect()
    }

    /// Block `b` is completely on disk with hash `h`.
    pub(crate) fn block_done(&mut self, b: u64, h: Cv) {
        if let Some(c) = self.cvs.get_mut(b as usize) {
            *c = Some(h);
            self.have.insert(b);
            self.dirty = true;
        }
    }

    /// Compare what we hashed with what the sender hashed, once both are complete.
    pub(crate) fn check(&self) -> Check {
        let (Some(fh), true) = (self.file_hash, self.held_job.is_none()) else {
            return Check::Waiting;
        };
        if self.cvs.iter().any(Option::is_none) || self.expected.iter().any(Option::is_none) {
            return Check::Waiting;
        }
        let bad: Vec<u64> = (0..self.g.blocks())
            .filter(|&b| self.cvs[b as usize] != self.expected[b as usize])
            .collect();
        if !bad.is_empty() {
            return Check::Bad(bad);
        }
        let cvs: Vec<Cv> = self.cvs.iter().flatten().copied().collect();
        let root = root_of_blocks(&cvs);
        if root == fh {
            Check::Good(root)
        } else {
            Check::FileMismatch
        }
    }

    /// Blocks that failed verification are not held any more: they come again.
    pub(crate) fn forget(&mut self, bad: &[u64]) {
        for b in bad {
            self.have.remove(b);
            self.held_before.remove(b);
            if let Some(c) = self.cvs.get_mut(*b as usize) {
                *c = None;
            }
        }
        self.dirty = true;
    }

    /// Write the resume record: the blocks held now.
    pub(crate) fn save(&mut self) -> io::Result<()> {
        self.state.have = transfer::blocks::to_ranges(self.have.iter().copied());
        self.dirty = false;
        match &self.dir {
            Some(d) => self.state.save(d, &self.state_name),
            None => Ok(()),
        }
    }

    /// The verified file's commit job for the finisher (the directory moves with it).
    pub(crate) fn commit_job(&mut self, id: u64, overwrite: bool) -> io::Result<Job> {
        let dir = self.dir.take().ok_or_else(|| io::Error::other("committed twice"))?;
        self.finishing = true;
        Ok(Job::Commit(Commit {
            id,
            part: self.part.try_clone()?,
            dir,
            part_name: self.part_name.clone(),
            name: self.name.clone(),
            state_name: self.state_name.clone(),
            overwrite,
            sync: self.offer.sync,
            mtime_ns: self.offer.mtime_ns,
        }))
    }
}

/// Open (or create) the `.part` file and its resume record in `dir` (never through a link, never
/// a file with other links). An existing record is used only when it describes the same source
/// file (size, mtime, block size) and the `.part` has that size.
fn open_part(dir: &Dir, part_name: &str, state_name: &str, o: &Offer) -> Result<(File, ResumeState), PartError> {
    let part = dir.open_rw(part_name).map_err(PartError::Dir)?;
    let len = part.metadata().map_err(PartError::Io)?.len();
    let resumable = ResumeState::load(dir, state_name)
        .filter(|s| s.size == o.size && s.mtime_ns == o.mtime_ns && s.block_size == o.block_size && len == o.size);
    let state = match resumable {
        Some(s) => s,
        None => {
            // Start over: drop stale content, keep a sparse file of the final size.
            part.set_len(0).map_err(PartError::Io)?;
            part.set_len(o.size).map_err(PartError::Io)?;
            ResumeState {
                version: RESUME_STATE_VERSION,
                size: o.size,
                mtime_ns: o.mtime_ns,
                chunk_size: 0,
                block_size: o.block_size,
                have: Vec::new(),
            }
        }
    };
    state.save(dir, state_name).map_err(PartError::Io)?;
    Ok((part, state))
}

/// Make a verified file durable (when asked) and give it its name.
pub(crate) struct Commit {
    pub(crate) id: u64,
    part: File,
    dir: Dir,
    part_name: String,
    name: String,
    state_name: String,
    overwrite: bool,
    sync: bool,
    mtime_ns: u64,
}

/// Work for the finisher thread.
pub(crate) enum Job {
    /// Start writing back a completed block (`sync_file_range` `SYNC_FILE_RANGE_WRITE`), so the
    /// final fsync of a synced file waits only for the last blocks.
    Writeback(File, u64, u64),
    /// Sync (if asked), rename into place, drop the resume record.
    Commit(Commit),
}

/// A commit's outcome: the file id and how long the fsync took, or why it failed.
pub(crate) type Committed = (u64, Result<Option<Duration>, CommitError>);

/// The finisher thread of one session.
pub(crate) struct Finisher {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Committed>,
    thread: Option<JoinHandle<()>>,
    /// Commits handed over and not reported back.
    pub(crate) pending: usize,
}

impl Finisher {
    pub(crate) fn start() -> Finisher {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            for job in rx {
                match job {
                    Job::Writeback(f, off, len) => start_writeback(&f, off, len),
                    Job::Commit(c) => {
                        let id = c.id;
                        if tx.send((id, commit(c))).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Finisher {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            pending: 0,
        }
    }

    pub(crate) fn submit(&mut self, job: Job) {
        if matches!(job, Job::Commit(_)) {
            self.pending += 1;
        }
        if let Some(j) = &self.jobs {
            let _ = j.send(job);
        }
    }

    /// Commits finished since the last call.
    pub(crate) fn finished(&mut self) -> Vec<Committed> {
        let v: Vec<Committed> = self.done.try_iter().collect();
        self.pending -= v.len().min(self.pending);
        v
    }

    /// Wait (bounded) for the commits still pending.
    pub(crate) fn drain(&mut self, limit: Duration) -> Vec<Committed> {
        let deadline = Instant::now() + limit;
        let mut v = Vec::new();
        while self.pending > v.len() {
            match self
                .done
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(c) => v.push(c),
                Err(_) => break,
            }
        }
        self.pending -= v.len().min(self.pending);
        v
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start_writeback(f: &File, off: u64, len: u64) {
    let (Ok(off), Ok(len)) = (i64::try_from(off), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a valid descriptor we own, plain integers; SYNC_FILE_RANGE_WRITE only starts
    // writeback of dirty pages in the range (sync_file_range(2)). Best effort: an error here
    // only means the final fsync has more to do.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), off, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

fn commit(c: Commit) -> Result<Option<Duration>, CommitError> {
    let synced = if c.sync {
        // Durable before the sender hears "verified" (it may delete its copy then).
        let t = Instant::now();
        c.part.sync_all().map_err(|why| CommitError::Sync {
            path: c.dir.display(&c.part_name),
            why,
        })?;
        Some(t.elapsed())
    } else {
        None
    };
    // renameat in the held directory: replaces the entry, never writes through it; without
    // --overwrite a file that appeared meanwhile is not replaced either.
    c.dir
        .rename(&c.part_name, &c.name, c.overwrite)
        .map_err(|why| CommitError::Rename {
            path: c.dir.display(&c.name),
            why,
        })?;
    let _ = c.dir.remove(&c.state_name);
    // Give the received file the source's modification time (as `cp -p`); best effort.
    let _ = c.part.set_modified(UNIX_EPOCH + Duration::from_nanos(c.mtime_ns));
    Ok(synced)
}
