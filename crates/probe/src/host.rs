//! Host counters over a trial, for one end: CPU of the host and of the probe process, the
//! kernel's UDP counters and the interface's counters. With them a result can say whether a loss
//! was the network's, a full socket buffer's (`RcvbufErrors`) or a busy CPU's (seed 004 §4.3
//! reads the same /proc counters by hand).
//!
//! This crate reads no files: the socket layer (`probe-session`, through `netio::counters`) fills
//! these structs from /proc before and after a trial and sends the receiver's copy to the client
//! inside the `results` control message.

use serde::{Deserialize, Serialize};

/// Host CPU over the trial from /proc/stat (all CPUs together), percent of all CPU time; the
/// fields sum to 100 when any tick passed.
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

/// CPU used by the probe process (all its threads) from /proc/self/stat, percent of one core
/// (two busy threads read 200).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessCpuUse {
    /// User time, % of one core.
    pub user_pct: f64,
    /// System time, % of one core.
    pub system_pct: f64,
}

impl ProcessCpuUse {
    /// User + system, % of one core.
    pub fn total_pct(&self) -> f64 {
        self.user_pct + self.system_pct
    }
}

/// Differences of the host-wide IPv4 UDP counters of /proc/net/snmp (RFC 4113 names) over the
/// trial. Host-wide: other UDP traffic on the host counts too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpDelta {
    /// Datagrams delivered to sockets (InDatagrams).
    pub in_datagrams: u64,
    /// Datagrams that could not be delivered, all causes (InErrors).
    pub in_errors: u64,
    /// Dropped because a socket receive buffer was full (RcvbufErrors, part of InErrors).
    pub rcvbuf_errors: u64,
    /// Dropped because a socket send buffer was full (SndbufErrors).
    pub sndbuf_errors: u64,
    /// Datagrams sent (OutDatagrams).
    pub out_datagrams: u64,
    /// Datagrams to a port nobody listened on (NoPorts).
    pub no_ports: u64,
}

/// Differences of one interface's /proc/net/dev counters over the trial.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceDelta {
    /// Interface name (the one holding the local address of the trial).
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

/// One end's counters over a trial. Every part is optional: a host without /proc (or a peer that
/// did not send them) leaves it `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDelta {
    /// Wall-clock time between the two readings, s.
    pub wall_s: f64,
    /// Host CPU shares.
    pub cpu: Option<HostCpu>,
    /// The probe process's CPU.
    pub process: Option<ProcessCpuUse>,
    /// Host UDP counters.
    pub udp: Option<UdpDelta>,
    /// The interface carrying the trial, when it could be found.
    pub interface: Option<InterfaceDelta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_and_json_roundtrip() {
        let c = HostCpu {
            ticks: 200,
            user_pct: 30.0,
            system_pct: 20.0,
            idle_pct: 45.0,
            softirq_pct: 5.0,
            ..HostCpu::default()
        };
        assert!((c.total_pct() - 100.0).abs() < 1e-9);
        assert!((c.busy_pct() - 55.0).abs() < 1e-9);
        let h = HostDelta {
            wall_s: 1.5,
            cpu: Some(c),
            process: Some(ProcessCpuUse {
                user_pct: 60.0,
                system_pct: 40.0,
            }),
            udp: Some(UdpDelta {
                in_datagrams: 10,
                ..UdpDelta::default()
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
}
