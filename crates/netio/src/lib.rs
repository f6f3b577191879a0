//! UDP I/O primitives for paced multi-Gb/s streams on Linux, shared by `evlbi stream` and
//! `evlbi probe`.
//!
//! Radio telescopes stream VDIF frames over UDP at 0.5–10 Gb/s. At those rates the sender must
//! release packets on a precise schedule without bursts, the receiver must take tens of thousands
//! of datagrams a second without one system call each, and every result must be able to say
//! whether a loss was the network's, a full socket buffer's or a busy CPU's. This crate supplies
//! the pieces:
//!
//! - [`pacer`]: the waiting half of the core crate `pacing`'s absolute-timeline schedule: sleep
//!   until a deadline, spin the last stretch, and the timer slack that makes the sleep exact.
//! - [`socket`]: UDP sockets whose send/receive buffers are sized (forced past the sysctl cap when
//!   privileged), read back and reported, with the sysctl to raise when the kernel capped them.
//! - [`batch`]: recvmmsg(2)/sendmmsg(2) batches, kernel receive timestamps (SO_TIMESTAMPNS), the
//!   socket's own drop counter (SO_RXQ_OVFL), truncation flags, and opt-in UDP GRO receive with
//!   coalesced buffers split into datagrams.
//! - [`addr`]: the one `HOST:PORT` grammar (peers, and the `ADDR:PORT` of a listen spec), and
//!   resolving a host.
//! - [`listen`]: where a receiver listens, as written on a command line (`PORT`, `ADDR:PORT`,
//!   `[V6]:PORT`, `GROUP@PORT%IFACE`), and the socket bound and joined to a multicast group.
//! - [`gso`]: UDP GSO send (UDP_SEGMENT) for unpaced bulk, with detection and a fallback.
//! - [`ready`]: epoll(7) over many descriptors (a server's idle connections) and the descriptor
//!   limit raised to the hard one.
//! - [`stop`]: SIGINT/SIGTERM/SIGHUP set a flag, so long-running commands stop and still report.
//! - [`error`]: the error of a local socket or file operation, and the chain of causes as text.
//! - [`counters`]: host counters from /proc (UDP drops, NIC counters, CPU of the host and of this
//!   process).
//!
//! Linux only: the socket options and /proc files are Linux's. The system calls std and socket2
//! do not cover are called through `libc` in [`batch`], [`gso`] and a private `sys` module.

pub mod addr;
pub mod batch;
pub mod counters;
pub mod error;
pub mod gso;
pub mod listen;
pub mod pacer;
pub mod ready;
pub mod socket;
pub mod stop;
mod sys;

pub use addr::{AddrSyntax, HostPort, HostPortError, HOST_PORT_FORMS};
pub use batch::{enable_rx_drop_counter, enable_rx_timestamps, Received, RecvBatch, SendBatch};
pub use counters::{
    clock_ticks_per_second, parse_udp_counters, read_process_cpu, read_udp_counters, CountersError, CpuTimes, HostCpu,
    InterfaceCounters, ProcessCpu, ProcessCpuShare, UdpCounters,
};
pub use error::{error_chain, io_err, IoError};
pub use gso::{gso_supported, send_gso, send_gso_parts, GsoSent};
pub use listen::{bind_listen, ListenSpec, ListenSpecError, MulticastInterface};
pub use ready::{raise_fd_limit, ReadySet};
pub use socket::{
    bind_udp, connect_udp, size_buffers, wait_any_readable, wait_fds_readable, BufferGrant, BufferRequest, NetioError,
};
pub use stop::{install_stop_signals, stop_signal};
