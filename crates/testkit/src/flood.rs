//! A flood of TCP connections that never send a byte: the attack a control port must survive.
//!
//! The flood connects at a set rate from a set local address and holds the newest connections
//! (as many as a share of this process's descriptor limit allows); older ones are reset (linger
//! 0), so repeated runs leave no TIME_WAIT behind to run the ephemeral ports out.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// What a flood did.
#[derive(Debug, Clone, Copy, Default)]
pub struct FloodReport {
    /// Connections established.
    pub connected: u64,
    /// Connect attempts that failed (a full accept queue, no descriptor, …).
    pub failed: u64,
    /// Seconds it ran.
    pub seconds: f64,
}

impl FloodReport {
    /// Connections established per second.
    pub fn rate(&self) -> f64 {
        self.connected as f64 / self.seconds.max(1e-9)
    }
}

/// A flood running on its own thread until [`Flood::finish`] (or drop).
pub struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<FloodReport>>,
}

/// Connections the flood holds at most: a quarter of this process's descriptor limit (raised
/// to the hard limit first), at most 8192.
pub fn flood_hold() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(now / 4).unwrap_or(usize::MAX).min(8192)
}

impl Flood {
    /// Connect to `target` from `from` (port chosen by the kernel) `per_second` times a second,
    /// for at least `min` and at least `per_second × min` connections (a busy host may not
    /// reach the rate: the flood then lasts longer), at most `max`; it ends at
    /// [`Flood::finish`] once both minimums are met.
    pub fn start(target: SocketAddr, from: IpAddr, per_second: u32, min: Duration, max: Duration) -> Flood {
        Flood::start_in(None, target, from, per_second, min, max)
    }

    /// [`Flood::start`] from inside the network namespace named by the file `netns`.
    pub fn start_in(
        netns: Option<std::path::PathBuf>,
        target: SocketAddr,
        from: IpAddr,
        per_second: u32,
        min: Duration,
        max: Duration,
    ) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let hold = flood_hold();
        let thread = std::thread::spawn(move || {
            if let Some(ns) = netns {
                if let Err(e) = crate::netns::enter(&ns) {
                    eprintln!("flood: {e}");
                    return FloodReport::default();
                }
            }
            run(target, from, per_second, min, max, hold, &flag)
        });
        Flood {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop once the minimum time has passed; what the flood did.
    pub fn finish(mut self) -> FloodReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    target: SocketAddr,
    from: IpAddr,
    per_second: u32,
    min: Duration,
    max: Duration,
    hold: usize,
    stop: &AtomicBool,
) -> FloodReport {
    let mut held: VecDeque<Socket> = VecDeque::new();
    let mut report = FloodReport::default();
    let t0 = Instant::now();
    let spacing = Duration::from_secs(1) / per_second.max(1);
    let min_connections = (f64::from(per_second) * min.as_secs_f64()) as u64;
    let mut next = t0;
    loop {
        let now = Instant::now();
        let elapsed = now - t0;
        let enough = elapsed >= min && report.connected >= min_connections;
        if elapsed >= max || (enough && stop.load(Ordering::Relaxed)) {
            break;
        }
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(1)));
            continue;
        }
        // Fallen far behind (a busy host): do not burst, pick the schedule up from now.
        if now - next > Duration::from_millis(100) {
            next = now;
        }
        next += spacing;
        match connect(target, from) {
            Ok(s) => {
                report.connected += 1;
                held.push_back(s);
                if held.len() > hold {
                    held.pop_front();
                }
            }
            Err(_) => report.failed += 1,
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

fn connect(target: SocketAddr, from: IpAddr) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::for_address(target), Type::STREAM, Some(Protocol::TCP))?;
    s.bind(&SockAddr::from(SocketAddr::new(from, 0)))?;
    s.set_linger(Some(Duration::ZERO))?;
    s.connect_timeout(&SockAddr::from(target), Duration::from_secs(2))?;
    Ok(s)
}
