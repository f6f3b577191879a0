//! `evlbi serve`: a recorder the NASA Field System drives over VSI-S, as it drives jive5ab on a
//! FlexBuff.
//!
//! [`Daemon::execute`] answers one statement. Settings (`mode`, `net_protocol`, `net_port`,
//! `mtu`, `ipd`, `threads`, `record_format`, `datastream`, `record = nthread`) are kept in
//! [`settings::Settings`]; `set_disks` takes directories the operator allowed ([`paths`]).
//! `record = on : LABEL`, `net2file = open : PATH`, `net2net` (a relay), `fill2net` (a test
//! stream of the mode) and `disk2file` run one at a time ([`sessions`], [`disk2file`]);
//! `scan_set`, `scan_check?`, `data_check?`, `disk2file` read back what was recorded
//! ([`scans`]); `evlbi?`, `tstat?`, `status?`, `record?`, `error?`, `rtime?`, `dts_id?`,
//! `os_rev?` report. Settings cannot change while a transfer runs (return code 6, `not whilst
//! record is in progress`), queries always work. [`vsi::serve`] is the control port.
//!
//! `runtime = NAME` ([`runtimes`]) gives a control connection a context of its own — settings
//! and one transfer — beside the default one, as jive5ab's runtimes do: a correlator input host
//! serves several stations at once, one runtime (data port, `net2sfxc` socket) each.
//!
//! Recordings are a FlexBuff's unless `record_format` (or jive5ab's `record = mk6 : 1`) says
//! otherwise: FlexBuff vbs over every set disk, named by the Field System's label exactly —
//! `<label>_ds<stream>` per data stream when the FS defined them (the thread procedure's
//! `ds{thread}` gives `<label>_dsds0`, `<label>_dsds1`, as jive5ab) —, a letter appended when a
//! disk holds the name already (said in the reply, `!record = 0 : <label>a ;`). Mark6 spreads
//! the scan the same way; `record_format = vdif` writes continuous VDIF files per station in
//! `<first disk>/<label>/`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use metrics::{Hub, Publisher, Status};
use vsis::command::{Fill2Net, Net2Net, Request, Setting};
use vsis::evlbi::{EvlbiStats, UnixTime};
use vsis::runtime::DEFAULT_RUNTIME;
use vsis::status::RuntimeStatus;
use vsis::{ReplyRepr, ReturnCode, StatementRepr};

mod counts;
pub mod disk2file;
pub mod errors;
pub mod paths;
mod recorder;
pub mod runtimes;
pub mod scans;
pub mod sessions;
pub mod settings;
mod space;
mod station;
pub mod vsi;

use disk2file::{Disk2FileError, Disk2FileJob};
use runtimes::{Here, Outlets, Session, Shared};
use scans::ScanSession;
use sessions::{Fill, Kind, Recording, Relay, StartError, TransferEnv, TransferError};
use settings::Settings;

/// Why the running transfer failed when it was stopped (or stopped by itself).
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// A recording, relay or `fill2net`.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// A `disk2file` copy.
    #[error(transparent)]
    Disk2File(#[from] Disk2FileError),
}

/// The one transfer running, if any.
enum Running {
    None,
    Recording(Recording),
    Relay(Relay),
    Fill(Fill),
    Disk2File(Disk2FileJob),
}

impl Running {
    fn kind(&self) -> Option<Kind> {
        match self {
            Running::None => None,
            Running::Recording(r) => Some(r.kind),
            Running::Relay(_) => Some(Kind::Net2Net),
            Running::Fill(_) => Some(Kind::Fill2Net),
            Running::Disk2File(_) => Some(Kind::Disk2File),
        }
    }
}

/// One runtime's state (the default one, or one of `runtime = NAME`).
struct State {
    settings: Settings,
    /// `set_disks`: the directories recordings go to, checked against the allowed ones.
    disks: Vec<PathBuf>,
    running: Running,
    /// The transfer whose counts `evlbi?` shows when none runs (jive5ab keeps them).
    last: Option<Kind>,
    /// This session's recordings and the scan pointer of `scan_set`.
    session: ScanSession,
    /// `tstat?`'s previous look: transfer, seconds into it, bytes in, bytes out.
    tstat: Option<(Kind, f64, u64, u64)>,
    /// Where its transfers hand their counts, which `evlbi?`, `tstat?` and the transfers'
    /// queries answer from.
    outlets: Outlets,
}

impl State {
    /// A runtime with the default settings recording on `disks`.
    fn new(disks: Vec<PathBuf>, outlets: Outlets) -> State {
        State {
            settings: Settings::default(),
            disks,
            running: Running::None,
            last: None,
            session: ScanSession::default(),
            tstat: None,
            outlets,
        }
    }

