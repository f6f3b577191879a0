//! `evlbi stream relay` over real sockets: the sans-IO [`stream::relay::Relay`] on the relay's
//! thread, its input sockets read by a receive thread apart ([`inputs`]: recvmmsg straight into
//! pooled buffers handed over whole, frames queued and sent from there, never copied; one GSO
//! sendmsg gathers prefix and frame per datagram), the tee through
//! [`Recorder`](recording::write::Recorder).

mod config;
mod inputs;
mod tally;

pub use config::{RelayRunConfig, MAX_ARQ_LATENCY};
pub use tally::RelayLiveLine;
use tally::{relay_status, Baseline, RelayEnd, Tally};

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netio::io_err;
use stream::relay::Relay;
use stream::results::RelayReport;

use crate::live::difx::{DifxConnector, DifxWatch};
use crate::live::{LiveOutput, StartRule};
use crate::socket::{bind_inputs, first_seq, new_session, Wire};
use crate::{Observer, StreamSessionError};
use recording::write::{OutputDir, Recorder};
use stream::results::RelayStatus;

/// Longest the relay thread spends sending before it takes the input again, so a backlog
/// leaving at the catch-up rate never leaves the input sockets unread for long.
const SEND_SLICE: Duration = Duration::from_micros(500);

/// Bound sockets, before relaying: lets a caller print the ports (`--listen 127.0.0.1:0`).
pub struct BoundRelay {
    cfg: RelayRunConfig,
    inputs: Vec<UdpSocket>,
    grants: Vec<netio::BufferGrant>,
    wire: Output,
    tee: Recorder,
    observer: Option<Observer<RelayStatus>>,
    notice: Option<Observer<String>>,
    progress: Option<Observer<String>>,
}

/// Where the relay's frames go: datagrams, or a TCP connection to a DiFX datastream.
enum Output {
    Udp(Wire),
    Tcp(LiveOutput, DifxWatch),
}

impl Output {
    /// Send a transmit: its datagrams, or (TCP) each datagram's frame, framing left out.
    fn send(&mut self, t: &stream::Transmit<'_>) -> Result<(), StreamSessionError> {
        match self {
            Output::Udp(w) => w.send(t),
            Output::Tcp(o, _) => {
                for (head, frame) in t.parts() {
                    let frame = if frame.is_empty() { head } else { frame };
                    // An invalid frame goes as its header with the fill pattern as data.
                    let invalid = frame.get(3).is_some_and(|b| b & 0x80 != 0);
                    o.frame(frame, invalid);
                }
                o.flush();
                Ok(())
            }
        }
    }

    /// Datagrams coming back (UDP only).
    fn read_returns(&mut self, f: impl FnMut(&[u8])) {
        if let Output::Udp(w) = self {
            w.read_returns(f);
        }
    }

    fn would_block(&self) -> u64 {
        match self {
            Output::Udp(w) => w.would_block(),
            Output::Tcp(..) => 0,
        }
    }
}

impl BoundRelay {
    /// Bind every input (buffers sized first, so nothing that comes is refused) and the
    /// output, then set the tee up.
    pub fn bind(cfg: RelayRunConfig) -> Result<BoundRelay, StreamSessionError> {
        let cfg = cfg.validate()?;
        let (inputs, grants, _) = bind_inputs(&cfg.listen, cfg.rcvbuf)?;
        let wire = if cfg.tcp {
            let (connector, watch) = DifxConnector::new(cfg.to, cfg.connect_wait);
            // A received frame first, at a time step (DiFX must not start on an invalid one).
            let rule = StartRule { valid_only: true };
            let out = LiveOutput::start(Box::new(connector), None, cfg.live_buffer, rule)
                .map_err(|e| io_err("start the TCP output's writer thread")(e))?;
            Output::Tcp(out, watch)
        } else {
            Output::Udp(Wire::open(cfg.to, cfg.sndbuf)?)
        };
        let tee = Recorder::new(
            cfg.tee.clone().map(OutputDir::Path).as_ref(),
            cfg.tee_recording.as_ref(),
            cfg.chunk,
            &cfg.writer,
            cfg.write_buffer,
            false,
            cfg.split_threads,
        )
        .map_err(io_err("set up the tee's recording and its writer"))?;
        Ok(BoundRelay {
            cfg,
            inputs,
            grants,
            wire,
            tee,
            observer: None,
            notice: None,
            progress: None,
        })
    }

    /// Hand `observer` the counts so far at every live interval.
    pub fn observe(mut self, observer: Observer<RelayStatus>) -> BoundRelay {
        self.observer = Some(observer);
        self
    }

    /// Hand `notice` each sentence the operator must read when it happens (a stream refused for
    /// a missing `--fps`), once each.
    pub fn on_notice(mut self, notice: Observer<String>) -> BoundRelay {
        self.notice = Some(notice);
        self
    }

    /// Hand `progress` each line the operator should see while the relay goes on that is no
    /// error, with its lead word: `waiting: ` (a DiFX job's port not open yet: an error only
    /// when the relay gives up at its end), `warning: ` (a given `--fps` the frames showed wrong,
    /// corrected).
    pub fn on_progress(mut self, progress: Observer<String>) -> BoundRelay {
        self.progress = Some(progress);
        self
    }

