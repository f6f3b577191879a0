//! The TCP test client: the probe handshake with [`Hello::tcp`], `streams` data connections
//! (congestion control set on each), memory-to-memory writes for the test's duration, TCP_INFO
//! sampled on every stream meanwhile, then `tcp_done` and the server's `tcp_results`.
//!
//! A test that ends early — the server stops, a connection is reset, no results come — is not an
//! error here: the result says `partial` and why, and keeps every interval and sample measured up
//! to then. Only a failure before any data flowed (connect, handshake) is an `Err`.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use probe::tcp::{
    app_bytes_acked, IntervalAggregator, MathisCheck, Preamble, TcpInfo, TcpInterval, TcpSample, Thinned,
};
use probe::tcp_results::{TcpStreamSummary, TcpTestParams, TcpTestResult};
use probe::wire::HEADER_LEN;

use crate::burn::{Burner, CpuLoadSpec};
use crate::channel::{Control, ControlReader, ControlWriter};
use crate::client::{connect_and_authenticate, Connected};
use crate::control::{
    ControlMsg, Hello, TcpDone, TcpHello, TcpResults, MAX_DURATION_MS, MAX_STREAMS, PROTOCOL_VERSION,
};
use crate::error::ProbeSessionError;
use crate::host::{interface_of, HostSnapshot};
use crate::tcpsock::{check_congestion, congestion, set_congestion, tcp_info};
use netio::io_err;

/// Most TCP_INFO samples kept per test (all streams together); beyond, they are thinned evenly.
pub const MAX_SAMPLES: usize = 20_000;
/// After the writes end, the longest wait for the server's results (the data still in the
/// socket buffers drains meanwhile).
pub const RESULTS_WAIT: Duration = Duration::from_secs(120);

/// TCP test settings.
#[derive(Debug, Clone)]
pub struct TcpClientConfig {
    /// Server control address.
    pub server: SocketAddr,
    /// Pre-shared key.
    pub key: Option<Vec<u8>>,
    /// Test id (random when `None`).
    pub test_id: Option<u64>,
    /// Parallel connections (1..=64).
    pub streams: u16,
    /// How long to write.
    pub duration: Duration,
    /// Length of the per-interval figures.
    pub interval: Duration,
    /// How often TCP_INFO is read on every stream.
    pub sample_every: Duration,
    /// Bytes per write.
    pub write_size: u32,
    /// Congestion control to set on the sender's sockets (`None`: the kernel's default).
    pub cc: Option<String>,
    /// A competing CPU-bound task to run on this host while the data flows.
    pub cpu_load: Option<CpuLoadSpec>,
}

impl TcpClientConfig {
    /// Defaults: one stream for 10 s, 1 s intervals, TCP_INFO every 100 ms, 128 KiB writes
    /// (iperf3's), the kernel's congestion control, no CPU load.
    pub fn new(server: SocketAddr) -> Self {
        TcpClientConfig {
            server,
            key: None,
            test_id: None,
            streams: 1,
            duration: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            sample_every: Duration::from_millis(100),
            write_size: 128 * 1024,
            cc: None,
            cpu_load: None,
        }
    }
}

/// Write `buf` over and over until `deadline` or `stop`; then close our side. Returns what broke
/// the stream, if anything.
fn write_loop(
    sock: &TcpStream,
    buf: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
    written: &AtomicU64,
) -> Option<String> {
    let mut w = sock;
    let err = loop {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            break None;
        }
        match w.write(buf) {
            Ok(0) => break Some("the connection accepted no more data".to_string()),
            Ok(n) => {
                written.fetch_add(n as u64, Ordering::Relaxed);
            }
            // SO_SNDTIMEO (200 ms) bounds each write so the deadline is seen.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => break Some(e.to_string()),
        }
    };
    let _ = sock.shutdown(std::net::Shutdown::Write);
    err
}

