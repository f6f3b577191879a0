//! The receiver loop: socket → [`stream::Receiver`] → [`Recorder`] (VDIF files, or a vbs/Mark6
//! scan over many disks), NAKs back, live lines out.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod config;
mod sink;
mod tally;

pub use config::RecvConfig;
use sink::Sink;
pub use tally::LiveLine;
use tally::{status, LiveTally, RunEnd};

use netio::counters::{read_process_cpu, socket_drops};
use stream::Receiver;

use crate::report::RecvReport;
use crate::socket::bind_inputs;
use crate::{Observer, StreamSessionError};
use netio::io_err;
use recording::write::Recorder;
use stream::results::RecvStatus;

/// Bound socket, before receiving: lets a caller print the port (e.g. `--listen 127.0.0.1:0`).
pub struct BoundReceiver {
    cfg: RecvConfig,
    socks: Vec<std::net::UdpSocket>,
    grants: Vec<netio::BufferGrant>,
    sink: Sink,
    /// Each datagram carries the socket's drop count (SO_RXQ_OVFL).
    drop_count: bool,
    observer: Option<Observer<RecvStatus>>,
    notice: Option<Observer<String>>,
}

impl BoundReceiver {
    /// Bind the socket, then set up the output (directory, writer processes) — in that order
    /// unless [`RecvConfig::output_before_bind`]: a sender started at once would meanwhile hit a
    /// closed port (every datagram lost, silently). Bound first, the kernel queues them in the
    /// receive buffer (sized before the bind) and counts any overflow as this socket's drops.
    /// Return only when ready to receive, so the caller's "listening" line means ready.
    pub fn bind(cfg: RecvConfig) -> Result<BoundReceiver, StreamSessionError> {
        let cfg = cfg.validate()?;
        let early = if cfg.output_before_bind {
            let sink = Self::output(&cfg)?;
            // Nothing queues yet: the receive path will never fault its buffers in — unless
            // allocating takes longer than the idle timeout (2 s without one), which the
            // receiver never waits for its own set-up.
            let limit = cfg.idle_timeout.unwrap_or(Duration::from_secs(2));
            sink.wait_populated(Instant::now() + limit);
            Some(sink)
        } else {
            None
        };
        let (socks, grants, drop_count) = bind_inputs(&cfg.listen, cfg.rcvbuf)?;
        // Frames are judged by when they came: a live window of 2 ms, and a source not accepted
        // yet by the rate its frames arrive at (a genuine board read in one burst after the loop
        // was held off its core 50 ms was refused as 20 frames/s). A loop held off its core for
        // 10-50 ms reads them late (see `arrival`). Without the stamps (never on Linux) the read
        // time stands in.
        for sock in &socks {
            let _ = netio::batch::enable_rx_timestamps(sock);
        }
        // Several sockets are read in turn: none may block the others.
        if socks.len() > 1 {
            for sock in &socks {
                sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
            }
        }
        let sink = match early {
            Some(sink) => sink,
            None => Self::output(&cfg)?,
        };
        Ok(BoundReceiver {
            cfg,
            socks,
            grants,
            sink,
            drop_count,
            observer: None,
            notice: None,
        })
    }

    /// The output `cfg` asks for, its writers started.
    fn output(cfg: &RecvConfig) -> Result<Sink, StreamSessionError> {
        if let Some(live) = &cfg.live {
            return Ok(Sink::Live(live.start()?.with_frame_format(cfg.receiver.frame_format)));
        }
        let sink = Recorder::new(
            cfg.out_dir.as_ref(),
            cfg.recording.as_ref(),
            cfg.chunk,
            &cfg.writer,
            cfg.write_buffer,
            cfg.direct_io,
            cfg.split_threads,
        )
        .map_err(io_err("set up the output directory (or disks) and its writers"))?;
        Ok(Sink::Rec(match (sink, &cfg.out_file) {
            (Recorder::Files(f), Some((name, mode))) => Recorder::Files(f.into_one_file(name, *mode)),
            (s, _) => s,
        }))
    }

    /// Hand `observer` the counts so far at every live interval.
    pub fn observe(mut self, observer: Observer<RecvStatus>) -> BoundReceiver {
        self.observer = Some(observer);
        self
    }

    /// Hand `notice` each sentence the operator must read when it happens (a stream refused for
    /// a missing `--fps`), once each.
    pub fn on_notice(mut self, notice: Observer<String>) -> BoundReceiver {
        self.notice = Some(notice);
        self
    }

