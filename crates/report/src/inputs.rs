//! Reading result JSON files and telling their kinds apart: a probe trial, a probe sweep, a TCP
//! test, a CPU-load sweep, a receive-buffer sweep, a host-jitter measurement, a stream send or
//! receive report, a transfer report, an `evlbi linkemu --json` summary, or the demo's assembled
//! `report.json`.

use std::path::{Path, PathBuf};

use probe::host_jitter::HostJitterReport;
use probe::results::{ProbeResult, SweepResult};
use probe::tcp_results::{CpuLoadSweepResult, RcvbufSweepResult, TcpTestResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stream::results::{RecvReport, SendReport};

/// What a result file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `evlbi probe client --json` ([`ProbeResult`]).
    ProbeTrial,
    /// A probe sweep ([`SweepResult`]).
    ProbeSweep,
    /// `evlbi stream send --out` ([`SendReport`]).
    StreamSend,
    /// `evlbi stream recv --json` ([`RecvReport`]).
    StreamRecv,
    /// `scripts/demo.sh`'s `report.json` (generation, stream send/recv, correlation).
    Demo,
    /// `evlbi send --json` (`transfer::results::SendReport`).
    TransferSend,
    /// `evlbi linkemu --json` ([`LinkemuRun`]).
    Linkemu,
    /// `evlbi probe client --tcp --json` ([`TcpTestResult`]).
    TcpTest,
    /// `evlbi probe client --tcp --cpu-load-sweep` ([`CpuLoadSweepResult`]).
    CpuLoadSweep,
    /// `evlbi probe client --rcvbuf-sweep` ([`RcvbufSweepResult`]).
    RcvbufSweep,
    /// `evlbi probe host-jitter --json` ([`HostJitterReport`]).
    HostJitter,
}

impl Kind {
    /// Human name.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::ProbeTrial => "probe trial",
            Kind::ProbeSweep => "probe sweep",
            Kind::StreamSend => "stream send report",
            Kind::StreamRecv => "stream recv report",
            Kind::Demo => "demo report",
            Kind::TransferSend => "transfer send report",
            Kind::Linkemu => "linkemu summary",
            Kind::TcpTest => "TCP test",
            Kind::CpuLoadSweep => "CPU-load sweep",
            Kind::RcvbufSweep => "receive-buffer sweep",
            Kind::HostJitter => "host timing floor",
        }
    }
}

/// Fringe S/N of the demo's correlation of the sent and of the received files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Correlation {
    /// S/N correlating the files as sent.
    pub sent_snr: Option<f64>,
    /// S/N correlating the files as received (lost frames filled invalid).
    pub received_snr: Option<f64>,
    /// Delay found, seconds, on the received files.
    pub received_delay_s: Option<f64>,
}

/// The parts of the demo report that the page shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Demo {
    /// Stream sender report.
    pub send: Option<SendReport>,
    /// Stream receiver report.
    pub recv: Option<RecvReport>,
    /// Correlation results.
    pub correlate: Option<Correlation>,
    /// How the stream's path was made lossy (emulated WAN or loss injected at the sender).
    pub path: Option<String>,
}

/// The parts of an `evlbi linkemu --json` summary the page shows. The emulator's own
/// `RealtimeStats` cannot be read back whole (its queue-delay histogram is written as a
/// [`histogram::HistSummary`]), so this names the fields read, with linkemu's own types.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LinkemuRun {
    /// "model" or "bare".
    pub mode: String,
    /// Run length, seconds.
    pub elapsed_s: f64,
    /// MTU of both devices.
    pub mtu: u32,
    /// RNG seed.
    pub seed: u64,
    /// Path model A → B.
    pub a_to_b_config: linkemu::LinkConfig,
    /// Path model B → A.
    pub b_to_a_config: linkemu::LinkConfig,
    /// What happened A → B.
    pub a_to_b: LinkemuDirection,
    /// What happened B → A.
    pub b_to_a: LinkemuDirection,
    /// Per-second counters (absent in summaries written before they were recorded).
    #[serde(default)]
    pub intervals: Vec<linkemu::IntervalSample>,
}

/// One direction of a [`LinkemuRun`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LinkemuDirection {
    /// Read from the input device.
    pub received: linkemu::Counter,
    /// Written to the output device.
    pub forwarded: linkemu::Counter,
    /// Dropped at the emulator's memory bound.
    pub overflow: linkemu::Counter,
    /// Kernel drops on the input device (emulator short of CPU).
    pub input_tx_dropped: Option<u64>,
    /// The link model's account (absent in bare mode).
    pub model: Option<LinkemuModel>,
}

/// The link model's account of one direction.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LinkemuModel {
    /// Lost by the loss model.
    pub dropped_loss: linkemu::Counter,
    /// Dropped by the full bottleneck queue.
    pub dropped_queue: linkemu::Counter,
    /// Duplicates made.
    pub duplicated: linkemu::Counter,
    /// Largest queue occupancy, bytes.
    pub max_queue_bytes: u64,
    /// Queue waits.
    pub queue_delay_us: histogram::HistSummary,
}