/// Handshake and data connections; returns them with the hello sent.
fn establish(
    config: &TcpClientConfig,
) -> Result<(Control, Hello, Vec<TcpStream>, std::net::IpAddr), ProbeSessionError> {
    let streams = config.streams.clamp(1, MAX_STREAMS);
    let Connected {
        control,
        hello,
        port,
        local_ip,
    } = connect_and_authenticate(config.server, config.key.clone(), config.test_id, |test_id| Hello {
        version: PROTOCOL_VERSION,
        test_id,
        size: HEADER_LEN as u32,
        count: 1,
        spacing_ns: 0,
        client_nonce: None,
        interval_ms: None,
        rcvbuf: None,
        tcp: Some(TcpHello {
            streams,
            duration_ms: u64::try_from(config.duration.as_millis())
                .unwrap_or(MAX_DURATION_MS)
                .min(MAX_DURATION_MS),
            write_size: config.write_size,
            cc: config.cc.clone(),
        }),
    })?;
    let test_id = hello.test_id;
    let dest = SocketAddr::new(config.server.ip(), port);
    let mut socks = Vec::with_capacity(usize::from(streams));
    for stream in 0..streams {
        let mut s =
            TcpStream::connect_timeout(&dest, Duration::from_secs(5)).map_err(io_err("connect a data connection"))?;
        if let Some(cc) = &config.cc {
            set_congestion(&s, cc).map_err(io_err("set the congestion control (TCP_CONGESTION)"))?;
        }
        s.write_all(&Preamble { test_id, stream }.emit())
            .map_err(io_err("write the data connection preamble"))?;
        s.set_write_timeout(Some(Duration::from_millis(200)))
            .map_err(io_err("set the send timeout"))?;
        socks.push(s);
    }
    Ok((control, hello, socks, local_ip))
}

/// Run one TCP test; `on_interval` gets each interval as it closes (from this thread).
pub fn run_tcp_client(
    config: &TcpClientConfig,
    mut on_interval: impl FnMut(&TcpInterval),
) -> Result<TcpTestResult, ProbeSessionError> {
    if let Some(cc) = &config.cc {
        check_congestion(cc)?;
    }
    // The competing task starts first, so a level that cannot be set fails before the server is
    // involved, and on this (the main) thread, which outlives the test: its PR_SET_PDEATHSIG is
    // tied to the thread that started it. It is measured from the start of the data phase.
    let mut burner = config.cpu_load.as_ref().map(Burner::start).transpose()?;
    let (control, hello, socks, local_ip) = establish(config)?;
    let tcp = hello.tcp.clone().unwrap_or(TcpHello {
        streams: 1,
        duration_ms: 1000,
        write_size: config.write_size,
        cc: None,
    });
    let mut result = TcpTestResult::new(TcpTestParams {
        test_id: hello.test_id,
        streams: tcp.streams,
        duration_s: tcp.duration_ms as f64 / 1e3,
        interval_s: config.interval.as_secs_f64(),
        write_size: tcp.write_size,
        cc_requested: config.cc.clone(),
    });
    result.cc = socks.first().and_then(|s| congestion(s).ok());
    let (reader, mut writer) = control.split()?;
    let host0 = HostSnapshot::take(interface_of(local_ip).as_deref());
    if let Some(b) = burner.as_mut() {
        b.mark();
    }
    let t0 = Instant::now();
    let duration = Duration::from_millis(tcp.duration_ms);
    let streams = Streams::new(&socks);
    let mut sampling = Sampling::new(config, t0, socks.len());
    let mut ending = Ending::default();
    let buf = vec![0u8; tcp.write_size as usize];
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(await_results(reader, duration + RESULTS_WAIT));
        });
        streams.spawn_writers(s, &buf, t0 + duration);
        let mut writes_over = || {
            result.host.sender = Some(host0.delta());
            result.cpu_load = burner.take().map(Burner::stop);
        };
        let loop_ctx = LoopCtx {
            streams: &streams,
            results: &rx,
            hard_deadline: t0 + duration + RESULTS_WAIT,
        };
        loop_ctx.run(
            &mut sampling,
            &mut ending,
            &mut writer,
            &mut on_interval,
            &mut writes_over,
        );
        // Unblock the control reader if it still waits.
        let _ = writer.stream().shutdown(std::net::Shutdown::Both);
        streams.stop.store(true, Ordering::Relaxed);
    });
    if matches!(ending.outcome, Some(Ok(_))) {
        // The server has every byte; the last ACKs may still be on their way (delayed ACK):
        // wait for them, bounded, so the last TCP_INFO has the final counts.
        let settle = Instant::now() + Duration::from_secs(2);
        while Instant::now() < settle && socks.iter().any(|s| tcp_info(s).is_ok_and(|i| i.unacked > 0)) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let t_end = Instant::now().duration_since(t0).as_secs_f64();
    sampling.last(&streams, t_end, &mut on_interval);
    if let Some(b) = burner.take() {
        // Only when the writers never all finished (the hard deadline passed).
        result.cpu_load = Some(b.stop());
    }
    if result.host.sender.is_none() {
        result.host.sender = Some(host0.delta());
    }
    finish_result(
        &mut result,
        Finish {
            elapsed_s: t_end,
            write_s: ending.writes_end.map_or(t_end, |w| w.duration_since(t0).as_secs_f64()),
            written: streams.written(),
            errors: streams.errors.into_inner().unwrap_or_default(),
            last_infos: sampling.last_infos,
            agg: sampling.agg,
            kept: sampling.kept,
            every: sampling.every,
            outcome: ending.outcome,
            done_error: ending.done_error,
            duration,
        },
    );
    Ok(result)
}

