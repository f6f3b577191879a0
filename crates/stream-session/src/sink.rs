//! Where received frames go: one VDIF file per station and segment, or nowhere (memory sink for
//! throughput tests).
//!
//! The receive loop must never wait for the disk (a full socket buffer drops data within
//! milliseconds at 4 Gb/s), so frames are gathered into 1 MiB buffers of whole frames and handed
//! to a writer thread through a bounded queue (256 MiB). A write error (disk full, unwritable
//! directory) cuts the file back to whole frames, keeps the error, and counts every later frame
//! of that station as not written; receiving goes on.
//!
//! Files must hold only whole frames even when the receiver is killed with SIGKILL. A `write()`
//! is not atomic against that: the kernel copies a buffered write a page at a time and gives up
//! between pages once a fatal signal is pending (`generic_perform_write`), so a 1 MiB write of
//! whole frames can end mid-frame. No flag or syscall makes an append atomic on every file system
//! (RWF_ATOMIC needs kernel 6.11 and a block-sized unit), so with [`WriterPlacement::ChildProcess`]
//! the writes run in a child process that a kill of the receiver does not touch. The frames
//! travel in shared memory ([`crate::ring`]): the receiver gathers them into a slot and pipes a
//! small record naming it ([`serve_writer_process`]); the child writes each complete record's
//! slot, drops a record cut short by the receiver's death, and exits at end of input.
//!
//! With `direct` the child writes with O_DIRECT, straight from the shared slots to the disk (see
//! [`DIRECT_ALIGN`] for the placement that makes this possible); a file's last partial block
//! is written through the page cache when it closes.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use stream::FrameSink;

use serde::{Deserialize, Serialize};

use crate::report::WrittenFile;
use crate::ring::SharedRing;

/// Hand a buffer to the writer once it holds this much.
const FLUSH_BYTES: usize = 1 << 20;
/// Default memory queued for the writer (256 MiB: half a second of disk stall absorbed at
/// 4 Gb/s).
pub const DEFAULT_WRITE_BUFFER: u64 = 256 << 20;

/// Where the file writes run.
#[derive(Debug, Clone, Default)]
pub enum WriterPlacement {
    /// A thread of the receiver. A SIGKILL of the receiver can leave a partial frame at the end
    /// of a file.
    #[default]
    Thread,
    /// A child process, `program args… DIR`, that calls [`serve_writer_process`] on its standard
    /// input and output (the `evlbi` binary has a hidden subcommand for it). Files then hold only
    /// whole frames after a SIGKILL of the receiver.
    ChildProcess {
        /// Executable, usually `std::env::current_exe()`.
        program: PathBuf,
        /// Arguments before the directory.
        args: Vec<OsString>,
    },
}

#[derive(Debug, PartialEq)]
enum WriteOp {
    /// Start a new file for `station`, named after its first frame's time.
    Open { station: u16, stamp: String },
    /// Whole frames for the station's current file (writer thread).
    Data {
        station: u16,
        buf: Vec<u8>,
        frames: u64,
        filled: u64,
        frame_len: u64,
    },
    /// Whole frames in slot `slot` of the shared ring, `len` bytes from byte `at` (writer
    /// process).
    Slot {
        station: u16,
        slot: u32,
        at: u32,
        len: u32,
        frames: u64,
        filled: u64,
        frame_len: u64,
    },
    /// Close the station's current file.
    Close { station: u16 },
}

struct Open {
    file: Option<File>,
    path: PathBuf,
    info: WrittenFile,
    /// Frame length of the file (from its first record).
    frame_len: u64,
    /// With direct I/O: the file's last, partial block.
    carry: Option<Carry>,
}

/// Direct I/O (O_DIRECT) moves data from memory to the disk without the page cache, which at
/// 4 Gb/s costs more CPU than the copy itself (this VM: 8 GB written in 2.1 s of system time
/// direct, 17 s buffered). File offset, length and memory address must all be multiples of the
/// device's logical block size; 4096 serves 512-byte and 4 KiB-sector devices alike.
pub const DIRECT_ALIGN: usize = 4096;

#[repr(C, align(4096))]
struct Block([u8; DIRECT_ALIGN]);

/// The bytes of a direct-I/O file past its last whole block: written when the block is complete,
/// or through the page cache when the file is closed.
struct Carry {
    block: Box<Block>,
    len: usize,
}

impl Carry {
    fn new() -> Carry {
        Carry {
            block: Box::new(Block([0; DIRECT_ALIGN])),
            len: 0,
        }
    }
}

/// Append `data` to a direct-I/O file whose unwritten last block is in `c`. The receiver places
/// a record in its slot at the offset the data has within its block on disk (memory address ≡
/// file offset mod [`DIRECT_ALIGN`]), so after topping up the carried block the rest is aligned
/// and goes to the disk straight from shared memory.
fn write_direct(f: &mut File, c: &mut Carry, data: &[u8]) -> std::io::Result<()> {
    if (data.as_ptr() as usize) % DIRECT_ALIGN != c.len {
        return Err(bad(format!(
            "writer record: placed at {} within its block, the file is at {}",
            (data.as_ptr() as usize) % DIRECT_ALIGN,
            c.len
        )));
    }
    let mut rest = data;
    if c.len > 0 {
        let n = (DIRECT_ALIGN - c.len).min(rest.len());
        c.block.0[c.len..c.len + n].copy_from_slice(&rest[..n]);
        c.len += n;
        rest = &rest[n..];
        if c.len < DIRECT_ALIGN {
            return Ok(());
        }
        f.write_all(&c.block.0)?;
        c.len = 0;
    }
    let whole = rest.len() - rest.len() % DIRECT_ALIGN;
    f.write_all(&rest[..whole])?;
    let tail = &rest[whole..];
    c.block.0[..tail.len()].copy_from_slice(tail);
    c.len = tail.len();
    Ok(())
}

