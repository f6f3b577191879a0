//! One receiving session: the loop that serves the control connection and the session's one
//! data stream together — offers answered as they come, every accepted block written and
//! hashed as it arrives, each file verified, made durable (when asked) and named the moment its
//! last block and the sender's hashes are in.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ctlchan::mac::{hex32, hex_encode};
use ctlchan::Channel;
use netio::io_err;
use transfer::blocks::to_ranges;
use transfer::blocktree::Cv;
use transfer::results::{FileRecvReport, StreamRecvReport};
use transfer::{Receiver, ReceiverConfig, ReceiverState, SessionParams};

use crate::control::{clip, data_key, early_blocks, Msg, Offer, HASHES_PER_MESSAGE};
use crate::error::{unexpected, ProtocolViolation, Refusal, TransferSessionError, UsageError};
use crate::fileio::PartSink;
use crate::receiving::{Claim, Receiving, ServerEvent};
use crate::recv_files::{Check, Finisher, Job, RxFile};
use crate::udp::Intake;

/// How often resume records of files receiving data are rewritten.
const SAVE_EVERY: Duration = Duration::from_secs(1);
/// Longest sleep between looks at everything.
const TICK: Duration = Duration::from_millis(20);
/// A session with nothing happening on either connection for this long ends.
const IDLE: Duration = Duration::from_secs(600);
/// Most files a session may have in flight (offered and not answered for good): a sender keeps
/// at most 128; beyond this an offer is refused, so a hostile one cannot exhaust descriptors.
const MAX_FILES_IN_FLIGHT: usize = 1024;
/// Most blocks of the files in flight (each costs two hashes of bookkeeping, ~70 bytes): offers
/// of absurd sizes are refused, not allocated (1 << 22 blocks: 256 TiB of 64 MiB blocks).
const MAX_BLOCKS_IN_FLIGHT: u64 = 1 << 22;
/// Longest the data waits for the session's first offer (it comes in the same flight as the
/// `hello`; a sender with only directories sends none).
const EARLY_WAIT: Duration = Duration::from_secs(1);

/// What a session needs of the connection it serves.
pub(crate) struct Net<'a> {
    pub(crate) key: &'a [u8; 32],
    /// The session id the sender's first flight set.
    pub(crate) session_id: u64,
    /// Where the sender's data comes from (its first flight's UDP port).
    pub(crate) data_from: SocketAddr,
    /// The first flight's `session`.
    pub(crate) chunk_size: u32,
    /// Its first segment's bytes ([`crate::control::early_blocks`]).
    pub(crate) first_segment: u64,
    pub(crate) local_ip: IpAddr,
    pub(crate) peer: SocketAddr,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) on: &'a dyn Fn(ServerEvent),
}

/// A file being received and its claim on its path.
struct Entry<'s> {
    rx: RxFile,
    _claim: Claim<'s>,
}

/// The session's state besides the sockets. See the module docs.
struct Session<'s> {
    srv: &'s Receiving,
    files: HashMap<u64, Entry<'s>>,
    finisher: Finisher,
    last_control: Instant,
    /// The session's first offer was read: its first segment is in the stream
    /// ([`crate::control::early_blocks`]).
    first_offer_seen: bool,
}

