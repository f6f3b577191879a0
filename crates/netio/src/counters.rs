//! Host counters from /proc, so every result can tell network loss from a full socket buffer, a
//! busy CPU or a NIC drop. Each counter set has a `parse` (pure, for fixture tests), a `read` of
//! the live file and a `delta` against an earlier reading. Fields are found by name where the
//! file has names (/proc/net/snmp, /proc/net/dev), so kernels that add columns still parse.
//! Malformed text is a [`CountersError`], never a panic.

// unsafe: sysconf(3) (clock ticks) and fstat(2) of a socket (its inode): std has neither.
#![allow(unsafe_code)]

pub use hostcounters::{CpuTimes, HostCpu, InterfaceCounters, ProcessCpu, ProcessCpuShare, UdpCounters};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The live UDP counters (/proc/net/snmp).
pub const UDP_COUNTERS_PATH: &str = "/proc/net/snmp";
/// The live host CPU counters.
pub const CPU_TIMES_PATH: &str = "/proc/stat";
/// This process's CPU counters.
pub const PROCESS_CPU_PATH: &str = "/proc/self/stat";
/// The live interface counters.
pub const NET_DEV_PATH: &str = "/proc/net/dev";

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
    let path = UDP_COUNTERS_PATH;
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
    parse_udp_counters(&read(UDP_COUNTERS_PATH)?)
}

/// Parse /proc/stat text into host CPU ticks (the line starting "cpu " sums all CPUs). Kernels
/// before 2.6.11 lack steal etc.; missing trailing fields read as 0, at least
/// user/nice/system/idle are required.
pub fn parse_cpu_times(text: &str) -> Result<CpuTimes, CountersError> {
    let path = CPU_TIMES_PATH;
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| malformed(path, "no aggregate cpu line"))?;
    let mut v = [0u64; 8];
    let mut fields = 0;
    for (slot, s) in v.iter_mut().zip(line.split_whitespace().skip(1)) {
        *slot = number(path, "cpu field", s)?;
        fields += 1;
    }
    if fields < 4 {
        return Err(malformed(
            path,
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

/// Read the live host CPU ticks.
pub fn read_cpu_times() -> Result<CpuTimes, CountersError> {
    parse_cpu_times(&read(CPU_TIMES_PATH)?)
}

/// Clock ticks per second of the /proc CPU counters (sysconf(3) _SC_CLK_TCK, usually 100).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// Parse `/proc/<pid>/stat` text into the process's CPU ticks (fields 14 to 17). The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after the last ')'.
pub fn parse_process_cpu(text: &str) -> Result<ProcessCpu, CountersError> {
    let path = PROCESS_CPU_PATH;
    let close = text
        .rfind(')')
        .ok_or_else(|| malformed(path, "no ')' closing the command name"))?;
    // `)` is one byte, so `close + 1` is a char boundary.
    let rest = text.get(close + 1..).unwrap_or("");
    // After ')' come field 3 (state) onwards: utime is field 14 → index 11 here.
    let mut f = rest.split_whitespace().skip(11);
    let mut num = |field: u32| -> Result<u64, CountersError> {
        let s = f
            .next()
            .ok_or_else(|| malformed(path, format!("field {field} missing")))?;
        number(path, &format!("field {field}"), s)
    };
    Ok(ProcessCpu {
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
    })
}

/// Read this process's CPU ticks.
pub fn read_process_cpu() -> Result<ProcessCpu, CountersError> {
    parse_process_cpu(&read(PROCESS_CPU_PATH)?)
}

/// Parse every interface of /proc/net/dev text. The second header line names the columns of
/// the Receive and Transmit groups (separated by '|'); values are matched by those names.
pub fn parse_net_dev_all(text: &str) -> Result<Vec<InterfaceCounters>, CountersError> {
    let header = text
        .lines()
        .find(|l| l.contains('|') && l.contains("bytes"))
        .ok_or_else(|| malformed(NET_DEV_PATH, "no column header line"))?;
    let groups: Vec<&str> = header.split('|').collect();
    let (Some(rx), Some(tx)) = (groups.get(1), groups.get(2)) else {
        return Err(malformed(NET_DEV_PATH, "header lacks Receive|Transmit column groups"));
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
                NET_DEV_PATH,
                format!("{name}: {} values, header names {}", values.len(), rx.len() + tx.len()),
            ));
        }
        let mut c = InterfaceCounters {
            name: name.to_string(),
            ..InterfaceCounters::default()
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
                *slot = number(NET_DEV_PATH, &format!("{name} {group}_{col}"), v)?;
            }
        }
        out.push(c);
    }
    Ok(out)
}

/// Parse the counters of `interface` from /proc/net/dev text.
pub fn parse_net_dev(text: &str, interface: &str) -> Result<InterfaceCounters, CountersError> {
    parse_net_dev_all(text)?
        .into_iter()
        .find(|c| c.name == interface)
        .ok_or_else(|| CountersError::NoInterface {
            path: NET_DEV_PATH,
            name: interface.to_string(),
        })
}

/// Read the live counters of `interface`.
pub fn read_net_dev(interface: &str) -> Result<InterfaceCounters, CountersError> {
    parse_net_dev(&read(NET_DEV_PATH)?, interface)
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

/// Bytes queued in `sock`'s receive buffer now, as the kernel charges them against the
/// buffer's size (SO_MEMINFO `SK_MEMINFO_RMEM_ALLOC`: each datagram with its overhead, so the
/// figure compares with the granted SO_RCVBUF); `None` where the kernel does not say. One
/// system call: cheap enough to look after each wait of a receive loop.
pub fn socket_queued_bytes(sock: &impl std::os::fd::AsRawFd) -> Option<u64> {
    // SK_MEMINFO_VARS is 9 since Linux 4.x; the receive allocation is the first.
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which holds them.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (rc == 0 && len >= 4).then(|| u64::from(info[0]))
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
    /// [`parse_process_cpu`]).
    pub fn parse(text: &str) -> Result<ProcessStat, CountersError> {
        const PATH: &str = "/proc/<pid>/stat";
        let cpu = parse_process_cpu(text)?;
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