    /// The latest counts of a transfer kind: `evlbi?` statistics, seconds, bytes in, bytes out.
    fn counts(&self, kind: Kind) -> Option<(EvlbiStats, f64, u64, u64)> {
        let c = self.outlets.of(kind)?.latest()?;
        Some((c.evlbi(), c.elapsed_s(), c.bytes_in(), c.bytes_out()))
    }

    fn bytes(&self, kind: Kind) -> (u64, u64) {
        self.counts(kind).map_or((0, 0), |c| (c.2, c.3))
    }

    /// The rate the set disks fill at: a running `record`'s measured rate after its first
    /// second, else the mode's ([`space::fill_rate`]).
    fn fill_rate(&self) -> Option<space::FillRate> {
        let recording = match &self.running {
            Running::Recording(r) if r.kind == Kind::Record => self.counts(Kind::Record).map(|c| space::Progress {
                elapsed_s: c.1,
                written: c.3,
            }),
            _ => None,
        };
        space::fill_rate(self.settings.mode.as_ref(), recording)
    }

    /// What `evlbi?` shows: the running transfer's counts, or the last one's.
    fn evlbi_stats(&self) -> EvlbiStats {
        self.running
            .kind()
            .or(self.last)
            .and_then(|k| self.counts(k))
            .map_or_else(EvlbiStats::default, |c| c.0)
    }

    /// What the metrics call its transfer and target.
    fn transfer(&self) -> (String, Option<String>) {
        let target = match &self.running {
            Running::None => None,
            Running::Recording(r) => Some(r.name.clone()),
            Running::Relay(r) => Some(r.to().to_string()),
            Running::Fill(f) => Some(f.to().to_string()),
            Running::Disk2File(j) => Some(j.dest.clone()),
        };
        (
            self.running.kind().map_or("no_transfer", Kind::name).to_string(),
            target,
        )
    }
}

/// A code and fields for a reply.
type Answer = (ReturnCode, Vec<String>);

fn ok(fields: Vec<String>) -> Answer {
    (ReturnCode::Done, fields)
}

fn refuse(code: ReturnCode, why: impl Into<String>) -> Answer {
    (code, vec![why.into()])
}

/// The refusal of a transfer that could not start: its code and why.
fn refuse_start(e: &StartError) -> Answer {
    refuse(e.return_code(), e.to_string())
}

/// The recorder.
pub struct Daemon {
    env: TransferEnv,
    version: String,
    hub: Arc<Hub>,
    serve_pub: Publisher,
    state: Mutex<Shared>,
}

impl Daemon {
    /// A daemon recording where `env.paths` allows, on its default disks until `set_disks`,
    /// publishing to `hub` (sources `record`, `net2net`, `fill2net`, `serve`; each further
    /// runtime's `record`, `net2net`, `fill2net` labelled with its name).
    pub fn new(env: TransferEnv, version: &str, hub: Arc<Hub>) -> Result<Daemon, metrics::HubError> {
        let default = State::new(env.paths.default_disks(), Outlets::new(&hub, DEFAULT_RUNTIME)?);
        let d = Daemon {
            serve_pub: hub.source("serve")?,
            hub,
            env,
            version: version.to_string(),
            state: Mutex::new(Shared::new(default)),
        };
        d.publish(&d.lock());
        Ok(d)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Answer one statement in the default runtime, as a connection of its own that sends
    /// nothing else (a runtime it selects is forgotten, a transient one deleted).
    pub fn execute(&self, s: &StatementRepr) -> ReplyRepr {
        let mut session = self.session();
        let r = self.execute_in(&mut session, s);
        self.end_session(session);
        r
    }

    /// Answer one statement of the control connection `session`, in its runtime. A statement
    /// whose handling panics (a bug) is answered with 4 and why, counted (`internal_errors`)
    /// and queued for `error?`: the connection, the running transfer and the daemon's shutdown
    /// go on (a panic on `data_check?` used to drop the client unanswered and leave `evlbi
    /// serve` deaf to SIGTERM).
    pub fn execute_in(&self, session: &mut Session, s: &StatementRepr) -> ReplyRepr {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(session, s))) {
            Ok(reply) => reply,
            Err(payload) => {
                let why = payload
                    .downcast_ref::<&str>()
                    .map(|m| m.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                let what = format!("internal error answering {}: {why}", s.keyword);
                let mut g = self.lock();
                g.counts.statements += 1;
                g.counts.refused += 1;
                g.counts.internal_errors += 1;
                g.errors.push(-1, what.clone(), unix_seconds());
                self.publish(&g);
                ReplyRepr::new(s, ReturnCode::Failed, vec![what])
            }
        }
    }

