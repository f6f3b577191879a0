//! The results of a probe trial and of a sweep, defined once (hyperfine style): JSON, CSV, plots
//! and HTML reports are all views of these structs.

use serde::{Deserialize, Serialize};

use crate::recv_stats::{ReceiverReport, RecvConfig};
use crate::send_stats::SenderReport;
use hostcounters::HostDelta;

/// Version of the result JSON layout; bumped on incompatible changes.
pub const RESULT_SCHEMA_VERSION: u32 = 1;

/// Parameters of one trial, as negotiated in `hello`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestParams {
    /// Session id carried in every datagram.
    pub test_id: u64,
    /// UDP payload size, bytes.
    pub size: u32,
    /// Packets the sender was asked to send.
    pub count: u64,
    /// Intended inter-packet spacing, ns (0 = as fast as possible).
    pub spacing_ns: u64,
}

impl TestParams {
    /// Offered user-data rate, bit/s (`None` for spacing 0).
    pub fn offered_user_rate_bps(&self) -> Option<f64> {
        (self.spacing_ns > 0).then(|| f64::from(self.size) * 8e9 / self.spacing_ns as f64)
    }

    /// Offered wire rate including 66 bytes of framing per packet, bit/s.
    pub fn offered_wire_rate_bps(&self) -> Option<f64> {
        (self.spacing_ns > 0)
            .then(|| (f64::from(self.size) + crate::wire::WIRE_OVERHEAD_BYTES as f64) * 8e9 / self.spacing_ns as f64)
    }
}

/// Host counters over a trial on both ends (CPU user/sys/idle of the host and the probe process,
/// `/proc/net/snmp` UDP counters, the interface's `/proc/net/dev` counters), see [`HostDelta`].
/// Filled by the socket layer; the receiver's arrive in the `results` control message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCounters {
    /// Sending host (the client), from just before the first datagram to just after the last.
    pub sender: Option<HostDelta>,
    /// Receiving host (the server), from `ready` to the end of the drain.
    pub receiver: Option<HostDelta>,
}

/// Everything measured in one probe trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// [`RESULT_SCHEMA_VERSION`] of this document.
    pub schema_version: u32,
    /// evlbi version that produced it.
    pub tool_version: String,
    /// Trial parameters.
    pub params: TestParams,
    /// Offered user-data rate from size and spacing, bit/s.
    pub offered_user_rate_bps: Option<f64>,
    /// Offered wire rate, bit/s.
    pub offered_wire_rate_bps: Option<f64>,
    /// Sender statistics (`None` if the sender did not report them).
    pub sender: Option<SenderReport>,
    /// Receiver statistics (`None` if the trial failed before results).
    pub receiver: Option<ReceiverReport>,
    /// Host CPU and kernel/NIC counters, filled by the socket layer.
    pub host: HostCounters,
    /// Free-form notes and warnings (e.g. "socket buffer capped by the kernel").
    pub notes: Vec<String>,
    /// The receiving socket's buffer and the datagrams the kernel dropped at it, when the server
    /// reported them (absent in results of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_socket: Option<ReceiverSocket>,
}

/// The receiver's UDP socket over one trial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverSocket {
    /// SO_RCVBUF asked for, bytes.
    pub rcvbuf_requested: u64,
    /// What the kernel reports after the request (getsockopt SO_RCVBUF): twice the payload that
    /// fits, socket(7).
    pub rcvbuf_granted: u64,
    /// Datagrams the kernel dropped at this socket (the `drops` column of /proc/net/udp: a full
    /// receive buffer, or a failed checksum/filter), counted from the socket's creation. `None`
    /// when the table could not be read.
    pub drops: Option<u64>,
}

impl ProbeResult {
    /// Assemble a result from the parts.
    pub fn new(params: TestParams, sender: Option<SenderReport>, receiver: Option<ReceiverReport>) -> Self {
        ProbeResult {
            schema_version: RESULT_SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            offered_user_rate_bps: params.offered_user_rate_bps(),
            offered_wire_rate_bps: params.offered_wire_rate_bps(),
            params,
            sender,
            receiver,
            host: HostCounters::default(),
            notes: Vec::new(),
            receiver_socket: None,
        }
    }
}

/// One point of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// UDP payload size, bytes.
    pub size: u32,
    /// Spacing, ns.
    pub spacing_ns: u64,
    /// The trial at this point.
    pub result: ProbeResult,
}

/// A sweep over sizes × spacings: the data of seed 000 Figures 3–4 and seed 004 Figure 3
/// (received rate and loss against spacing, one curve per size).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// [`RESULT_SCHEMA_VERSION`] of this document.
    pub schema_version: u32,
    /// Sizes swept, bytes.
    pub sizes: Vec<u32>,
    /// Spacings swept, ns.
    pub spacings_ns: Vec<u64>,
    /// Measured points, in the order run (size-major).
    pub points: Vec<SweepPoint>,
}

