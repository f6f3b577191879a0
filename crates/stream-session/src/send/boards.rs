//! The sending sockets and the state machines behind them: one [`Board`] sending every station
//! (streamed inputs read by threads of their own), or `senders` boards of a simulated backend,
//! each its own socket carrying its block of every station's threads from memory; each
//! station's frames on a [`Pacer`]'s timeline, from now or from the frames' own VDIF time.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use linkemu::LossModel;
use netio::io_err;
use pacing::{Pacer, Spacing};
use stream::results::SentBoard;
use stream::sender::{FrameSource, MemorySource, Sender, SenderConfig, StationSpec};
use stream::PacedSchedule;

use super::input::Source;
use super::reader::{self, ReaderStats};
use super::shape::{board_rate, board_threads};
use super::SendConfig;
use crate::socket::{first_seq, new_session, Wire};
use crate::StreamSessionError;

/// One sending socket and the state machine of what leaves it: the one sender, or one board of
/// a simulated backend carrying its share of every station's threads.
pub(super) struct Board {
    pub sender: Sender<PacedSchedule>,
    pub wire: Wire,
    /// Thread ids it carries (of the station with the most threads).
    threads: Vec<u16>,
}

impl Board {
    /// What it sent, for the report.
    pub fn result(&self) -> SentBoard {
        let t = self.sender.totals();
        let local = self.wire.local();
        SentBoard {
            local_addr: local.to_string(),
            local_port: local.port(),
            to: self.wire.to().to_string(),
            threads: self.threads.clone(),
            frames_sent: t.frames,
            bytes_sent: t.bytes,
            achieved_rate_bps: t.achieved_rate_bps,
            slips: t.slips,
        }
    }

    /// Read every datagram waiting on the socket into the sender (NAKs), then send the repeats
    /// they ask for.
    pub fn serve_naks(&mut self, now: Instant) -> Result<(), StreamSessionError> {
        let sender = &mut self.sender;
        self.wire.read_returns(|d| sender.handle_nak(now, d));
        while let Some(t) = sender.poll_transmit(now)? {
            self.wire.send(&t)?;
            sender.on_transmitted(Instant::now());
        }
        Ok(())
    }
}

/// The reader threads of streamed inputs, in station order (`None` for one sent from memory).
pub(super) type Readers = Vec<Option<JoinHandle<ReaderStats>>>;

/// The sockets and their senders (one board with every station, or `cfg.senders` boards) and
/// the reader threads.
pub(super) type Built = (Vec<Board>, Readers);

/// Open the sockets and set the senders up over `sources`.
pub(super) fn build(cfg: &SendConfig, sources: Vec<Source>) -> Result<Built, StreamSessionError> {
    let timeline = timeline_start(cfg, &sources);
    if cfg.senders > 1 {
        return Ok((build_boards(cfg, sources, timeline)?, Vec::new()));
    }
    let wire = Wire::open(cfg.to, cfg.sndbuf)?;
    let threads = (0..sources.iter().map(|s| s.shape.station.threads).max().unwrap_or(1)).collect();
    let (sender, readers) = build_sender(cfg, sources, timeline)?;
    Ok((vec![Board { sender, wire, threads }], readers))
}

/// `cfg.senders` boards (K > 1), each its own socket sending its block of every station's
/// threads from the shared memory, paced per time step at its share of the station's rate.
fn build_boards(
    cfg: &SendConfig,
    sources: Vec<Source>,
    (start, later): (Instant, u32),
) -> Result<Vec<Board>, StreamSessionError> {
    let shared: Vec<(Source, Bytes)> = sources
        .into_iter()
        .map(|mut s| {
            let data = s.memory.take().unwrap_or_default();
            (s, data)
        })
        .collect();
    let most_threads = shared.iter().map(|(s, _)| s.shape.station.threads).max().unwrap_or(1);
    let mut boards = Vec::new();
    for b in 0..cfg.senders {
        // Each board its own loss draws, so boards do not lose the same time steps.
        let mut sender = Sender::new(sender_config(cfg, start, cfg.seed.wrapping_add(b as u64)));
        for (src, data) in &shared {
            let (s, loop_seconds) = (&src.shape.station, src.shape.loop_seconds);
            let share = board_threads(s.threads, cfg.senders, b);
            let m = share.len() as u64;
            // One time step of the whole station (a frame of every thread) at its rate.
            let step = Spacing::from_rate((s.data_len as u64) * u64::from(s.threads), s.rate_bps.get());
            let pacer = paced(cfg, Pacer::new(start, step));
            let source = MemorySource::from_bytes(data.clone(), s.frame_len, loop_seconds)
                .only_threads(&share)
                .later_by(later);
            let station = StationSpec {
                rate_bps: board_rate(s.rate_bps, s.threads, &share),
                ..s.clone()
            };
            sender.add_station(station, Box::new(source), PacedSchedule::steps(pacer, m));
        }
        let to = cfg.board_to.get(b).copied().unwrap_or(cfg.to);
        boards.push(Board {
            sender,
            wire: Wire::open(to, cfg.sndbuf)?,
            threads: board_threads(most_threads, cfg.senders, b),
        });
    }
    Ok(boards)
}

