//! Host counters from /proc, parsed by name (not position) so kernels that add columns still
//! parse. Each has a `parse` for fixture tests and a `read` for the live file.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A /proc file that could not be read or understood.
#[derive(Debug, Error)]
pub enum CountersError {
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// File.
        path: &'static str,
        /// OS error.
        source: std::io::Error,
    },
    /// The text is not in the expected shape.
    #[error("{path}: {why}")]
    Malformed {
        /// File.
        path: &'static str,
        /// What was wrong.
        why: String,
    },
}

fn read(path: &'static str) -> Result<String, CountersError> {
    std::fs::read_to_string(path).map_err(|source| CountersError::Read { path, source })
}

/// The "Udp:" counters of /proc/net/snmp (RFC 4113 names; RcvbufErrors are datagrams the kernel
/// dropped because a socket receive buffer was full).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets.
    pub in_datagrams: u64,
    /// Datagrams to a port nobody listens on.
    pub no_ports: u64,
    /// Datagrams dropped for any error (includes RcvbufErrors).
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
    const PATH: &'static str = "/proc/net/snmp";

    /// Parse /proc/net/snmp text. Missing fields read as 0.
    pub fn parse(text: &str) -> Result<UdpCounters, CountersError> {
        let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
        let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
            return Err(CountersError::Malformed {
                path: Self::PATH,
                why: "no Udp: header and value lines".into(),
            });
        };
        let mut c = UdpCounters::default();
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()).skip(1) {
            let v: u64 = value.parse().map_err(|_| CountersError::Malformed {
                path: Self::PATH,
                why: format!("Udp {name} = {value:?} is not a number"),
            })?;
            match name {
                "InDatagrams" => c.in_datagrams = v,
                "NoPorts" => c.no_ports = v,
                "InErrors" => c.in_errors = v,
                "OutDatagrams" => c.out_datagrams = v,
                "RcvbufErrors" => c.rcvbuf_errors = v,
                "SndbufErrors" => c.sndbuf_errors = v,
                "InCsumErrors" => c.in_csum_errors = v,
                _ => {}
            }
        }
        Ok(c)
    }

    /// Read the live counters.
    pub fn read() -> Result<UdpCounters, CountersError> {
        Self::parse(&read(Self::PATH)?)
    }

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

/// Host CPU time from the first "cpu" line of /proc/stat, in clock ticks (proc(5)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Normal user time.
    pub user: u64,
    /// Niced user time.
    pub nice: u64,
    /// Kernel time.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Waiting for I/O.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts (network receive processing lands here).
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
}

/// Shares of CPU time over an interval, percent of all CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// User + nice.
    pub user: f64,
    /// System + irq + softirq.
    pub system: f64,
    /// Idle + iowait.
    pub idle: f64,
    /// Steal.
    pub steal: f64,
}

impl CpuTimes {
    const PATH: &'static str = "/proc/stat";

    /// Parse /proc/stat text.
    pub fn parse(text: &str) -> Result<CpuTimes, CountersError> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some("cpu"))
            .ok_or_else(|| CountersError::Malformed {
                path: Self::PATH,
                why: "no aggregate cpu line".into(),
            })?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        if v.len() < 4 {
            return Err(CountersError::Malformed {
                path: Self::PATH,
                why: format!("cpu line has {} fields, expected at least 4", v.len()),
            });
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(CpuTimes {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        })
    }

    /// Read the live counters.
    pub fn read() -> Result<CpuTimes, CountersError> {
        Self::parse(&read(Self::PATH)?)
    }

    /// Percent shares between `earlier` and `self`.
    pub fn share_since(&self, earlier: &CpuTimes) -> CpuShare {
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        let user = d(self.user, earlier.user) + d(self.nice, earlier.nice);
        let system = d(self.system, earlier.system) + d(self.irq, earlier.irq) + d(self.softirq, earlier.softirq);
        let idle = d(self.idle, earlier.idle) + d(self.iowait, earlier.iowait);
        let steal = d(self.steal, earlier.steal);
        let total = (user + system + idle + steal).max(1.0);
        CpuShare {
            user: 100.0 * user / total,
            system: 100.0 * system / total,
            idle: 100.0 * idle / total,
            steal: 100.0 * steal / total,
        }
    }
}

/// CPU time of this process (user and system ticks from /proc/self/stat fields 14 and 15).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// User ticks.
    pub utime: u64,
    /// System ticks.
    pub stime: u64,
}

/// CPU used by this process over an interval, percent of one core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpuShare {
    /// User, % of one core.
    pub user: f64,
    /// System, % of one core.
    pub system: f64,
}

impl ProcessCpu {
    const PATH: &'static str = "/proc/self/stat";

    /// Parse /proc/<pid>/stat text. The command name (field 2) may hold spaces and parentheses,
    /// so fields are counted after the last ')'.
    pub fn parse(text: &str) -> Result<ProcessCpu, CountersError> {
        let rest = text
            .rfind(')')
            .map(|i| &text[i + 1..])
            .ok_or_else(|| CountersError::Malformed {
                path: Self::PATH,
                why: "no ')' closing the command name".into(),
            })?;
        // After ')' come field 3 (state) onwards: utime is field 14 → index 11 here.
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| -> Result<u64, CountersError> {
            f.get(i)
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| CountersError::Malformed {
                    path: Self::PATH,
                    why: format!("field {} missing or not a number", i + 3),
                })
        };
        Ok(ProcessCpu {
            utime: num(11)?,
            stime: num(12)?,
        })
    }

    /// Read this process's counters.
    pub fn read() -> Result<ProcessCpu, CountersError> {
        Self::parse(&read(Self::PATH)?)
    }

    /// CPU between `earlier` and `self` over `wall` seconds, in percent of one core.
    pub fn share_since(&self, earlier: &ProcessCpu, wall_s: f64) -> ProcessCpuShare {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let pct = |a: u64, b: u64| 100.0 * a.saturating_sub(b) as f64 / hz / wall_s.max(1e-9);
        ProcessCpuShare {
            user: pct(self.utime, earlier.utime),
            system: pct(self.stime, earlier.stime),
        }
    }
}