/// Serve one authenticated session until the sender's `bye` (or a failure).
pub(crate) fn run(srv: &Receiving, ch: &mut Channel<Msg>, net: &Net<'_>) -> Result<(), TransferSessionError> {
    let chunk_size = net.chunk_size;
    // The session's own socket on the control port's number, connected to the sender's data
    // address; then what reached the shared socket before it existed ([`crate::early`]).
    let port = srv.data_listener.local_addr().map_err(io_err("UDP socket"))?.port();
    let sock = crate::udp::bind_shared(SocketAddr::new(net.local_ip, port), Some(net.data_from), srv.cfg.rcvbuf)
        .map_err(io_err(format!("binding UDP port {port} for {}", net.data_from)))?;
    // Kernel receive stamps for the one-way delay.
    netio::enable_rx_timestamps(&sock).map_err(io_err("SO_TIMESTAMPNS"))?;
    let session_id = net.session_id;
    let early = {
        let mut pen = srv.pen.lock().unwrap_or_else(|p| p.into_inner());
        pen.drain(&srv.data_listener);
        pen.take(Instant::now(), session_id, net.data_from)
    };
    ch.send(&Msg::Welcome {
        udp_port: port,
        session_id,
    })?;
    (net.on)(ServerEvent::DataPort(net.peer, port));
    let mut rcfg = ReceiverConfig::new(SessionParams {
        session_id,
        file_size: 0,
        chunk_size,
    });
    rcfg.open = true;
    rcfg.data_key = Some(data_key(net.key, session_id));
    rcfg.idle_timeout = srv.cfg.data_idle_timeout;
    let mut receiver = Receiver::new(rcfg, PartSink::new(chunk_size), Instant::now()).map_err(UsageError::from)?;
    let mut intake = Intake::new(&sock, net.peer.ip()).map_err(io_err("UDP_GRO"))?;
    let mut s = Session {
        srv,
        files: HashMap::new(),
        finisher: Finisher::start(),
        last_control: Instant::now(),
        first_offer_seen: false,
    };
    let early_datagrams = early.len() as u64;
    let r = s.serve(ch, &sock, &mut receiver, &mut intake, net, early);
    s.close(net, r.is_ok());
    let st = receiver.stats();
    (net.on)(ServerEvent::Stream(
        net.peer,
        StreamRecvReport {
            datagrams_received: st.datagrams_received,
            duplicate_datagrams: st.duplicate_datagrams,
            rejected: st.rejected.total(),
            foreign: intake.foreign,
            loss_fraction: st.loss_fraction,
            bytes_written: st.bytes_written,
            early_datagrams,
            early_dropped: {
                let p = srv.pen.lock().unwrap_or_else(|p| p.into_inner());
                p.stats.dropped_full + p.stats.expired + p.stats.unparsed
            },
            first_segment_dropped: receiver.sink().skipped_chunks,
        },
    ));
    r.map_err(|e| match e {
        TransferSessionError::Control(_) => e,
        // Tell the sender why (disk full, a silent stream, …) before hanging up.
        e => fatal(ch, e),
    })
}

impl<'s> Session<'s> {
    /// The loop. Returns when the sender says `bye`.
    fn serve(
        &mut self,
        ch: &mut Channel<Msg>,
        sock: &UdpSocket,
        receiver: &mut Receiver<PartSink>,
        intake: &mut Intake,
        net: &Net<'_>,
        early: Vec<(Instant, Vec<u8>)>,
    ) -> Result<(), TransferSessionError> {
        let mut out = Vec::with_capacity(2048);
        let mut ready = 3u64;
        let started = Instant::now();
        let mut early = Some(early);
        let mut next_save = Instant::now() + SAVE_EVERY;
        loop {
            if net.stop.load(Ordering::Relaxed) {
                return Err(TransferSessionError::Interrupted);
            }
            if ready & 2 != 0 {
                while let Some(m) = ch.try_recv()? {
                    self.last_control = Instant::now();
                    if matches!(m, Msg::Bye) {
                        return Ok(());
                    }
                    self.control(m, ch, receiver, net)?;
                }
            }
            // Data waits for the first offer (its first segment opens the stream), at most
            // EARLY_WAIT: datagrams before it would fall outside the stream.
            let data_open = self.first_offer_seen || started.elapsed() > EARLY_WAIT;
            if data_open {
                if let Some(e) = early.take() {
                    intake.feed_early(net.data_from, &e, receiver);
                }
            }
            if data_open && ready & 1 != 0 {
                intake.pump(sock, receiver).map_err(io_err("receiving UDP"))?;
            }
            self.completions(ch, receiver)?;
            self.verify_ready(ch, receiver, net)?;
            self.committed(ch, receiver, net)?;
            let now = Instant::now();
            if receiver.poll_timeout().is_some_and(|t| t <= now) {
                receiver.handle_timeout(now);
            }
            if receiver.state() == ReceiverState::TimedOut {
                return Err(ProtocolViolation::NoData(self.srv.cfg.data_idle_timeout).into());
            }
            if let Some(to) = intake.locked() {
                while receiver.poll_transmit_into(now, &mut out) {
                    crate::udp::send_blocking(sock, Some(to), &out).map_err(io_err("sending reports"))?;
                }
            }
            if now >= next_save {
                for e in self.files.values_mut().filter(|e| e.rx.dirty) {
                    let _ = e.rx.save();
                }
                next_save = now + SAVE_EVERY;
            }
            if now.saturating_duration_since(self.last_control) > IDLE && receiver.poll_timeout().is_none() {
                return Err(ProtocolViolation::Silent(IDLE).into());
            }
            // A verdict waiting on the finisher should not wait for the tick.
            let tick = if self.finisher.pending > 0 {
                Duration::from_millis(1)
            } else {
                TICK
            };
            let wake = receiver.poll_timeout().map_or(now + tick, |t| t.min(now + tick));
            let wait = wake.saturating_duration_since(Instant::now());
            ready = if data_open {
                netio::wait_fds_readable(&[sock.as_fd(), ch.stream().as_fd()], wait)
            } else {
                // Only the control connection until the first offer: bit 1 is its bit.
                netio::wait_fds_readable(&[ch.stream().as_fd()], wait).map(|r| r << 1)
            }
            .map_err(io_err("waiting for the network"))?;
        }
    }

