//! One forwarding direction: read IP packets from one TUN device, pass them
//! through a [`Link`], write what it releases to the other TUN device.
//!
//! The loop is deadline driven: it sleeps in `ppoll` on the input descriptor
//! until a packet arrives or the link's next release is due (at most
//! [`IDLE_WAIT`], so that the stop flag is seen promptly), and never spins
//! when idle.

use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use linkemu::{Counter, Link, LinkStats, LiveCounters};

use crate::sys;

/// Longest sleep between checks of the stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// Packets read in one go before releasing due packets again, so a flood on
/// the input cannot delay releases by more than this many reads.
const READ_BATCH: usize = 64;
/// Free buffers kept for reuse; more are freed.
const POOL_MAX: usize = 1024;
/// Timer slack for forwarding threads: releases wake at most this late.
const TIMER_SLACK_NS: u64 = 1_000;

/// A packet held by the link. Small packets are copied into a buffer of
/// their own size so that memory stays proportional to the bytes in flight
/// (a 52-byte TCP ACK must not pin a 9000-byte buffer for 100 ms).
#[derive(Clone)]
pub(crate) struct Packet {
    buf: Box<[u8]>,
    len: usize,
}

/// Counters of one direction, updated by its thread, readable at any time.
#[derive(Debug, Default)]
pub(crate) struct Live {
    received_packets: AtomicU64,
    received_bytes: AtomicU64,
    forwarded_packets: AtomicU64,
    forwarded_bytes: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_queue: AtomicU64,
    overflow: AtomicU64,
    write_errors: AtomicU64,
}

impl Live {
    pub(crate) fn snapshot(&self) -> LiveCounters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LiveCounters {
            received_packets: get(&self.received_packets),
            received_bytes: get(&self.received_bytes),
            forwarded_packets: get(&self.forwarded_packets),
            forwarded_bytes: get(&self.forwarded_bytes),
            dropped_loss: get(&self.dropped_loss),
            dropped_queue: get(&self.dropped_queue),
            overflow: get(&self.overflow),
            write_errors: get(&self.write_errors),
        }
    }
}

/// Final account of one direction.
#[derive(Debug, Clone, Serialize)]
pub struct DirectionReport {
    /// Read from the input TUN device.
    pub received: Counter,
    /// Written to the output TUN device (duplicates included).
    pub forwarded: Counter,
    /// Dropped before the model because the emulator's bound on bytes in
    /// flight ([`super::RealtimeConfig::queue_limit_bytes`]) was reached.
    pub overflow: Counter,
    /// Writes to the output device that failed (packet lost).
    pub write_errors: u64,
    /// Copies still inside the link when the emulator stopped (not delivered).
    pub in_flight_at_stop: u64,
    /// Packets the kernel dropped on the input TUN device because this
    /// direction did not read them in time (emulator short of CPU). The
    /// model never saw them; non-zero means the run is not trustworthy.
    /// `None` if the counter could not be read.
    pub input_tx_dropped: Option<u64>,
    /// Everything the link model did (loss, queue drops, duplicates, queue
    /// delay histogram); `None` in bare mode.
    pub model: Option<LinkStats>,
}

/// Everything one forwarding thread needs.
pub(crate) struct Direction {
    pub input: Arc<File>,
    pub output: Arc<File>,
    /// `None`: bare copy loop (no model), for benchmarking the plumbing.
    pub link: Option<Link<Packet>>,
    pub buf_len: usize,
    pub queue_limit_bytes: u64,
    pub live: Arc<Live>,
    pub stop: Arc<AtomicBool>,
}

struct Totals {
    received: Counter,
    forwarded: Counter,
    overflow: Counter,
    write_errors: u64,
}

impl Direction {
    /// Runs until the stop flag is set or the input fails.
    pub(crate) fn run(self) -> io::Result<DirectionReport> {
        sys::set_timer_slack(TIMER_SLACK_NS);
        let Direction {
            input,
            output,
            link,
            buf_len,
            queue_limit_bytes,
            live,
            stop,
        } = self;
        let mut totals = Totals {
            received: Counter::default(),
            forwarded: Counter::default(),
            overflow: Counter::default(),
            write_errors: 0,
        };
        let result = match link {
            None => bare_loop(&input, &output, buf_len, &live, &stop, &mut totals).map(|()| None),
            Some(mut link) => {
                let mut fwd = Forwarder {
                    output: &output,
                    pool: Vec::new(),
                    buf_len,
                    totals: &mut totals,
                };
                let r = model_loop(&input, &mut link, &mut fwd, queue_limit_bytes, &live, &stop);
                r.map(|()| Some(link))
            }
        };
        publish(&live, &totals, None);
        let link = result?;
        Ok(DirectionReport {
            received: totals.received,
            forwarded: totals.forwarded,
            overflow: totals.overflow,
            write_errors: totals.write_errors,
            in_flight_at_stop: link.as_ref().map_or(0, |l| l.in_flight() as u64),
            // Filled in by the emulator, which knows the namespaces.
            input_tx_dropped: None,
            model: link.map(|l| l.stats().clone()),
        })
    }
}

