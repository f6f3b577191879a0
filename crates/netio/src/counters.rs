//! Host counters from /proc, so every result can tell network loss from a full socket buffer, a
//! busy CPU or a NIC drop. Each counter set has a `parse` (pure, for fixture tests), a `read` of
//! the live file and a `delta` against an earlier reading. Fields are found by name where the
//! file has names (/proc/net/snmp, /proc/net/dev), so kernels that add columns still parse.
//! Malformed text is a [`CountersError`], never a panic.

// unsafe: sysconf(3) (clock ticks) and fstat(2) of a socket (its inode): std has neither.
#![allow(unsafe_code)]

pub use hostcounters::{ProcessCpuShare, UdpCounters};
use std::time::Duration;

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
    /// /proc/net/dev has no line for the interface.
    #[error("{path}: no interface {name:?}")]
    NoInterface {
        /// File.
        path: &'static str,
        /// Interface asked for.
        name: String,
    },
}

fn read(path: &'static str) -> Result<String, CountersError> {
    std::fs::read_to_string(path).map_err(|source| CountersError::Read { path, source })
}

fn malformed(path: &'static str, why: impl Into<String>) -> CountersError {
    CountersError::Malformed { path, why: why.into() }
}

fn number(path: &'static str, what: &str, s: &str) -> Result<u64, CountersError> {
    s.parse()
        .map_err(|_| malformed(path, format!("{what} = {s:?} is not a number")))
}

/// Parse /proc/net/snmp text into its "Udp:" counters: the first "Udp:" line names the columns,
/// the second holds the values. Fields are matched by name; missing ones read as 0.
pub fn parse_udp_counters(text: &str) -> Result<UdpCounters, CountersError> {
    let path = UdpCounters::PATH;
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return Err(malformed(path, "no Udp: header and value lines"));
    };
    let mut c = UdpCounters::default();
    for (name, value) in names.split_whitespace().zip(values.split_whitespace()).skip(1) {
        let slot = match name {
            "InDatagrams" => &mut c.in_datagrams,
            "NoPorts" => &mut c.no_ports,
            "InErrors" => &mut c.in_errors,
            "OutDatagrams" => &mut c.out_datagrams,
            "RcvbufErrors" => &mut c.rcvbuf_errors,
            "SndbufErrors" => &mut c.sndbuf_errors,
            "InCsumErrors" => &mut c.in_csum_errors,
            _ => continue,
        };
        *slot = number(path, &format!("Udp {name}"), value)?;
    }
    Ok(c)
}

/// Read the live UDP counters.
pub fn read_udp_counters() -> Result<UdpCounters, CountersError> {
    parse_udp_counters(&read(UdpCounters::PATH)?)
}

/// Host CPU time from the aggregate "cpu" line of /proc/stat, in clock ticks (proc(5)). Guest
/// time is already included in user/nice and is not read separately.
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

/// Shares of host CPU time over an interval, percent of all CPUs (they sum to 100 when any time
/// passed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// User.
    pub user: f64,
    /// Niced user.
    pub nice: f64,
    /// Kernel.
    pub system: f64,
    /// Idle.
    pub idle: f64,
    /// I/O wait.
    pub iowait: f64,
    /// Hard interrupts.
    pub irq: f64,
    /// Soft interrupts.
    pub softirq: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
}

impl CpuShare {
    /// Everything but idle and iowait.
    pub fn busy(&self) -> f64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }
}

impl CpuTimes {
    /// The live file.
    pub const PATH: &'static str = "/proc/stat";

    /// Parse /proc/stat text (the line starting "cpu " sums all CPUs). Kernels before 2.6.11
    /// lack steal etc.; missing trailing fields read as 0, at least user/nice/system/idle are
    /// required.
    pub fn parse(text: &str) -> Result<CpuTimes, CountersError> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some("cpu"))
            .ok_or_else(|| malformed(Self::PATH, "no aggregate cpu line"))?;
        let mut v = [0u64; 8];
        let mut fields = 0;
        for (slot, s) in v.iter_mut().zip(line.split_whitespace().skip(1)) {
            *slot = number(Self::PATH, "cpu field", s)?;
            fields += 1;
        }
        if fields < 4 {
            return Err(malformed(
                Self::PATH,
                format!("cpu line has {fields} fields, expected at least 4"),
            ));
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
        Ok(CpuTimes {
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
        })
    }

    /// Read the live counters.
    pub fn read() -> Result<CpuTimes, CountersError> {
        Self::parse(&read(Self::PATH)?)
    }

    /// Ticks since `earlier`.
    pub fn delta(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    /// Total ticks.
    pub fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Read `self` as an interval (a [`CpuTimes::delta`]) and give each field's percent share;
    /// all zero if no ticks passed.
    pub fn percentages(&self) -> CpuShare {
        let total = self.total();
        if total == 0 {
            return CpuShare::default();
        }
        let p = |x: u64| 100.0 * x as f64 / total as f64;
        CpuShare {
            user: p(self.user),
            nice: p(self.nice),
            system: p(self.system),
            idle: p(self.idle),
            iowait: p(self.iowait),
            irq: p(self.irq),
            softirq: p(self.softirq),
            steal: p(self.steal),
        }
    }

    /// Shares between `earlier` and `self`: `self.delta(earlier).percentages()`.
    pub fn share_since(&self, earlier: &CpuTimes) -> CpuShare {
        self.delta(earlier).percentages()
    }
}

