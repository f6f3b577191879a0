//! Waiting on many descriptors at once, and the descriptor limit that bounds how many a process
//! may hold.
//!
//! A TCP server that keeps thousands of idle connections without a thread each needs to learn
//! which of them became readable without looking at every one: poll(2) costs time in proportion
//! to the descriptors watched on every call, epoll(7) in proportion to those ready. [`ReadySet`]
//! is a thin owner of an epoll instance over rustix's safe bindings (rustix is already in the
//! build through tempfile; a crate like mio would add a reactor we do not need).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll;

/// Descriptors watched for readability (level-triggered), each under a caller's token.
pub struct ReadySet {
    epoll: OwnedFd,
    events: Vec<epoll::Event>,
}

impl ReadySet {
    /// An empty set that reports up to `batch` ready descriptors per [`ReadySet::wait`].
    pub fn new(batch: usize) -> io::Result<ReadySet> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        Ok(ReadySet {
            epoll,
            events: Vec::with_capacity(batch.clamp(1, 4096)),
        })
    }

    /// Watch `fd` for input, end of stream or an error, reported as `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        Ok(epoll::add(&self.epoll, fd, epoll::EventData::new_u64(token), flags)?)
    }

    /// Stop watching `fd` (closing it also does, unless a duplicate of it is still open).
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(epoll::delete(&self.epoll, fd)?)
    }

    /// Wait up to `timeout` for watched descriptors to become ready and put their tokens in
    /// `ready` (cleared first). A signal only ends the wait early.
    pub fn wait(&mut self, timeout: Duration, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        self.events.clear();
        let ts = epoll_timeout(timeout);
        match epoll::wait(&self.epoll, rustix::buffer::spare_capacity(&mut self.events), Some(&ts)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        ready.extend(self.events.iter().map(|e| e.data.u64()));
        Ok(())
    }
}

/// A timeout epoll_wait(2) takes on every kernel: whole milliseconds up to `c_int::MAX` (older
/// kernels refuse more), rounded up so a short wait never becomes a busy loop.
fn epoll_timeout(timeout: Duration) -> rustix::event::Timespec {
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i64;
    rustix::event::Timespec {
        tv_sec: ms / 1000,
        tv_nsec: ((ms % 1000) * 1_000_000) as rustix::event::Nsecs,
    }
}

impl std::fmt::Debug for ReadySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadySet")
            .field("epoll", &self.epoll)
            .finish_non_exhaustive()
    }
}

impl AsFd for ReadySet {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

/// Raise this process's soft limit on open descriptors to its hard limit (a server holding many
/// idle connections, a transfer holding many files, need more than the usual 1024), and return
/// the soft limit now in effect (`u64::MAX` for none). Best effort: a refusal leaves it as it was.
pub fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum || (lim.current.is_some() && lim.maximum.is_none()) {
        let raised = Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return lim.maximum.unwrap_or(u64::MAX);
        }
    }
    lim.current.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn reports_only_the_connections_that_spoke_or_closed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut clients: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let served: Vec<TcpStream> = (0..5).map(|_| l.accept().unwrap().0).collect();
        let mut set = ReadySet::new(16).unwrap();
        for (i, s) in served.iter().enumerate() {
            set.add(s.as_fd(), i as u64).unwrap();
        }
        let mut ready = Vec::new();
        set.wait(Duration::from_millis(50), &mut ready).unwrap();
        assert!(ready.is_empty(), "{ready:?}");
        clients[1].write_all(b"x").unwrap();
        drop(clients.remove(3));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            set.wait(Duration::from_millis(100), &mut ready).unwrap();
            seen.extend(ready.iter().copied());
            if seen.len() == 2 {
                break;
            }
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![1, 3]);
        set.remove(served[1].as_fd()).unwrap();
        set.remove(served[3].as_fd()).unwrap();
        set.wait(Duration::from_millis(20), &mut ready).unwrap();
        assert!(ready.is_empty(), "{ready:?}");
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let now = raise_fd_limit();
        let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(lim.current, lim.maximum);
        assert_eq!(now, lim.current.unwrap_or(u64::MAX));
    }
}