    fn answer(&self, session: &mut Session, s: &StatementRepr) -> ReplyRepr {
        let mut g = self.lock();
        self.reap_all(&mut g);
        let (code, fields) = match Request::parse(s) {
            Ok(Request::Runtime(cmd)) => self.runtime(&mut g, session, cmd),
            Ok(r) => match g.here(session.runtime()) {
                Some(mut h) => self.handle(&mut h, r),
                // Another connection deleted it (jive5ab's reply).
                None => refuse(
                    ReturnCode::Failed,
                    format!("current runtime ('{}') has been deleted", session.runtime()),
                ),
            },
            Err(e) => (e.code, vec![e.message]),
        };
        g.counts.statements += 1;
        if !matches!(code, ReturnCode::Done | ReturnCode::Initiated) {
            g.counts.refused += 1;
        }
        self.publish(&g);
        ReplyRepr::new(s, code, fields)
    }

    /// Count a control line that was too long, and a connection.
    pub fn note(&self, overlong: u64, connections: u64) {
        let mut st = self.lock();
        st.counts.overlong_lines += overlong;
        st.counts.connections += connections;
        self.publish(&st);
    }

    /// Count a control connection closed at once (its peer is not allowed).
    pub fn note_refused(&self) {
        let mut st = self.lock();
        st.counts.connections_refused += 1;
        self.publish(&st);
    }

    /// Stop whatever runs in every runtime (the daemon is going away); the first report's
    /// error, if any.
    pub fn shutdown(&self) -> Option<StopError> {
        let mut g = self.lock();
        let names: Vec<String> = g.runtimes.keys().cloned().collect();
        let mut first = None;
        for name in &names {
            if let Some(mut h) = g.here(name) {
                let r = self.stop_running(&mut h).err();
                first = first.or(r);
            }
        }
        self.publish(&g);
        first
    }

    /// The daemon's counts with the default runtime's transfer, disks and time left, and each
    /// other runtime's transfer.
    fn publish(&self, g: &Shared) {
        let mut c = g.counts.clone();
        let st = g.default_runtime();
        (c.transfer, c.target) = st.transfer();
        c.scans = g.runtimes.values().map(|r| r.session.recorded.len() as u64).sum();
        let set = space::look(&st.disks);
        let rate = st.fill_rate();
        c.time_left_s = rate.map(|r| space::time_left_s(&set, r));
        c.fill_rate_bps = rate.map(|r| r.bps);
        c.fill_rate_measured = rate.is_some_and(|r| r.measured);
        c.disks = set.disks;
        c.runtimes = g
            .runtimes
            .iter()
            .filter(|(n, _)| *n != DEFAULT_RUNTIME)
            .map(|(name, r)| {
                let (transfer, target) = r.transfer();
                RuntimeStatus {
                    name: name.clone(),
                    transfer,
                    target,
                }
            })
            .collect();
        self.serve_pub.publish(Status::Serve(c));
    }

    /// Publish the counts again with a fresh look at the disks' space (the metrics' time left
    /// stays current between statements): for a timer of the caller's, every few seconds.
    pub fn refresh(&self) {
        let g = self.lock();
        self.publish(&g);
    }

    /// [`Daemon::reap`] every runtime.
    fn reap_all(&self, g: &mut Shared) {
        let names: Vec<String> = g.runtimes.keys().cloned().collect();
        for name in &names {
            if let Some(mut h) = g.here(name) {
                self.reap(&mut h);
            }
        }
    }

    /// A transfer that ended by itself is collected: a failure goes to the error queue (bit
    /// 0x2 of `status?`, `error?`); a finished `disk2file` just ends.
    fn reap(&self, st: &mut Here<'_>) {
        let ended = match &st.running {
            Running::None => false,
            Running::Recording(r) => r.has_ended(),
            Running::Relay(r) => r.has_ended(),
            Running::Fill(f) => f.has_ended(),
            Running::Disk2File(j) => j.has_ended(),
        };
        if !ended {
            return;
        }
        let kind = match (st.running.kind().map_or("transfer", Kind::name), st.runtime) {
            (k, DEFAULT_RUNTIME) => k.to_string(),
            (k, rt) => format!("{k} (runtime {rt})"),
        };
        let quiet = matches!(st.running, Running::Disk2File(_));
        match self.stop_running(st) {
            Ok(()) if quiet => {}
            Ok(()) => st.errors.push(-1, format!("{kind} ended by itself"), unix_seconds()),
            Err(e) => st.errors.push(-1, format!("{kind} failed: {e}"), unix_seconds()),
        }
    }