/// Turn O_DIRECT off for an open file (its last, partial block).
fn end_direct(f: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own; results checked.
    let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether files in `dir` can be written with direct I/O: a clear error now instead of a
/// failed recording later.
fn check_direct(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join(format!(".evlbi-direct-check-{}", std::process::id()));
    let opened = File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe);
    let _ = std::fs::remove_file(&probe);
    opened.map(drop).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "{} does not take direct I/O (O_DIRECT: {e}); leave out --direct to write through the page cache",
                dir.display()
            ),
        )
    })
}

#[derive(Default)]
struct Shared {
    error: Mutex<Option<String>>,
    not_written: AtomicU64,
}

impl Shared {
    fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }
}

fn create(dir: &Path, station: u16, stamp: &str, direct: bool) -> std::io::Result<(File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = vdif::station_name(station);
    for n in 0..1000 {
        let suffix = if n == 0 { String::new() } else { format!("_{n}") };
        let path = dir.join(format!("{name}_{stamp}{suffix}.vdif"));
        let flags = if direct { libc::O_DIRECT } else { 0 };
        match File::options()
            .write(true)
            .create_new(true)
            .custom_flags(flags)
            .open(&path)
        {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "1000 files of the same name",
    ))
}

/// Append whole frames to a station's open file; on a write error cut the file back to whole
/// frames, count what did not make it and stop writing that file.
fn append(o: &mut Open, data: &[u8], frames: u64, filled: u64, frame_len: u64, shared: &Shared) {
    let Some(f) = o.file.as_mut() else {
        shared.not_written.fetch_add(frames, Ordering::Relaxed);
        return;
    };
    if o.info.frames == 0 {
        o.frame_len = frame_len;
    }
    let written = if frame_len != o.frame_len {
        Err(bad(format!(
            "writer record: frames of {frame_len} bytes in a file of {}-byte frames",
            o.frame_len
        )))
    } else if let Some(c) = o.carry.as_mut() {
        write_direct(f, c, data)
    } else {
        f.write_all(data)
    };
    match written {
        Ok(()) => {
            o.info.bytes += data.len() as u64;
            o.info.frames += frames;
            o.info.filled += filled;
        }
        Err(e) => cut_back(o, frames, shared, e),
    }
}

/// After a write error: cut the file back to the whole frames on disk, count the rest of what
/// it was given (`more` frames beyond those already counted) as not written, and stop writing
/// the file.
fn cut_back(o: &mut Open, more: u64, shared: &Shared, e: std::io::Error) {
    let fl = o.frame_len.max(1);
    let given = o.info.frames + more;
    if let Some(f) = o.file.take() {
        let on_disk = f.metadata().map_or(o.info.bytes, |m| m.len());
        // With direct I/O the carried block never reached the disk: fewer frames than counted.
        let kept = (on_disk / fl).min(given);
        let _ = f.set_len(kept * fl);
        o.info.frames = kept;
        o.info.bytes = kept * fl;
        o.info.filled = o.info.filled.min(kept);
    }
    shared
        .not_written
        .fetch_add(given - o.info.frames.min(given), Ordering::Relaxed);
    shared.fail(format!("writing {}: {e}", o.path.display()));
}

/// Close a station's file: a direct-I/O file's last partial block goes through the page cache
/// (O_DIRECT writes whole blocks only).
fn close(mut o: Open, shared: &Shared) -> WrittenFile {
    if let (Some(f), Some(c)) = (o.file.as_mut(), o.carry.as_ref()) {
        if c.len > 0 {
            if let Err(e) = end_direct(f).and_then(|()| f.write_all(&c.block.0[..c.len])) {
                cut_back(&mut o, 0, shared, e);
            }
        }
    }
    o.info
}