/// Wait for the server's `tcp_results` (or its refusal).
fn await_results(mut reader: ControlReader, wait: Duration) -> Result<Box<TcpResults>, ProbeSessionError> {
    match reader.recv(wait, "tcp_results")? {
        ControlMsg::TcpResults(r) => Ok(r),
        ControlMsg::Error(e) => Err(ProbeSessionError::Refused(e.message)),
        other => Err(ProbeSessionError::Unexpected(other.name())),
    }
}

/// The data connections of a running test and what their writer threads report.
struct Streams<'a> {
    socks: &'a [TcpStream],
    /// Set to end every writer (a stream broke, the server ended the test, or we are done).
    stop: AtomicBool,
    written: Vec<AtomicU64>,
    errors: Mutex<Vec<Option<String>>>,
    /// Writers that have ended.
    finished: AtomicUsize,
}

impl<'a> Streams<'a> {
    fn new(socks: &'a [TcpStream]) -> Self {
        let n = socks.len();
        Streams {
            socks,
            stop: AtomicBool::new(false),
            written: (0..n).map(|_| AtomicU64::new(0)).collect(),
            errors: Mutex::new(vec![None; n]),
            finished: AtomicUsize::new(0),
        }
    }

    /// One writer thread per stream, writing `buf` until `deadline`; one that breaks stops all.
    fn spawn_writers<'s>(&'s self, s: &'s std::thread::Scope<'s, '_>, buf: &'s [u8], deadline: Instant) {
        for (i, sock) in self.socks.iter().enumerate() {
            s.spawn(move || {
                let e = write_loop(sock, buf, deadline, &self.stop, &self.written[i]);
                if let Some(e) = e {
                    self.stop.store(true, Ordering::Relaxed);
                    if let Ok(mut v) = self.errors.lock() {
                        v[i] = Some(e);
                    }
                }
                self.finished.fetch_add(1, Ordering::Release);
            });
        }
    }

    fn written(&self) -> Vec<u64> {
        self.written.iter().map(|w| w.load(Ordering::Relaxed)).collect()
    }

    fn all_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire) == self.socks.len()
    }

    fn any_broken(&self) -> bool {
        self.errors
            .lock()
            .map(|v| v.iter().any(Option::is_some))
            .unwrap_or(true)
    }
}

/// TCP_INFO sampling: the rounds kept, the intervals built from them.
struct Sampling {
    t0: Instant,
    every: Duration,
    agg: IntervalAggregator,
    kept: Thinned<Vec<TcpSample>>,
    last_infos: Vec<Option<TcpInfo>>,
    last_round: Vec<TcpSample>,
}

impl Sampling {
    fn new(config: &TcpClientConfig, t0: Instant, n: usize) -> Self {
        let every = config.sample_every.max(Duration::from_millis(10));
        Sampling {
            t0,
            every,
            agg: IntervalAggregator::new(config.interval.as_secs_f64()).with_tolerance(every.as_secs_f64() / 2.0),
            kept: Thinned::new((MAX_SAMPLES / n.max(1)).max(16)),
            last_infos: vec![None; n],
            last_round: Vec::new(),
        }
    }

