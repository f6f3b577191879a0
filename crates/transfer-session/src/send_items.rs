//! The sender's items (files and directories to create) through a session: offered a window
//! ahead of the data, accepted into the stream, hashed as sent, and closed by their verdicts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use ctlchan::mac::hex_encode;
use ctlchan::Channel;
use transfer::blocks::{from_ranges, Geometry};
use transfer::blocktree::{root_of_blocks, Cv};
use transfer::results::{FileRound, FileSendReport};
use transfer::Sender;

use crate::control::{early_blocks, Msg, Offer, HASHES_PER_MESSAGE};
use crate::error::{unexpected, ProtocolViolation, TransferSessionError};
use crate::fileio::{FileSource, ReadAt};
use crate::hashing::{join_block_hashing, spawn_block_hashing, HeldHashes};
use crate::plan::{Item, Source};

/// Most items offered and not yet answered for good (bounds open files on both ends).
const MAX_OPEN_ITEMS: usize = 128;
/// Most bytes of offered files not yet acknowledged in the stream (at least one file is always
/// offered): enough to cover a 10 Gb/s × 200 ms path twice.
const MAX_AHEAD_BYTES: u64 = 1 << 30;

/// One file from its offer to its verdict.
struct FileRun {
    idx: usize,
    g: Geometry,
    offered_at: Instant,
    /// Its bytes counted in [`Items::ahead_bytes`].
    ahead: u64,
    /// The opened source, until it moves into the stream's [`FileSource`] on `accept`.
    file: Option<Arc<dyn ReadAt>>,
    accepted: bool,
    /// Blocks `0..early` went into the stream before the `accept` (the session's first
    /// segment, [`crate::control::early_blocks`]).
    early: u64,
    /// Hashes of first-segment blocks sent before the `accept`: kept back until it says which
    /// blocks the receiver holds (it must prove those first).
    withheld: Vec<(u64, Cv)>,
    hashes: Vec<Option<Cv>>,
    /// Blocks whose hash is not known yet (the file's hash is sent once none is missing).
    hashes_missing: usize,
    /// The file's hash, once sent.
    file_hash: Option<Cv>,
    /// Blocks the receiver held from an earlier attempt (resumed once they verify).
    held: BTreeSet<u64>,
    held_job: Option<HeldHashes>,
    /// The receiver's proof of the held blocks: its hashes of them (`held`).
    proofs: HashMap<u64, Cv>,
    /// Our hashes of the held blocks, kept back until every proof is in (a receiver that saw
    /// them first could echo them as its proof).
    held_hashes: Option<Vec<(u64, Cv)>>,
    /// Our hashes of the held blocks were sent: no proof counts any more.
    proofs_settled: bool,
    /// Held blocks whose proof was not our hash: they count only once sent again.
    disputed: BTreeSet<u64>,
    report: FileSendReport,
}

impl FileRun {
    /// Once our hashes of the held blocks are read and the receiver proved every block it still
    /// holds: the held blocks whose proof is not ours are disputed, and our hashes may go out.
    fn settle_proofs(&mut self) -> Vec<(u64, Cv)> {
        if self.proofs_settled || !self.held.iter().all(|b| self.proofs.contains_key(b)) {
            return Vec::new();
        }
        let Some(ours) = self.held_hashes.take() else {
            return Vec::new();
        };
        self.proofs_settled = true;
        for &(b, h) in &ours {
            if self.held.contains(&b) && self.proofs.get(&b) != Some(&h) {
                self.disputed.insert(b);
            }
        }
        self.proofs = HashMap::new();
        ours
    }
}