/// The writer (thread, or the body of the writer process with `ring`): owns the files.
fn writer(
    dir: PathBuf,
    ops: impl IntoIterator<Item = WriteOp>,
    shared: Arc<Shared>,
    ring: Option<&SharedRing>,
    direct: bool,
) -> Vec<WrittenFile> {
    let mut open: HashMap<u16, Open> = HashMap::new();
    let mut done = Vec::new();
    for op in ops {
        match op {
            WriteOp::Open { station, stamp } => {
                if let Some(o) = open.remove(&station) {
                    done.push(close(o, &shared));
                }
                let (file, path) = match create(&dir, station, &stamp, direct) {
                    Ok((f, p)) => (Some(f), p),
                    Err(e) => {
                        shared.fail(format!("creating a file in {}: {e}", dir.display()));
                        (None, PathBuf::new())
                    }
                };
                let info = WrittenFile {
                    path: path.display().to_string(),
                    station: vdif::station_name(station),
                    bytes: 0,
                    frames: 0,
                    filled: 0,
                };
                open.insert(
                    station,
                    Open {
                        file,
                        path,
                        info,
                        frame_len: 0,
                        carry: direct.then(Carry::new),
                    },
                );
            }
            WriteOp::Data {
                station,
                buf,
                frames,
                filled,
                frame_len,
            } => match open.get_mut(&station) {
                Some(o) => append(o, &buf, frames, filled, frame_len, &shared),
                None => {
                    shared.not_written.fetch_add(frames, Ordering::Relaxed);
                }
            },
            WriteOp::Slot {
                station,
                slot,
                at,
                len,
                frames,
                filled,
                frame_len,
            } => {
                let data = ring.and_then(|r| r.handed(slot, at as usize, len as usize));
                match (open.get_mut(&station), data) {
                    (Some(o), Some(data)) => append(o, data, frames, filled, frame_len, &shared),
                    (_, None) => {
                        shared.fail(format!("writer record: slot {slot} ({len} bytes) was not handed over"));
                        shared.not_written.fetch_add(frames, Ordering::Relaxed);
                    }
                    (None, Some(_)) => {
                        shared.not_written.fetch_add(frames, Ordering::Relaxed);
                    }
                }
                if let Some(r) = ring {
                    r.release(slot);
                }
            }
            WriteOp::Close { station } => {
                if let Some(o) = open.remove(&station) {
                    done.push(close(o, &shared));
                }
            }
        }
    }
    done.extend(open.into_values().map(|o| close(o, &shared)));
    done.retain(|f| !f.path.is_empty());
    done
}

// The record format on the pipe to a writer process (little-endian). Both ends are this crate,
// but the child still bounds and checks every field: a bad record stops it with an error rather
// than writing garbage into a VDIF file.
//   tag u8 (1 open, 3 close, 4 slot), station u16, then
//   open:  len u16, stamp bytes (≤ MAX_STAMP)
//   slot:  frames u64, filled u64, frame_len u32, len u32, slot u32, at u32 (len = frames ·
//          frame_len; the bytes are in that slot of the shared ring from byte `at`)
// (Tag 2 carried the bytes inline, through the pipe; it is gone with the ring.)
const TAG_OPEN: u8 = 1;
const TAG_CLOSE: u8 = 3;
const TAG_SLOT: u8 = 4;
const MAX_STAMP: usize = 64;
/// Largest data record: the 1 MiB flush size plus one frame of at most 64 KiB, with room.
const MAX_RECORD: u32 = 4 << 20;

fn encode_op(op: &WriteOp, out: &mut impl Write) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(32);
    match op {
        WriteOp::Open { station, stamp } => {
            let stamp = &stamp.as_bytes()[..stamp.len().min(MAX_STAMP)];
            head.push(TAG_OPEN);
            head.extend_from_slice(&station.to_le_bytes());
            head.extend_from_slice(&(stamp.len() as u16).to_le_bytes());
            head.extend_from_slice(stamp);
            out.write_all(&head)
        }
        WriteOp::Slot {
            station,
            slot,
            at,
            len,
            frames,
            filled,
            frame_len,
        } => {
            head.push(TAG_SLOT);
            head.extend_from_slice(&station.to_le_bytes());
            head.extend_from_slice(&frames.to_le_bytes());
            head.extend_from_slice(&filled.to_le_bytes());
            head.extend_from_slice(&(*frame_len as u32).to_le_bytes());
            head.extend_from_slice(&len.to_le_bytes());
            head.extend_from_slice(&slot.to_le_bytes());
            head.extend_from_slice(&at.to_le_bytes());
            // One write of ≤ PIPE_BUF bytes: atomic on a pipe, so a killed receiver leaves
            // a whole record or none.
            out.write_all(&head)
        }
        WriteOp::Data { .. } => Err(std::io::Error::other("frame data goes through the ring, not the pipe")),
        WriteOp::Close { station } => {
            head.push(TAG_CLOSE);
            head.extend_from_slice(&station.to_le_bytes());
            out.write_all(&head)
        }
    }
}

/// Why a record from the pipe was refused.
fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// The next record, `Ok(None)` at end of input — also when the input ends inside a record,
/// which is what a receiver killed mid-write leaves.
fn decode_op(input: &mut impl Read) -> std::io::Result<Option<WriteOp>> {
    fn take<const N: usize>(input: &mut impl Read) -> std::io::Result<Option<[u8; N]>> {
        let mut b = [0u8; N];
        Ok(take_into(input, &mut b)?.map(|()| b))
    }
    macro_rules! field {
        ($n:literal, $t:ty) => {
            match take::<$n>(input)? {
                Some(b) => <$t>::from_le_bytes(b),
                None => return Ok(None),
            }
        };
    }
    let tag = field!(1, u8);
    let station = field!(2, u16);
    match tag {
        TAG_OPEN => {
            let len = usize::from(field!(2, u16));
            if len > MAX_STAMP {
                return Err(bad(format!("writer record: file stamp of {len} bytes")));
            }
            let mut stamp = vec![0u8; len];
            if take_into(input, &mut stamp)?.is_none() {
                return Ok(None);
            }
            let stamp = String::from_utf8(stamp).map_err(|_| bad("writer record: stamp not UTF-8".into()))?;
            if !stamp.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(bad(format!("writer record: stamp {stamp:?}")));
            }
            Ok(Some(WriteOp::Open { station, stamp }))
        }
        TAG_SLOT => {
            let frames = field!(8, u64);
            let filled = field!(8, u64);
            let frame_len = field!(4, u32);
            let len = field!(4, u32);
            let slot = field!(4, u32);
            let at = field!(4, u32);
            if len > MAX_RECORD
                || frame_len == 0
                || filled > frames
                || u64::from(frame_len).checked_mul(frames) != Some(u64::from(len))
            {
                return Err(bad(format!(
                    "writer record: {len} bytes for {frames} frames of {frame_len} bytes"
                )));
            }
            Ok(Some(WriteOp::Slot {
                station,
                slot,
                at,
                len,
                frames,
                filled,
                frame_len: u64::from(frame_len),
            }))
        }
        TAG_CLOSE => Ok(Some(WriteOp::Close { station })),
        t => Err(bad(format!("writer record: unknown tag {t}"))),
    }
}

