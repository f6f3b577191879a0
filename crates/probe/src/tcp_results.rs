//! Results of the TCP and host experiments, defined once (JSON is the source of truth; text,
//! plots and the HTML report are views):
//!
//! - [`TcpTestResult`]: one `probe client --tcp` test — per-interval throughput and retransmits,
//!   TCP_INFO samples over time, host CPU on both ends, the Mathis check (seed 003 Fig 1), and the
//!   competing CPU load when one ran (seed 001 §4).
//! - [`CpuLoadSweepResult`]: one TCP test per nice level of the competing task: throughput
//!   against nice level and against the CPU left (seed 001 Fig 2–3, right panels).
//! - [`RcvbufSweepResult`]: one UDP trial per receive-buffer size: loss against buffer, with the
//!   kernel's drops beside the loss the application saw (seed 003 Fig 2c).
//!
//! Every result says whether it is `partial` (the test ended early: a peer vanished, a point of a
//! sweep failed) and why (`error`); what was measured up to then is kept.

use serde::{Deserialize, Serialize};

use crate::results::{HostCounters, ProbeResult, RESULT_SCHEMA_VERSION};
use crate::tcp::MAX_STREAMS;
use crate::tcp::{MathisCheck, TcpInfo, TcpInterval, TcpSample};

/// What a TCP test was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpTestParams {
    /// Session id.
    pub test_id: u64,
    /// Parallel connections.
    pub streams: u16,
    /// How long the client was to write, s.
    pub duration_s: f64,
    /// Interval of the per-interval figures, s.
    pub interval_s: f64,
    /// Bytes per application write.
    pub write_size: u32,
    /// Congestion control asked for (`None`: the kernel's default).
    pub cc_requested: Option<String>,
}

/// One stream of a TCP test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpStreamSummary {
    /// Stream number.
    pub stream: u16,
    /// Bytes the application wrote.
    pub bytes_written: u64,
    /// Bytes the server received on it (`None` without the server's report).
    pub bytes_received: Option<u64>,
    /// The sender socket's last TCP_INFO (after the writes ended and the data drained).
    pub last_tcp_info: Option<TcpInfo>,
    /// What ended the stream early, if anything.
    pub error: Option<String>,
}

/// One stream at the receiver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpStreamRx {
    /// Stream number.
    pub stream: u16,
    /// Bytes received.
    pub bytes: u64,
    /// What ended the stream other than the client's orderly close, if anything (length ≤ 1024).
    pub error: Option<String>,
}

/// What the receiving end (the probe server) of a TCP test saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpReceiverReport {
    /// Per stream.
    pub streams: Vec<TcpStreamRx>,
    /// Bytes received, all streams.
    pub bytes: u64,
    /// From the first byte to the last, s.
    pub duration_s: f64,
    /// `bytes` over `duration_s`, bit/s.
    pub rate_bps: Option<f64>,
    /// Connections to the data port refused: another address, or a preamble that was not the
    /// session's.
    pub stray_connections: u64,
    /// The test ended early (the client vanished, a stream broke).
    pub partial: bool,
    /// Why, if it did (length ≤ 1024).
    pub error: Option<String>,
}

impl TcpReceiverReport {
    /// Bounds a peer must respect: at most [`MAX_STREAMS`] streams, short error texts, finite
    /// figures. Returns the offending field and why.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.streams.len() > usize::from(MAX_STREAMS) {
            return Err(("receiver.streams", format!("more than {MAX_STREAMS}")));
        }
        let long = |e: &Option<String>| e.as_ref().is_some_and(|e| e.len() > 1024);
        if long(&self.error) || self.streams.iter().any(|s| long(&s.error)) {
            return Err(("receiver.error", "longer than 1024 bytes".into()));
        }
        if !self.duration_s.is_finite() || self.duration_s < 0.0 || self.rate_bps.is_some_and(|r| !r.is_finite()) {
            return Err(("receiver.duration_s", "not a finite, non-negative number".into()));
        }
        Ok(())
    }
}