    /// One control message (not `bye`).
    fn control(
        &mut self,
        m: Msg,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
        net: &Net<'_>,
    ) -> Result<(), TransferSessionError> {
        match m {
            Msg::Mkdir { id, path } => match self.srv.root.make_dirs(&path) {
                Ok(_) => {
                    ch.send(&Msg::Done { id })?;
                    (net.on)(ServerEvent::Directory(path));
                }
                Err(e) => ch.send(&Msg::Refused {
                    id,
                    message: clip(&e.to_string()),
                })?,
            },
            Msg::Offer(o) => self.offer(o, ch, receiver, net)?,
            Msg::Hashes {
                id,
                first_block,
                hashes,
            } => {
                let Some(e) = self.files.get_mut(&id) else {
                    return Ok(()); // a file refused or failed meanwhile
                };
                if first_block.saturating_add(hashes.len() as u64) > e.rx.g.blocks() {
                    return Err(ProtocolViolation::HashesBeyondEnd(id).into());
                }
                for (i, h) in hashes.iter().enumerate() {
                    let h = hex32(h);
                    let slot = &mut e.rx.expected[first_block as usize + i];
                    if slot.is_some() && *slot != h {
                        return Err(ProtocolViolation::TwoHashes(id).into());
                    }
                    *slot = h;
                }
            }
            Msg::FileHash { id, blake3 } => {
                if let Some(e) = self.files.get_mut(&id) {
                    e.rx.file_hash = hex32(&blake3);
                }
            }
            m => return Err(unexpected(&m, "offer, mkdir, hashes, file_hash or bye")),
        }
        Ok(())
    }

    /// An offered file: refuse it, or open (or resume) its `.part` and put the blocks it lacks
    /// into the stream — before the sender hears `accept`, so no datagram of it can come first.
    fn offer(
        &mut self,
        o: Offer,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
        net: &Net<'_>,
    ) -> Result<(), TransferSessionError> {
        let id = o.id;
        if self.files.contains_key(&id) {
            return Err(ProtocolViolation::OfferedTwice(id).into());
        }
        // The session's first offer: its first segment is already on its way, whatever the answer.
        let early = if self.first_offer_seen {
            0
        } else {
            early_blocks(&o, net.first_segment)
        };
        self.first_offer_seen = true;
        let g = transfer::blocks::Geometry {
            size: o.size,
            block_size: o.block_size,
        };
        let blocks_in_flight: u64 = self.files.values().map(|e| e.rx.g.blocks()).sum();
        let opened = match self.srv.claim(&o.path) {
            _ if self.files.len() >= MAX_FILES_IN_FLIGHT || blocks_in_flight + o.blocks() > MAX_BLOCKS_IN_FLIGHT => {
                Err(Refusal::TooMuchInFlight { path: o.path.clone() })
            }
            None => Err(Refusal::Busy { path: o.path.clone() }),
            Some(claim) => self
                .place(&o)
                .and_then(|(dir, name)| RxFile::open(dir, name, &o))
                .map(|rx| (claim, rx)),
        };
        let (claim, rx) = match opened {
            Ok(x) => x,
            Err(why) => {
                for b in 0..early {
                    let (len, off) = receiver.sink_mut().push_skipped(g, b);
                    receiver.push_segment(len, off);
                }
                let message = clip(&why.to_string());
                ch.send(&Msg::Refused {
                    id,
                    message: message.clone(),
                })?;
                (net.on)(ServerEvent::File(FileRecvReport {
                    path: o.path.clone(),
                    size: o.size,
                    error: Some(message),
                    ..FileRecvReport::default()
                }));
                return Ok(());
            }
        };
        let part = rx
            .part
            .try_clone()
            .map_err(io_err(format!("writing {}", rx.part_path.display())))?;
        let sink = receiver.sink_mut();
        sink.add_file(id, part, rx.g);
        // The first segment: the blocks we hold are received and dropped, never written twice.
        for b in 0..early {
            let seg = if rx.have.contains(&b) {
                Some(receiver.sink_mut().push_skipped(g, b))
            } else {
                receiver.sink_mut().push_block(id, b)
            };
            if let Some((len, off)) = seg {
                receiver.push_segment(len, off);
            }
        }
        for b in rx.missing().into_iter().filter(|&b| b >= early) {
            if let Some((len, off)) = receiver.sink_mut().push_block(id, b) {
                receiver.push_segment(len, off);
            }
        }
        ch.send(&Msg::Accept {
            id,
            have: to_ranges(rx.have.iter().copied()),
        })?;
        self.files.insert(id, Entry { rx, _claim: claim });
        Ok(())
    }

