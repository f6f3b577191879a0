//! A reader's connection ([`LiveConn`]) and where readers come from ([`Connector`]).

use std::io::{IoSlice, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::LiveCounts;

/// A connected stream socket a reader takes the frames from.
#[derive(Debug)]
pub enum LiveConn {
    /// A unix-domain socket (SFXC's default `mk5:///tmp/mk5read/...`).
    Unix(UnixStream),
    /// TCP.
    Tcp(TcpStream),
}

/// Socket send buffer asked for a reader's connection: 8 MiB (16 ms at 4 Gb/s) lets a reader
/// take big reads and the writer sleep between chunks, where the default (~200 KiB) wakes both
/// every 0.4 ms at 4 Gb/s.
const READER_SNDBUF: usize = 8 << 20;
/// Slices one sendmsg(2) takes at most (IOV_MAX on Linux; std's writev caps the same).
const MAX_IOV: usize = 1024;

impl LiveConn {
    /// Ask for a larger send buffer (what the kernel grants is enough either way).
    pub(super) fn size_buffer(&self) {
        let req = netio::BufferRequest {
            rcv: 0,
            snd: READER_SNDBUF,
        };
        let _ = match self {
            LiveConn::Unix(s) => netio::size_buffers(s, req),
            LiveConn::Tcp(s) => netio::size_buffers(s, req),
        };
    }

    /// A second handle on the same connection (the receiver's, for [`LiveConn::send_now`]).
    pub(super) fn try_clone(&self) -> std::io::Result<LiveConn> {
        Ok(match self {
            LiveConn::Unix(s) => LiveConn::Unix(s.try_clone()?),
            LiveConn::Tcp(s) => LiveConn::Tcp(s.try_clone()?),
        })
    }

    /// What of `bufs` the socket takes now, never waiting (MSG_DONTWAIT: the connection's
    /// O_NONBLOCK is shared with the writer thread's handle, whose writes wait with a timeout),
    /// at most [`MAX_IOV`] slices; a reader gone is an error, not a SIGPIPE (MSG_NOSIGNAL).
    pub(super) fn send_now(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let bufs = &bufs[..bufs.len().min(MAX_IOV)];
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        match self {
            LiveConn::Unix(s) => socket2::SockRef::from(s).send_vectored_with_flags(bufs, flags),
            LiveConn::Tcp(s) => socket2::SockRef::from(s).send_vectored_with_flags(bufs, flags),
        }
    }

    pub(super) fn set_write_timeout(&self, d: Duration) -> std::io::Result<()> {
        match self {
            LiveConn::Unix(s) => s.set_write_timeout(Some(d)),
            LiveConn::Tcp(s) => s.set_write_timeout(Some(d)),
        }
    }
}

impl Write for LiveConn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LiveConn::Unix(s) => s.write(buf),
            LiveConn::Tcp(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            LiveConn::Unix(s) => s.write_vectored(bufs),
            LiveConn::Tcp(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Where readers come from: a socket readers connect to ([`sfxc::SfxcListener`]), or a
/// reader's port this side connects to.
pub trait Connector: Send {
    /// Where readers connect, for reports: `unix:/path`, `tcp:ADDRESS:PORT`.
    fn endpoint(&self) -> String;
    /// The next reader, ready for frames; `None` once `stop` is set (looked at at least every
    /// 100 ms). Connections that fail the protocol are counted in `counts` and closed.
    fn next_reader(&mut self, stop: &AtomicBool, counts: &LiveCounts) -> Option<LiveConn>;
    /// Called at least every 100 ms while a reader is connected: turn others away.
    fn while_connected(&mut self, _counts: &LiveCounts) {}
}
