//! What the host says about a run, as every result carries it: the kernel's UDP counters, the
//! CPU share of a process and the socket buffers the kernel granted.
//!
//! Plain serde types with their arithmetic. The socket layer (`netio`) reads them from /proc and
//! getsockopt(2); the core crates' result types (stream, probe) and the report view use them
//! without linking that layer.

use serde::{Deserialize, Serialize};

/// The "Udp:" counters of /proc/net/snmp (IPv4; names from RFC 4113). RcvbufErrors are
/// datagrams the kernel dropped because a socket receive buffer was full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets.
    pub in_datagrams: u64,
    /// Datagrams to a port nobody listens on.
    pub no_ports: u64,
    /// Datagrams dropped for any error (includes RcvbufErrors and InCsumErrors).
    pub in_errors: u64,
    /// Datagrams sent.
    pub out_datagrams: u64,
    /// Dropped: socket receive buffer full.
    pub rcvbuf_errors: u64,
    /// Dropped: socket send buffer full.
    pub sndbuf_errors: u64,
    /// Dropped: bad checksum.
    pub in_csum_errors: u64,
}

impl UdpCounters {
    /// The live file they come from.
    pub const PATH: &'static str = "/proc/net/snmp";

    /// Counts since `earlier` (counters only grow; a wrap or reset reads as 0).
    pub fn delta(&self, earlier: &UdpCounters) -> UdpCounters {
        UdpCounters {
            in_datagrams: self.in_datagrams.saturating_sub(earlier.in_datagrams),
            no_ports: self.no_ports.saturating_sub(earlier.no_ports),
            in_errors: self.in_errors.saturating_sub(earlier.in_errors),
            out_datagrams: self.out_datagrams.saturating_sub(earlier.out_datagrams),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(earlier.rcvbuf_errors),
            sndbuf_errors: self.sndbuf_errors.saturating_sub(earlier.sndbuf_errors),
            in_csum_errors: self.in_csum_errors.saturating_sub(earlier.in_csum_errors),
        }
    }
}

/// CPU used by this process over an interval, percent of one core (a process with two busy
/// threads reads 200).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpuShare {
    /// User, % of one core.
    pub user: f64,
    /// System, % of one core.
    pub system: f64,
}

impl ProcessCpuShare {
    /// User + system.
    pub fn total(&self) -> f64 {
        self.user + self.system
    }
}

/// What the kernel granted, read back with getsockopt(2). `granted_*` are the kernel's (doubled,
/// socket(7)) figures: a request was met when `granted ≥ 2·requested`, and
/// [`BufferGrant::usable_rcv`] is the payload that fits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BufferGrant {
    /// Receive buffer asked for (0: kernel default kept).
    pub requested_rcv: usize,
    /// SO_RCVBUF as reported by the kernel (twice the usable size).
    pub granted_rcv: usize,
    /// Send buffer asked for (0: kernel default kept).
    pub requested_snd: usize,
    /// SO_SNDBUF as reported by the kernel (twice the usable size).
    pub granted_snd: usize,
    /// net.core.rmem_max (cap on SO_RCVBUF without CAP_NET_ADMIN), if readable.
    pub rmem_max: Option<usize>,
    /// net.core.wmem_max (cap on SO_SNDBUF without CAP_NET_ADMIN), if readable.
    pub wmem_max: Option<usize>,
    /// The receive request exceeded rmem_max and SO_RCVBUFFORCE lifted the cap.
    pub forced_rcv: bool,
    /// The send request exceeded wmem_max and SO_SNDBUFFORCE lifted the cap.
    pub forced_snd: bool,
    /// One line per buffer that was capped, with the sysctl that lifts the cap.
    pub warnings: Vec<String>,
}

impl BufferGrant {
    /// Receive payload bytes that fit (half the reported size, socket(7)).
    pub fn usable_rcv(&self) -> usize {
        self.granted_rcv / 2
    }

    /// Send payload bytes that fit (half the reported size, socket(7)).
    pub fn usable_snd(&self) -> usize {
        self.granted_snd / 2
    }
}
