//! The sender over a real socket: VDIF files (one station each) read into memory or on reader
//! threads, handed to the sans-IO [`stream::Sender`] (framing, sequence numbers, loop time,
//! repeats, counters) whose frames leave on an exact absolute timeline per station
//! ([`pacing::Pacer`]); NAKs read from the socket between frames are fed back to it.
//!
//! - `config`: [`SendConfig`], the settings, their defaults ([`SendConfig::new`]) and their
//!   rules ([`SendConfig::validate`]);
//! - `input`: the inputs and their one reading pass; `shape`: how an input is sent, decided
//!   without files; `reader`: reader threads; `boards`: the sockets and their senders;
//! - here: the drive loop and the report.

mod boards;
mod config;
mod input;
mod reader;
mod shape;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netio::counters::{clock_ticks_per_second, read_process_cpu};
use netio::pacer::wait_until_spin;
use stream::results::{SendStatus, SentBoard};
use stream::sender::combined_results;

use crate::report::SendReport;
use crate::{InputProblem, Observer, StreamSessionError};
use boards::Board;
pub use config::{SendConfig, DEFAULT_CATCH_UP, DEFAULT_MAX_LAG};
pub use input::{Input, Opener};
pub use shape::board_threads;

/// Read and shape every input; check that the boards can carry each.
fn examine_inputs(cfg: &mut SendConfig) -> Result<Vec<input::Source>, StreamSessionError> {
    let inputs = std::mem::take(&mut cfg.inputs);
    let mut sources = Vec::with_capacity(inputs.len());
    for i in inputs {
        let s = input::examine(i, cfg.fps, cfg.rate_bps, cfg.loop_files)?;
        shape::check_boards(&s.shape, cfg.senders, s.memory.is_some())
            .map_err(|p| StreamSessionError::input(&s.shape.station.name, p))?;
        sources.push(s);
    }
    Ok(sources)
}

/// The socket loop: wait for the next departure of any board, send what each board's sender
/// hands out, answer NAKs at most every millisecond. Returns whether `stop` ended it.
fn drive(
    cfg: &SendConfig,
    boards: &mut [Board],
    stop: &AtomicBool,
    mut observer: Option<Observer<SendStatus>>,
) -> Result<bool, StreamSessionError> {
    let start = boards.first().map_or_else(Instant::now, |b| b.sender.config().start);
    let mut next_ctl = start;
    let mut next_status = start + Duration::from_secs(1);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let Some(due) = boards.iter().filter_map(|b| b.sender.poll_timeout()).min() else {
            return Ok(false);
        };
        wait_until_spin(due, cfg.spin);
        // The boards take turns, each sending what is due at the turn's start, until a round
        // sends nothing: a backend's boards send at once. (Each board sent all it had, the clock
        // read again after each send, before the next one's turn: held up at the start, board 1
        // sent nothing until board 0 had caught up, and a recorder counting threads from the
        // mode's rate learned board 0's alone.)
        let mut sent = true;
        while sent {
            sent = false;
            let round = Instant::now();
            for b in boards.iter_mut() {
                while let Some(t) = b.sender.poll_transmit(round)? {
                    // A truncated mapped input: the kernel's read of its lost pages fails
                    // (EFAULT), ours read zeros (crate::mapped): stop with the reason.
                    b.wire.send(&t).map_err(|e| {
                        if crate::mapped::truncated() {
                            StreamSessionError::InputTruncated
                        } else {
                            e
                        }
                    })?;
                    // Departure gaps and lateness are those of the send call's return, as they
                    // were before the sender became a state machine (a GSO burst takes a while).
                    b.sender.on_transmitted(Instant::now());
                    sent = true;
                }
            }
        }
        if crate::mapped::truncated() {
            return Err(StreamSessionError::InputTruncated);
        }
        let now = Instant::now();
        // Read the socket with or without ARQ: a jive5ab sends a keep-alive back every N
        // datagrams, which would otherwise fill the receive buffer (and read as rcvbuf_errors).
        if now >= next_ctl {
            next_ctl = now + Duration::from_millis(1);
            for b in boards.iter_mut() {
                b.serve_naks(now)?;
            }
        }
        if let Some(observe) = observer.as_mut().filter(|_| now >= next_status) {
            next_status += Duration::from_secs(1);
            observe(send_status(boards, now.saturating_duration_since(start)));
        }
    }
}

/// The counts so far of every board's sender, for an observer.
fn send_status(boards: &[Board], elapsed: Duration) -> SendStatus {
    SendStatus {
        elapsed_s: elapsed.as_secs_f64(),
        stations: station_results(boards),
        senders: boards.iter().map(Board::result).collect(),
        arq: arq_stats(boards),
    }
}

/// Every station's counts, over the boards that carried its threads.
fn station_results(boards: &[Board]) -> Vec<stream::results::SentStation> {
    match boards {
        [one] => one.sender.station_results(),
        many => combined_results(&many.iter().map(|b| &b.sender).collect::<Vec<_>>()).unwrap_or_default(),
    }
}