/// The items of one session. See the module docs.
pub(crate) struct Items {
    plan: Vec<Item>,
    next: usize,
    block_size: u64,
    sync: bool,
    /// Items offered (or mkdir'd) and not answered for good, by id (= plan index).
    open: BTreeMap<u64, ()>,
    files: HashMap<u64, FileRun>,
    reports: Vec<Option<FileSendReport>>,
    directories: Vec<String>,
    ahead_bytes: u64,
    held_bytes: u64,
    current: String,
    /// An offer was sent: later ones have no first segment.
    offered_one: bool,
    /// Bytes of the session's first segment.
    first_segment: u64,
    /// Withheld hashes the `accept` released: sent with the next ones.
    released: Vec<((u64, u64), Cv)>,
}

impl Items {
    /// `first_segment`: the bytes of the session's first segment (`session.first_segment`).
    pub(crate) fn new(plan: Vec<Item>, block_size: u64, sync: bool, first_segment: u64) -> Items {
        let n = plan.len();
        Items {
            plan,
            next: 0,
            block_size,
            first_segment,
            sync,
            open: BTreeMap::new(),
            files: HashMap::new(),
            reports: vec![None; n],
            directories: Vec::new(),
            ahead_bytes: 0,
            held_bytes: 0,
            current: String::new(),
            offered_one: false,
            released: Vec::new(),
        }
    }