/// The competing CPU-bound task of `--cpu-load`, run on the sending host for the data phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLoadReport {
    /// Nice level asked for (−20..=19).
    pub nice: i32,
    /// Nice level of the task as the kernel reported it (/proc/PID/stat).
    pub nice_observed: Option<i32>,
    /// Spinning threads in the task.
    pub threads: u32,
    /// CPUs online on the sending host.
    pub cpus: u32,
    /// CPU the task got over the data phase, % of all CPUs (user + system, /proc/PID/stat).
    pub task_cpu_pct: Option<f64>,
    /// CPU left to everything else (the test included): 100 − `task_cpu_pct`, % of all CPUs —
    /// the "available CPU" of seed 001 Fig 2.
    pub available_cpu_pct: Option<f64>,
}

/// One `evlbi probe client --tcp` test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TcpTestResult {
    /// [`RESULT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// evlbi version that produced it.
    pub tool_version: String,
    /// What was asked.
    pub params: TcpTestParams,
    /// Congestion control in force on the sender's sockets (read back with TCP_CONGESTION).
    pub cc: Option<String>,
    /// The test ended early; the figures cover what ran.
    pub partial: bool,
    /// Why it ended early.
    pub error: Option<String>,
    /// Length of the data phase as run (writes plus the drain to the last acknowledgement), s.
    pub elapsed_s: f64,
    /// Length of the write phase (until the last stream stopped writing), s.
    pub write_s: f64,
    /// Bytes written, all streams.
    pub bytes_written: u64,
    /// Bytes acknowledged by the receiver, all streams (TCP_INFO `bytes_acked`).
    pub bytes_acked: u64,
    /// `bytes_acked` over `elapsed_s`, bit/s.
    pub sender_rate_bps: Option<f64>,
    /// Bytes the server received (`None` without its report).
    pub received_bytes: Option<u64>,
    /// The server's rate, first byte to last byte, bit/s.
    pub received_rate_bps: Option<f64>,
    /// Segments retransmitted, all streams.
    pub retransmits: u64,
    /// The achieved rate beside the Mathis bound for the measured RTT and retransmit rate.
    pub mathis: Option<MathisCheck>,
    /// Per stream.
    pub streams: Vec<TcpStreamSummary>,
    /// Per interval, all streams together.
    pub intervals: Vec<TcpInterval>,
    /// TCP_INFO samples of every stream over time (evenly thinned to bounded memory on long
    /// tests, see `sample_period_s`).
    pub samples: Vec<TcpSample>,
    /// Time between the kept samples, s.
    pub sample_period_s: f64,
    /// The competing CPU load, when `--cpu-load` ran one.
    pub cpu_load: Option<CpuLoadReport>,
    /// Host CPU and counters on both ends over the data phase.
    pub host: HostCounters,
    /// The server's report.
    pub receiver: Option<TcpReceiverReport>,
    /// Notes and warnings.
    pub notes: Vec<String>,
}

impl TcpTestResult {
    /// An empty result for `params` (filled by the socket layer).
    pub fn new(params: TcpTestParams) -> TcpTestResult {
        TcpTestResult {
            schema_version: RESULT_SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            params,
            cc: None,
            partial: false,
            error: None,
            elapsed_s: 0.0,
            write_s: 0.0,
            bytes_written: 0,
            bytes_acked: 0,
            sender_rate_bps: None,
            received_bytes: None,
            received_rate_bps: None,
            retransmits: 0,
            mathis: None,
            streams: Vec::new(),
            intervals: Vec::new(),
            samples: Vec::new(),
            sample_period_s: 0.0,
            cpu_load: None,
            host: HostCounters::default(),
            receiver: None,
            notes: Vec::new(),
        }
    }

    /// The samples taken while the streams were writing (after it, a closing connection's RTT
    /// and window readings describe the close, not the transfer).
    pub fn write_phase_samples(&self) -> impl Iterator<Item = &TcpSample> {
        let end = self.write_s;
        self.samples.iter().filter(move |s| s.t_s <= end)
    }

    /// The rate achieved: the receiver's when it reported, else the sender's acknowledged rate.
    pub fn achieved_rate_bps(&self) -> Option<f64> {
        self.received_rate_bps.or(self.sender_rate_bps)
    }
}