    /// Refuse a setting while a transfer runs.
    fn idle(st: &State) -> Result<(), Answer> {
        match st.running.kind() {
            None => Ok(()),
            Some(k) => Err(refuse(
                ReturnCode::Conflict,
                format!("not whilst {} is in progress", k.name()),
            )),
        }
    }

    fn stop_running(&self, st: &mut Here<'_>) -> Result<(), StopError> {
        match std::mem::replace(&mut st.running, Running::None) {
            Running::None => Ok(()),
            Running::Recording(r) => {
                let name = r.name.clone();
                let report = r.stop()?;
                // A disk that left the set mid-scan is said where the FS looks (status? bit
                // 0x2, error?), and leaves the disk set until the FS sets it again.
                let now = unix_seconds();
                for d in report.recording.iter().flat_map(|x| &x.disks).filter(|d| d.dropped) {
                    let why = d.error.clone().unwrap_or_default();
                    st.errors.push(
                        1006,
                        format!(
                            "disk {} dropped from the recording and the disk set (set_disks takes it back): {why}",
                            d.path
                        ),
                        now,
                    );
                    st.disks.retain(|p| p.display().to_string() != d.path);
                }
                // Frames the daemon took but no disk holds are loss `scan_check?` reports too:
                // lost at the scan's end (its last disk gone) they leave no gap to see.
                if report.frames_not_written > 0 {
                    let frame = report.stations.first().map_or(0, |s| s.frame_len as u64);
                    // Said where the FS looks too (status? bit 0x2, error?), after the disks
                    // that caused it: `record = off` answers 0 whatever the scan kept.
                    st.errors.push(
                        -1,
                        format!(
                            "record {name}: {} frames reached the recorder but no disk (evlbi? counts them lost)",
                            report.frames_not_written
                        ),
                        now,
                    );
                    st.session.not_written.retain(|(n, _)| *n != name);
                    st.session.not_written.push((name, report.frames_not_written * frame));
                }
                Ok(())
            }
            Running::Relay(r) => Ok(r.stop().map(|_| ())?),
            Running::Fill(f) => Ok(f.stop()?),
            Running::Disk2File(j) => {
                st.session.last_dest = Some(j.dest.clone());
                Ok(j.finish().map(|_| ())?)
            }
        }
    }

    /// Answer one request: an arm per keyword, each a line or two; the work is in the methods
    /// they call.
    fn handle(&self, st: &mut Here<'_>, r: Request) -> Answer {
        macro_rules! set {
            ($setting:expr, $query:expr, |$v:ident| $apply:expr) => {
                match $setting {
                    Setting::Query => ok($query),
                    Setting::Set($v) => match Self::idle(st) {
                        Err(a) => a,
                        Ok(()) => {
                            $apply;
                            ok(vec![])
                        }
                    },
                }
            };
        }
        let s = &mut st.settings;
        match r {
            Request::Version => ok(vec!["evlbi".into(), self.version.clone(), "vsi-s".into()]),
            Request::Status => ok(self.status_word(st)),
            Request::Mode(m) => {
                let q = s.mode.as_ref().map_or_else(
                    || vec!["none".into(), "<unknown>".into(), "0".into(), "0.000".into()],
                    |m| m.query_fields(),
                );
                set!(m, q, |v| st.settings.mode = v)
            }
            Request::Threads(t) => set!(t, vec![s.threads_field()], |v| st.settings.threads = Some(v)),
            Request::NetProtocol(p) => set!(p, s.protocol_fields(), |v| st.settings.apply_protocol(&v)),
            Request::NetPort(Setting::Query) => ok(s.port_fields()),
            Request::NetPort(Setting::Set(v)) => match Self::idle(st).map(|()| st.settings.set_ports(v)) {
                Err(a) => a,
                Ok(Ok(())) => ok(vec![]),
                Ok(Err(e)) => refuse(ReturnCode::BadParameter, e.to_string()),
            },
            Request::Mtu(m) => set!(m, vec![s.mtu.to_string()], |v| st.settings.mtu = v),
            // jive5ab takes a new ipd at any time; here it applies to the next net2net.
            Request::Ipd(Setting::Query) => ok(vec![s.ipd_field()]),
            Request::Ipd(Setting::Set(v)) => {
                s.ipd_ns = v;
                ok(vec![])
            }
            // As jive5ab, at any time; here it applies to the next net2net.
            Request::Ack(Setting::Query) => ok(vec![s.ack.to_string()]),
            Request::Ack(Setting::Set(v)) => {
                s.ack = v;
                ok(vec![])
            }
            // evlbi's; applies to the next net2net.
            Request::ArqLatency(Setting::Query) => ok(vec![s.arq_latency_ms.to_string()]),
            Request::ArqLatency(Setting::Set(v)) => {
                s.arq_latency_ms = v;
                ok(vec![])
            }
            Request::RecordFormat(f) => {
                set!(f, vec![s.record_format.name().into()], |v| st.settings.record_format =
                    v)
            }
            Request::SetDisks(d) => self.set_disks(st, d),
            Request::Record(r) => self.record(st, r),
            Request::Net2File(n) => self.net2file(st, n),
            Request::Net2Net(n) => self.net2net(st, n),
            Request::Net2Sfxc(n) => self.net2sfxc(st, n),
            // jive5ab's channel dropping: only 0 (none) parses.
            Request::Trackmask(Setting::Query) => ok(vec!["0x0000000000000000".into()]),
            Request::Trackmask(Setting::Set(_)) => ok(vec![]),
            Request::Fill2Net(f) => self.fill2net(st, f),
            Request::Evlbi(fmt) => {
                let stats = st.evlbi_stats();
                let fmt = fmt.as_deref().unwrap_or(vsis::evlbi::DEFAULT_FORMAT);
                let text = vsis::evlbi::format(&stats, fmt, unix_now());
                ok(text.split(" : ").map(str::to_string).collect())
            }
            Request::Tstat(query) => self.tstat(st, query),
            Request::DtsId => ok(self.dts_id(st)),
            Request::OsRev => station::os_rev(),
            Request::Error => ok(errors::error_fields(st.errors.pop().as_ref())),
            Request::Rtime => self.rtime(st),
            Request::DataStream(d) => self.datastream(st, d),
            Request::ScanSet(s) => self.scan_set(st, s),
            Request::ScanCheck(a) => self.scan_check(st, a),
            Request::DataCheck => self.data_check(st),
            Request::Disk2File(d) => self.disk2file(st, d),
            Request::Reset(what) => self.reset(st, &what),
            // Taken by `execute_in` before a runtime is chosen.
            Request::Runtime(_) => refuse(ReturnCode::Failed, "runtime: not here"),
        }
    }