    /// The input addresses actually bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inputs.iter().filter_map(|s| s.local_addr().ok()).collect()
    }

    /// What the kernel granted for each input's receive buffer.
    pub fn grants(&self) -> &[netio::BufferGrant] {
        &self.grants
    }

    /// Relay until stopped (`stop`, duration, idle timeout); `live` gets one line per interval.
    pub fn run(
        self,
        stop: &AtomicBool,
        mut live: impl FnMut(&RelayLiveLine),
    ) -> Result<RelayReport, StreamSessionError> {
        let BoundRelay {
            cfg,
            inputs,
            grants,
            mut wire,
            mut tee,
            mut observer,
            mut notice,
            mut progress,
        } = self;
        let base = Baseline::now();
        let started = base.started;
        // Sleeps that end on time: departures are due every few microseconds.
        let _ = netio::pacer::fine_timer_slack();
        // Spin for departures only when every frame must leave at its own time.
        let spin = if cfg.relay.burst <= 1 { SPIN } else { Duration::ZERO };
        let mut rcfg = cfg.relay.clone();
        rcfg.start = started;
        rcfg.session = new_session();
        rcfg.first_seq = first_seq(rcfg.output);
        let mut relay = Relay::new(rcfg);
        let mut readers =
            inputs::Inputs::new(inputs, cfg.relay.buffer_bytes).map_err(io_err("start the relay's receive thread"))?;
        let mut t = Marks {
            first: None,
            last_in: started,
            next_ctl: started,
            next_live: started + cfg.interval,
        };
        let mut tally = Tally::default();
        let stopped_by = loop {
            if stop.load(Ordering::Relaxed) {
                break "signal";
            }
            let now = Instant::now();
            if let Some(why) = t.end(&cfg, started, now) {
                break why;
            }
            if !readers.any_open() {
                break "input readers ended";
            }
            wait(&relay, &mut readers, now, spin);
            readers.read(&mut relay, &mut t, &mut tally, &mut tee);
            while let Some(n) = relay.poll_notice() {
                if let Some(say) = notice.as_mut() {
                    say(n);
                }
            }
            while let Some(w) = relay.poll_warning() {
                if let Some(say) = progress.as_mut() {
                    say(format!("warning: {w}"));
                }
            }
            if let (Output::Tcp(_, watch), Some(say)) = (&wire, progress.as_mut()) {
                if let Some(n) = watch.poll_overdue() {
                    say(format!("waiting: {n}"));
                }
            }
            let now = Instant::now();
            relay.handle_timeout(now, &mut tee);
            send_due(&mut relay, &mut wire, spin, cfg.relay.smoothing)?;
            readers.send_keepalives(&mut relay);
            if now >= t.next_ctl {
                t.next_ctl = now + Duration::from_millis(1);
                wire.read_returns(|d| relay.handle_return(now, d));
            }
            if now >= t.next_live {
                let counts = (readers.drops(), readers.handover_dropped());
                let line = tally.line(now, t.first, cfg.interval, &relay, counts);
                if let Some(observe) = observer.as_mut() {
                    observe(relay_status(&line, &relay, counts));
                }
                live(&line);
                t.next_live += cfg.interval;
            }
        };
        // The inputs are not read any more; what was taken (the hand-over's too) still leaves.
        readers.stop(&mut relay, &mut t, &mut tally, &mut tee);
        let answer_for = cfg.relay.arq_latency.filter(|_| stopped_by != "signal");
        drain(
            &mut relay,
            &mut wire,
            &mut tee,
            (spin, cfg.relay.smoothing),
            stop,
            answer_for,
        )?;
        relay.finish();
        let send_would_block = wire.would_block();
        let (live_out, live_out_error) = match wire {
            // What is queued for the correlator still goes (a second at most).
            Output::Tcp(o, watch) => (Some(o.finish(Duration::from_secs(1))), watch.last_error()),
            Output::Udp(_) => (None, None),
        };
        let socket_drops = readers.drops();
        let handover_dropped = readers.handover_dropped();
        let (readers, reader_error) = readers.finish();
        let end = RelayEnd {
            handover_dropped,
            base,
            marks: t,
            readers,
            socket_drops,
            grants,
            reader_error,
            stopped_by,
        };
        let mut report = end.report(&cfg, &relay, send_would_block, tee.finish());
        (report.live_out, report.live_out_error) = (live_out, live_out_error);
        Ok(report)
    }
}