fn take_into(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<Option<()>> {
    match input.read_exact(buf) {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a writer process reports on its standard output when its input ends.
#[derive(Debug, Serialize, Deserialize)]
struct WriterOutcome {
    files: Vec<WrittenFile>,
    not_written: u64,
    error: Option<String>,
}

/// The body of a writer process: records from `input` (see [`WriterPlacement::ChildProcess`])
/// naming slots of `ring` into files in `dir` (with O_DIRECT when `direct`) until end of input,
/// then a JSON outcome on `output`.
pub fn serve_writer_process(
    dir: &Path,
    ring: &SharedRing,
    direct: bool,
    input: impl Read,
    output: impl Write,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::default());
    let mut input = std::io::BufReader::with_capacity(64 << 10, input);
    let sh = shared.clone();
    let ops = std::iter::from_fn(move || match decode_op(&mut input) {
        Ok(op) => op,
        Err(e) => {
            sh.fail(format!("from the receiver: {e}"));
            None
        }
    });
    let files = writer(dir.to_path_buf(), ops, shared.clone(), Some(ring), direct);
    let outcome = WriterOutcome {
        files,
        not_written: shared.not_written.load(Ordering::Relaxed),
        error: shared.error.lock().ok().and_then(|e| e.clone()),
    };
    serde_json::to_writer(output, &outcome).map_err(std::io::Error::other)
}

/// Descriptor number the ring has in the writer process.
pub const RING_FD: i32 = 3;

/// [`serve_writer_process`] on standard input and output with the ring on descriptor `ring_fd`,
/// for the child's `main`. It first ignores SIGINT, SIGTERM and SIGHUP: those stop the receiver,
/// which then closes the pipe, and the child must write everything it was given before it exits.
pub fn run_writer_process(dir: &Path, ring_fd: i32, direct: bool) -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: setting a disposition to SIG_IGN installs no handler code.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // SAFETY: F_GETFD only asks whether the number is an open descriptor.
    if ring_fd < 0 || unsafe { libc::fcntl(ring_fd, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::other(format!(
            "no shared ring on descriptor {ring_fd}: this command is started by `stream recv --out`"
        )));
    }
    use std::os::fd::FromRawFd;
    // SAFETY: the descriptor is open (checked) and this process takes it over for good.
    let ring = SharedRing::open(unsafe { std::os::fd::OwnedFd::from_raw_fd(ring_fd) })?;
    serve_writer_process(dir, &ring, direct, std::io::stdin().lock(), std::io::stdout().lock())
}

fn spawn_writer_process(
    program: &Path,
    args: &[OsString],
    dir: &Path,
    ring: &SharedRing,
    direct: bool,
) -> std::io::Result<Child> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let ring_fd = ring.fd().as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args).arg("--ring-fd").arg(RING_FD.to_string());
    if direct {
        cmd.arg("--direct");
    }
    // SAFETY: between fork and exec only async-signal-safe calls (dup2, fcntl) run.
    unsafe {
        cmd.pre_exec(move || {
            let rc = if ring_fd == RING_FD {
                // Already there: only drop close-on-exec.
                libc::fcntl(RING_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(ring_fd, RING_FD)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Its own process group: Ctrl-C in a terminal reaches the receiver, which finishes and
        // closes the pipe; the child must not stop before writing what it was given.
        .process_group(0)
        .spawn()?;
    Ok(child)
}

/// The writer thread's body when the writes run in a child process: forward the records (the
/// frames themselves are in the shared ring). Sets `gone` when the child can take no more.
fn forward_to_child(
    mut child: Child,
    ops: std::sync::mpsc::Receiver<WriteOp>,
    shared: Arc<Shared>,
    gone: Arc<AtomicBool>,
) -> Vec<WrittenFile> {
    let mut stdin = child.stdin.take();
    for op in ops {
        if let Some(pipe) = stdin.as_mut() {
            match encode_op(&op, pipe) {
                Ok(()) => continue,
                Err(e) => {
                    shared.fail(format!("the file writer process stopped: {e}"));
                    gone.store(true, Ordering::Release);
                    stdin = None;
                }
            }
        }
        if let WriteOp::Slot { frames, .. } | WriteOp::Data { frames, .. } = op {
            shared.not_written.fetch_add(frames, Ordering::Relaxed);
        }
    }
    drop(stdin);
    let out = child.wait_with_output();
    gone.store(true, Ordering::Release);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            shared.fail(format!("waiting for the file writer process: {e}"));
            return Vec::new();
        }
    };
    match serde_json::from_slice::<WriterOutcome>(&out.stdout) {
        Ok(o) => {
            shared.not_written.fetch_add(o.not_written, Ordering::Relaxed);
            if let Some(e) = o.error {
                shared.fail(e);
            }
            o.files
        }
        Err(_) => {
            shared.fail(format!(
                "the file writer process ended ({}) without a report: the files written are not known",
                out.status
            ));
            Vec::new()
        }
    }
}

/// Whether process `pid` has exited, without reaping it (its owner waits for it later).
fn exited(pid: u32) -> bool {
    // SAFETY: waitid writes one siginfo_t into memory we own; WNOWAIT leaves the child waitable.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            libc::id_t::from(pid),
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after a successful waitid (0 when nothing has exited).
    rc != 0 || unsafe { info.si_pid() } != 0
}

/// The writer process's side of the sink: the shared ring, the slots this process holds, and
/// how to tell that the process is gone.
struct RingSide {
    ring: Arc<SharedRing>,
    held: Vec<bool>,
    child: u32,
    gone: Arc<AtomicBool>,
}

/// A station's buffer of whole frames being gathered.
enum Gather {
    /// In memory, for the writer thread.
    Heap(Vec<u8>),
    /// In a slot of the ring (`None` until the next frame needs one), `len` bytes from byte
    /// `at`: the offset the data has within its block in the file, which lets the writer move
    /// it with direct I/O.
    Slot { slot: Option<u32>, at: usize, len: usize },
}

struct Pending {
    buf: Gather,
    frames: u64,
    filled: u64,
    frame_len: u64,
    bytes_in_file: u64,
    rotate: bool,
}

/// Writes each station's frames to `DIR/<station>_<UTC of first frame>.vdif`, starting a new
/// file at a discontinuity or when `chunk` bytes are reached.
pub struct FileSink {
    chunk: Option<u64>,
    ops: Option<SyncSender<WriteOp>>,
    ring: Option<RingSide>,
    /// Time the caller waited because the writer had all the buffers, and how often.
    stalled: std::time::Duration,
    stalls: u64,
    thread: Option<JoinHandle<Vec<WrittenFile>>>,
    shared: Arc<Shared>,
    pending: HashMap<u16, Pending>,
    frames: u64,
    filled: u64,
}

/// A slot holds one flush of frames plus one frame of the largest UDP payload, from an offset
/// within the first block.
const SLOT_BYTES: u32 = (FLUSH_BYTES + 65_536 + DIRECT_ALIGN) as u32;

impl FileSink {
    /// Files in `dir` (created if missing), or a memory sink when `None`; the writes run where
    /// `placement` says, with about `write_buffer` bytes of buffers between this process and
    /// the writes (at least one), with direct I/O when `direct` (writer process only).
    pub fn new(
        dir: Option<&Path>,
        chunk: Option<u64>,
        placement: &WriterPlacement,
        write_buffer: u64,
        direct: bool,
    ) -> std::io::Result<FileSink> {
        let shared = Arc::new(Shared::default());
        let mut ring = None;
        let (ops, thread) = match dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                if direct {
                    if matches!(placement, WriterPlacement::Thread) {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            "direct I/O needs the writer process (its buffers are aligned shared memory)",
                        ));
                    }
                    check_direct(d)?;
                }
                let buffers = usize::try_from(write_buffer / FLUSH_BYTES as u64)
                    .unwrap_or(usize::MAX)
                    .max(1);
                let (tx, handle) = match placement {
                    WriterPlacement::Thread => {
                        let (tx, rx) = sync_channel(buffers);
                        let d = d.to_path_buf();
                        let sh = shared.clone();
                        (tx, std::thread::spawn(move || writer(d, rx, sh, None, false)))
                    }
                    WriterPlacement::ChildProcess { program, args } => {
                        let slots = u32::try_from(buffers).unwrap_or(u32::MAX).min(crate::ring::MAX_SLOTS);
                        let r = Arc::new(SharedRing::create(slots, SLOT_BYTES).map_err(|e| {
                            std::io::Error::new(e.kind(), format!("shared memory for the file writer: {e}"))
                        })?);
                        let child = spawn_writer_process(program, args, d, &r, direct).map_err(|e| {
                            std::io::Error::new(
                                e.kind(),
                                format!("starting the file writer process {}: {e}", program.display()),
                            )
                        })?;
                        let gone = Arc::new(AtomicBool::new(false));
                        ring = Some(RingSide {
                            held: vec![false; r.slots() as usize],
                            ring: r,
                            child: child.id(),
                            gone: gone.clone(),
                        });
                        // Records are small and the ring bounds what is in flight; the queue
                        // only has to hold one record per slot plus opens and closes.
                        let (tx, rx) = sync_channel(2 * slots as usize + 64);
                        let sh = shared.clone();
                        (tx, std::thread::spawn(move || forward_to_child(child, rx, sh, gone)))
                    }
                };
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        Ok(FileSink {
            chunk,
            ops,
            ring,
            stalled: std::time::Duration::ZERO,
            stalls: 0,
            thread,
            shared,
            pending: HashMap::new(),
            frames: 0,
            filled: 0,
        })
    }

    /// Frames passed in (written or not).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Filled frames passed in.
    pub fn filled(&self) -> u64 {
        self.filled
    }

    /// Time spent waiting for the writer (all buffers with it: the output takes less than the
    /// stream's rate, or stalled), and how many times that happened.
    pub fn stalled(&self) -> (std::time::Duration, u64) {
        (self.stalled, self.stalls)
    }

    fn send(&mut self, op: WriteOp) {
        let Some(tx) = &self.ops else { return };
        let unsent = match tx.try_send(op) {
            Ok(()) => return,
            Err(TrySendError::Full(op)) => {
                // The writer's queue is full: waiting here is a stall.
                let t = std::time::Instant::now();
                let sent = tx.send(op);
                self.stalled += t.elapsed();
                self.stalls += 1;
                match sent {
                    Ok(()) => return,
                    Err(e) => e.0,
                }
            }
            Err(TrySendError::Disconnected(op)) => op,
        };
        // The writer is gone (it cannot panic on I/O; this is defensive): count the loss.
        if let WriteOp::Data { frames, .. } | WriteOp::Slot { frames, .. } = unsent {
            self.shared.not_written.fetch_add(frames, Ordering::Relaxed);
        }
    }

    /// A free slot of the ring, waiting (and counting the wait as a stall) while the writer has
    /// them all; `None` once the writer process is gone.
    fn take_slot(&mut self) -> Option<u32> {
        let side = self.ring.as_mut()?;
        if let Some(s) = side.ring.try_take(&mut side.held) {
            return Some(s);
        }
        let t = std::time::Instant::now();
        let mut checked = t;
        let got = loop {
            std::thread::sleep(std::time::Duration::from_micros(50));
            if let Some(s) = side.ring.try_take(&mut side.held) {
                break Some(s);
            }
            if checked.elapsed() >= std::time::Duration::from_millis(10) {
                checked = std::time::Instant::now();
                if side.gone.load(Ordering::Acquire) || exited(side.child) {
                    self.shared.fail("the file writer process ended early".into());
                    break None;
                }
            }
        };
        self.stalled += t.elapsed();
        self.stalls += 1;
        got
    }

    fn hand_over(&mut self, station: u16) {
        let Some(p) = self.pending.get_mut(&station) else {
            return;
        };
        let (frames, filled) = (std::mem::take(&mut p.frames), std::mem::take(&mut p.filled));
        let frame_len = p.frame_len;
        let op = match &mut p.buf {
            Gather::Heap(buf) => {
                if buf.is_empty() {
                    return;
                }
                WriteOp::Data {
                    station,
                    buf: std::mem::replace(buf, Vec::with_capacity(FLUSH_BYTES + frame_len as usize)),
                    frames,
                    filled,
                    frame_len,
                }
            }
            Gather::Slot { slot, at, len } => {
                let (Some(s), true) = (*slot, *len > 0) else { return };
                let n = std::mem::take(len);
                *slot = None;
                let at = std::mem::take(at) as u32;
                if let Some(side) = self.ring.as_mut() {
                    side.ring.hand_over(s);
                    side.held[s as usize] = false;
                }
                WriteOp::Slot {
                    station,
                    slot: s,
                    at,
                    len: n as u32,
                    frames,
                    filled,
                    frame_len,
                }
            }
        };
        self.send(op);
    }

    /// Flush and close every file; the list of files written, frames not written, first error.
    pub fn finish(&mut self) -> (Vec<WrittenFile>, u64, Option<String>) {
        let stations: Vec<u16> = self.pending.keys().copied().collect();
        for s in stations {
            self.hand_over(s);
            self.send(WriteOp::Close { station: s });
        }
        self.ops = None;
        let files = self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default();
        let err = self.shared.error.lock().ok().and_then(|e| e.clone());
        (files, self.shared.not_written.load(Ordering::Relaxed), err)
    }

    /// Add one frame to the station's buffer (a slot of the ring or memory): `Some(full)`, or
    /// `None` when it could not be kept (counted as not written).
    fn gather(&mut self, station: u16, frame: &[u8]) -> Option<bool> {
        let needs_slot = matches!(
            self.pending.get(&station).map(|p| &p.buf),
            Some(Gather::Slot { slot: None, .. })
        );
        let fresh = if needs_slot { self.take_slot() } else { None };
        let p = self.pending.get_mut(&station)?;
        match &mut p.buf {
            Gather::Heap(buf) => {
                buf.extend_from_slice(frame);
                Some(buf.len() >= FLUSH_BYTES)
            }
            Gather::Slot { slot, at, len } => {
                if slot.is_none() {
                    *slot = fresh;
                    *at = (p.bytes_in_file % DIRECT_ALIGN as u64) as usize;
                }
                let (Some(s), Some(side)) = (*slot, self.ring.as_ref()) else {
                    self.shared.not_written.fetch_add(1, Ordering::Relaxed);
                    return None;
                };
                // SAFETY: this process holds slot `s` (taken, not handed over) and this is the
                // only slice of it alive.
                let dst = unsafe { side.ring.slot_mut(s) };
                let (start, end) = (*at + *len, *at + *len + frame.len());
                // Frames come from datagrams (≤ 64 KiB) and a slot is handed over once it holds
                // a flush's worth, so a frame always fits; refuse rather than overrun if not.
                let Some(room) = dst.get_mut(start..end) else {
                    self.shared.not_written.fetch_add(1, Ordering::Relaxed);
                    return None;
                };
                room.copy_from_slice(frame);
                *len += frame.len();
                Some(*len >= FLUSH_BYTES)
            }
        }
    }
}

