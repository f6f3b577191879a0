//! Why the emulator could not start or stop cleanly, in a leaf module that the namespace and
//! device code imports (the crate root only re-exports it).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use linkemu::ConfigError;
use thiserror::Error;

/// Why the emulator could not start or stop cleanly.
#[derive(Debug, Error)]
pub enum RealtimeError {
    /// A namespace or device name is empty, too long or has forbidden characters.
    #[error("invalid name {0:?} (use letters, digits, '_', '-', '.')")]
    InvalidName(String),
    /// Both endpoints name the same namespace.
    #[error("endpoints A and B must be different namespaces (both are {0:?})")]
    SameNamespace(String),
    /// The subnet is not a /30 network address inside 10.77.0.0/16.
    #[error("subnet {0} must be a /30 network address inside 10.77.0.0/16, e.g. 10.77.0.0 or 10.77.0.4")]
    InvalidSubnet(Ipv4Addr),
    /// The MTU is outside 576..=65535 (IPv4 minimum to the TUN maximum).
    #[error("MTU {0} out of range 576..=65535")]
    InvalidMtu(u32),
    /// A link configuration is invalid.
    #[error("link configuration: {0}")]
    Config(#[from] ConfigError),
    /// `/dev/net/tun` is missing (no TUN support in this kernel or container).
    #[error("/dev/net/tun is missing: this kernel or container has no TUN support")]
    NoTun,
    /// An emulator for this namespace pair is already running.
    #[error("an emulator for this pair is already running as pid {pid} (state file {path})")]
    AlreadyRunning {
        /// Its process id.
        pid: u32,
        /// Its state file.
        path: PathBuf,
    },
    /// A previous emulator for this pair died without cleaning up.
    #[error("stale state file {0} from an emulator that died: run `evlbi linkemu --down` with the same --a/--b first")]
    StaleState(PathBuf),
    /// A state file is unreadable.
    #[error("state file {path}: {reason}")]
    BadStateFile {
        /// The file.
        path: PathBuf,
        /// Parse error.
        reason: String,
    },
    /// An `ip` command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A system call or file operation failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A process recorded in a state file did not exit after SIGTERM.
    #[error("emulator pid {pid} did not exit after SIGTERM")]
    StillRunning {
        /// Its process id.
        pid: u32,
    },
    /// A forwarding thread failed (its error) or panicked.
    #[error("forwarding {direction} stopped: {reason}")]
    Forwarding {
        /// `"a_to_b"` or `"b_to_a"`.
        direction: &'static str,
        /// The error.
        reason: String,
    },
}