/// Reads one packet into `buf`; `Ok(None)` when nothing is waiting.
fn read_packet(input: &File, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        match (&*input).read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes one packet; a refused write (device down, no buffer space) loses
/// the packet and is counted, it does not stop forwarding.
fn write_packet(output: &File, data: &[u8], totals: &mut Totals) {
    match (&*output).write(data) {
        Ok(n) if n == data.len() => totals.forwarded.add(n as u64),
        _ => totals.write_errors += 1,
    }
}

fn publish(live: &Live, t: &Totals, model: Option<&LinkStats>) {
    let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
    set(&live.received_packets, t.received.packets);
    set(&live.received_bytes, t.received.bytes);
    set(&live.forwarded_packets, t.forwarded.packets);
    set(&live.forwarded_bytes, t.forwarded.bytes);
    set(&live.overflow, t.overflow.packets);
    set(&live.write_errors, t.write_errors);
    if let Some(s) = model {
        set(&live.dropped_loss, s.dropped_loss.packets);
        set(&live.dropped_queue, s.dropped_queue.packets);
    }
}

/// The comparison baseline: read, write, nothing else.
fn bare_loop(
    input: &File,
    output: &File,
    buf_len: usize,
    live: &Live,
    stop: &AtomicBool,
    totals: &mut Totals,
) -> io::Result<()> {
    let mut buf = vec![0u8; buf_len];
    while !stop.load(Ordering::Relaxed) {
        let mut got = 0;
        while got < READ_BATCH {
            let Some(n) = read_packet(input, &mut buf)? else { break };
            totals.received.add(n as u64);
            write_packet(output, &buf[..n], totals);
            got += 1;
        }
        publish(live, totals, None);
        if got < READ_BATCH {
            sys::wait_readable(input, Some(IDLE_WAIT))?;
        }
    }
    Ok(())
}

/// Output side of the model loop: writes released packets and recycles
/// their buffers.
struct Forwarder<'a> {
    output: &'a File,
    pool: Vec<Box<[u8]>>,
    buf_len: usize,
    totals: &'a mut Totals,
}

impl Forwarder<'_> {
    fn take(&mut self) -> Box<[u8]> {
        self.pool
            .pop()
            .unwrap_or_else(|| vec![0u8; self.buf_len].into_boxed_slice())
    }

    fn give(&mut self, buf: Box<[u8]>) {
        // Only full-size buffers are interchangeable.
        if buf.len() == self.buf_len && self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    fn release_due(&mut self, link: &mut Link<Packet>, now: Instant) {
        while let Some(p) = link.poll(now) {
            write_packet(self.output, &p.buf[..p.len], self.totals);
            self.give(p.buf);
        }
    }
}

fn model_loop(
    input: &File,
    link: &mut Link<Packet>,
    fwd: &mut Forwarder<'_>,
    queue_limit_bytes: u64,
    live: &Live,
    stop: &AtomicBool,
) -> io::Result<()> {
    while !stop.load(Ordering::Relaxed) {
        fwd.release_due(link, Instant::now());
        let mut got = 0;
        while got < READ_BATCH {
            let mut buf = fwd.take();
            let Some(n) = read_packet(input, &mut buf)? else {
                fwd.give(buf);
                break;
            };
            got += 1;
            fwd.totals.received.add(n as u64);
            if link.in_flight_bytes() + n as u64 > queue_limit_bytes {
                fwd.totals.overflow.add(n as u64);
                fwd.give(buf);
                continue;
            }
            // Keep the full buffer only when the packet fills at least half
            // of it; otherwise copy, so held memory is < 2× the bytes held.
            let packet = if 2 * n >= buf.len() {
                Packet { buf, len: n }
            } else {
                let small: Box<[u8]> = buf[..n].into();
                fwd.give(buf);
                Packet { buf: small, len: n }
            };
            let now = Instant::now();
            link.push(now, packet, n);
            // A zero-delay, unlimited link releases at once: do it now
            // rather than after the batch, for latency and buffer reuse.
            fwd.release_due(link, now);
        }
        publish(live, fwd.totals, Some(link.stats()));
        if got == READ_BATCH {
            // More may be waiting; releases are handled at the loop top.
            continue;
        }
        let now = Instant::now();
        let wait = match link.next_release() {
            Some(due) => due.saturating_duration_since(now).min(IDLE_WAIT),
            None => IDLE_WAIT,
        };
        if !wait.is_zero() {
            sys::wait_readable(input, Some(wait))?;
        }
    }
    Ok(())
}