/// A parsed result.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// One probe trial.
    Probe(Box<ProbeResult>),
    /// A sweep.
    Sweep(Box<SweepResult>),
    /// Stream sender.
    StreamSend(Box<SendReport>),
    /// `evlbi send --json`.
    TransferSend(Box<transfer::results::SendReport>),
    /// `evlbi linkemu --json`.
    Linkemu(Box<LinkemuRun>),
    /// Stream receiver.
    StreamRecv(Box<RecvReport>),
    /// Demo report.
    Demo(Box<Demo>),
    /// A TCP test.
    Tcp(Box<TcpTestResult>),
    /// A CPU-load sweep.
    CpuLoadSweep(Box<CpuLoadSweepResult>),
    /// A receive-buffer sweep.
    RcvbufSweep(Box<RcvbufSweepResult>),
    /// A host-jitter measurement.
    HostJitter(Box<HostJitterReport>),
}

impl Input {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Input::Probe(_) => Kind::ProbeTrial,
            Input::Sweep(_) => Kind::ProbeSweep,
            Input::StreamSend(_) => Kind::StreamSend,
            Input::StreamRecv(_) => Kind::StreamRecv,
            Input::Demo(_) => Kind::Demo,
            Input::TransferSend(_) => Kind::TransferSend,
            Input::Linkemu(_) => Kind::Linkemu,
            Input::Tcp(_) => Kind::TcpTest,
            Input::CpuLoadSweep(_) => Kind::CpuLoadSweep,
            Input::RcvbufSweep(_) => Kind::RcvbufSweep,
            Input::HostJitter(_) => Kind::HostJitter,
        }
    }
}

/// A result file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not JSON (or truncated).
    #[error("{path} is not valid JSON ({cause}); expected the JSON written by evlbi probe/stream/send/linkemu or scripts/demo.sh")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause (in the message, not a chained source, so it is said once).
        cause: serde_json::Error,
    },
    /// JSON of no known kind.
    #[error(
        "{path} is not an evlbi result: expected a probe trial (keys params, receiver), a probe sweep \
         (sizes, spacings_ns, points), a TCP test (intervals, samples, mathis), a CPU-load sweep \
         (nice_levels, points), a receive-buffer sweep (rcvbufs, points), a host-jitter measurement \
         (kind \"host_jitter\"), a stream send report (to, \
         stations), a stream recv report (listen, stations), a transfer send report (files, \
         transferred_bytes), a linkemu summary (mode, a_to_b, b_to_a) or a demo report.json \
         (stream, correlate); found {found}"
    )]
    UnknownKind {
        /// The file.
        path: PathBuf,
        /// What the file's top level holds.
        found: String,
    },
    /// Recognised, but a field is missing or of the wrong type.
    #[error("{path} looks like a {} but does not match it: {cause}", kind.describe())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The kind it resembles.
        kind: Kind,
        /// The cause (in the message only).
        cause: serde_json::Error,
    },
}

fn top_level(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let keys: Vec<&str> = m.keys().take(8).map(String::as_str).collect();
            format!("an object with keys [{}]", keys.join(", "))
        }
        Value::Array(a) => format!("an array of {} elements", a.len()),
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
    }
}

/// Which kind a JSON value is, by its distinguishing keys.
pub fn detect(v: &Value) -> Option<Kind> {
    let m = v.as_object()?;
    let has = |k: &str| m.contains_key(k);
    if m.get("kind").and_then(Value::as_str) == Some(HostJitterReport::KIND) {
        Some(Kind::HostJitter)
    } else if has("sizes") && has("spacings_ns") && has("points") {
        Some(Kind::ProbeSweep)
    } else if has("nice_levels") && has("points") {
        Some(Kind::CpuLoadSweep)
    } else if has("rcvbufs") && has("points") {
        Some(Kind::RcvbufSweep)
    } else if has("intervals") && has("samples") && has("mathis") {
        // Before the probe trial: a TCP test has params and receiver too.
        Some(Kind::TcpTest)
    } else if has("params") && has("schema_version") && (has("receiver") || has("sender")) {
        Some(Kind::ProbeTrial)
    } else if has("listen") && has("stations") {
        Some(Kind::StreamRecv)
    } else if has("to") && has("stations") {
        Some(Kind::StreamSend)
    } else if has("stream") && (has("correlate") || has("generated")) {
        Some(Kind::Demo)
    } else if has("files") && has("transferred_bytes") {
        Some(Kind::TransferSend)
    } else if has("a_to_b") && has("b_to_a") && has("mode") {
        Some(Kind::Linkemu)
    } else {
        None
    }
}

fn shape<T: serde::de::DeserializeOwned>(v: Value, path: &Path, kind: Kind) -> Result<T, InputError> {
    serde_json::from_value(v).map_err(|cause| InputError::Shape {
        path: path.to_path_buf(),
        kind,
        cause,
    })
}

