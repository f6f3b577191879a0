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