    /// The addresses actually bound, in `--listen` order.
    pub fn local_addrs(&self) -> Result<Vec<SocketAddr>, StreamSessionError> {
        let addrs: Result<Vec<_>, _> = self.socks.iter().map(|s| s.local_addr()).collect();
        Ok(addrs.map_err(io_err("read local address"))?)
    }

    /// What the kernel granted for each receive buffer (with warnings when capped).
    pub fn grants(&self) -> &[netio::BufferGrant] {
        &self.grants
    }

    /// Receive until stopped (`stop`, duration, idle timeout); `live` gets one line per interval.
    pub fn run(self, stop: &AtomicBool, mut live: impl FnMut(&LiveLine)) -> Result<RecvReport, StreamSessionError> {
        let BoundReceiver {
            cfg,
            socks,
            grants,
            mut sink,
            drop_count,
            mut observer,
            mut notice,
        } = self;
        let mut rx = Receiver::new(cfg.receiver.clone());
        let udp0 = netio::read_udp_counters().unwrap_or_default();
        let cpu0 = read_process_cpu().unwrap_or_default();
        let started = Instant::now();
        let mut batch = netio::batch::RecvBatch::new(BATCH, 65_536);
        // UDP GRO: a sender using GSO (--burst) is received as one buffer per burst, split here.
        for sock in &socks {
            let _ = batch.enable_gro(sock);
        }
        let mut t = Timers {
            first: None,
            last_rx: started,
            ready_since: started,
            next_nak: started,
            next_live: started + cfg.interval,
            next_expire: started,
            nap: false,
            // One socket only: with several, a nap for one would hold the others up.
            nap_for: (socks.len() == 1 && grants.iter().all(|g| g.granted_rcv >= NAP_MIN_RCVBUF)).then_some(
                match sink {
                    Sink::Live(_) => LIVE_NAP,
                    _ => NAP,
                },
            ),
            calls: 0,
        };
        let mut naks = NakOut::default();
        let mut tally = LiveTally::default();
        let stopped_by = loop {
            if stop.load(Ordering::Relaxed) {
                break "signal";
            }
            let now = Instant::now();
            if cfg.duration.is_some_and(|d| now - started >= d) {
                break "duration";
            }
            let received = receive_any(&socks, &mut batch, &mut rx, &mut sink, &mut t, &mut tally)?;
            if let Sink::Live(live) = &mut sink {
                // A station gone quiet goes on as filled frames at its rate; what the batch
                // gave goes to the readers now. Not after a wait that found nothing while
                // datagrams are queued now: the loop was held off its core past the wait, and
                // the frames it has yet to read are not silence (filled, they came late).
                if received || !queued(&socks) {
                    rx.fill_silence(Instant::now(), live);
                }
                live.flush();
            }
            if let (Some(n), Some(say)) = (rx.poll_notice(), notice.as_mut()) {
                say(n);
            }
            // Before the first datagram the first-datagram timeout counts from the start
            // (`ready_since` starts there): a receiver started before its sender waits for it
            // (issue 37), one that never hears a sender still stops if asked to (issue 29).
            // Never while datagrams are queued for it (a loop held off its core, or a set-up
            // slower than the limit, sees them late, not never).
            let limit = match t.first {
                Some(_) => cfg.idle_timeout,
                None => cfg.first_datagram_timeout,
            };
            let idle = limit.is_some_and(|limit| now.saturating_duration_since(t.ready_since) >= limit);
            if !received && idle && !queued(&socks) {
                break "idle timeout";
            }
            let now = Instant::now();
            if cfg.receiver.arq && now >= t.next_nak {
                naks.send(&socks, &tally.routes, &mut rx, now);
                t.next_nak = now + Duration::from_millis(1);
            }
            if now >= t.next_expire {
                // Sources that never formed a run are forgotten (and counted) on time.
                rx.expire(now);
                t.next_expire = now + Duration::from_millis(100);
            }
            if now >= t.next_live {
                let dropped = drops(&socks, &batch);
                let line = tally.line(now, t.first, cfg.interval, &rx, &mut sink, dropped);
                if let Some(observe) = observer.as_mut() {
                    observe(status(&line, &rx, &sink, dropped, naks.sent));
                }
                live(&line);
                t.next_live += cfg.interval;
            }
        };
        // Drops after the last datagram: the socket's count as the loop ends (a sender still
        // sending after a duration or signal stop adds none later) less the one the last datagram
        // carried. Only with the per-datagram count (without it every drop would look late) and
        // one socket (the count a datagram carries is its own socket's).
        let dropped_after_last = match (drop_count, socks.as_slice()) {
            (true, [sock]) => socket_drops(sock).map_or(0, |d| d.saturating_sub(batch.drops_seen())),
            _ => 0,
        };
        rx.finish(&mut sink);
        rx.lost_at_end(dropped_after_last);
        let end = RunEnd {
            dropped_after_last,
            started,
            first: t.first,
            last_rx: t.last_rx,
            udp0,
            cpu0,
            naks_sent: naks.sent,
            receive_calls: t.calls,
            stopped_by: stopped_by.to_string(),
            data_age: std::mem::take(&mut tally.data_age),
            queue_peak: tally.queue_peak,
        };
        Ok(end.report(&cfg, (&socks, grants, &batch), &rx, sink))
    }
}