/// The repeats of every board, summed.
fn arq_stats(boards: &[Board]) -> Option<stream::arq::RetransmitStats> {
    let mut arq: Option<stream::arq::RetransmitStats> = None;
    for q in boards.iter().filter_map(|b| b.sender.arq_stats()) {
        arq.get_or_insert_with(Default::default).add(&q);
    }
    arq
}

/// Send until the files end (no `--loop`), the duration passes or `stop` is set.
pub fn run_sender(cfg: SendConfig, stop: &AtomicBool) -> Result<SendReport, StreamSessionError> {
    run_sender_observed(cfg, stop, None)
}

/// [`run_sender`], handing `observer` the counts so far once a second.
pub fn run_sender_observed(
    cfg: SendConfig,
    stop: &AtomicBool,
    observer: Option<Observer<SendStatus>>,
) -> Result<SendReport, StreamSessionError> {
    let mut cfg = cfg.validate()?;
    let sources = examine_inputs(&mut cfg)?;
    let largest_frame = sources.iter().map(|s| s.shape.station.frame_len).max();
    let (mut boards, readers) = boards::build(&cfg, sources)?;
    let path_mtu = boards::path_mtu(&boards);
    let warnings = setup_warnings(&cfg, largest_frame, path_mtu);
    let udp0 = netio::read_udp_counters().unwrap_or_default();
    let cpu0 = read_process_cpu().unwrap_or_default();
    let wall0 = Instant::now();
    let interrupted = drive(&cfg, &mut boards, stop, observer)?;
    // The last frames may still be asked for: keep answering for one latency window.
    if let (Some(latency), false) = (cfg.arq_latency, interrupted) {
        let until = Instant::now() + latency;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            for b in boards.iter_mut() {
                b.serve_naks(Instant::now())?;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let wall = wall0.elapsed().as_secs_f64();
    let mut stations = station_results(&boards);
    let senders: Vec<SentBoard> = boards.iter().map(Board::result).collect();
    let arq = arq_stats(&boards);
    let sum = |f: fn(&Board) -> u64| boards.iter().map(f).sum::<u64>();
    let (rejected_control, returned_datagrams, send_would_block) = (
        sum(|b| b.sender.rejected_control()),
        sum(|b| b.sender.returned_datagrams()),
        sum(|b| b.wire.would_block()),
    );
    let duration_s = boards.iter().map(|b| b.sender.duration_s()).fold(0.0, f64::max);
    // Dropping the senders drops the readers' channels: a reader blocked on a full queue ends.
    drop(boards);
    for (st, reader) in stations.iter_mut().zip(readers) {
        let rs = reader.and_then(|h| h.join().ok()).unwrap_or_default();
        if let Some((op, source)) = rs.error {
            return Err(StreamSessionError::input(
                &st.file,
                InputProblem::ReadWhileSending { op, source },
            ));
        }
        st.loops += rs.loops;
        st.garbage_bytes += rs.garbage_bytes;
    }
    Ok(SendReport {
        to: cfg.to.to_string(),
        format: cfg.format,
        duration_s,
        stations,
        senders,
        path_mtu,
        warnings,
        arq,
        rejected_control,
        returned_datagrams,
        send_would_block,
        cpu: read_process_cpu().unwrap_or_default().share_since(
            &cpu0,
            Duration::from_secs_f64(wall),
            clock_ticks_per_second(),
        ),
        udp: netio::read_udp_counters().unwrap_or_default().delta(&udp0),
        interrupted,
    })
}

/// What the operator should know before the run: a timer slack the kernel refused, datagrams
/// larger than the path MTU.
fn setup_warnings(cfg: &SendConfig, largest_frame: Option<usize>, path_mtu: Option<usize>) -> Vec<String> {
    let mut warnings = Vec::new();
    if cfg.spin < netio::pacer::DEFAULT_SPIN && !netio::pacer::fine_timer_slack() {
        warnings.push(format!(
            "spin window {:?}: the kernel refused a 1 ns timer slack, sleeps may end up to ~50 us late",
            cfg.spin
        ));
    }
    let ip_udp = if cfg.to.is_ipv4() { 28 } else { 48 };
    if let (Some(mtu), Some(largest)) = (path_mtu, largest_frame) {
        let datagram = largest + cfg.format.prefix_len();
        if datagram + ip_udp > mtu {
            warnings.push(format!(
                "{datagram}-byte datagrams exceed the path MTU {mtu} to {}: every frame is fragmented, and under \
                 loss fragment reassembly collapses (one lost fragment loses the frame and holds reassembly memory); \
                 use jumbo frames on the path or frames of at most {} bytes",
                cfg.to,
                mtu - ip_udp - cfg.format.prefix_len()
            ));
        }
    }
    warnings
}
