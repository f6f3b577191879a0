//! What `stream send`, `stream recv` and `stream relay` share: the framing and split flags, and
//! the one tail a receiving command runs once its sockets are bound (metrics → run → emit →
//! the exit that says what arrived).

use std::sync::atomic::AtomicBool;

use anyhow::Result;
use clap::ValueEnum;
use stream::SeqFormat;
use stream_session::recv::{BoundReceiver, LiveLine};
use stream_session::relay::{BoundRelay, RelayLiveLine};
use stream_session::report::{RecvReport, RelayReport};
use stream_session::{Observer, StreamSessionError};

use crate::flags::JsonOutput;
use crate::shared_args::LiveArgs;
use crate::stream_print::{recv_live_line, recv_summary, relay_live_line, relay_summary};
use crate::{stop_flag, ProblemsFound};

/// How recordings are split into files.
#[derive(Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Split {
    /// One continuous file per station, its threads interleaved in time order.
    #[default]
    Station,
    /// One continuous file per VDIF thread of each station (STATION_tTHREAD_UTC.vdif), as
    /// correlators that read threads apart want.
    Thread,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// evlbi's 24-byte prefix: sequence number, stream, frame rate, threads.
    Native,
    /// jive5ab udps: 8-byte little-endian sequence number.
    Jive5ab,
    /// Bare VDIF frames.
    None,
}

impl Format {
    /// How the framing is said in a command's first line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Native => "native framing",
            Format::Jive5ab => "jive5ab udps",
            Format::None => "bare VDIF",
        }
    }
}

impl From<Format> for SeqFormat {
    fn from(f: Format) -> SeqFormat {
        match f {
            Format::Native => SeqFormat::Native,
            Format::Jive5ab => SeqFormat::Jive5ab,
            Format::None => SeqFormat::None,
        }
    }
}

/// A receiving session with its sockets bound (`stream recv`, `stream relay`): what
/// [`run_bound`] needs of it, and how its command shows it.
pub trait Bound: Sized {
    /// One live line.
    type Live;
    /// The counts an observer takes.
    type Status: Send + 'static;
    /// The result.
    type Report: serde::Serialize;
    /// The program name of the metrics page (`stream recv`) and its metrics source.
    const NAMES: (&'static str, &'static str);
    /// Whether the closing lines are said with `--json` too (on stderr).
    const SUMMARY_WITH_JSON: bool;
    /// What the kernel granted each receive buffer (with warnings when capped).
    fn grants(&self) -> &[netio::BufferGrant];
    /// Hand `o` the counts every interval.
    fn observe(self, o: Observer<Self::Status>) -> Self;
    /// Hand `n` the sentences the operator must read when they happen.
    fn on_notice(self, n: Observer<String>) -> Self;
    /// Hand `p` the lines of progress, each with its lead word (`waiting:`, `warning:`).
    fn on_progress(self, _p: Observer<String>) -> Self {
        self
    }
    /// Run until stopped.
    fn run(self, stop: &AtomicBool, live: &mut dyn FnMut(&Self::Live)) -> Result<Self::Report, StreamSessionError>;
    /// Its counts as the metrics page takes them.
    fn status(s: Self::Status) -> metrics::Status;
    /// A live line's text.
    fn live_line(l: &Self::Live) -> String;
    /// The closing lines.
    fn summary(r: &Self::Report);
}

impl Bound for BoundReceiver {
    type Live = LiveLine;
    type Status = stream::results::RecvStatus;
    type Report = RecvReport;
    const NAMES: (&'static str, &'static str) = ("stream recv", "stream_recv");
    const SUMMARY_WITH_JSON: bool = true;
    fn grants(&self) -> &[netio::BufferGrant] {
        BoundReceiver::grants(self)
    }
    fn observe(self, o: Observer<Self::Status>) -> Self {
        BoundReceiver::observe(self, o)
    }
    fn on_notice(self, n: Observer<String>) -> Self {
        BoundReceiver::on_notice(self, n)
    }
    fn run(self, stop: &AtomicBool, live: &mut dyn FnMut(&LiveLine)) -> Result<RecvReport, StreamSessionError> {
        BoundReceiver::run(self, stop, live)
    }
    fn status(s: Self::Status) -> metrics::Status {
        metrics::Status::StreamRecv(s)
    }
    fn live_line(l: &LiveLine) -> String {
        recv_live_line(l)
    }
    fn summary(r: &RecvReport) {
        recv_summary(r)
    }
}