/// Most a kernel receive time may put a datagram's arrival before its read: a stamp older than
/// any queue holds (the wall clock stepped) is not believed beyond it.
const MAX_ARRIVAL_AGE: Duration = Duration::from_secs(2);

/// When a datagram read at `now` (`wall`: the same moment in Unix ns) arrived, by its kernel
/// receive time (SO_TIMESTAMPNS) if it has one: up to [`MAX_ARRIVAL_AGE`] before `now`, never
/// after it.
fn arrival(now: Instant, wall: u64, kernel_time: Option<u64>) -> Instant {
    let Some(k) = kernel_time else {
        return now;
    };
    let age = Duration::from_nanos(wall.saturating_sub(k)).min(MAX_ARRIVAL_AGE);
    now.checked_sub(age).unwrap_or(now)
}

/// Whether any of the sockets has datagrams queued.
fn queued(socks: &[std::net::UdpSocket]) -> bool {
    socks
        .iter()
        .any(|s| netio::counters::socket_queued_bytes(s).is_some_and(|b| b > 0))
}

/// Our socket's drops alone (host-wide RcvbufErrors count every process's): /proc/net/udp is
/// exact at any moment, the SO_RXQ_OVFL cmsg covers hosts without it.
fn drops(socks: &[std::net::UdpSocket], batch: &netio::batch::RecvBatch) -> u64 {
    let at_sockets: u64 = socks.iter().map(|s| socket_drops(s).unwrap_or(0)).sum();
    at_sockets.max(batch.drops_seen())
}

/// The receive loop's clock marks.
struct Timers {
    /// Arrival of the first batch.
    first: Option<Instant>,
    /// Arrival of the last batch (for the duration).
    last_rx: Instant,
    /// When the loop was last ready to receive again after handling a batch: idleness is "no
    /// datagram for T while we were listening", never the time a full writer queue held the
    /// loop up (the socket buffer fills meanwhile).
    ready_since: Instant,
    next_nak: Instant,
    next_live: Instant,
    next_expire: Instant,
    /// The last batch was small: pause before the next call (`nap_for`).
    nap: bool,
    /// How long a nap is ([`NAP`], [`LIVE_NAP`]); none when the receive buffer granted does not
    /// hold a nap's worth with room to spare, or several sockets are read.
    nap_for: Option<Duration>,
    /// Receive calls that returned datagrams.
    calls: u64,
}

/// Datagrams asked for per recvmmsg.
const BATCH: usize = 128;
/// Pause after a batch that came back less than half full, so the next call finds a batch's
/// worth queued: a stream of one frame per datagram otherwise wakes the loop for each datagram
/// (two system calls and a context switch per frame, most of the receiver's CPU at 4 Gb/s).
/// 64000 frames/s queue 64 in this time; the socket buffer holds it many times over. 1 ms
/// rather than 0.5: each nap is a sleep and a wake (on this 2-vCPU VM, 19 % of the receiver's
/// CPU went to switching at 2000 naps/s, bench/RESULTS.md issue 30).
const NAP: Duration = Duration::from_millis(1);
/// The nap when a correlator reads live: every frame's wait in the socket during a nap is
/// latency its reader sees (issue 35: added p99 under 5 ms; with 1 ms naps the added p50 was
/// 0.82 ms against jive5ab's 0.21), so half of [`NAP`]: batches of ~32 at 4 Gb/s.
const LIVE_NAP: Duration = Duration::from_micros(500);
/// Nap only with at least this much receive buffer granted (a nap at 8 Gb/s queues 1 MB).
const NAP_MIN_RCVBUF: usize = 4 << 20;