    /// Stop the running transfer if it is of `kind`.
    fn stop(&self, st: &mut Here<'_>, kind: Kind) -> Answer {
        if st.running.kind() != Some(kind) {
            return refuse(ReturnCode::Conflict, format!("Not doing {}", kind.name()));
        }
        match self.stop_running(st) {
            Ok(()) => ok(vec![]),
            Err(e) => refuse(ReturnCode::Failed, e.to_string()),
        }
    }

    fn net2net(&self, st: &mut Here<'_>, n: Net2Net) -> Answer {
        match n {
            Net2Net::Query => match &st.running {
                Running::Relay(r @ Relay::Connected { .. }) => ok(vec!["connected".into(), r.to().to_string()]),
                Running::Relay(r) => ok(vec![
                    "active".into(),
                    r.to().to_string(),
                    st.bytes(Kind::Net2Net).1.to_string(),
                ]),
                _ => ok(vec!["inactive".into()]),
            },
            Net2Net::Connect { host, port, input } => {
                if let Err(a) = Self::idle(st) {
                    return a;
                }
                match sessions::connect_relay(&host, port, input, &st.settings, &self.env) {
                    Ok(r) => {
                        st.running = Running::Relay(r);
                        ok(vec![])
                    }
                    Err(e) => refuse_start(&e),
                }
            }
            Net2Net::On => match std::mem::replace(&mut st.running, Running::None) {
                Running::Relay(r) => match r.start(st.outlets.relay.clone()) {
                    Ok(r) => {
                        st.running = Running::Relay(r);
                        st.last = Some(Kind::Net2Net);
                        st.tstat = None;
                        ok(vec![])
                    }
                    Err(e) => refuse_start(&e),
                },
                other => {
                    st.running = other;
                    refuse(ReturnCode::Conflict, "not connected, send net2net = connect first")
                }
            },
            Net2Net::Off => self.stop(st, Kind::Net2Net),
        }
    }