impl Bound for BoundRelay {
    type Live = RelayLiveLine;
    type Status = stream::results::RelayStatus;
    type Report = RelayReport;
    const NAMES: (&'static str, &'static str) = ("stream relay", "stream_relay");
    const SUMMARY_WITH_JSON: bool = false;
    fn grants(&self) -> &[netio::BufferGrant] {
        BoundRelay::grants(self)
    }
    fn observe(self, o: Observer<Self::Status>) -> Self {
        BoundRelay::observe(self, o)
    }
    fn on_notice(self, n: Observer<String>) -> Self {
        BoundRelay::on_notice(self, n)
    }
    fn on_progress(self, p: Observer<String>) -> Self {
        BoundRelay::on_progress(self, p)
    }
    fn run(self, stop: &AtomicBool, live: &mut dyn FnMut(&RelayLiveLine)) -> Result<RelayReport, StreamSessionError> {
        BoundRelay::run(self, stop, live)
    }
    fn status(s: Self::Status) -> metrics::Status {
        metrics::Status::StreamRelay(s)
    }
    fn live_line(l: &RelayLiveLine) -> String {
        relay_live_line(l)
    }
    fn summary(r: &RelayReport) {
        relay_summary(r)
    }
}

/// The one tail of a receiving command, its sockets bound: the kernel's buffer warnings,
/// metrics, the run (live lines unless `--quiet`; notices always), the JSON where `output`
/// asks, the closing lines.
pub fn run_bound<B: Bound>(bound: B, live: &LiveArgs, output: &JsonOutput) -> Result<B::Report> {
    for w in bound.grants().iter().flat_map(|g| g.warnings.iter()) {
        status!("warning: {w}");
    }
    let (program, source) = B::NAMES;
    let metrics = live.metrics.start(program)?;
    let bound = match metrics.observer(source, B::status) {
        Some(o) => bound.observe(o),
        None => bound,
    };
    // Said when it happens, quiet or not: nothing is recorded or relayed until the operator acts.
    let bound = bound.on_notice(Box::new(|n: String| status!("error: {n}")));
    // A wait that goes on (a DiFX job's port not open yet) or a correction is no error: "error:"
    // is for what stops or loses data (the relay's give-up at its end says so then).
    let bound = bound.on_progress(Box::new(|n: String| status!("{n}")));
    let stop = stop_flag()?;
    let quiet = live.quiet.quiet;
    let r = bound.run(&stop, &mut |l| {
        if !quiet {
            status!("{}", B::live_line(l));
        }
    })?;
    if output.emit(&r)? || B::SUMMARY_WITH_JSON {
        B::summary(&r);
    }
    Ok(r)
}

/// What a receiving command's exit says of what arrived on `addrs`: nothing at all (a recorder
/// that heard nothing has not recorded: a script, or the operator's cron check of a link, sees
/// it), or only datagrams it could not use while `used` frames were taken (`did`: "written",
/// "relayed"). Datagrams refused by policy (`--from`, `--max-stations`) are other people's
/// traffic; the rest were meant for it.
pub fn arrival(
    d: &stream::DatagramCounters,
    used: u64,
    did: &str,
    addrs: &[String],
    first_problem: Option<&str>,
) -> Result<()> {
    if d.datagrams == 0 {
        return Err(ProblemsFound::nothing_arrived(addrs).into());
    }
    let unusable = d.rejected() - d.foreign_source - d.too_many_stations;
    if unusable > 0 && used == 0 {
        return Err(ProblemsFound(format!(
            "all {} datagrams were rejected and no frame was {did}: {}",
            d.datagrams,
            first_problem.unwrap_or("see the counts above")
        ))
        .into());
    }
    Ok(())
}