/// After the loop: what is queued still goes out (paced, for a second at most) — stopped or not:
/// those frames were taken from the station and tee'd, and `net2net = off` or a Ctrl-C at a
/// scan's end must not drop them (jive5ab's net2net loses its buffer at a stop) — and with
/// `answer_for` the last frames' NAKs are answered for that long (one latency window), unless
/// stopped.
fn drain(
    relay: &mut Relay,
    wire: &mut Output,
    tee: &mut Recorder,
    (spin, smoothing): (Duration, Duration),
    stop: &AtomicBool,
    answer_for: Option<Duration>,
) -> Result<(), StreamSessionError> {
    let until = Instant::now() + Duration::from_secs(1);
    while relay.has_queued() && Instant::now() < until {
        let now = Instant::now();
        relay.handle_timeout(now + stream::relay::LEARN_FOR, tee);
        send_due(relay, wire, spin, smoothing)?;
        std::thread::sleep(Duration::from_micros(50));
    }
    if let Some(latency) = answer_for {
        let until = Instant::now() + latency;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            wire.read_returns(|d| relay.handle_return(now, d));
            send_due(relay, wire, spin, smoothing)?;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

/// How close to a departure the loop stops sleeping and spins (a sleep on a busy host ends tens
/// of microseconds late, and a late departure at every frame would add up to a backlog).
const SPIN: Duration = Duration::from_micros(100);

/// In a backlog (a frame waited longer than `--smoothing`: its station is catching up), the
/// next catch-up batch is waited for by spinning when it is due within this: a sleep on a
/// loaded host ends later than a batch's catch-up span, the catch-up rule gives a late batch at
/// most one batch of credit, and a backlog woken up for each batch may never drain (issue 30:
/// at 8.192 Gb/s on one port a relay that slept between catch-up batches fell 0.2 s behind and
/// dropped 1256 frames; one that spun whenever 2 batches waited was lossless but spent twice
/// the CPU at 4 Gb/s, where 2–3 batches wait in the steady state).
const BACKLOG_SPIN: Duration = Duration::from_micros(200);

/// Send everything due now (the clock read again after each send, so a backlog drains in one
/// pass at the catch-up spacing rather than one frame per loop), for [`SEND_SLICE`] at most;
/// frames due within `spin` (within [`BACKLOG_SPIN`] in a backlog) are waited for here,
/// spinning.
fn send_due(
    relay: &mut Relay,
    wire: &mut Output,
    spin: Duration,
    smoothing: Duration,
) -> Result<(), StreamSessionError> {
    let began = Instant::now();
    let backlog = relay.longest_wait(began) > smoothing;
    let spin = if backlog { spin.max(BACKLOG_SPIN) } else { spin };
    for _ in 0..4096 {
        let now = Instant::now();
        if now - began > SEND_SLICE {
            break;
        }
        let Some(tx) = relay.poll_transmit(now).map_err(StreamSessionError::Schedule)? else {
            break;
        };
        wire.send(&tx)?;
        // Stamped with the time it was framed for: the relay's pacing counts from when a batch
        // was due, not from when the send call returned.
        relay.on_transmitted(now);
        // The next frame is due within the spin window: wait for it here.
        if let Some(next) = relay.poll_timeout() {
            if next > Instant::now() + spin {
                break;
            }
            while Instant::now() < next {
                std::hint::spin_loop();
            }
        }
    }
    Ok(())
}

/// Wait for what comes first: input, or the next departure (a whole batch, see `--burst`),
/// 1 ms at most. While frames wait to leave, the relay sleeps to their departure without
/// waking for input (the receive thread reads it meanwhile; it waits in the hand-over and is
/// taken then): a wake-up per input batch
/// and another per departure cost more than the frames (issue 30). Departures within `spin`
/// are waited for by the sender, spinning.
fn wait(relay: &Relay, inputs: &mut inputs::Inputs, now: Instant, spin: Duration) {
    let cap = now + Duration::from_millis(1);
    match relay.poll_timeout() {
        Some(due) if due <= now + spin => {}
        Some(due) if relay.has_queued() => {
            let until = due.min(cap);
            if until > now {
                std::thread::sleep(until - now);
            }
        }
        due => inputs.wait(due.unwrap_or(cap).min(cap)),
    }
}

/// Why an input stopped being read: its socket failed.
#[derive(Debug, thiserror::Error)]
#[error("input {input}: receive: {source}")]
pub struct ReaderError {
    /// The input's index (the order of `--listen`).
    pub input: u16,
    /// The socket's error.
    pub source: std::io::Error,
}

/// The relay loop's clock marks.
struct Marks {
    first: Option<Instant>,
    last_in: Instant,
    next_ctl: Instant,
    next_live: Instant,
}

impl Marks {
    /// Why the run ends now, if it does: its duration is up, or nothing came for the idle
    /// timeout — before the first datagram, for the first-datagram timeout from the start
    /// (`last_in` starts there): a relay started before its backend waits for it (issue 37),
    /// one that never hears its backend still stops if asked to (issue 29).
    fn end(&self, cfg: &RelayRunConfig, started: Instant, now: Instant) -> Option<&'static str> {
        if cfg.duration.is_some_and(|d| now - started >= d) {
            return Some("duration");
        }
        let idle = now.saturating_duration_since(self.last_in);
        let limit = match self.first {
            Some(_) => cfg.idle_timeout,
            None => cfg.first_datagram_timeout,
        };
        limit.is_some_and(|d| idle >= d).then_some("idle timeout")
    }
}