/// Clock ticks per second of the /proc CPU counters (sysconf(3) _SC_CLK_TCK, usually 100).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// CPU time of this process: user and system ticks, fields 14 and 15 of /proc/self/stat
/// (proc(5)), and those of its children that have been waited for (fields 16 and 17).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// User ticks.
    pub utime: u64,
    /// System ticks.
    pub stime: u64,
    /// User ticks of waited-for children.
    #[serde(default)]
    pub cutime: u64,
    /// System ticks of waited-for children.
    #[serde(default)]
    pub cstime: u64,
}

impl ProcessCpu {
    /// The live file.
    pub const PATH: &'static str = "/proc/self/stat";

    /// Parse `/proc/<pid>/stat` text. The command name (field 2) may hold spaces and parentheses,
    /// so fields are counted after the last ')'.
    pub fn parse(text: &str) -> Result<ProcessCpu, CountersError> {
        let close = text
            .rfind(')')
            .ok_or_else(|| malformed(Self::PATH, "no ')' closing the command name"))?;
        // `)` is one byte, so `close + 1` is a char boundary.
        let rest = text.get(close + 1..).unwrap_or("");
        // After ')' come field 3 (state) onwards: utime is field 14 → index 11 here.
        let mut f = rest.split_whitespace().skip(11);
        let mut num = |field: u32| -> Result<u64, CountersError> {
            let s = f
                .next()
                .ok_or_else(|| malformed(Self::PATH, format!("field {field} missing")))?;
            number(Self::PATH, &format!("field {field}"), s)
        };
        Ok(ProcessCpu {
            utime: num(14)?,
            stime: num(15)?,
            cutime: num(16)?,
            cstime: num(17)?,
        })
    }

    /// Read this process's counters.
    pub fn read() -> Result<ProcessCpu, CountersError> {
        Self::parse(&read(Self::PATH)?)
    }

    /// Ticks since `earlier`.
    pub fn delta(&self, earlier: &ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            utime: self.utime.saturating_sub(earlier.utime),
            stime: self.stime.saturating_sub(earlier.stime),
            cutime: self.cutime.saturating_sub(earlier.cutime),
            cstime: self.cstime.saturating_sub(earlier.cstime),
        }
    }

    /// CPU of the children that ended and were waited for between `earlier` and `self`, over
    /// `wall`, in percent of one core (e.g. a helper process that did part of the work).
    pub fn children_share_since(&self, earlier: &ProcessCpu, wall: Duration) -> ProcessCpuShare {
        let d = self.delta(earlier);
        ProcessCpu {
            utime: d.cutime,
            stime: d.cstime,
            ..ProcessCpu::default()
        }
        .share_since(&ProcessCpu::default(), wall)
    }

    /// CPU between `earlier` and `self` over `wall` of wall-clock time, in percent of one core.
    pub fn share_since(&self, earlier: &ProcessCpu, wall: Duration) -> ProcessCpuShare {
        let d = self.delta(earlier);
        let hz = clock_ticks_per_second() as f64;
        let secs = wall.as_secs_f64().max(1e-9);
        let pct = |ticks: u64| 100.0 * ticks as f64 / hz / secs;
        ProcessCpuShare {
            user: pct(d.utime),
            system: pct(d.stime),
        }
    }

    /// User + system CPU between `earlier` and `self` over `wall`, percent of one core.
    pub fn cpu_percent(&self, earlier: &ProcessCpu, wall: Duration) -> f64 {
        self.share_since(earlier, wall).total()
    }
}

/// One interface's counters from /proc/net/dev (as the driver reports them; `rx_drop` includes
/// packets the kernel dropped for lack of backlog or buffers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDevCounters {
    /// Interface name.
    pub interface: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errs: u64,
    /// Received packets dropped.
    pub rx_drop: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Send errors.
    pub tx_errs: u64,
    /// Packets dropped on send.
    pub tx_drop: u64,
}

