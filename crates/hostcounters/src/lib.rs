//! What the host says about a run, as every result carries it: the kernel's UDP counters, the
//! host's and a process's CPU, an interface's counters and the socket buffers the kernel granted.
//!
//! Plain serde types with their arithmetic (differences, shares), one JSON schema for every
//! result: a field carries its unit in its name (`user_pct`, `wall_s`), as the rest of the
//! results do; counts are bare. The socket layer (`netio`) reads the raw counters from /proc and
//! getsockopt(2); the core crates' result types (probe, stream, transfer) and the report view use
//! them without linking that layer.
//!
//! Older results named the process CPU shares `user` and `system`; those names are still read
//! (serde `alias`), never written.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The "Udp:" counters of /proc/net/snmp (IPv4; names from RFC 4113), or their difference over a
/// run. Host-wide: other UDP traffic on the host counts too. RcvbufErrors are datagrams the kernel
/// dropped because a socket receive buffer was full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets (InDatagrams).
    pub in_datagrams: u64,
    /// Datagrams to a port nobody listens on (NoPorts).
    pub no_ports: u64,
    /// Datagrams dropped for any error (InErrors; includes RcvbufErrors and InCsumErrors).
    pub in_errors: u64,
    /// Datagrams sent (OutDatagrams).
    pub out_datagrams: u64,
    /// Dropped: socket receive buffer full (RcvbufErrors).
    pub rcvbuf_errors: u64,
    /// Dropped: socket send buffer full (SndbufErrors).
    pub sndbuf_errors: u64,
    /// Dropped: bad checksum (InCsumErrors; absent from older probe results).
    #[serde(default)]
    pub in_csum_errors: u64,
}

impl UdpCounters {
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

impl CpuTimes {
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
    pub fn shares(&self) -> HostCpu {
        let total = self.total();
        let p = |x: u64| {
            if total == 0 {
                0.0
            } else {
                100.0 * x as f64 / total as f64
            }
        };
        HostCpu {
            ticks: total,
            user_pct: p(self.user),
            nice_pct: p(self.nice),
            system_pct: p(self.system),
            idle_pct: p(self.idle),
            iowait_pct: p(self.iowait),
            irq_pct: p(self.irq),
            softirq_pct: p(self.softirq),
            steal_pct: p(self.steal),
        }
    }

    /// Shares between `earlier` and `self`: `self.delta(earlier).shares()`.
    pub fn share_since(&self, earlier: &CpuTimes) -> HostCpu {
        self.delta(earlier).shares()
    }
}

/// Host CPU over an interval (all CPUs together), percent of all CPU time; the fields sum to
/// 100 when any tick passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCpu {
    /// Clock ticks that passed, summed over all CPUs (the denominator of the shares).
    pub ticks: u64,
    /// Normal user time, %.
    pub user_pct: f64,
    /// Niced user time, %.
    pub nice_pct: f64,
    /// Kernel time, %.
    pub system_pct: f64,
    /// Idle, %.
    pub idle_pct: f64,
    /// Waiting for I/O, %.
    pub iowait_pct: f64,
    /// Hard interrupts, %.
    pub irq_pct: f64,
    /// Soft interrupts (network receive processing lands here), %.
    pub softirq_pct: f64,
    /// Stolen by the hypervisor, %.
    pub steal_pct: f64,
}

impl HostCpu {
    /// The one-line summary reports and live lines print: `user 41% sys 12% softirq 3% idle 44%`
    /// (nice counted as user).
    pub fn summary(&self) -> String {
        format!(
            "user {:.0}% sys {:.0}% softirq {:.0}% idle {:.0}%",
            self.user_pct + self.nice_pct,
            self.system_pct,
            self.softirq_pct,
            self.idle_pct
        )
    }

    /// Sum of all shares (≈ 100, or 0 when no tick passed).
    pub fn total_pct(&self) -> f64 {
        self.user_pct
            + self.nice_pct
            + self.system_pct
            + self.idle_pct
            + self.iowait_pct
            + self.irq_pct
            + self.softirq_pct
            + self.steal_pct
    }