impl SweepResult {
    /// Empty sweep over the given grid.
    pub fn new(sizes: Vec<u32>, spacings_ns: Vec<u64>) -> Self {
        SweepResult {
            schema_version: RESULT_SCHEMA_VERSION,
            sizes,
            spacings_ns,
            points: Vec::new(),
        }
    }

    /// The grid in run order (size-major, spacing-minor).
    pub fn grid(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.sizes
            .iter()
            .flat_map(move |&s| self.spacings_ns.iter().map(move |&g| (s, g)))
    }

    /// Add a measured point.
    pub fn push(&mut self, result: ProbeResult) {
        self.points.push(SweepPoint {
            size: result.params.size,
            spacing_ns: result.params.spacing_ns,
            result,
        });
    }

    /// One curve: `(spacing_ns, received wire rate bit/s, loss fraction)` for a size, for the
    /// throughput/loss-versus-spacing plots.
    pub fn curve(&self, size: u32) -> Vec<(u64, Option<f64>, Option<f64>)> {
        self.points
            .iter()
            .filter(|p| p.size == size)
            .map(|p| {
                let r = p.result.receiver.as_ref();
                (
                    p.spacing_ns,
                    r.and_then(|r| r.wire_rate_bps),
                    r.and_then(|r| r.loss_fraction),
                )
            })
            .collect()
    }
}

/// Smallest, median and largest of a figure over trials.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Number of trials that had the figure.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of the values present; `None` if there are none. NaNs are ignored.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().flatten().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            n,
            min: v[0],
            median,
            max: v[n - 1],
        })
    }
}

/// How much repeated trials of the same parameters agree (seed 004 §4.3 stability runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialsSummary {
    /// Trials run.
    pub trials: usize,
    /// Received user-data rate, bit/s.
    pub received_user_rate_bps: Option<Spread>,
    /// Loss fraction.
    pub loss_fraction: Option<Spread>,
    /// Packets lost.
    pub lost_packets: Option<Spread>,
    /// Receiver inter-arrival p99 (jitter), ns.
    pub inter_arrival_p99_ns: Option<Spread>,
    /// Sender departure-gap p99, ns.
    pub departure_gap_p99_ns: Option<Spread>,
    /// One-way delay p99 above the minimum, ns.
    pub one_way_delay_p99_ns: Option<Spread>,
}

impl TrialsSummary {
    /// Spread of the main figures over `trials`.
    pub fn of(trials: &[ProbeResult]) -> TrialsSummary {
        let rx =
            |f: fn(&ReceiverReport) -> Option<f64>| Spread::of(trials.iter().map(|t| t.receiver.as_ref().and_then(f)));
        let u = |v: Option<u64>| v.map(|x| x as f64);
        TrialsSummary {
            trials: trials.len(),
            received_user_rate_bps: rx(|r| r.user_rate_bps),
            loss_fraction: rx(|r| r.loss_fraction),
            lost_packets: rx(|r| Some(r.lost_packets as f64)),
            inter_arrival_p99_ns: rx(|r| r.inter_arrival_ns.p99.map(|x| x as f64)),
            departure_gap_p99_ns: Spread::of(
                trials
                    .iter()
                    .map(|t| t.sender.as_ref().and_then(|s| u(s.departure_gap_ns.p99))),
            ),
            one_way_delay_p99_ns: rx(|r| r.one_way_delay.p99_ns.map(|x| x as f64)),
        }
    }
}

/// Repeated trials of the same parameters, back to back (one session each), and their spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialsResult {
    /// [`RESULT_SCHEMA_VERSION`] of this document.
    pub schema_version: u32,
    /// Spread of the main figures over the trials.
    pub summary: TrialsSummary,
    /// Every trial, in the order run.
    pub trials: Vec<ProbeResult>,
}

impl TrialsResult {
    /// Wrap trials and compute their spread.
    pub fn new(trials: Vec<ProbeResult>) -> TrialsResult {
        TrialsResult {
            schema_version: RESULT_SCHEMA_VERSION,
            summary: TrialsSummary::of(&trials),
            trials,
        }
    }
}

/// Header of [`SweepResult::to_csv`].
pub const SWEEP_CSV_HEADER: &str =
    "size,spacing_ns,offered_user_rate_bps,received_user_rate_bps,received_wire_rate_bps,\
loss_fraction,lost,reordered,duplicates,jitter_p50_ns,jitter_p99_ns,sender_gap_p99_ns,sender_cpu_pct,receiver_cpu_pct";

