//! The writer process: the child's side ([`run_if_child`], [`serve_writer_process`]) and the
//! receiver's side that spawns it and writes records to it ([`spawn_writer_process`],
//! [`ChildPipe`]). The records themselves are in [`super::pipe`].
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
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::files::{writer, Shared, Written};
use super::pipe::decode_op;
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

/// The receiver's end of a writer process: the process and the pipe its records go down.
///
/// The receive thread writes each record itself, one `write` of at most a few hundred bytes
/// (below PIPE_BUF, so all or nothing: the child never sees half a record from a live
/// receiver). A forwarding thread did this before; its wake-up per record cost the receiver
/// ~20 % of its CPU at 4.096 Gb/s (a futex wake, and the woken thread preempting the receive
/// loop on its core; bench/RESULTS.md, issue 30). The pipe is non-blocking: when it is full
/// the caller waits for room, counted as a stall, while the child lives.
pub(super) struct ChildPipe {
    /// `None` once [`ChildPipe::finish`] took it to wait for it.
    child: Option<Child>,
    stdin: Option<std::process::ChildStdin>,
    record: Vec<u8>,
}

/// Bytes asked for the record pipe: a record per ring slot (at most [`crate::ring::MAX_SLOTS`]
/// of 37 bytes) and the opens and closes between them fit with room to spare, so the receiver
/// meets a full pipe only when the child stopped reading.
const PIPE_BYTES: libc::c_int = 1 << 20;

impl ChildPipe {
    /// The pipe to `child` (its standard input), made non-blocking and as large as allowed.
    pub(super) fn new(mut child: Child) -> std::io::Result<ChildPipe> {
        use std::os::fd::AsRawFd;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the file writer process has no input pipe"))?;
        let fd = stdin.as_raw_fd();
        // SAFETY: fcntl on a descriptor this process owns; results are checked.
        unsafe {
            // A smaller pipe (an unprivileged user past fs.pipe-max-size) only means waiting
            // sooner, so a refusal is not an error.
            libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(ChildPipe {
            child: Some(child),
            stdin: Some(stdin),
            record: Vec::with_capacity(512),
        })
    }

    /// The child's process id.
    pub(super) fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Write `op`'s record: how long it waited for room (`ZERO`: none), or why the child can
    /// take no more.
    pub(super) fn send(&mut self, op: &WriteOp) -> std::io::Result<std::time::Duration> {
        let pid = self.id();
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        self.record.clear();
        op.emit(&mut self.record).map_err(std::io::Error::other)?;
        let started = std::time::Instant::now();
        let mut waited = std::time::Duration::ZERO;
        loop {
            match stdin.write(&self.record) {
                Ok(n) if n == self.record.len() => return Ok(waited),
                // A pipe writes a record below PIPE_BUF whole or not at all (pipe(7)).
                Ok(_) => return Err(self.broken(std::io::Error::other("a record was cut on the pipe"))),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if exited(pid) {
                        return Err(self.broken(std::io::Error::other("the file writer process ended")));
                    }
                    wait_writable(stdin, 10);
                    waited = started.elapsed();
                }
                Err(e) => return Err(self.broken(e)),
            }
        }
    }

    fn broken(&mut self, e: std::io::Error) -> std::io::Error {
        self.stdin = None;
        e
    }

    /// Close the pipe, wait for the child and take its report: the files it wrote.
    pub(super) fn finish(mut self, shared: &Shared) -> Written {
        drop(self.stdin.take());
        let Some(child) = self.child.take() else {
            return Written::default();
        };
        let out = match child.wait_with_output() {
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
}

impl Drop for ChildPipe {
    /// A writer dropped without [`ChildPipe::finish`] (the receive loop ended in an error): the
    /// pipe closes, the child writes what it was given and exits, and a thread reaps it — else
    /// it stays a zombie for the life of the receiver, one per failed recording of a
    /// long-running `evlbi serve`.
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Some(mut child) = self.child.take() {
            let reaper = std::thread::Builder::new().name("writer-reaper".into());
            // Without a thread (none can be made) the child is reaped when the receiver exits.
            let _ = reaper.spawn(move || child.wait());
        }
    }
}

/// Wait up to `ms` milliseconds for room in the pipe.
fn wait_writable(pipe: &std::process::ChildStdin, ms: libc::c_int) {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll reads and writes one pollfd we own; the result (ready, timeout, EINTR) only
    // leads to another try.
    unsafe { libc::poll(&mut fds, 1, ms) };
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

#[cfg(test)]
mod tests {
    use super::ChildPipe;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// The state letter of process `pid` (`Z`: a zombie); `None` once it is gone.
    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name in parentheses (which may hold spaces): " S ...".
        stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
    }

    /// A writer dropped without `finish` (a receive loop that ended in an error) used to stay a
    /// zombie for the life of the receiver. `cat` stands in for the writer: it exits when its
    /// input pipe closes, as the writer process does.
    #[test]
    fn a_writer_dropped_without_finish_is_reaped() {
        let child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("cat");
        let pipe = ChildPipe::new(child).expect("pipe");
        let pid = pipe.id();
        assert!(state(pid).is_some_and(|s| s != 'Z'), "running before the drop");
        drop(pipe);
        let deadline = Instant::now() + Duration::from_secs(10);
        while state(pid).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(state(pid), None, "the writer {pid} is not reaped (Z: a zombie)");
    }
}