impl FrameSink for FileSink {
    fn frame(&mut self, station: u16, frame: &[u8], filled: bool) {
        self.frames += 1;
        self.filled += u64::from(filled);
        if self.ops.is_none() {
            return;
        }
        let new_file = self.pending.get(&station).is_none_or(|p| p.rotate);
        if new_file {
            self.hand_over(station);
            let stamp = vdif::VdifHeader::parse(frame)
                .map(|h| vdif::time::iso(h.ref_epoch, h.seconds, 0.0))
                .unwrap_or_default();
            // 2026-11-23T12:00:00.000000000Z → 20261123T120000
            let stamp: String = stamp.chars().take(19).filter(|c| c.is_ascii_alphanumeric()).collect();
            self.send(WriteOp::Open { station, stamp });
            // A slot held by the previous file of this station (taken, nothing in it) goes back.
            if let Some(Pending {
                buf: Gather::Slot { slot: Some(s), .. },
                ..
            }) = self.pending.get(&station)
            {
                if let Some(side) = self.ring.as_mut() {
                    side.held[*s as usize] = false;
                }
            }
            let buf = if self.ring.is_some() {
                Gather::Slot {
                    slot: None,
                    at: 0,
                    len: 0,
                }
            } else {
                Gather::Heap(Vec::with_capacity(FLUSH_BYTES + frame.len()))
            };
            self.pending.insert(
                station,
                Pending {
                    buf,
                    frames: 0,
                    filled: 0,
                    frame_len: frame.len() as u64,
                    bytes_in_file: 0,
                    rotate: false,
                },
            );
        }
        let Some(full) = self.gather(station, frame) else {
            return;
        };
        let chunk = self.chunk;
        let Some(p) = self.pending.get_mut(&station) else {
            return;
        };
        p.frames += 1;
        p.filled += u64::from(filled);
        p.bytes_in_file += frame.len() as u64;
        if chunk.is_some_and(|c| p.bytes_in_file >= c) {
            p.rotate = true;
        }
        if full {
            self.hand_over(station);
        }
    }