    /// Sample every stream at `now`, passing on an interval that closed.
    fn round(&mut self, streams: &Streams, now: Instant, on_interval: &mut impl FnMut(&TcpInterval)) {
        let t = now.duration_since(self.t0).as_secs_f64();
        self.last_round = sample_round(streams.socks, &streams.written, t, &mut self.last_infos);
        if let Some(iv) = self.agg.on_round(t, &self.last_round) {
            on_interval(&iv);
        }
        self.kept.push(self.last_round.clone());
    }

    /// The final round at `t_end` s and the last (partial) interval.
    fn last(&mut self, streams: &Streams, t_end: f64, on_interval: &mut impl FnMut(&TcpInterval)) {
        let final_round = sample_round(streams.socks, &streams.written, t_end, &mut self.last_infos);
        if !final_round.is_empty() {
            self.last_round = final_round;
        }
        if let Some(iv) = self.agg.finish(t_end, &self.last_round) {
            on_interval(&iv);
        }
        self.kept.push(std::mem::take(&mut self.last_round));
    }
}

/// How the test ended: the server's answer, when the writes ended, whether `tcp_done` went out.
#[derive(Default)]
struct Ending {
    outcome: Option<Result<Box<TcpResults>, ProbeSessionError>>,
    writes_end: Option<Instant>,
    done_error: Option<String>,
}

/// What the sampling loop watches.
struct LoopCtx<'a, 'b> {
    streams: &'a Streams<'b>,
    results: &'a mpsc::Receiver<Result<Box<TcpResults>, ProbeSessionError>>,
    hard_deadline: Instant,
}

impl LoopCtx<'_, '_> {
    /// Sample every `every` until the results are in (or there is no point waiting for them):
    /// once every writer has ended, `writes_over` runs and `tcp_done` goes out.
    fn run(
        &self,
        sampling: &mut Sampling,
        ending: &mut Ending,
        writer: &mut ControlWriter,
        on_interval: &mut impl FnMut(&TcpInterval),
        writes_over: &mut impl FnMut(),
    ) {
        let streams = self.streams;
        let mut next = sampling.t0 + sampling.every;
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            if ending.outcome.is_none() {
                match self.results.recv_timeout(wait) {
                    Ok(o) => ending.outcome = Some(o),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        ending.outcome = Some(Err(ProbeSessionError::Closed("tcp_results")))
                    }
                }
            } else {
                std::thread::sleep(wait);
            }
            let now = Instant::now();
            if now >= next {
                sampling.round(streams, now, on_interval);
                next += sampling.every;
                if next < now {
                    next = now + sampling.every;
                }
            }
            // The server ended the test (or vanished) while we were still writing.
            if ending.writes_end.is_none() && ending.outcome.is_some() {
                streams.stop.store(true, Ordering::Relaxed);
            }
            if ending.writes_end.is_none() && streams.all_finished() {
                ending.writes_end = Some(Instant::now());
                writes_over();
                let done = ControlMsg::TcpDone(TcpDone {
                    bytes_written: streams.written(),
                });
                if let Err(e) = writer.send(&done) {
                    ending.done_error = Some(netio::error_chain(&e));
                }
            }
            if let Some(end) = ending.writes_end {
                // Results in, or no point waiting: we could not say we were done, or a stream
                // broke and the server is not answering.
                let broken = ending.done_error.is_some() || streams.any_broken();
                if ending.outcome.is_some() || (broken && end.elapsed() > Duration::from_secs(2)) {
                    break;
                }
            }
            if now >= self.hard_deadline {
                break;
            }
        }
    }
}

/// One TCP_INFO sample of every stream at `t` (streams whose socket cannot be read are left out).
fn sample_round(socks: &[TcpStream], written: &[AtomicU64], t: f64, last: &mut [Option<TcpInfo>]) -> Vec<TcpSample> {
    socks
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let info = tcp_info(s).ok()?;
            last[i] = Some(info);
            Some(TcpSample::new(
                t,
                u16::try_from(i).unwrap_or(u16::MAX),
                written[i].load(Ordering::Relaxed),
                &info,
            ))
        })
        .collect()
}

