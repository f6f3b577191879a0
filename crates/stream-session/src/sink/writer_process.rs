//! The child-process writer: the record protocol on its pipe, its body
//! ([`serve_writer_process`], [`run_writer_process`]), and the receiver's side that spawns it and
//! forwards records to it.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::files::{writer, Shared, Written};
use super::scan_files::LaneScan;
use super::{bad, WriteOp};
use crate::report::WrittenFile;
use crate::ring::SharedRing;

// The record format on the pipe to a writer process (little-endian). Both ends are this crate,
// but the child still bounds and checks every field: a bad record stops it with an error rather
// than writing garbage into a VDIF file.
//   tag u8 (1 open, 3 close, 4 slot), file key u32 (station id, thread + 1 above it), then
//   open:  len u16, stamp bytes (≤ MAX_STAMP)
//   slot:  frames u64, filled u64, frame_len u32, len u32, slot u32, at u32 (len = frames ·
//          frame_len; the bytes are in that slot of the shared ring from byte `at`)
//   block: layout u8 (1 vbs, 2 mk6), number u32, planned u64, frame_len u32, name len u16,
//          name bytes (a scan name, ≤ scanfmt::name::MAX_NAME)
//   end block: nothing more
// (Tag 2 carried the bytes inline, through the pipe; it is gone with the ring.)
const TAG_OPEN: u8 = 1;
const TAG_CLOSE: u8 = 3;
const TAG_SLOT: u8 = 4;
const TAG_BLOCK: u8 = 5;
const TAG_END_BLOCK: u8 = 6;
/// Largest block: a vbs chunk of 64 GiB (jive5ab's are 128–256 MiB).
const MAX_BLOCK: u64 = 64 << 30;
const MAX_STAMP: usize = 64;
/// Largest data record: the largest flush size (2 MiB) plus one frame of at most 64 KiB, with room.
const MAX_RECORD: u32 = 4 << 20;

pub(super) fn encode_op(op: &WriteOp, out: &mut impl Write) -> std::io::Result<()> {
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
        WriteOp::Block {
            station,
            scan,
            layout,
            number,
            planned,
            frame_len,
        } => {
            let name = &scan.as_bytes()[..scan.len().min(scanfmt::name::MAX_NAME)];
            head.push(TAG_BLOCK);
            head.extend_from_slice(&station.to_le_bytes());
            head.push(match layout {
                scanfmt::Layout::Vbs => 1,
                scanfmt::Layout::Mk6 => 2,
            });
            head.extend_from_slice(&number.to_le_bytes());
            head.extend_from_slice(&planned.to_le_bytes());
            head.extend_from_slice(&(*frame_len as u32).to_le_bytes());
            head.extend_from_slice(&(name.len() as u16).to_le_bytes());
            head.extend_from_slice(name);
            out.write_all(&head)
        }
        WriteOp::EndBlock { station } => {
            head.push(TAG_END_BLOCK);
            head.extend_from_slice(&station.to_le_bytes());
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
/// The next record, `Ok(None)` at end of input — also when the input ends inside a record,
/// which is what a receiver killed mid-write leaves.
pub(super) fn decode_op(input: &mut impl Read) -> std::io::Result<Option<WriteOp>> {
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
    let station = field!(4, u32);
    // Thread ids have 10 bits (VDIF 1.1.1 §3): a key beyond them is no file of ours.
    if station >> 16 > 1024 {
        return Err(bad(format!("writer record: file key {station:#x}")));
    }
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
        TAG_BLOCK => {
            let layout = match field!(1, u8) {
                1 => scanfmt::Layout::Vbs,
                2 => scanfmt::Layout::Mk6,
                l => return Err(bad(format!("writer record: layout {l}"))),
            };
            let number = field!(4, u32);
            let planned = field!(8, u64);
            let frame_len = field!(4, u32);
            let len = usize::from(field!(2, u16));
            if len > scanfmt::name::MAX_NAME || planned == 0 || planned > MAX_BLOCK || frame_len == 0 {
                return Err(bad(format!(
                    "writer record: block of {planned} bytes, frames of {frame_len}, name of {len}"
                )));
            }
            let mut name = vec![0u8; len];
            if take_into(input, &mut name)?.is_none() {
                return Ok(None);
            }
            let scan = String::from_utf8(name)
                .ok()
                .filter(|n| scanfmt::name::is_valid(n))
                .ok_or_else(|| bad("writer record: not a scan name".into()))?;
            Ok(Some(WriteOp::Block {
                station,
                scan,
                layout,
                number,
                planned,
                frame_len: u64::from(frame_len),
            }))
        }
        TAG_END_BLOCK => Ok(Some(WriteOp::EndBlock { station })),
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
pub(super) struct WriterOutcome {
    pub(super) files: Vec<WrittenFile>,
    /// A vbs/Mark6 disk's recordings.
    #[serde(default)]
    pub(super) scans: Vec<LaneScan>,
    pub(super) not_written: u64,
    pub(super) error: Option<String>,
}

/// The body of a writer process: records from `input` (see [`WriterPlacement::ChildProcess`](super::WriterPlacement::ChildProcess))
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
    let written = writer(dir.to_path_buf(), ops, shared.clone(), Some(ring), direct);
    let outcome = WriterOutcome {
        files: written.files,
        scans: written.scans,
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

pub(super) fn spawn_writer_process(
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
pub(super) fn forward_to_child(
    mut child: Child,
    ops: std::sync::mpsc::Receiver<WriteOp>,
    shared: Arc<Shared>,
    gone: Arc<AtomicBool>,
) -> Written {
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
            return Written::default();
        }
    };
    match serde_json::from_slice::<WriterOutcome>(&out.stdout) {
        Ok(o) => {
            shared.not_written.fetch_add(o.not_written, Ordering::Relaxed);
            if let Some(e) = o.error {
                shared.fail(e);
            }
            Written {
                files: o.files,
                scans: o.scans,
            }
        }
        Err(_) => {
            shared.fail(format!(
                "the file writer process ended ({}) without a report: the files written are not known",
                out.status
            ));
            Written::default()
        }
    }
}

/// Whether process `pid` has exited, without reaping it (its owner waits for it later).
pub(super) fn exited(pid: u32) -> bool {
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