    fn discontinuity(&mut self, station: u16) {
        if let Some(p) = self.pending.get_mut(&station) {
            p.rotate = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames(n: usize, len: usize, first: u8) -> Vec<u8> {
        (0..n * len).map(|i| first.wrapping_add((i / len) as u8)).collect()
    }

    fn ops() -> Vec<WriteOp> {
        vec![
            WriteOp::Open {
                station: 7,
                stamp: "20261123T120000".into(),
            },
            WriteOp::Slot {
                station: 7,
                slot: 0,
                at: 0,
                len: 300,
                frames: 3,
                filled: 1,
                frame_len: 100,
            },
            WriteOp::Slot {
                station: 7,
                slot: 1,
                at: 0,
                len: 200,
                frames: 2,
                filled: 0,
                frame_len: 100,
            },
            WriteOp::Close { station: 7 },
        ]
    }

    /// A ring holding the frames `ops()` names, handed over as the receiver would.
    fn ring_for_ops() -> SharedRing {
        let ring = SharedRing::create(2, 4096).unwrap();
        let mut held = vec![false; 2];
        for (n, first) in [(3usize, 1u8), (2, 9)] {
            let s = ring.try_take(&mut held).unwrap();
            // SAFETY: `s` is held and this is its only slice.
            unsafe { ring.slot_mut(s)[..n * 100].copy_from_slice(&frames(n, 100, first)) };
            ring.hand_over(s);
            held[s as usize] = false;
        }
        ring
    }

    fn encoded(ops: &[WriteOp]) -> Vec<u8> {
        let mut out = Vec::new();
        for op in ops {
            encode_op(op, &mut out).unwrap();
        }
        out
    }

    fn decode_all(mut bytes: &[u8]) -> std::io::Result<Vec<WriteOp>> {
        let mut got = Vec::new();
        while let Some(op) = decode_op(&mut bytes)? {
            got.push(op);
        }
        Ok(got)
    }

    #[test]
    fn records_round_trip() {
        let ops = ops();
        assert_eq!(decode_all(&encoded(&ops)).unwrap(), ops);
        let inline = WriteOp::Data {
            station: 1,
            buf: vec![0; 10],
            frames: 1,
            filled: 0,
            frame_len: 10,
        };
        assert!(
            encode_op(&inline, &mut Vec::new()).is_err(),
            "frames go through the ring"
        );
    }

    #[test]
    fn a_record_cut_anywhere_is_dropped_whole() {
        let ops = ops();
        let bytes = encoded(&ops);
        // Record boundaries: a cut exactly there keeps the records before it, anywhere else
        // drops the record it falls in.
        let mut ends = vec![0];
        for op in &ops {
            ends.push(ends.last().unwrap() + encoded(std::slice::from_ref(op)).len());
        }
        for cut in 0..bytes.len() {
            let got = decode_all(&bytes[..cut]).unwrap();
            let whole = ends.iter().filter(|&&e| e > 0 && e <= cut).count();
            assert_eq!(got, ops[..whole], "cut at {cut}");
        }
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let mut data = encoded(&ops()[1..2]);
        data[23] ^= 1; // the byte count no longer equals frames × frame length
        assert!(decode_all(&data).is_err());
        assert!(decode_all(&[9, 0, 0]).is_err(), "unknown tag");
        assert!(decode_all(&[2, 0, 0]).is_err(), "inline data is no longer accepted");
        let mut open = encoded(&ops()[..1]);
        open[5] = b'/'; // a path separator in the file stamp
        assert!(decode_all(&open).is_err());
    }

    #[test]
    fn the_writer_process_body_writes_whole_records_and_drops_a_cut_one() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring_for_ops();
        let bytes = encoded(&ops());
        let cut = bytes.len() - 3 - 10; // inside the second slot record (before Close)
        let mut report = Vec::new();
        serve_writer_process(dir.path(), &ring, false, &bytes[..cut], &mut report).unwrap();
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert_eq!(outcome.files.len(), 1);
        assert_eq!(outcome.files[0].frames, 3);
        assert_eq!(outcome.files[0].filled, 1);
        assert_eq!(outcome.error, None);
        let on_disk = std::fs::read(&outcome.files[0].path).unwrap();
        assert_eq!(on_disk, frames(3, 100, 1));
        let mut held = vec![false; 2];
        assert!(ring.try_take(&mut held).is_some(), "the written slot was given back");
        assert!(
            ring.try_take(&mut held).is_none(),
            "the cut record's slot was never written"
        );
    }

    #[test]
    fn a_record_naming_a_slot_not_handed_over_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ring = SharedRing::create(2, 4096).unwrap(); // nothing handed over
        let mut report = Vec::new();
        serve_writer_process(dir.path(), &ring, false, &encoded(&ops())[..], &mut report).unwrap();
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert_eq!(outcome.not_written, 5);
        assert!(outcome.error.unwrap().contains("not handed over"));
        assert_eq!(std::fs::read(&outcome.files[0].path).unwrap().len(), 0);
    }