    /// Sum of the sizes of every file.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.plan
            .iter()
            .map(|i| if let Item::File { size, .. } = i { *size } else { 0 })
            .sum()
    }

    /// Bytes the receiver held before (not sent).
    pub(crate) fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// Destination of the latest file offered.
    pub(crate) fn current(&self) -> &str {
        &self.current
    }

    /// Every item answered for good.
    pub(crate) fn all_final(&self) -> bool {
        self.next == self.plan.len() && self.open.is_empty()
    }

    /// Offer (or mkdir) the next items while the window has room: their lines go to `out`
    /// (before the TCP connect completes there is no channel to send them on yet).
    pub(crate) fn offer_more(
        &mut self,
        out: &mut Vec<Msg>,
        sender: &mut Sender<FileSource>,
    ) -> Result<(), TransferSessionError> {
        while self.next < self.plan.len()
            && self.open.len() < MAX_OPEN_ITEMS
            && (self.open.is_empty() || self.ahead_bytes < MAX_AHEAD_BYTES)
        {
            let idx = self.next;
            self.next += 1;
            let id = idx as u64;
            match self.plan[idx].clone() {
                Item::Dir(d) if d.is_empty() => {}
                Item::Dir(d) => {
                    out.push(Msg::Mkdir { id, path: d });
                    self.open.insert(id, ());
                }
                Item::File {
                    source,
                    dest,
                    size,
                    mtime_ns,
                } => self.offer_file(out, sender, idx, &source, dest, size, mtime_ns),
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn offer_file(
        &mut self,
        out: &mut Vec<Msg>,
        sender: &mut Sender<FileSource>,
        idx: usize,
        source: &Source,
        dest: String,
        planned_size: u64,
        mtime_ns: u64,
    ) {
        let mut report = FileSendReport {
            source: source.name(),
            path: dest.clone(),
            ..FileSendReport::default()
        };
        // A file's size as opened now (it may have changed since the plan); a stream's as planned.
        let (file, size) = match source.open() {
            Ok((f, size)) => (f, size.unwrap_or(planned_size)),
            Err(e) => {
                report.error = Some(netio::error_chain(&e));
                self.reports[idx] = Some(report);
                return;
            }
        };
        report.size = size;
        let g = Geometry {
            size,
            block_size: self.block_size,
        };
        let id = idx as u64;
        let offer = Offer {
            id,
            path: dest.clone(),
            size,
            mtime_ns,
            block_size: self.block_size,
            sync: self.sync,
        };
        // The session's first offer: its first segment goes into the stream now, before any
        // answer (the receiver drops what it turns out to hold or refuse).
        let early = if self.offered_one {
            0
        } else {
            early_blocks(&offer, self.first_segment)
        };
        out.push(Msg::Offer(offer));
        self.offered_one = true;
        if early > 0 {
            sender.source_mut().add_file(id, file.clone(), g);
            for b in 0..early {
                if let Some((len, off)) = sender.source_mut().push_block(id, b) {
                    sender.push_segment(len, off);
                }
            }
        }
        self.current = dest;
        self.ahead_bytes += size;
        self.open.insert(id, ());
        self.files.insert(
            id,
            FileRun {
                idx,
                g,
                offered_at: Instant::now(),
                ahead: size,
                file: Some(file),
                accepted: false,
                early,
                withheld: Vec::new(),
                hashes: vec![None; g.blocks() as usize],
                hashes_missing: g.blocks() as usize,
                file_hash: None,
                held: BTreeSet::new(),
                held_job: None,
                proofs: HashMap::new(),
                held_hashes: None,
                proofs_settled: false,
                disputed: BTreeSet::new(),
                report,
            },
        );
    }

    /// A control message from the receiver.
    pub(crate) fn handle(&mut self, m: Msg, sender: &mut Sender<FileSource>) -> Result<(), TransferSessionError> {
        match m {
            Msg::Done { id } => {
                if let Some(Item::Dir(d)) = self.open.remove(&id).and_then(|_| self.plan.get(id as usize)) {
                    self.directories.push(d.clone());
                }
                Ok(())
            }
            Msg::Refused { id, message } => {
                self.open.remove(&id);
                match self.files.remove(&id) {
                    Some(mut f) => {
                        sender.source_mut().finish_file(id);
                        self.ahead_bytes = self.ahead_bytes.saturating_sub(f.ahead);
                        f.report.error = Some(message);
                        f.report.elapsed_s = f.offered_at.elapsed().as_secs_f64();
                        self.reports[f.idx] = Some(f.report);
                    }
                    None => {
                        let path = match self.plan.get(id as usize) {
                            Some(Item::Dir(d)) => d.clone(),
                            _ => return Err(unexpected(&Msg::Refused { id, message }, "a known item")),
                        };
                        self.reports[id as usize] = Some(FileSendReport {
                            path,
                            error: Some(message),
                            ..FileSendReport::default()
                        });
                    }
                }
                Ok(())
            }
            Msg::Accept { id, have } => self.accept(id, &have, sender),
            Msg::Held {
                id,
                first_block,
                hashes,
            } => self.held(id, first_block, &hashes),
            Msg::Resend { id, blocks } => self.resend(id, &blocks, sender),
            Msg::Verified {
                id,
                path,
                blake3,
                synced,
                sync_us,
            } => self.verified(id, path, blake3, synced, sync_us, sender),
            m => Err(unexpected(&m, "accept, held, verified, resend, refused or done")),
        }
    }

    fn accept(
        &mut self,
        id: u64,
        have: &[[u64; 2]],
        sender: &mut Sender<FileSource>,
    ) -> Result<(), TransferSessionError> {
        let f = match self.files.get_mut(&id) {
            Some(f) if !f.accepted => f,
            _ => {
                return Err(unexpected(
                    &Msg::Accept {
                        id,
                        have: have.to_vec(),
                    },
                    "an accept for an offered file",
                ))
            }
        };
        f.accepted = true;
        let blocks = f.g.blocks();
        f.held = from_ranges(have).filter(|&b| b < blocks).collect();
        let file = f.file.take().ok_or(ProtocolViolation::AcceptedTwice(id))?;
        let reader = file.clone();
        if f.early == 0 {
            sender.source_mut().add_file(id, file, f.g);
        }
        // The first segment's hashes of blocks the receiver does not hold may go now; those of
        // held blocks are read again and sent once it proved them.
        for (b, h) in std::mem::take(&mut f.withheld) {
            if !f.held.contains(&b) {
                self.released.push(((id, b), h));
            }
        }
        let mut bytes = f.g.len_of((0..f.early).filter(|b| !f.held.contains(b)));
        for b in (f.early..blocks).filter(|b| !f.held.contains(b)) {
            if let Some((len, off)) = sender.source_mut().push_block(id, b) {
                sender.push_segment(len, off);
                bytes += len;
            }
        }
        f.report.rounds.push(FileRound { bytes });
        let held_bytes = f.g.len_of(f.held.iter().copied());
        self.held_bytes += held_bytes;
        f.ahead -= held_bytes.min(f.ahead);
        self.ahead_bytes = self.ahead_bytes.saturating_sub(held_bytes);
        if !f.held.is_empty() {
            // Blocks the receiver holds are not sent, so not hashed on the way: read them.
            f.held_job = Some(spawn_block_hashing(reader, f.g, f.held.iter().copied().collect()));
        }
        Ok(())
    }

    /// The receiver's hashes of blocks it holds, from `first_block` on: kept until every held
    /// block has one and ours are read, then compared ([`Items::send_hashes`]).
    fn held(&mut self, id: u64, first_block: u64, hashes: &[String]) -> Result<(), TransferSessionError> {
        let Some(f) = self.files.get_mut(&id).filter(|f| f.accepted && !f.proofs_settled) else {
            return Err(ProtocolViolation::UnknownFile {
                what: "a proof of held blocks",
                id,
                state: "accepted and waiting for one",
            }
            .into());
        };
        for (b, h) in (first_block..).zip(hashes) {
            // Validated as 32 bytes of hex ([`crate::control`]); a block resent since, or never
            // claimed, needs no proof.
            let Some(h) = ctlchan::mac::hex32(h).filter(|_| f.held.contains(&b)) else {
                continue;
            };
            if f.proofs.insert(b, h).is_some() {
                return Err(ProtocolViolation::TwoHashes(id).into());
            }
        }
        Ok(())
    }

    fn resend(
        &mut self,
        id: u64,
        blocks: &[[u64; 2]],
        sender: &mut Sender<FileSource>,
    ) -> Result<(), TransferSessionError> {
        let Some(f) = self.files.get_mut(&id).filter(|f| f.accepted) else {
            return Err(unexpected(
                &Msg::Resend {
                    id,
                    blocks: blocks.to_vec(),
                },
                "a resend for an accepted file",
            ));
        };
        let mut bytes = 0;
        for b in from_ranges(blocks).filter(|&b| b < f.g.blocks()) {
            f.held.remove(&b);
            f.disputed.remove(&b);
            if let Some((len, off)) = sender.source_mut().push_block(id, b) {
                sender.push_segment(len, off);
                bytes += len;
            }
        }
        f.report.rounds.push(FileRound { bytes });
        Ok(())
    }

    fn verified(
        &mut self,
        id: u64,
        path: String,
        blake3: String,
        synced: bool,
        sync_us: u64,
        sender: &mut Sender<FileSource>,
    ) -> Result<(), TransferSessionError> {
        let Some(mut f) = self.files.remove(&id).filter(|f| f.accepted) else {
            return Err(ProtocolViolation::UnknownFile {
                what: "a verdict",
                id,
                state: "accepted",
            }
            .into());
        };
        self.open.remove(&id);
        let st = sender.source_mut().finish_file(id);
        let now = Instant::now();
        let ours = f.file_hash.map(|h| hex_encode(&h));
        f.report.verified = ours.as_deref() == Some(blake3.as_str()) && path == f.report.path && f.disputed.is_empty();
        if path != f.report.path {
            f.report.error = Some(format!(
                "the receiver verified {path:?}, not the offered {:?}",
                f.report.path
            ));
        } else if !f.disputed.is_empty() {
            f.report.error = Some(format!(
                "the receiver said it held {} blocks ({} bytes) it did not prove (its hashes of them \
                 are not ours) and never fetched again: not verified",
                f.disputed.len(),
                f.g.len_of(f.disputed.iter().copied())
            ));
        } else if !f.report.verified {
            f.report.error = Some(format!("receiver's BLAKE3 {blake3} differs from ours"));
        }
        f.report.resumed_bytes = f.g.len_of(f.held.difference(&f.disputed).copied());
        f.report.blake3 = Some(blake3);
        f.report.synced = synced;
        f.report.sync_s = synced.then(|| sync_us as f64 / 1e6);
        f.report.elapsed_s = now.saturating_duration_since(f.offered_at).as_secs_f64();
        f.report.tail_s = st.last_sent.map(|t| now.saturating_duration_since(t).as_secs_f64());
        self.ahead_bytes = self.ahead_bytes.saturating_sub(f.ahead);
        self.reports[f.idx] = Some(f.report);
        Ok(())
    }

    /// Send the block hashes finished since the last call (as the blocks are sent, and those
    /// read for held blocks), then each file's hash once all its blocks have one.
    pub(crate) fn send_hashes(
        &mut self,
        ch: &mut Channel<Msg>,
        sender: &mut Sender<FileSource>,
    ) -> Result<(), TransferSessionError> {
        let mut fresh: BTreeMap<(u64, u64), Cv> = sender
            .source_mut()
            .take_hashed()
            .into_iter()
            .map(|h| ((h.file, h.block), h.hash))
            .collect();
        fresh.extend(std::mem::take(&mut self.released));
        // Before its accept, a file's hashes (of its first segment) are kept back; after it, the
        // hash of a first-segment block the receiver says it holds never goes out as sent (it
        // goes out read back, once the receiver proved the block: settle_proofs below).
        fresh.retain(|&(id, b), h| match self.files.get_mut(&id) {
            Some(f) if !f.accepted => {
                f.withheld.push((b, *h));
                false
            }
            Some(f) => !f.held.contains(&b),
            None => true,
        });
        for (&id, f) in self.files.iter_mut() {
            if f.held_job.as_ref().is_some_and(|j| j.is_finished()) {
                if let Some(job) = f.held_job.take() {
                    let hashed =
                        join_block_hashing(job).map_err(netio::io_err(format!("reading {}", f.report.source)))?;
                    f.held_hashes = Some(hashed);
                }
            }
            fresh.extend(f.settle_proofs().into_iter().map(|(b, h)| ((id, b), h)));
        }
        let mut runs: Vec<(u64, u64, Vec<String>)> = Vec::new();
        for ((id, b), h) in fresh {
            let Some(f) = self.files.get_mut(&id) else { continue };
            if let Some(slot) = f.hashes.get_mut(b as usize) {
                if slot.is_some() {
                    continue; // a block sent again: its hash is of what was sent first
                }
                *slot = Some(h);
                f.hashes_missing -= 1;
            }
            match runs.last_mut() {
                Some((rid, first, hs))
                    if *rid == id && *first + hs.len() as u64 == b && hs.len() < HASHES_PER_MESSAGE =>
                {
                    hs.push(hex_encode(&h))
                }
                _ => runs.push((id, b, vec![hex_encode(&h)])),
            }
        }
        for (id, first_block, hashes) in runs {
            ch.send(&Msg::Hashes {
                id,
                first_block,
                hashes,
            })?;
        }
        for (&id, f) in self.files.iter_mut() {
            if f.accepted && f.file_hash.is_none() && f.hashes_missing == 0 {
                let cvs: Vec<Cv> = f.hashes.iter().flatten().copied().collect();
                let root = root_of_blocks(&cvs);
                f.file_hash = Some(root);
                ch.send(&Msg::FileHash {
                    id,
                    blake3: hex_encode(&root),
                })?;
            }
        }
        Ok(())
    }

    /// The reports of every file (in plan order) and the directories created.
    pub(crate) fn into_reports(mut self) -> (Vec<FileSendReport>, Vec<String>) {
        // Items never answered (the session ended early) have no report.
        for f in self.files.into_values() {
            let mut r = f.report;
            r.error.get_or_insert_with(|| "no verdict from the receiver".into());
            self.reports[f.idx] = Some(r);
        }
        (self.reports.into_iter().flatten().collect(), self.directories)
    }
}