impl NetDevCounters {
    /// The live file.
    pub const PATH: &'static str = "/proc/net/dev";

    /// Parse every interface of /proc/net/dev text. The second header line names the columns of
    /// the Receive and Transmit groups (separated by '|'); values are matched by those names.
    pub fn parse_all(text: &str) -> Result<Vec<NetDevCounters>, CountersError> {
        let header = text
            .lines()
            .find(|l| l.contains('|') && l.contains("bytes"))
            .ok_or_else(|| malformed(Self::PATH, "no column header line"))?;
        let groups: Vec<&str> = header.split('|').collect();
        let (Some(rx), Some(tx)) = (groups.get(1), groups.get(2)) else {
            return Err(malformed(Self::PATH, "header lacks Receive|Transmit column groups"));
        };
        let rx: Vec<&str> = rx.split_whitespace().collect();
        let tx: Vec<&str> = tx.split_whitespace().collect();
        let mut out = Vec::new();
        for line in text.lines() {
            if line.contains('|') {
                continue;
            }
            let Some((name, values)) = line.split_once(':') else {
                continue;
            };
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let values: Vec<&str> = values.split_whitespace().collect();
            if values.len() < rx.len() + tx.len() {
                return Err(malformed(
                    Self::PATH,
                    format!("{name}: {} values, header names {}", values.len(), rx.len() + tx.len()),
                ));
            }
            let mut c = NetDevCounters {
                interface: name.to_string(),
                ..NetDevCounters::default()
            };
            let (rv, tv) = values.split_at(rx.len());
            for (group, names, vals) in [("rx", &rx, rv), ("tx", &tx, tv)] {
                for (col, v) in names.iter().zip(vals) {
                    let slot = match (group, *col) {
                        ("rx", "bytes") => &mut c.rx_bytes,
                        ("rx", "packets") => &mut c.rx_packets,
                        ("rx", "errs") => &mut c.rx_errs,
                        ("rx", "drop") => &mut c.rx_drop,
                        ("tx", "bytes") => &mut c.tx_bytes,
                        ("tx", "packets") => &mut c.tx_packets,
                        ("tx", "errs") => &mut c.tx_errs,
                        ("tx", "drop") => &mut c.tx_drop,
                        _ => continue,
                    };
                    *slot = number(Self::PATH, &format!("{name} {group}_{col}"), v)?;
                }
            }
            out.push(c);
        }
        Ok(out)
    }

    /// Parse the counters of `interface` from /proc/net/dev text.
    pub fn parse(text: &str, interface: &str) -> Result<NetDevCounters, CountersError> {
        Self::parse_all(text)?
            .into_iter()
            .find(|c| c.interface == interface)
            .ok_or_else(|| CountersError::NoInterface {
                path: Self::PATH,
                name: interface.to_string(),
            })
    }

    /// Read the live counters of `interface`.
    pub fn read(interface: &str) -> Result<NetDevCounters, CountersError> {
        Self::parse(&read(Self::PATH)?, interface)
    }

    /// Counts since `earlier` (same interface assumed; the name is kept from `self`).
    pub fn delta(&self, earlier: &NetDevCounters) -> NetDevCounters {
        NetDevCounters {
            interface: self.interface.clone(),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_errs: self.rx_errs.saturating_sub(earlier.rx_errs),
            rx_drop: self.rx_drop.saturating_sub(earlier.rx_drop),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_errs: self.tx_errs.saturating_sub(earlier.tx_errs),
            tx_drop: self.tx_drop.saturating_sub(earlier.tx_drop),
        }
    }
}

/// One socket's line of /proc/net/udp or /proc/net/udp6 (proc(5)): the receive queue and the
/// datagrams the kernel dropped at this socket (`drops`: receive buffer full, or refused by a
/// filter or checksum), counted from the socket's creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpSocketEntry {
    /// Local port.
    pub local_port: u16,
    /// Bytes waiting in the receive queue.
    pub rx_queue: u64,
    /// Socket inode (what fstat(2) reports for the socket's descriptor).
    pub inode: u64,
    /// Datagrams dropped at this socket.
    pub drops: u64,
}

impl UdpSocketEntry {
    /// The live IPv4 table.
    pub const PATH: &'static str = "/proc/net/udp";
    /// The live IPv6 table.
    pub const PATH6: &'static str = "/proc/net/udp6";

