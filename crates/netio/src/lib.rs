//! UDP I/O primitives shared by `evlbi stream` and `evlbi probe`.
//!
//! - [`pacer`]: packet `n` leaves at `start + n·spacing` on an absolute monotonic timeline with
//!   exact rational spacing (no drift), sleeping then spinning, re-anchoring instead of bursting
//!   when the sender fell far behind.
//! - [`socket`]: UDP sockets whose send/receive buffers are sized, read back and reported
//!   (with the sysctl to raise when the kernel capped them).
//! - [`counters`]: host counters from /proc (UDP drops, CPU of the host and of this process), so
//!   every result can tell network loss from a full socket buffer or a busy CPU.

pub mod counters;
pub mod pacer;
pub mod socket;

pub use counters::{CountersError, CpuTimes, ProcessCpu, UdpCounters};
pub use pacer::{Pacer, Spacing};
pub use socket::{bind_udp, BufferGrant, BufferRequest, NetioError};