/// One nice level of a CPU-load sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLoadPoint {
    /// Nice level of the competing task; `None` for the baseline without one.
    pub nice: Option<i32>,
    /// Throughput achieved, bit/s.
    pub rate_bps: Option<f64>,
    /// CPU left by the competing task, % of all CPUs (100 without one).
    pub available_cpu_pct: Option<f64>,
    /// Sending host idle over the test, % of all CPUs.
    pub sender_idle_pct: Option<f64>,
    /// The test.
    pub result: TcpTestResult,
}

impl CpuLoadPoint {
    /// The point of one test.
    pub fn of(result: TcpTestResult) -> CpuLoadPoint {
        CpuLoadPoint {
            nice: result.cpu_load.as_ref().map(|c| c.nice),
            rate_bps: result.achieved_rate_bps(),
            available_cpu_pct: match &result.cpu_load {
                Some(c) => c.available_cpu_pct,
                None => Some(100.0),
            },
            sender_idle_pct: result.host.sender.as_ref().and_then(|h| h.cpu).map(|c| c.idle_pct),
            result,
        }
    }
}

/// TCP throughput against the nice level of a competing CPU-bound task on the sender (seed 001
/// Fig 2–3, right panels), a baseline without the task first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuLoadSweepResult {
    /// [`RESULT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The nice levels asked for, in the order run (after the baseline).
    pub nice_levels: Vec<i32>,
    /// Points run: the baseline, then one per nice level.
    pub points: Vec<CpuLoadPoint>,
    /// The sweep stopped before its last point.
    pub partial: bool,
    /// Why.
    pub error: Option<String>,
}

impl CpuLoadSweepResult {
    /// An empty sweep over `nice_levels`.
    pub fn new(nice_levels: Vec<i32>) -> Self {
        CpuLoadSweepResult {
            schema_version: RESULT_SCHEMA_VERSION,
            nice_levels,
            points: Vec::new(),
            partial: false,
            error: None,
        }
    }
}

/// One receive-buffer size of a `--rcvbuf-sweep`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RcvbufPoint {
    /// SO_RCVBUF asked of the receiver's kernel, bytes.
    pub rcvbuf_requested: u64,
    /// What the kernel reported after the request (twice the usable payload, socket(7)).
    pub rcvbuf_granted: Option<u64>,
    /// Packets the application found missing.
    pub lost_packets: Option<u64>,
    /// `lost_packets` over the packets expected.
    pub loss_fraction: Option<f64>,
    /// Datagrams the kernel dropped at the receiving socket (/proc/net/udp `drops`).
    pub socket_drops: Option<u64>,
    /// The receiving host's UDP RcvbufErrors over the trial (/proc/net/snmp; host-wide, so other
    /// UDP traffic on the host counts too).
    pub rcvbuf_errors: Option<u64>,
    /// Lost packets the receiving socket did not drop: lost in the network, the NIC or the
    /// sender (`lost_packets − socket_drops`, 0 when drops exceed it).
    pub lost_elsewhere: Option<u64>,
    /// The trial.
    pub result: ProbeResult,
}

impl RcvbufPoint {
    /// The point of one trial that asked for `rcvbuf_requested`.
    pub fn of(rcvbuf_requested: u64, result: ProbeResult) -> RcvbufPoint {
        let rx = result.receiver.as_ref();
        let lost = rx.map(|r| r.lost_packets);
        let drops = result.receiver_socket.and_then(|s| s.drops);
        RcvbufPoint {
            rcvbuf_requested,
            rcvbuf_granted: result.receiver_socket.map(|s| s.rcvbuf_granted),
            lost_packets: lost,
            loss_fraction: rx.and_then(|r| r.loss_fraction),
            socket_drops: drops,
            rcvbuf_errors: result
                .host
                .receiver
                .as_ref()
                .and_then(|h| h.udp)
                .map(|u| u.rcvbuf_errors),
            lost_elsewhere: lost.zip(drops).map(|(l, d)| l.saturating_sub(d)),
            result,
        }
    }
}

