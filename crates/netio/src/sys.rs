//! Thin libc wrappers for what neither std nor socket2 exposes: integer socket options by raw
//! level/name (SO_*BUFFORCE, SO_TIMESTAMPNS, UDP_SEGMENT, UDP_GRO) and ppoll(2) for a receive
//! timeout with nanosecond resolution. Hand-written because no dependency in the workspace offers
//! these options; each wrapper is one system call with its arguments checked here.

// unsafe: setsockopt/getsockopt/ppoll: the socket options and waits std does not offer.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// setsockopt(2) with an `int` value.
pub(crate) fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` lives across the call and the length passed is exactly its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// getsockopt(2) of an `int` value.
pub(crate) fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes and `len` holds the buffer size.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Wait up to `timeout` for `fd` to become readable (ppoll(2)). `Ok(false)` on timeout or when a
/// signal interrupted the wait.
pub(crate) fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask change.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    // POLLERR/POLLHUP also count as "readable": the following receive reports the error.
    Ok(r > 0)
}

/// Wait up to `timeout` for any of `fds` (at most 64) to become readable (ppoll(2)); a bit per
/// readable descriptor, 0 on timeout or when a signal interrupted the wait.
pub(crate) fn wait_any_readable(fds: &[RawFd], timeout: Duration) -> io::Result<u64> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .take(64)
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfds.len()` valid pollfds, a valid timespec, no signal mask change.
    let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(pfds
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
        .fold(0u64, |m, (i, _)| m | (1 << i)))
}

/// Whether `e` is the OS error `code`.
pub(crate) fn is_errno(e: &io::Error, code: libc::c_int) -> bool {
    e.raw_os_error() == Some(code)
}