    fn fill2net(&self, st: &mut Here<'_>, f: Fill2Net) -> Answer {
        match f {
            Fill2Net::Query => match &st.running {
                Running::Fill(f @ Fill::Connected { .. }) => ok(vec!["connected".into(), f.to().to_string()]),
                Running::Fill(f) => ok(vec![
                    "active".into(),
                    f.to().to_string(),
                    st.counts(Kind::Fill2Net).map_or(0, |c| c.3).to_string(),
                ]),
                _ => ok(vec!["inactive".into()]),
            },
            Fill2Net::Connect { host, port, station } => {
                if let Err(a) = Self::idle(st) {
                    return a;
                }
                match sessions::connect_fill(&host, port, station, &st.settings) {
                    Ok(f) => {
                        st.running = Running::Fill(f);
                        ok(vec![])
                    }
                    Err(e) => refuse_start(&e),
                }
            }
            Fill2Net::On => match std::mem::replace(&mut st.running, Running::None) {
                Running::Fill(f) => match f.start(&st.settings, st.outlets.fill.clone()) {
                    Ok(f) => {
                        st.running = Running::Fill(f);
                        st.tstat = None;
                        ok(vec![])
                    }
                    Err(e) => refuse_start(&e),
                },
                other => {
                    st.running = other;
                    refuse(ReturnCode::Conflict, "not connected, send fill2net = connect first")
                }
            },
            Fill2Net::Off => self.stop(st, Kind::Fill2Net),
        }
    }

    /// jive5ab's `tstat?` (rates since the previous `tstat?`; the first answers 1, "Retry")
    /// and `tstat =` (the counters with a timestamp).
    fn tstat(&self, st: &mut Here<'_>, query: bool) -> Answer {
        let Some(kind) = st.running.kind() else {
            return ok(vec!["0.0".into(), "no_transfer".into()]);
        };
        let (_, t, bytes_in, bytes_out) = st.counts(kind).unwrap_or_default();
        let out_name = match kind {
            Kind::Net2Net | Kind::Fill2Net => "NetWriter",
            Kind::Record | Kind::Net2File | Kind::Disk2File => "FileWriter",
            Kind::Net2Sfxc => "SFXCWrite",
        };
        if !query {
            let now = unix_now();
            return ok(vec![
                format!("{:.3}", now.secs as f64 + f64::from(now.micros) / 1e6),
                kind.name().into(),
                "NetReader".into(),
                bytes_in.to_string(),
                out_name.into(),
                bytes_out.to_string(),
            ]);
        }
        let previous = st.tstat.replace((kind, t, bytes_in, bytes_out));
        match previous {
            Some((k, t0, in0, out0)) if k == kind && t - t0 > 0.1 => {
                let dt = t - t0;
                let rate = |b: u64, b0: u64| sci_bps(b.saturating_sub(b0) as f64 * 8.0 / dt);
                ok(vec![
                    format!("{dt:5.2}s"),
                    kind.name().into(),
                    format!("NetReader {}", rate(bytes_in, in0)),
                    format!("{out_name} {}", rate(bytes_out, out0)),
                ])
            }
            Some((k, t0, in0, out0)) if k == kind => {
                // Too soon for a rate: keep the older look.
                st.tstat = Some((k, t0, in0, out0));
                (
                    ReturnCode::Initiated,
                    vec!["Retry - too soon".into(), kind.name().into()],
                )
            }
            _ => (
                ReturnCode::Initiated,
                vec!["Retry - we're initialized now".into(), kind.name().into()],
            ),
        }
    }

    /// `status?`: jive5ab's status word (bit 0 ready, 1 error pending, 3–4 a transfer in
    /// progress, 6 recording, 8 playback, 12 disk2file, 16 relaying) and, while errors are
    /// queued, the oldest (left for `error?` to take, as jive5ab does); then, beyond jive5ab's
    /// fields, each set disk's free space as `PATH=GB` (as `rtime?` ends).
    fn status_word(&self, st: &mut Here<'_>) -> Vec<String> {
        let mut w: u32 = 1;
        if !st.errors.is_empty() {
            w |= 1 << 1;
        }
        if let Some(k) = st.running.kind() {
            w |= 0x3 << 3;
            w |= match k {
                Kind::Record | Kind::Net2File => 1 << 6,
                Kind::Net2Net | Kind::Fill2Net | Kind::Net2Sfxc => 1 << 16,
                Kind::Disk2File => (1 << 8) | (1 << 12),
            };
        }
        let mut f = vec![format!("0x{w:08x}")];
        if let Some(e) = st.errors.peek() {
            f.extend([e.number.to_string(), e.message.clone(), errors::vex_timestamp(e.first)]);
        }
        f.extend(space::look(&st.disks).disks.iter().map(space::free_field));
        f
    }
}

/// A rate as jive5ab's `sciprint` writes it: `509.126Mbps`.
fn sci_bps(v: f64) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(s, _)| v >= *s)
        .map_or((v, ""), |(s, p)| (v / s, *p));
    format!("{}{prefix}bps", vsis::evlbi::cpp_double(scaled))
}