    /// Records of `counts` frames of `frame_len` bytes placed in the ring's slots as the
    /// receiver places them (at the offset the data has within its block in the file, unless
    /// `misplace` names a record to shift), ending with a close: the ring, the records, and the
    /// bytes the file must hold.
    fn placed(counts: &[usize], frame_len: usize, misplace: Option<usize>) -> (SharedRing, Vec<u8>, Vec<u8>) {
        let ring = SharedRing::create(counts.len() as u32, SLOT_BYTES).unwrap();
        let mut held = vec![false; counts.len()];
        let mut ops = vec![WriteOp::Open {
            station: 3,
            stamp: "20261123T120000".into(),
        }];
        let (mut file, mut first) = (Vec::new(), 0u8);
        for (i, &n) in counts.iter().enumerate() {
            let data = frames(n, frame_len, first);
            first = first.wrapping_add(n as u8);
            let at = file.len() % DIRECT_ALIGN + usize::from(misplace == Some(i)) * 8;
            let s = ring.try_take(&mut held).unwrap();
            // SAFETY: `s` is held and this is its only slice.
            unsafe { ring.slot_mut(s)[at..at + data.len()].copy_from_slice(&data) };
            ring.hand_over(s);
            held[s as usize] = false;
            ops.push(WriteOp::Slot {
                station: 3,
                slot: s,
                at: at as u32,
                len: data.len() as u32,
                frames: n as u64,
                filled: 0,
                frame_len: frame_len as u64,
            });
            file.extend_from_slice(&data);
        }
        ops.push(WriteOp::Close { station: 3 });
        (ring, encoded(&ops), file)
    }