/// UDP loss against the receive socket buffer at one rate and packet size (seed 003 Fig 2c).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RcvbufSweepResult {
    /// [`RESULT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// UDP payload size, bytes.
    pub size: u32,
    /// Spacing between datagrams, ns.
    pub spacing_ns: u64,
    /// Datagrams per trial.
    pub count: u64,
    /// Receive buffers swept, bytes, in the order run.
    pub rcvbufs: Vec<u64>,
    /// Points run.
    pub points: Vec<RcvbufPoint>,
    /// The sweep stopped before its last point.
    pub partial: bool,
    /// Why.
    pub error: Option<String>,
}

impl RcvbufSweepResult {
    /// An empty sweep.
    pub fn new(size: u32, spacing_ns: u64, count: u64, rcvbufs: Vec<u64>) -> Self {
        RcvbufSweepResult {
            schema_version: RESULT_SCHEMA_VERSION,
            size,
            spacing_ns,
            count,
            rcvbufs,
            points: Vec::new(),
            partial: false,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ReceiverSocket, TestParams};
    use hostcounters::{HostCpu, HostDelta, UdpCounters};

    fn params() -> TcpTestParams {
        TcpTestParams {
            test_id: 1,
            streams: 1,
            duration_s: 1.0,
            interval_s: 0.5,
            write_size: 131_072,
            cc_requested: Some("cubic".into()),
        }
    }

    #[test]
    fn cpu_load_points_take_the_tests_figures() {
        let mut r = TcpTestResult::new(params());
        r.sender_rate_bps = Some(5e8);
        assert_eq!(CpuLoadPoint::of(r.clone()).available_cpu_pct, Some(100.0));
        r.received_rate_bps = Some(4e8);
        r.cpu_load = Some(CpuLoadReport {
            nice: 10,
            nice_observed: Some(10),
            threads: 2,
            cpus: 2,
            task_cpu_pct: Some(40.0),
            available_cpu_pct: Some(60.0),
        });
        r.host.sender = Some(HostDelta {
            cpu: Some(HostCpu {
                idle_pct: 5.0,
                ..HostCpu::default()
            }),
            ..HostDelta::default()
        });
        let p = CpuLoadPoint::of(r);
        assert_eq!(
            (p.nice, p.rate_bps, p.available_cpu_pct, p.sender_idle_pct),
            (Some(10), Some(4e8), Some(60.0), Some(5.0))
        );
        let mut s = CpuLoadSweepResult::new(vec![10]);
        s.points.push(p);
        let back: CpuLoadSweepResult = serde_json::from_str(&serde_json::to_string(&s).expect("ser")).expect("de");
        assert_eq!(back, s);
    }

    #[test]
    fn rcvbuf_points_tell_socket_drops_from_other_loss() {
        let mut r = ProbeResult::new(
            TestParams {
                test_id: 1,
                size: 1472,
                count: 1000,
                spacing_ns: 0,
            },
            None,
            None,
        );
        r.receiver_socket = Some(ReceiverSocket {
            rcvbuf_requested: 65_536,
            rcvbuf_granted: 131_072,
            drops: Some(40),
        });
        r.host.receiver = Some(HostDelta {
            udp: Some(UdpCounters {
                rcvbuf_errors: 41,
                ..UdpCounters::default()
            }),
            ..HostDelta::default()
        });
        let p = RcvbufPoint::of(65_536, r.clone());
        assert_eq!(
            (p.rcvbuf_granted, p.socket_drops, p.rcvbuf_errors),
            (Some(131_072), Some(40), Some(41))
        );
        // No receiver report: nothing known about loss.
        assert_eq!((p.lost_packets, p.lost_elsewhere), (None, None));
    }

    #[test]
    fn receiver_report_bounds() {
        let mut rx = TcpReceiverReport {
            streams: vec![],
            bytes: 0,
            duration_s: 0.0,
            rate_bps: None,
            stray_connections: 0,
            partial: false,
            error: None,
        };
        assert!(rx.validate().is_ok());
        rx.duration_s = f64::NAN;
        assert!(rx.validate().is_err());
        rx.duration_s = 1.0;
        rx.error = Some("x".repeat(1025));
        assert!(rx.validate().is_err());
        rx.error = None;
        rx.streams = (0..65)
            .map(|s| TcpStreamRx {
                stream: s,
                bytes: 0,
                error: None,
            })
            .collect();
        assert_eq!(rx.validate().map_err(|e| e.0), Err("receiver.streams"));
    }
}