/// Seconds since 1970, now.
fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn unix_now() -> UnixTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    UnixTime {
        secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        micros: d.subsec_micros(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsis::statement::split_request;

    fn daemon() -> (Daemon, tempfile::TempDir) {
        daemon_on(Hub::new("serve", "0.1.0"))
    }

    /// A daemon publishing to `hub`.
    fn daemon_on(hub: Arc<Hub>) -> (Daemon, tempfile::TempDir) {
        let root = tempfile::tempdir().unwrap();
        let env = TransferEnv {
            paths: paths::StationPaths::new(&[root.path().to_path_buf()], &[]).unwrap(),
            writer: recording::write::WriterPlacement::Thread,
            interval: std::time::Duration::from_millis(100),
        };
        (Daemon::new(env, "0.1.0", hub).unwrap(), root)
    }

    fn say(d: &Daemon, line: &str) -> String {
        split_request(line.as_bytes())
            .into_iter()
            .map(|s| d.execute(&s.unwrap()).to_string())
            .collect::<Vec<_>>()
            .join("")
    }

    #[test]
    fn settings_are_set_and_reported_as_jive5ab_does() {
        let (d, root) = daemon();
        assert_eq!(say(&d, "mode?;"), "!mode? 0 : none : <unknown> : 0 : 0.000 ;");
        assert_eq!(say(&d, "mode = VDIF_8000-2048-16-2 ;"), "!mode = 0 ;");
        assert_eq!(
            say(&d, "mode?;"),
            "!mode? 0 : VDIF_8000-2048-16-2 : VDIF : 32 : 64000000.000 : 8000 ;"
        );
        assert_eq!(say(&d, "net_protocol = pudp : 32M ;"), "!net_protocol = 0 ;");
        assert_eq!(
            say(&d, "net_protocol?;"),
            "!net_protocol? 0 : pudp : 33554432 : 131072 : 8 ;"
        );
        assert_eq!(
            say(&d, "net_port = 46227 : 46228 ; net_port?;"),
            "!net_port = 0 ;!net_port? 0 : 46227 : 46228 ;"
        );
        // A port twice is refused in the session's words; a lone 0 is the default (jive5ab).
        assert_eq!(
            say(&d, "net_port = 46227 : 10.0.0.1@46228 : 46228 ; net_port?;"),
            "!net_port = 8 : net_port 46228 given twice (each port once) ;!net_port? 0 : 46227 : 46228 ;"
        );
        assert_eq!(
            say(&d, "net_port = host@46229 ;"),
            "!net_port = 8 : net_port host 'host' is not an IP address ;"
        );
        assert_eq!(
            say(&d, "net_port = 0 ; net_port?;"),
            "!net_port = 0 ;!net_port? 0 : 2630 ;"
        );
        assert_eq!(say(&d, "net_port = 46227 : 46228 ;"), "!net_port = 0 ;");
        assert_eq!(say(&d, "mtu=9000;mtu?;"), "!mtu = 0 ;!mtu? 0 : 9000 ;");
        assert_eq!(say(&d, "ipd = 10 ; ipd? ;"), "!ipd = 0 ;!ipd? 0 : 10 ;");
        assert_eq!(say(&d, "record?;"), "!record? 0 : off ;");
        assert_eq!(say(&d, "record = off ;"), "!record = 6 : Not doing record ;");
        assert_eq!(say(&d, "record? mk6 ;"), "!record? 0 : 0 ;");
        // jive5ab's word, then the set disk (the root here) and its free space.
        let status = say(&d, "status?;");
        let disk = format!("!status? 0 : 0x00000001 : {}=", root.path().display());
        assert!(status.starts_with(&disk) && status.ends_with("GB ;"), "{status}");
        assert_eq!(say(&d, "tstat?;"), "!tstat? 0 : 0.0 : no_transfer ;");
        assert_eq!(
            say(&d, "evlbi?;"),
            "!evlbi? 0 : total : 0 : loss : 0 ( 0.00%) : out-of-order : 0 ( 0.00%) : extent : 0seqnr/pkt ;"
        );
        assert_eq!(say(&d, "evlbi = %t : %l ;"), "!evlbi = 0 : 0 : 0 ;");
        assert_eq!(say(&d, "foo?;"), "!foo? 7 : ENOSYS - not implemented ;");
        assert_eq!(
            say(&d, "net2net = on ;"),
            "!net2net = 6 : not connected, send net2net = connect first ;"
        );
        // vbs and Mark6 are chosen like jive5ab's; a scan name that cannot name files is refused.
        assert_eq!(
            say(&d, "record = mk6 : 1 ; record? mk6 ;"),
            "!record = 0 ;!record? 0 : 1 ;"
        );
        assert!(say(&d, "record = on : s.1 ;").starts_with("!record = 8 : scan name \"s.1\""));
        assert_eq!(
            say(&d, "record_format = vdif ; record_format? ;"),
            "!record_format = 0 ;!record_format? 0 : vdif ;"
        );
        // What the Field System asks at the start of an experiment and sets in a setup.
        assert!(say(&d, "dts_id?;").starts_with("!dts_id? 0 : - : evlbi 0.1.0 : 1 : "));
        assert!(say(&d, "os_rev?;").starts_with("!os_rev? 0 : Linux version"));
        assert_eq!(say(&d, "error?;"), "!error? 0 :  :  :  :  :  ;");
        assert_eq!(
            say(&d, "record = nthread : : 2 ; record? nthread ;"),
            "!record = 0 ;!record? 0 : 1 : 2 ;"
        );
        assert_eq!(
            say(
                &d,
                "datastream=clear;datastream=add:ds{thread}:*;datastream=reset;datastream?;"
            ),
            "!datastream = 0 ;!datastream = 0 ;!datastream = 0 ;!datastream? 0 : 1 : ds{thread} ;"
        );
        assert_eq!(
            say(&d, "datastream = add : ds{thread} : * ;"),
            "!datastream = 4 : The data stream 'ds{thread}' already has a definition ;"
        );
        assert_eq!(say(&d, "scan_set? ;"), "!scan_set? 0 : -1 :  : 0 : 0 ;");
        assert_eq!(say(&d, "scan_check? ;"), "!scan_check? 8 : no scan name given ;");
        assert_eq!(
            say(&d, "scan_set = : -1000000 ;"),
            "!scan_set = 6 : there are no scans recorded in this session ;"
        );
        assert_eq!(say(&d, "disk2file? ;"), "!disk2file? 0 : inactive ;");
        assert_eq!(say(&d, "reset = abort ;"), "!reset = 6 : nothing running to abort ;");
        assert!(
            say(&d, "rtime? ;").starts_with("!rtime? 0 : "),
            "{}",
            say(&d, "rtime? ;")
        );
    }

    /// Issue 37 (3): each disk's free space in `rtime?` after jive5ab's fields, and in the
    /// published status with the time left at the mode's rate — two directories on one file
    /// system counted once.
    #[test]
    fn rtime_and_the_status_say_each_disks_space_and_the_time_left() {
        let hub = Hub::new("serve", "0.1.0");
        let (d, root) = daemon_on(hub.clone());
        for n in ["d0", "d1"] {
            std::fs::create_dir(root.path().join(n)).unwrap();
        }
        assert_eq!(say(&d, "mode = VDIF_8000-2048-16-2 ;"), "!mode = 0 ;");
        assert_eq!(say(&d, "set_disks = d0 : d1 ;"), "!set_disks = 0 : 2 ;");
        let reply = say(&d, "rtime? ;");
        let fields: Vec<&str> = reply.trim_end_matches(" ;").split(" : ").collect();
        assert_eq!(fields.len(), 1 + 7 + 2, "{reply}");
        for (f, n) in fields[8..].iter().zip(["d0", "d1"]) {
            assert!(f.contains(n) && f.ends_with("GB"), "{reply}");
        }
        let free = safedir::Dir::open(root.path()).unwrap().space().unwrap().free as f64;
        let rate = 2048e6 * 8032.0 / 8000.0;
        let said: f64 = fields[1].trim_end_matches('s').parse().unwrap();
        // Free space changes as other processes write: within 1 %.
        assert!(
            (said - free * 8.0 / rate).abs() <= 0.01 * said,
            "{said} s for {free} bytes: {reply}"
        );
        let serve = hub
            .snapshot()
            .into_iter()
            .find_map(|(_, st)| match &*st {
                Status::Serve(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(serve.disks.len(), 2, "{serve:?}");
        assert!(serve
            .disks
            .iter()
            .all(|x| x.total_bytes > 0 && x.free_bytes <= x.total_bytes));
        let left = serve.time_left_s.unwrap();
        assert!(
            (left - free * 8.0 / rate).abs() <= 0.01 * left,
            "one file system, counted once: {left} s"
        );
    }

    #[test]
    fn rates_print_as_sciprint_does() {
        assert_eq!(sci_bps(509_126_000.0), "509.126Mbps");
        assert_eq!(sci_bps(83_570_800.0), "83.5708Mbps");
        assert_eq!(sci_bps(0.0), "0bps");
        assert_eq!(sci_bps(4.096e9), "4.096Gbps");
    }
}