    #[test]
    fn direct_io_writes_records_at_any_offset_byte_exact() {
        // Frame lengths that share little with the block size, records that end mid-block, one
        // smaller than the block that is still topped up, and a last partial block at the close.
        for (counts, frame_len) in [
            (&[128usize, 3, 1, 130, 7][..], 8032usize),
            (&[5, 1, 1, 900][..], 1000),
            (&[1][..], 8032),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (ring, records, file) = placed(counts, frame_len, None);
            let mut report = Vec::new();
            serve_writer_process(dir.path(), &ring, true, &records[..], &mut report).unwrap();
            let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
            assert_eq!(outcome.error, None, "{counts:?}");
            assert_eq!(outcome.not_written, 0);
            assert_eq!(outcome.files[0].frames, counts.iter().sum::<usize>() as u64);
            assert!(
                std::fs::read(&outcome.files[0].path).unwrap() == file,
                "{counts:?} × {frame_len}: the file differs"
            );
        }
    }

    #[test]
    fn direct_io_refuses_a_misplaced_record_and_keeps_whole_frames() {
        let dir = tempfile::tempdir().unwrap();
        let (ring, records, file) = placed(&[3, 2, 4], 1000, Some(1));
        let mut report = Vec::new();
        serve_writer_process(dir.path(), &ring, true, &records[..], &mut report).unwrap();
        let outcome: WriterOutcome = serde_json::from_slice(&report).unwrap();
        assert!(outcome.error.unwrap().contains("placed at"));
        // The first record's 3000 bytes never filled a block: nothing reached the disk, and
        // all 9 frames are counted as not written.
        assert_eq!(outcome.files[0].frames, 0);
        assert_eq!(outcome.not_written, 9);
        let on_disk = std::fs::read(&outcome.files[0].path).unwrap();
        assert!(on_disk.len().is_multiple_of(1000) && file.starts_with(&on_disk));
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_all(&bytes);
        }
    }
}