impl SweepResult {
    /// A CSV view, one row per point in run order (empty cells where a figure is missing).
    /// Rates in bit/s; jitter is the receiver inter-arrival time; CPU is the probe process on
    /// each end, % of one core.
    pub fn to_csv(&self) -> String {
        fn f<T: ToString>(v: Option<T>) -> String {
            v.map_or(String::new(), |x| x.to_string())
        }
        let mut out = String::from(SWEEP_CSV_HEADER);
        out.push('\n');
        for p in &self.points {
            let r = &p.result;
            let rx = r.receiver.as_ref();
            let cpu = |h: &Option<HostDelta>| {
                h.as_ref()
                    .and_then(|h| h.process)
                    .map(|c| format!("{:.1}", c.total_pct()))
            };
            let row = [
                p.size.to_string(),
                p.spacing_ns.to_string(),
                f(r.offered_user_rate_bps.map(|v| v.round())),
                f(rx.and_then(|x| x.user_rate_bps).map(|v| v.round())),
                f(rx.and_then(|x| x.wire_rate_bps).map(|v| v.round())),
                f(rx.and_then(|x| x.loss_fraction)),
                f(rx.map(|x| x.lost_packets)),
                f(rx.map(|x| x.reordering.reordered_packets)),
                f(rx.map(|x| x.duplicates)),
                f(rx.and_then(|x| x.inter_arrival_ns.p50)),
                f(rx.and_then(|x| x.inter_arrival_ns.p99)),
                f(r.sender.as_ref().and_then(|s| s.departure_gap_ns.p99)),
                f(cpu(&r.host.sender)),
                f(cpu(&r.host.receiver)),
            ];
            out.push_str(&row.join(","));
            out.push('\n');
        }
        out
    }
}

// The live counts of a running `probe server` (`--metrics`); the view only renders them.

/// `probe server`: trials so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeServerStatus {
    /// Trials started (UDP and TCP).
    pub trials: u64,
    /// Trials that failed.
    pub failed: u64,
    /// Probe packets received (unique) over the UDP trials.
    pub packets: u64,
    /// Probe packets lost over the UDP trials.
    pub lost: u64,
    /// Bytes received over the TCP tests.
    pub tcp_bytes: u64,
    /// The last UDP trial's loss fraction.
    pub last_loss_fraction: Option<f64>,
    /// The last trial's user rate, b/s.
    pub last_rate_bps: Option<f64>,
}

// Built from the negotiated parameters here, so the receiver's statistics need not import the
// results they feed (results import the state machines' reports, never the reverse).
impl RecvConfig {
    /// The parameters of a trial (as negotiated in the session's `hello`).
    pub fn from_params(p: &TestParams) -> Self {
        RecvConfig {
            size: Some(p.size as usize),
            count: Some(p.count),
            spacing_ns: (p.spacing_ns > 0).then_some(p.spacing_ns),
            ..Self::new(p.test_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_min_median_max() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(2.0), Some(10.0)]).expect("values");
        assert_eq!((s.n, s.min, s.median, s.max), (4, 1.0, 2.5, 10.0));
        let s = Spread::of([Some(5.0), Some(1.0), Some(3.0)]).expect("values");
        assert_eq!(s.median, 3.0);
        assert_eq!(Spread::of([None]), None);
    }

    #[test]
    fn offered_rates() {
        let p = TestParams {
            test_id: 1,
            size: 8192,
            count: 10,
            spacing_ns: 16_000,
        };
        assert_eq!(p.offered_user_rate_bps(), Some(4.096e9));
        assert_eq!(p.offered_wire_rate_bps(), Some(8258.0 * 8e9 / 16e3));
        assert_eq!(TestParams { spacing_ns: 0, ..p }.offered_user_rate_bps(), None);
    }

    #[test]
    fn sweep_grid_and_json_roundtrip() {
        let mut s = SweepResult::new(vec![1472, 8192], vec![10_000, 20_000]);
        assert_eq!(
            s.grid().collect::<Vec<_>>(),
            vec![(1472, 10_000), (1472, 20_000), (8192, 10_000), (8192, 20_000)]
        );
        for (size, spacing_ns) in s.grid().collect::<Vec<_>>() {
            s.push(ProbeResult::new(
                TestParams {
                    test_id: 0,
                    size,
                    count: 1,
                    spacing_ns,
                },
                None,
                None,
            ));
        }
        let csv = s.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], SWEEP_CSV_HEADER);
        assert!(lines[3].starts_with("8192,10000,6553600000,"), "{}", lines[3]);
        assert_eq!(lines[1].split(',').count(), SWEEP_CSV_HEADER.split(',').count());
        let json = serde_json::to_string(&s).expect("serialise");
        let back: SweepResult = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, s);
        assert_eq!(s.curve(8192).len(), 2);
    }
}