    /// Parse the table: a header line naming the columns, then one line per socket. Columns are
    /// found by the header's names (`local_address`, `tx_queue rx_queue` as one `tx:rx` value,
    /// `inode`, `drops`); the header names `tr tm->when` for one value, which is accounted for.
    pub fn parse(text: &str) -> Result<Vec<UdpSocketEntry>, CountersError> {
        let mut lines = text.lines();
        let header = lines.next().ok_or_else(|| malformed(Self::PATH, "empty table"))?;
        // Header words → value columns: "tx_queue rx_queue" and "tr tm->when" are one value each.
        let mut cols = Vec::new();
        let mut words = header.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if (w == "tx_queue" && words.peek() == Some(&"rx_queue"))
                || (w == "tr" && words.peek() == Some(&"tm->when"))
            {
                words.next();
            }
            cols.push(w);
        }
        let at = |name: &str| {
            cols.iter()
                .position(|c| *c == name)
                .ok_or_else(|| malformed(Self::PATH, format!("no {name} column")))
        };
        let (local, queues, inode, drops) = (at("local_address")?, at("tx_queue")?, at("inode")?, at("drops")?);
        let mut out = Vec::new();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let v: Vec<&str> = line.split_whitespace().collect();
            let get = |i: usize| {
                v.get(i)
                    .copied()
                    .ok_or_else(|| malformed(Self::PATH, format!("line {line:?}: column {} missing", i + 1)))
            };
            let hex = |what: &str, s: &str| {
                u64::from_str_radix(s, 16).map_err(|_| malformed(Self::PATH, format!("{what} {s:?} is not hex")))
            };
            let port = get(local)?
                .rsplit_once(':')
                .ok_or_else(|| malformed(Self::PATH, format!("local address in {line:?}")))?
                .1;
            let rxq = get(queues)?
                .split_once(':')
                .ok_or_else(|| malformed(Self::PATH, format!("queues in {line:?}")))?
                .1;
            out.push(UdpSocketEntry {
                local_port: u16::try_from(hex("port", port)?).map_err(|_| malformed(Self::PATH, "port above 65535"))?,
                rx_queue: hex("rx_queue", rxq)?,
                inode: number(Self::PATH, "inode", get(inode)?)?,
                drops: number(Self::PATH, "drops", get(drops)?)?,
            });
        }
        Ok(out)
    }

    /// The live entry of the socket with `inode`, from the IPv4 table, then the IPv6 one.
    pub fn read(inode: u64) -> Result<Option<UdpSocketEntry>, CountersError> {
        for path in [Self::PATH, Self::PATH6] {
            if let Some(e) = Self::parse(&read(path)?)?.into_iter().find(|e| e.inode == inode) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }
}

/// Datagrams the kernel dropped at `sock` since it was created (/proc/net/udp `drops`, the entry
/// found by the socket's inode): this socket's loss alone, not the host's; `None` when the table
/// cannot be read or does not list the socket.
pub fn socket_drops(sock: &impl std::os::fd::AsRawFd) -> Option<u64> {
    // SAFETY: fstat(2) writes into a zeroed stat for a descriptor the caller holds open.
    let inode = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(sock.as_raw_fd(), &mut st) != 0 {
            return None;
        }
        st.st_ino
    };
    UdpSocketEntry::read(inode).ok().flatten().map(|e| e.drops)
}

/// Another process's CPU time and nice level from /proc/PID/stat (proc(5)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStat {
    /// User ticks, all threads.
    pub utime: u64,
    /// System ticks, all threads.
    pub stime: u64,
    /// Nice level of the main thread (field 19).
    pub nice: i32,
}

impl ProcessStat {
    /// Parse `/proc/<pid>/stat` text (fields counted after the last ')', as in
    /// [`ProcessCpu::parse`]).
    pub fn parse(text: &str) -> Result<ProcessStat, CountersError> {
        const PATH: &str = "/proc/<pid>/stat";
        let cpu = ProcessCpu::parse(text)?;
        let close = text.rfind(')').unwrap_or(0);
        // Field 19 (nice) is the 17th after the command name.
        let nice = text
            .get(close + 1..)
            .unwrap_or("")
            .split_whitespace()
            .nth(16)
            .ok_or_else(|| malformed(PATH, "field 19 missing"))?;
        Ok(ProcessStat {
            utime: cpu.utime,
            stime: cpu.stime,
            nice: nice
                .parse()
                .map_err(|_| malformed(PATH, format!("nice {nice:?} is not a number")))?,
        })
    }

    /// Read the live counters of process `pid`.
    pub fn read(pid: u32) -> Result<ProcessStat, CountersError> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|source| CountersError::Read {
            path: "/proc/<pid>/stat",
            source,
        })?;
        Self::parse(&text)
    }
}