/// recvmmsg: up to [`BATCH`] datagrams per system call, each handed to the receiver. Whether any
/// came within 1 ms.
fn receive_batch(
    sock: &std::net::UdpSocket,
    wait: Duration,
    batch: &mut netio::batch::RecvBatch,
    rx: &mut Receiver,
    sink: &mut Sink,
    t: &mut Timers,
    tally: &mut LiveTally,
) -> Result<bool, StreamSessionError> {
    let mut got = Ok(0);
    if let (true, Some(nap)) = (t.nap, t.nap_for) {
        std::thread::sleep(nap);
        got = batch.recv_batch(sock, Some(Duration::ZERO));
    }
    if matches!(got, Ok(0)) {
        got = batch.recv_batch(sock, Some(wait));
    }
    t.nap = false;
    match got {
        Ok(0) => Ok(false),
        Ok(n) => {
            t.nap = t.nap_for.is_some() && n < BATCH / 2;
            t.calls += 1;
            let now = Instant::now();
            t.first.get_or_insert(now);
            t.last_rx = now;
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |w| w.as_nanos() as u64);
            // The data's age, sampled once per batch (one clock read, one header parse).
            if let Some(t) = batch.iter().next().and_then(|d| rx.data_time_unix_ns(d.data, wall)) {
                // Older than its own time (another host's clock ahead of ours) is recorded as 1 ns.
                tally.data_age.record(wall.saturating_sub(t).max(1));
            }
            let stalls = sink.stalled().1;
            for d in batch.iter() {
                tally.bytes += d.data.len() as u64;
                let arrived = arrival(now, wall, d.kernel_time);
                rx.handle_datagram_arrived(now, arrived, d.from, d.data, d.truncated, sink);
            }
            // A full batch (the loop is behind) or a wait for the writer: how much the socket
            // holds now is how deep the stall reached into its buffer.
            if n == BATCH || sink.stalled().1 != stalls {
                if let Some(q) = netio::counters::socket_queued_bytes(sock) {
                    tally.queue_peak = Some(tally.queue_peak.unwrap_or(0).max(q));
                }
            }
            t.ready_since = Instant::now();
            Ok(true)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(io_err("receive")(e).into()),
    }
}

/// One batch from whichever socket has datagrams: the one socket waits up to 1 ms itself;
/// several are waited for together (ppoll), then read in turn. Each datagram's source is noted
/// with the socket it came to, so the NAKs for it leave from that port (a sender's connected
/// socket takes datagrams from the port it sends to only).
fn receive_any(
    socks: &[std::net::UdpSocket],
    batch: &mut netio::batch::RecvBatch,
    rx: &mut Receiver,
    sink: &mut Sink,
    t: &mut Timers,
    tally: &mut LiveTally,
) -> Result<bool, StreamSessionError> {
    if let [one] = socks {
        return receive_batch(one, Duration::from_millis(1), batch, rx, sink, t, tally);
    }
    let all: Vec<&std::net::UdpSocket> = socks.iter().collect();
    let ready = netio::wait_any_readable(&all, Duration::from_millis(1)).map_err(io_err("wait for datagrams"))?;
    let mut any = false;
    for (i, sock) in socks.iter().enumerate().filter(|(i, _)| ready & (1 << i) != 0) {
        if receive_batch(sock, Duration::ZERO, batch, rx, sink, t, tally)? {
            any = true;
            if let Some(d) = batch.iter().next() {
                tally.route(d.from, i);
            }
        }
    }
    Ok(any)
}

/// NAKs on their way back to the senders.
#[derive(Default)]
struct NakOut {
    buf: Vec<u8>,
    sent: u64,
}

impl NakOut {
    /// Send the NAKs the receiver has at `now` (a failed send is a lost NAK, asked again later).
    fn send(&mut self, socks: &[std::net::UdpSocket], routes: &[(SocketAddr, usize)], rx: &mut Receiver, now: Instant) {
        for (to, nak) in rx.poll_naks(now) {
            nak.encode(&mut self.buf);
            let i = routes.iter().find(|(a, _)| *a == to).map_or(0, |r| r.1);
            let Some(sock) = socks.get(i) else {
                continue;
            };
            if sock.send_to(&self.buf, to).is_ok() {
                self.sent += 1;
            }
        }
    }
}