/// `pacer` with the run's catch-up bound and speed; fixed to the clock when late frames are
/// skipped (a backend's frames carry their time: what falls beyond the bound is not sent late).
fn paced(cfg: &SendConfig, pacer: Pacer) -> Pacer {
    let pacer = pacer.with_max_lag(cfg.max_lag).with_catch_up(cfg.catch_up);
    if cfg.skip_late {
        pacer.fixed_to_clock()
    } else {
        pacer
    }
}

/// The sender state machine with one station per source, its timeline starting at `start`;
/// streamed sources get a reader thread each (their handles, in station order).
fn build_sender(
    cfg: &SendConfig,
    sources: Vec<Source>,
    (start, later): (Instant, u32),
) -> Result<(Sender<PacedSchedule>, Readers), StreamSessionError> {
    let mut sender = Sender::new(sender_config(cfg, start, cfg.seed));
    let mut readers = Vec::new();
    for src in sources {
        let (s, loop_seconds) = (src.shape.station, src.shape.loop_seconds);
        let spacing = Spacing::from_rate(s.data_len as u64, s.rate_bps.get());
        let pacer = paced(cfg, Pacer::new(start, spacing));
        let (source, reader): (Box<dyn FrameSource>, _) = match (src.memory, src.path) {
            (Some(data), _) => (
                Box::new(MemorySource::from_bytes(data, s.frame_len, loop_seconds).later_by(later)),
                None,
            ),
            (None, path) => {
                let Some(path) = path else {
                    // examine() keeps every input either in memory or with its opener.
                    return Err(StreamSessionError::input(s.name, crate::InputProblem::NotContiguous));
                };
                let (source, thread) = reader::spawn(path, s.frame_len, loop_seconds);
                (Box::new(source), Some(thread.map_err(io_err("start a reader thread"))?))
            }
        };
        sender.add_station(s, source, PacedSchedule::frames(pacer));
        readers.push(reader);
    }
    Ok((sender, readers))
}

/// The state machine's configuration of one sender (one socket).
fn sender_config(cfg: &SendConfig, start: Instant, seed: u64) -> SenderConfig {
    SenderConfig {
        format: cfg.format,
        session: new_session(),
        first_seq: first_seq(cfg.format),
        burst: cfg.burst,
        arq_latency: cfg.arq_latency,
        inject_loss: if cfg.inject_loss > 0.0 {
            LossModel::Bernoulli { p: cfg.inject_loss }
        } else {
            LossModel::None
        },
        seed,
        start,
        duration: cfg.duration,
    }
}

/// When the timeline starts, and how many whole seconds later than the data say the frames
/// are sent. The inputs are loaded: normally the timeline starts now. With `cfg.realtime` (a
/// backend simulator) it starts when the clock reaches the first frame's VDIF time moved to the
/// next whole second ahead of now, so every frame leaves at its own VDIF time, as from a
/// backend, and a receiver's data age is the path's latency.
fn timeline_start(cfg: &SendConfig, sources: &[Source]) -> (Instant, u32) {
    let soon = Instant::now() + Duration::from_millis(20);
    let first = sources
        .iter()
        .filter_map(|s| s.memory.as_deref())
        .find_map(|m| vdif::VdifHeader::parse(m).ok());
    let (true, Some(h)) = (cfg.realtime, first) else {
        return (soon, 0);
    };
    let (now_wall, now) = (std::time::SystemTime::now(), Instant::now());
    let Ok(wall) = now_wall.duration_since(std::time::UNIX_EPOCH) else {
        return (soon, 0);
    };
    // Frame 0 of a second: generated data start on a second.
    let t0 = h.unix_seconds();
    let ahead = wall + Duration::from_millis(20);
    let later = (ahead.as_secs() as i64 + i64::from(ahead.subsec_nanos() > 0) - t0).clamp(0, i64::from(u32::MAX / 2));
    let due = Duration::from_secs((t0 + later) as u64);
    (now + due.saturating_sub(wall), later as u32)
}

/// The sockets' path MTU, the first the kernel knew.
pub(super) fn path_mtu(boards: &[Board]) -> Option<usize> {
    boards.iter().find_map(|b| b.wire.path_mtu())
}