    /// Everything but idle and iowait, %.
    pub fn busy_pct(&self) -> f64 {
        self.total_pct() - self.idle_pct - self.iowait_pct
    }
}

/// CPU time of a process: user and system ticks, fields 14 and 15 of /proc/PID/stat (proc(5)),
/// and those of its children that have been waited for (fields 16 and 17).
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
    /// Ticks since `earlier`.
    pub fn delta(&self, earlier: &ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            utime: self.utime.saturating_sub(earlier.utime),
            stime: self.stime.saturating_sub(earlier.stime),
            cutime: self.cutime.saturating_sub(earlier.cutime),
            cstime: self.cstime.saturating_sub(earlier.cstime),
        }
    }

    /// CPU between `earlier` and `self` over `wall` of wall-clock time, at `ticks_per_second`
    /// (sysconf(3) _SC_CLK_TCK), in percent of one core.
    pub fn share_since(&self, earlier: &ProcessCpu, wall: Duration, ticks_per_second: u64) -> ProcessCpuShare {
        let d = self.delta(earlier);
        ProcessCpuShare::of_ticks(d.utime, d.stime, wall, ticks_per_second)
    }

    /// CPU of the children that ended and were waited for between `earlier` and `self`, over
    /// `wall`, in percent of one core (e.g. a helper process that did part of the work).
    pub fn children_share_since(&self, earlier: &ProcessCpu, wall: Duration, ticks_per_second: u64) -> ProcessCpuShare {
        let d = self.delta(earlier);
        ProcessCpuShare::of_ticks(d.cutime, d.cstime, wall, ticks_per_second)
    }
}

/// CPU used by a process (all its threads) over an interval, percent of one core (a process
/// with two busy threads reads 200).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessCpuShare {
    /// User time, % of one core (`user` in older stream results).
    #[serde(alias = "user")]
    pub user_pct: f64,
    /// System time, % of one core (`system` in older stream results).
    #[serde(alias = "system")]
    pub system_pct: f64,
}

impl ProcessCpuShare {
    /// `user` and `system` ticks over `wall` at `ticks_per_second`, in percent of one core.
    pub fn of_ticks(user: u64, system: u64, wall: Duration, ticks_per_second: u64) -> ProcessCpuShare {
        let hz = ticks_per_second.max(1) as f64;
        let secs = wall.as_secs_f64().max(1e-9);
        let pct = |ticks: u64| 100.0 * ticks as f64 / hz / secs;
        ProcessCpuShare {
            user_pct: pct(user),
            system_pct: pct(system),
        }
    }

    /// User + system, % of one core.
    pub fn total_pct(&self) -> f64 {
        self.user_pct + self.system_pct
    }
}

/// One interface's counters from /proc/net/dev (as the driver reports them; `rx_drop` includes
/// packets the kernel dropped for lack of backlog or buffers), or their difference over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceCounters {
    /// Interface name (for a run: the one holding its local address).
    #[serde(alias = "interface")]
    pub name: String,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Receive errors.
    pub rx_errs: u64,
    /// Received packets dropped (driver or kernel backlog).
    pub rx_drop: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Send errors.
    pub tx_errs: u64,
    /// Packets dropped on send.
    pub tx_drop: u64,
}

impl InterfaceCounters {
    /// Counts since `earlier` (same interface assumed; the name is kept from `self`).
    pub fn delta(&self, earlier: &InterfaceCounters) -> InterfaceCounters {
        InterfaceCounters {
            name: self.name.clone(),
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_errs: self.rx_errs.saturating_sub(earlier.rx_errs),
            rx_drop: self.rx_drop.saturating_sub(earlier.rx_drop),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_errs: self.tx_errs.saturating_sub(earlier.tx_errs),
            tx_drop: self.tx_drop.saturating_sub(earlier.tx_drop),
        }
    }
}