/// What the sampling loop leaves behind.
struct Finish {
    elapsed_s: f64,
    write_s: f64,
    written: Vec<u64>,
    errors: Vec<Option<String>>,
    last_infos: Vec<Option<TcpInfo>>,
    agg: IntervalAggregator,
    kept: Thinned<Vec<TcpSample>>,
    every: Duration,
    outcome: Option<Result<Box<TcpResults>, ProbeSessionError>>,
    done_error: Option<String>,
    duration: Duration,
}

fn finish_result(result: &mut TcpTestResult, f: Finish) {
    result.elapsed_s = f.elapsed_s;
    result.write_s = f.write_s;
    result.bytes_written = f.written.iter().sum();
    result.bytes_acked = f
        .last_infos
        .iter()
        .zip(&f.written)
        .filter_map(|(i, &w)| i.as_ref().and_then(|i| app_bytes_acked(i, w)))
        .sum();
    result.retransmits = f.last_infos.iter().flatten().map(|i| u64::from(i.total_retrans)).sum();
    result.sender_rate_bps = (f.elapsed_s > 0.0).then(|| result.bytes_acked as f64 * 8.0 / f.elapsed_s);
    if f.agg.times_merged() > 0 {
        result.notes.push(format!(
            "intervals merged pairwise {} times to stay within {} (each now {:.3} s)",
            f.agg.times_merged(),
            probe::tcp::MAX_INTERVALS,
            result.params.interval_s * f64::from(1u32 << f.agg.times_merged().min(31))
        ));
    }
    result.sample_period_s = f.every.as_secs_f64() * f.kept.keep_every() as f64;
    result.intervals = f.agg.into_intervals();
    result.samples = f.kept.into_items().into_iter().flatten().collect();
    let mut problems: Vec<String> = f
        .errors
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| format!("stream {i}: {e}")))
        .collect();
    if let Some(e) = &f.done_error {
        problems.push(format!("cannot tell the server the writes ended: {e}"));
    }
    let receiver = match f.outcome {
        Some(Ok(r)) => {
            let r = *r;
            result.host.receiver = r.host;
            result.notes.extend(r.notes);
            if r.receiver.partial {
                problems.push(format!(
                    "the server's receiver ended early: {}",
                    r.receiver.error.as_deref().unwrap_or("no reason given")
                ));
            }
            Some(r.receiver)
        }
        Some(Err(e)) => {
            problems.push(format!("the server went away or refused: {}", netio::error_chain(&e)));
            None
        }
        None => {
            problems.push(format!(
                "no results from the server within {} s of the end of the writes",
                RESULTS_WAIT.as_secs()
            ));
            None
        }
    };
    result.streams = f
        .written
        .iter()
        .enumerate()
        .map(|(i, &w)| TcpStreamSummary {
            stream: u16::try_from(i).unwrap_or(u16::MAX),
            bytes_written: w,
            bytes_received: receiver
                .as_ref()
                .and_then(|r| r.streams.iter().find(|s| usize::from(s.stream) == i))
                .map(|s| s.bytes),
            last_tcp_info: f.last_infos.get(i).copied().flatten(),
            error: f.errors.get(i).cloned().flatten(),
        })
        .collect();
    if let Some(r) = &receiver {
        result.received_bytes = Some(r.bytes);
        result.received_rate_bps = r.rate_bps;
    }
    result.receiver = receiver;
    let finals: Vec<TcpInfo> = f.last_infos.iter().flatten().copied().collect();
    // The RTT of the transfer: samples of the write phase (a closing connection's srtt jumps).
    let writing: Vec<TcpSample> = result.write_phase_samples().copied().collect();
    result.mathis = result
        .achieved_rate_bps()
        .and_then(|a| MathisCheck::from_test(&writing, &finals, a));
    if !problems.is_empty() {
        result.partial = true;
        result.error = Some(format!(
            "test ended after {:.2} s of {:.2} s: {}",
            f.write_s.min(f.duration.as_secs_f64()),
            f.duration.as_secs_f64(),
            problems.join("; ")
        ));
    }
}