fn demo(v: &Value, path: &Path) -> Result<Demo, InputError> {
    let part = |a: &str, b: &str| v.get(a).and_then(|x| x.get(b)).filter(|x| !x.is_null()).cloned();
    let send = part("stream", "send")
        .map(|x| shape(x, path, Kind::StreamSend))
        .transpose()?;
    let recv = part("stream", "recv")
        .map(|x| shape(x, path, Kind::StreamRecv))
        .transpose()?;
    let snr = |which: &str| part("correlate", which).and_then(|c| c.get("snr").and_then(Value::as_f64));
    let correlate = v.get("correlate").map(|_| Correlation {
        sent_snr: snr("sent"),
        received_snr: snr("received"),
        received_delay_s: part("correlate", "received").and_then(|c| c.get("delay_s").and_then(Value::as_f64)),
    });
    let path = v.get("path").and_then(Value::as_str).map(str::to_string);
    Ok(Demo {
        send,
        recv,
        correlate,
        path,
    })
}

/// Parse JSON text from `path` into a typed input.
pub fn parse(text: &str, path: &Path) -> Result<Input, InputError> {
    let v: Value = serde_json::from_str(text).map_err(|cause| InputError::Json {
        path: path.to_path_buf(),
        cause,
    })?;
    let kind = detect(&v).ok_or_else(|| InputError::UnknownKind {
        path: path.to_path_buf(),
        found: top_level(&v),
    })?;
    Ok(match kind {
        Kind::ProbeTrial => Input::Probe(Box::new(shape(v, path, kind)?)),
        Kind::ProbeSweep => Input::Sweep(Box::new(shape(v, path, kind)?)),
        Kind::StreamSend => Input::StreamSend(Box::new(shape(v, path, kind)?)),
        Kind::TransferSend => Input::TransferSend(Box::new(shape(v, path, kind)?)),
        Kind::StreamRecv => Input::StreamRecv(Box::new(shape(v, path, kind)?)),
        Kind::Demo => Input::Demo(Box::new(demo(&v, path)?)),
        Kind::Linkemu => Input::Linkemu(Box::new(shape(v, path, kind)?)),
        Kind::TcpTest => Input::Tcp(Box::new(shape(v, path, kind)?)),
        Kind::CpuLoadSweep => Input::CpuLoadSweep(Box::new(shape(v, path, kind)?)),
        Kind::RcvbufSweep => Input::RcvbufSweep(Box::new(shape(v, path, kind)?)),
        Kind::HostJitter => Input::HostJitter(Box::new(shape(v, path, kind)?)),
    })
}

/// Read one result file with `read` (the caller's bounded reader: this crate does no file IO
/// of its own) and parse it.
pub fn load(path: &Path, read: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>) -> Result<Input, InputError> {
    let bytes = read(path).map_err(|source| InputError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| InputError::Read {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })?;
    parse(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe::results::TestParams;

    fn params() -> TestParams {
        TestParams {
            test_id: 1,
            size: 1472,
            count: 10,
            spacing_ns: 10_000,
        }
    }

    #[test]
    fn kinds_are_told_apart() {
        let trial = ProbeResult::new(params(), None, None);
        let mut sweep = SweepResult::new(vec![1472], vec![10_000]);
        sweep.push(trial.clone());
        let p = Path::new("x.json");
        fn text<T: Serialize>(v: &T) -> String {
            serde_json::to_string(v).expect("serialise")
        }
        assert_eq!(parse(&text(&trial), p).map(|i| i.kind()).ok(), Some(Kind::ProbeTrial));
        assert_eq!(parse(&text(&sweep), p).map(|i| i.kind()).ok(), Some(Kind::ProbeSweep));
        let demo = r#"{"generated": {}, "stream": {"send": null, "recv": null}, "correlate": {"sent": {"snr": 9.0}}}"#;
        match parse(demo, p) {
            Ok(Input::Demo(d)) => assert_eq!(d.correlate.and_then(|c| c.sent_snr), Some(9.0)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse("[1, 2]", p), Err(InputError::UnknownKind { .. })));
        let tcp = TcpTestResult::new(probe::tcp_results::TcpTestParams {
            test_id: 1,
            streams: 1,
            duration_s: 1.0,
            interval_s: 1.0,
            write_size: 131_072,
            cc_requested: None,
        });
        assert_eq!(parse(&text(&tcp), p).map(|i| i.kind()).ok(), Some(Kind::TcpTest));
        let cpu = CpuLoadSweepResult::new(vec![19, 0]);
        assert_eq!(parse(&text(&cpu), p).map(|i| i.kind()).ok(), Some(Kind::CpuLoadSweep));
        let rcv = RcvbufSweepResult::new(1472, 12_000, 1000, vec![65_536]);
        assert_eq!(parse(&text(&rcv), p).map(|i| i.kind()).ok(), Some(Kind::RcvbufSweep));
        assert!(matches!(parse("{\"params\": ", p), Err(InputError::Json { .. })));
        let mut jitter = probe::host_jitter::HostJitter::new(16_000);
        jitter.on_release(0, 0);
        jitter.on_release(16_000, 16_500);
        let jitter = jitter.report(16_500, 0, 0);
        assert_eq!(parse(&text(&jitter), p).map(|i| i.kind()).ok(), Some(Kind::HostJitter));
    }
}