/// One end's host counters over a run: CPU of the host and of the process, the kernel's UDP
/// counters and the interface's counters. With them a result can say whether a loss was the
/// network's, a full socket buffer's (`RcvbufErrors`) or a busy CPU's (seed 004 §4.3 reads the
/// same /proc counters by hand). Every part is optional: a host without /proc (or a peer that did
/// not send them) leaves it `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDelta {
    /// Wall-clock time between the two readings, s.
    pub wall_s: f64,
    /// Host CPU shares.
    pub cpu: Option<HostCpu>,
    /// The process's CPU.
    pub process: Option<ProcessCpuShare>,
    /// Host UDP counters.
    pub udp: Option<UdpCounters>,
    /// The interface carrying the run, when it could be found.
    pub interface: Option<InterfaceCounters>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_and_json_roundtrip() {
        let t = CpuTimes {
            user: 60,
            system: 40,
            idle: 90,
            softirq: 10,
            ..CpuTimes::default()
        };
        let c = t.shares();
        assert_eq!(c.ticks, 200);
        assert!((c.user_pct - 30.0).abs() < 1e-9 && (c.softirq_pct - 5.0).abs() < 1e-9);
        assert!((c.total_pct() - 100.0).abs() < 1e-9);
        assert!((c.busy_pct() - 55.0).abs() < 1e-9);
        assert_eq!(CpuTimes::default().shares(), HostCpu::default());
        let h = HostDelta {
            wall_s: 1.5,
            cpu: Some(c),
            process: Some(ProcessCpuShare {
                user_pct: 60.0,
                system_pct: 40.0,
            }),
            udp: Some(UdpCounters {
                in_datagrams: 10,
                ..UdpCounters::default()
            }),
            interface: None,
        };
        let back: HostDelta = serde_json::from_str(&serde_json::to_string(&h).expect("ser")).expect("de");
        assert_eq!(back, h);
        assert!(serde_json::from_str::<HostDelta>(
            r#"{"wall_s":1,"cpu":null,"process":null,"udp":null,"interface":null,"x":1}"#
        )
        .is_err());
    }

    #[test]
    fn a_process_share_is_ticks_over_wall_time_and_reads_its_old_names() {
        // 50 user + 25 system ticks at 100 Hz over 1 s: 50 % and 25 % of a core.
        let then = ProcessCpu::default();
        let now = ProcessCpu {
            utime: 50,
            stime: 25,
            cutime: 0,
            cstime: 25,
        };
        let s = now.share_since(&then, Duration::from_secs(1), 100);
        assert_eq!((s.user_pct, s.system_pct, s.total_pct()), (50.0, 25.0, 75.0));
        let kids = now.children_share_since(&then, Duration::from_secs(1), 100);
        assert_eq!((kids.user_pct, kids.system_pct), (0.0, 25.0));
        let json = serde_json::to_value(s).expect("ser");
        assert_eq!(json, serde_json::json!({"user_pct": 50.0, "system_pct": 25.0}));
        // Stream results before the one schema wrote `user` and `system`.
        let old: ProcessCpuShare = serde_json::from_str(r#"{"user": 41.5, "system": 12.0}"#).expect("old names");
        assert_eq!((old.user_pct, old.system_pct), (41.5, 12.0));
    }

    #[test]
    fn older_udp_and_interface_json_still_reads() {
        // Probe results before the one schema had no in_csum_errors.
        let u: UdpCounters = serde_json::from_str(
            r#"{"in_datagrams":5,"in_errors":1,"rcvbuf_errors":1,"sndbuf_errors":0,"out_datagrams":7,"no_ports":2}"#,
        )
        .expect("old udp");
        assert_eq!((u.in_datagrams, u.rcvbuf_errors, u.in_csum_errors), (5, 1, 0));
        let later = UdpCounters { in_datagrams: 9, ..u };
        assert_eq!(later.delta(&u).in_datagrams, 4);
        assert_eq!(u.delta(&later).in_datagrams, 0, "a reset reads as 0");
        let i: InterfaceCounters = serde_json::from_str(r#"{"interface":"lo","rx_packets":3,"rx_bytes":0,"rx_errs":0,"rx_drop":0,"tx_packets":0,"tx_bytes":0,"tx_errs":0,"tx_drop":0}"#).expect("netio's old name");
        assert_eq!((i.name.as_str(), i.rx_packets), ("lo", 3));
    }
}
