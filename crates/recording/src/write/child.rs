//! The writer process: the child's side ([`run_if_child`], [`serve_writer_process`]) and the
//! receiver's side that spawns it and forwards records to it ([`spawn_writer_process`],
//! [`forward_to_child`]). The records themselves are in [`super::pipe`].
//!
//! The child is the same executable as the receiver, started again with [`CHILD_ENV`] set: a
//! binary that records calls [`run_if_child`] first thing in `main`, so the writer is an entry
//! point of this crate rather than a command of the binary's.

// unsafe: the writer process: signals, its inherited ring descriptor, waitid(2) on its parent.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::files::{writer, Shared, Written};
use super::pipe::{decode_op, encode_op};
use super::scan_files::LaneScan;
use super::WriteOp;
use crate::ring::SharedRing;
use safedir::Dir;
use stream::results::WrittenFile;

/// Set in the environment of a writer process: `direct` (O_DIRECT writes) or `cached`. Its one
/// argument is the path of the directory it writes below (for messages: the directory itself is
/// the descriptor [`DIR_FD`] it inherits, opened by the recorder).
pub const CHILD_ENV: &str = "EVLBI_RECORDING_WRITER";

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
    dir: Dir,
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
    let written = writer(dir, ops, shared.clone(), Some(ring), direct);
    let outcome = WriterOutcome {
        files: written.files,
        scans: written.scans,
        not_written: shared.not_written.load(Ordering::Relaxed),
        error: shared.error.lock().ok().and_then(|e| e.clone()),
    };
    serde_json::to_writer(output, &outcome).map_err(std::io::Error::other)
}

/// Tests: [`serve_writer_process`] into the directory at `dir` with `records`; its report.
#[cfg(test)]
pub(super) fn serve_in(dir: &Path, ring: &SharedRing, direct: bool, records: &[u8]) -> Vec<u8> {
    let mut report = Vec::new();
    let dir = Dir::open(dir).expect("test directory");
    serve_writer_process(dir, ring, direct, records, &mut report).expect("writer process body");
    report
}

/// Descriptor number the ring has in the writer process.
const RING_FD: i32 = 3;

/// Descriptor number of the directory the writer process writes below: the recorder's own
/// handle on it, so the child resolves no path (a disk swapped for a link after the recorder
/// opened it is never written through).
pub const DIR_FD: i32 = 4;

/// When this process was started as a writer process ([`CHILD_ENV`] set), serve the pipe and
/// the ring and return the exit code for `main` to exit with; `None` when it was not. A binary
/// that records with [`WriterPlacement::ChildProcess`](super::WriterPlacement::ChildProcess)
/// calls this first in `main`.
pub fn run_if_child() -> Option<i32> {
    let mode = std::env::var_os(CHILD_ENV)?;
    let direct = mode == "direct";
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("writer process: one argument, the directory, expected");
        return Some(2);
    };
    match run_writer_process(Path::new(&dir), direct) {
        Ok(()) => Some(0),
        Err(e) => {
            eprintln!("writer process: {e}");
            Some(1)
        }
    }
}

/// [`serve_writer_process`] on standard input and output with the ring on descriptor
/// [`RING_FD`] and the directory on [`DIR_FD`]. It first ignores SIGINT, SIGTERM and SIGHUP:
/// those stop the receiver, which then closes the pipe, and the child must write everything it
/// was given before it exits.
fn run_writer_process(dir: &Path, direct: bool) -> std::io::Result<()> {
    let ring_fd = RING_FD;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: setting a disposition to SIG_IGN installs no handler code.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // SAFETY: F_GETFD only asks whether the number is an open descriptor.
    if ring_fd < 0 || unsafe { libc::fcntl(ring_fd, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::other(format!(
            "no shared ring on descriptor {ring_fd}: a writer process is started by a recorder, not by hand"
        )));
    }
    use std::os::fd::FromRawFd;
    // SAFETY: the descriptor is open (checked) and this process takes it over for good.
    let ring = SharedRing::open(unsafe { std::os::fd::OwnedFd::from_raw_fd(ring_fd) })?;
    // SAFETY: F_GETFD only asks whether the number is an open descriptor.
    if unsafe { libc::fcntl(DIR_FD, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::other(format!(
            "no directory on descriptor {DIR_FD}: a writer process is started by a recorder, not by hand"
        )));
    }
    // SAFETY: the descriptor is open (checked) and this process takes it over for good.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(DIR_FD) };
    let dir = Dir::from_fd(fd, dir.to_path_buf()).map_err(safedir::DirError::into_io)?;
    serve_writer_process(dir, &ring, direct, std::io::stdin().lock(), std::io::stdout().lock())
}

pub(super) fn spawn_writer_process(
    program: &Path,
    dir: &Dir,
    ring: &SharedRing,
    direct: bool,
) -> std::io::Result<Child> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let ring_fd = ring.fd().as_raw_fd();
    let dir_fd = dir.fd().as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.env(CHILD_ENV, if direct { "direct" } else { "cached" });
    // SAFETY: between fork and exec only async-signal-safe calls (dup2, fcntl) run.
    unsafe {
        cmd.pre_exec(move || {
            // The directory first, out of the way: dup2 onto RING_FD must not close it.
            let dir_tmp = libc::fcntl(dir_fd, libc::F_DUPFD, 16);
            if dir_tmp < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for (from, to) in [(ring_fd, RING_FD), (dir_tmp, DIR_FD)] {
                let rc = if from == to {
                    // Already there: only drop close-on-exec.
                    libc::fcntl(to, libc::F_SETFD, 0)
                } else {
                    libc::dup2(from, to)
                };
                if rc < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd
        .arg(OsString::from(dir.path().as_os_str()))
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
