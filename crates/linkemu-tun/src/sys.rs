//! The few Linux system calls the emulator needs, each behind a safe wrapper.
//!
//! TUN is opened with a hand-written `TUNSETIFF` ioctl rather than a TUN
//! crate: the crates on crates.io (tun, tun-rs, tun-tap) bring async runtimes,
//! netlink stacks or build scripts, while all we need is one `open` and one
//! `ioctl`. Everything else (namespaces, `ppoll`, signals, `kill`) is a single
//! libc call. Every `unsafe` block says why it is sound.

// unsafe: setns(2), the TUN ioctl and ppoll(2): std has none of them.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Longest interface name the kernel accepts (IFNAMSIZ minus the NUL).
pub const MAX_IFNAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Moves the *calling thread* into the network namespace bound at
/// `/run/netns/<name>` (where `ip netns add` puts it).
///
/// Only this thread changes namespace; sockets and TUN devices it creates
/// afterwards belong to that namespace for their whole life, whichever
/// thread uses them later.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: `file` is an open descriptor for the duration of the call;
    // setns only reads it and affects the calling thread.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a fresh thread that has first entered namespace `name`, and
/// returns its result. The thread ends afterwards, so the caller's own
/// namespace is never changed. Use it to create sockets inside a namespace:
/// the socket stays in that namespace and can be used from any thread.
pub fn in_netns<T, F>(name: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let name = name.to_owned();
    std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || {
            enter_netns(&name)?;
            f()
        })?
        .join()
        .map_err(|_| io::Error::other("thread inside the namespace panicked"))?
}

/// Creates TUN device `name` (IP packets, no packet-info header) in the
/// calling thread's namespace and returns its non-blocking descriptor.
///
/// `IFF_TUN_EXCL` makes the call fail with `EBUSY` if a device of that name
/// already exists, so we never attach to (or later destroy) someone else's
/// persistent TUN device. The device is not persistent: it disappears when
/// the returned descriptor is closed.
pub fn create_tun(name: &str) -> io::Result<File> {
    if name.is_empty() || name.len() > MAX_IFNAME_LEN || name.bytes().any(|b| b == 0 || b == b'/') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"));
    }
    let path = CString::new("/dev/net/tun").map_err(io::Error::other)?;
    // SAFETY: `path` is a valid NUL-terminated string; open has no other inputs.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data (arrays, integers, a union of those); all
    // zero bytes is a valid value and what the kernel expects in unused fields.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // The flags are < 0x10000 and fit the kernel's `short` field as bits.
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_TUN_EXCL) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which `req` is,
    // and `owned` is a valid open descriptor of /dev/net/tun.
    let rc = unsafe { libc::ioctl(owned.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut libc::ifreq) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(File::from(owned))
}

/// Waits until `fd` is readable or `timeout` passes (`None`: forever).
/// Returns whether it is readable. An interrupting signal counts as a
/// timeout, so callers just re-check their stop flag.
///
/// `ppoll` rather than `poll` for its nanosecond timeout: packet release
/// deadlines are microseconds apart on a fast link.
pub fn wait_readable(fd: &impl AsRawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|t| libc::timespec {
        // Deadlines are bounded by the caller (≤ a second); saturate anyway.
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfd` is one valid pollfd (count 1); `ts_ptr` is null or points
    // to a live timespec; a null sigmask leaves the mask unchanged.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Sets the calling thread's timer slack: how late the kernel may wake a
/// sleeping thread to batch wake-ups. The default, 50 µs, would add that
/// much error to every packet release.
pub fn set_timer_slack(ns: u64) {
    let ns = libc::c_ulong::try_from(ns).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects
    // the calling thread. Failure just leaves the default slack.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Starts a new session with no controlling terminal, so that closing the
/// terminal (SIGHUP) or Ctrl-C in it no longer reaches this process: for a
/// background emulator started by `--up`.
pub fn detach_from_terminal() -> io::Result<()> {
    // SAFETY: setsid has no inputs; it fails (EPERM) only for a process-group
    // leader, which a freshly spawned child is not.
    let rc = unsafe { libc::setsid() };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends SIGTERM to `pid`.
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    if pid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal pid <= 1",
        ));
    }
    // SAFETY: kill has no memory inputs; pid > 1 never addresses a group.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/PID/stat`), or `None` if there is no such process or it is a
/// zombie (dead, waiting to be reaped). Together with the pid it identifies
/// a process even after the pid is reused.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself contain
    // spaces or ')': fields after it start after the *last* ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    // Field 3 is the state: Z (zombie) and X (dead) have exited already.
    if matches!(fields.next()?, "Z" | "X") {
        return None;
    }
    // We are at field 4 now, so field 22 is the 19th further on.
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_readable() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        // The test binary's name has no spaces, so plain splitting works here.
        let expected: u64 = stat.split_whitespace().nth(21).unwrap().parse().unwrap();
        assert_eq!(process_start_time(std::process::id()), Some(expected));
        assert_eq!(process_start_time(u32::MAX), None);
    }

    #[test]
    fn tun_names_are_checked_before_any_syscall() {
        assert!(create_tun("").is_err());
        assert!(create_tun("0123456789abcdefg").is_err());
        assert!(create_tun("a/b").is_err());
    }

    #[test]
    fn refuses_to_signal_init_or_groups() {
        assert!(terminate(0).is_err());
        assert!(terminate(1).is_err());
    }
}