    /// Where file `o.path` goes: its directory (created as needed) and name, checked against
    /// what is there; `Err` with the reason to refuse it.
    fn place(&self, o: &Offer) -> Result<(crate::paths::Dir, String), Refusal> {
        let (dir, name) = self.srv.root.parent_of(&o.path).map_err(Refusal::Path)?;
        match dir.kind(name).map_err(Refusal::Dir)? {
            None => {}
            Some(_) if !self.srv.cfg.overwrite => return Err(Refusal::Exists { path: o.path.clone() }),
            Some(safedir::EntryKind::File) => {}
            Some(_) => return Err(Refusal::NotAFile { path: o.path.clone() }),
        }
        Ok((dir, name.to_string()))
    }

    /// Blocks the stream completed (written and hashed), and write errors.
    fn completions(
        &mut self,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
    ) -> Result<(), TransferSessionError> {
        let sink = receiver.sink_mut();
        if let Some(e) = sink.last_error.take() {
            // Disk full or a failing disk: stop, keep what is on disk resumable.
            return Err(io_err("writing below the root")(e).into());
        }
        for c in sink.take_completed() {
            let Some(e) = self.files.get_mut(&c.file) else { continue };
            e.rx.block_done(c.block, c.hash);
            if e.rx.offer.sync {
                if let Ok(f) = e.rx.part.try_clone() {
                    let off = c.block * e.rx.g.block_size;
                    self.finisher.submit(Job::Writeback(f, off, e.rx.g.block_len(c.block)));
                }
            }
        }
        for (&id, e) in self.files.iter_mut() {
            let held =
                e.rx.poll_held()
                    .map_err(io_err(format!("reading {}", e.rx.part_path.display())))?;
            // The proof of what we said we hold: the sender's hashes of it come only after.
            for run in runs_of_blocks(&held) {
                ch.send(&Msg::Held {
                    id,
                    first_block: run[0].0,
                    hashes: run.iter().map(|(_, h)| hex_encode(h)).collect(),
                })?;
            }
        }
        Ok(())
    }

    /// Files whose blocks and hashes are all in: commit, fetch bad blocks again, or give up.
    fn verify_ready(
        &mut self,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
        net: &Net<'_>,
    ) -> Result<(), TransferSessionError> {
        let ready: Vec<u64> = self
            .files
            .iter()
            .filter(|(_, e)| !e.rx.finishing)
            .map(|(&id, _)| id)
            .collect();
        for id in ready {
            let Some(e) = self.files.get_mut(&id) else { continue };
            match e.rx.check() {
                Check::Waiting => {}
                Check::Good(root) => {
                    e.rx.report.blake3 = Some(hex_encode(&root));
                    let job =
                        e.rx.commit_job(id, self.srv.cfg.overwrite)
                            .map_err(io_err(format!("committing {}", e.rx.part_path.display())))?;
                    self.finisher.submit(job);
                }
                Check::Bad(bad) => {
                    e.rx.report.bad_blocks += bad.len() as u64;
                    e.rx.forget(&bad);
                    let _ = e.rx.save();
                    if e.rx.report.rounds < self.srv.cfg.max_rounds {
                        e.rx.report.rounds += 1;
                        for &b in &bad {
                            if let Some((len, off)) = receiver.sink_mut().push_block(id, b) {
                                receiver.push_segment(len, off);
                            }
                        }
                        ch.send(&Msg::Resend {
                            id,
                            blocks: to_ranges(bad.iter().copied()),
                        })?;
                    } else {
                        let why = format!(
                            "{}: blocks still fail verification after {} rounds; the source may be changing",
                            e.rx.offer.path, self.srv.cfg.max_rounds
                        );
                        self.fail(id, why, ch, receiver, net)?;
                    }
                }
                Check::FileMismatch => {
                    let why = format!("{}: every block matches but the file hash does not", e.rx.offer.path);
                    self.fail(id, why, ch, receiver, net)?;
                }
            }
        }
        Ok(())
    }

    /// Give up on file `id` (its `.part` and record stay, resumable).
    fn fail(
        &mut self,
        id: u64,
        why: String,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
        net: &Net<'_>,
    ) -> Result<(), TransferSessionError> {
        receiver.sink_mut().remove_file(id);
        if let Some(mut e) = self.files.remove(&id) {
            let _ = e.rx.save();
            e.rx.report.error = Some(why.clone());
            e.rx.report.elapsed_s = e.rx.started.elapsed().as_secs_f64();
            (net.on)(ServerEvent::File(e.rx.report));
        }
        ch.send(&Msg::Refused {
            id,
            message: clip(&why),
        })?;
        Ok(())
    }

    /// Commits the finisher completed: verdicts.
    fn committed(
        &mut self,
        ch: &mut Channel<Msg>,
        receiver: &mut Receiver<PartSink>,
        net: &Net<'_>,
    ) -> Result<(), TransferSessionError> {
        for (id, res) in self.finisher.finished() {
            let read_back = receiver.sink().read_back(id);
            receiver.sink_mut().remove_file(id);
            let Some(e) = self.files.remove(&id) else { continue };
            let mut rep = e.rx.report;
            rep.elapsed_s = e.rx.started.elapsed().as_secs_f64();
            rep.bytes_read_back += read_back;
            match res {
                Ok(synced) => {
                    rep.verified = true;
                    rep.synced = synced.is_some();
                    rep.sync_s = synced.map(|d| d.as_secs_f64());
                    rep.resumed_bytes = e.rx.g.len_of(e.rx.held_before.iter().copied());
                    ch.send(&Msg::Verified {
                        id,
                        path: e.rx.offer.path.clone(),
                        blake3: rep.blake3.clone().unwrap_or_default(),
                        synced: synced.is_some(),
                        sync_us: synced.map_or(0, |d| d.as_micros() as u64),
                    })?;
                }
                Err(why) => {
                    let why = why.to_string();
                    rep.error = Some(why.clone());
                    ch.send(&Msg::Refused {
                        id,
                        message: clip(&why),
                    })?;
                }
            }
            (net.on)(ServerEvent::File(rep));
        }
        Ok(())
    }

    /// The session ended: commits in flight finish, and every file still open keeps its record
    /// for the same command to resume.
    fn close(&mut self, net: &Net<'_>, clean: bool) {
        for (id, res) in self.finisher.drain(Duration::from_secs(30)) {
            if let (Some(e), Ok(_)) = (self.files.remove(&id), res) {
                let mut rep = e.rx.report;
                rep.verified = true;
                (net.on)(ServerEvent::File(rep));
            }
        }
        for (_, mut e) in self.files.drain() {
            if e.rx.finishing {
                continue;
            }
            // Tell the truth even if saving fails (disk full): the previous record then stays,
            // listing fewer blocks — still correct.
            let _ = e.rx.save();
            if clean {
                e.rx.report.error = Some("the session ended before the file's verdict".into());
                (net.on)(ServerEvent::File(e.rx.report));
            }
        }
    }
}

/// `(block, hash)` pairs in block order cut into runs of consecutive blocks, each at most
/// [`HASHES_PER_MESSAGE`] long (one `held` message each).
fn runs_of_blocks(held: &[(u64, Cv)]) -> impl Iterator<Item = &[(u64, Cv)]> {
    held.chunk_by(|a, b| a.0 + 1 == b.0)
        .flat_map(|run| run.chunks(HASHES_PER_MESSAGE))
}

/// Tell the sender why the session ends (best effort: the connection may be gone) and hand the
/// error back for the caller to return.
pub(crate) fn fatal(ch: &mut Channel<Msg>, e: TransferSessionError) -> TransferSessionError {
    let _ = ch.send(&Msg::Error {
        message: clip(&netio::error_chain(&e)),
    });
    e
}
