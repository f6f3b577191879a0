//! Real-time link emulator: linkemu's [`Link`](linkemu::Link) model between two network
//! namespaces, through a TUN device in each (Linux, root or CAP_NET_ADMIN +
//! CAP_SYS_ADMIN).
//!
//! ```text
//!   netns A                      this process                       netns B
//!  10.77.0.1 ── tun A ──read──▶ Link a→b ──write──▶ tun B ── 10.77.0.2
//!            ◀──write── Link b→a ◀──read──
//! ```
//!
//! [`Emulator::start`] creates the namespaces that do not exist yet
//! (remembering which), creates one TUN device in each (from a short-lived
//! thread that enters the namespace; the descriptor stays valid afterwards),
//! gives them the two host addresses of a /30 in 10.77.0.0/16, and starts
//! one forwarding thread per direction. [`Emulator::shutdown`] (or dropping
//! the emulator) stops the threads, closes the TUN devices, which removes
//! them, and deletes exactly the namespaces it created.
//!
//! While running, a state file in [`RealtimeConfig::state_dir`] records the
//! pid and what was created; [`down`] uses it to stop a detached emulator
//! or clean up after one that was killed.

mod error;
mod forward;
mod netns;
mod sys;

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use serde::Serialize;

use linkemu::LinkConfig;
pub use linkemu::{IntervalSample, LiveCounters};

pub use error::RealtimeError;
pub use forward::DirectionReport;
pub use netns::{
    check_netns_name, down, is_running, list_states, netns_exists, read_state, state_path, DownReport, RunState,
    DEFAULT_STATE_DIR,
};
pub use sys::{detach_from_terminal, in_netns, MAX_IFNAME_LEN};

/// Whether packets go through the link model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Through [`crate::Link`] with the configured delay, loss, rate…
    #[default]
    Model,
    /// Straight copy from one TUN device to the other, no model: the
    /// baseline that shows what the plumbing alone costs.
    Bare,
}

/// Everything [`Emulator::start`] needs.
#[derive(Debug, Clone)]
pub struct RealtimeConfig {
    /// Namespace of endpoint A (created if it does not exist).
    pub ns_a: String,
    /// Namespace of endpoint B (created if it does not exist).
    pub ns_b: String,
    /// Network address of the /30 the two ends share; A gets `.1`, B `.2`
    /// (relative). Must lie in 10.77.0.0/16.
    pub subnet: Ipv4Addr,
    /// MTU of both TUN devices.
    pub mtu: u32,
    /// TUN device name in A.
    pub dev_a: String,
    /// TUN device name in B.
    pub dev_b: String,
    /// What happens to packets A → B.
    pub a_to_b: LinkConfig,
    /// What happens to packets B → A.
    pub b_to_a: LinkConfig,
    /// RNG seed of A → B; B → A uses a seed derived from it.
    pub seed: u64,
    /// Model or bare copy.
    pub mode: Mode,
    /// Bound on the IP bytes held by one direction (delay line + bottleneck
    /// queue). Packets arriving beyond it are dropped and counted as
    /// `overflow`; it only bites when rate × delay exceeds it.
    pub queue_limit_bytes: u64,
    /// Where to keep the state file; `None` writes none.
    pub state_dir: Option<PathBuf>,
}

impl RealtimeConfig {
    /// Defaults: 10.77.0.0/30, MTU 1500, devices `lkemu-a`/`lkemu-b`, a
    /// perfect link both ways, 256 MiB per direction, state under
    /// [`DEFAULT_STATE_DIR`].
    pub fn new(ns_a: impl Into<String>, ns_b: impl Into<String>) -> Self {
        Self {
            ns_a: ns_a.into(),
            ns_b: ns_b.into(),
            subnet: Ipv4Addr::new(10, 77, 0, 0),
            mtu: 1500,
            dev_a: "lkemu-a".into(),
            dev_b: "lkemu-b".into(),
            a_to_b: LinkConfig::default(),
            b_to_a: LinkConfig::default(),
            seed: 1,
            mode: Mode::Model,
            queue_limit_bytes: 256 << 20,
            state_dir: Some(PathBuf::from(DEFAULT_STATE_DIR)),
        }
    }

    /// Addresses of A and B.
    pub fn addresses(&self) -> (Ipv4Addr, Ipv4Addr) {
        let net = u32::from(self.subnet);
        (Ipv4Addr::from(net + 1), Ipv4Addr::from(net + 2))
    }

    /// Checks every field without touching the system.
    pub fn validate(&self) -> Result<(), RealtimeError> {
        check_netns_name(&self.ns_a)?;
        check_netns_name(&self.ns_b)?;
        if self.ns_a == self.ns_b {
            return Err(RealtimeError::SameNamespace(self.ns_a.clone()));
        }
        for dev in [&self.dev_a, &self.dev_b] {
            if dev.len() > MAX_IFNAME_LEN || check_netns_name(dev).is_err() {
                return Err(RealtimeError::InvalidName(dev.clone()));
            }
        }
        let net = u32::from(self.subnet);
        // Inside 10.77.0.0/16 and aligned to a /30.
        if net & 0xffff_0000 != 0x0a4d_0000 || net & 3 != 0 {
            return Err(RealtimeError::InvalidSubnet(self.subnet));
        }
        if !(576..=65535).contains(&self.mtu) {
            return Err(RealtimeError::InvalidMtu(self.mtu));
        }
        self.a_to_b.validate()?;
        self.b_to_a.validate()?;
        Ok(())
    }
}

/// Final result of a run, serialisable as the JSON summary.
#[derive(Debug, Clone, Serialize)]
pub struct RealtimeStats {
    /// Model or bare.
    pub mode: Mode,
    /// Wall time from start to stop, seconds.
    pub elapsed_s: f64,
    /// Namespace, device and address of A.
    pub a: EndpointInfo,
    /// Namespace, device and address of B.
    pub b: EndpointInfo,
    /// MTU of both devices.
    pub mtu: u32,
    /// RNG seed.
    pub seed: u64,
    /// Configuration A → B.
    pub a_to_b_config: LinkConfig,
    /// Configuration B → A.
    pub b_to_a_config: LinkConfig,
    /// What happened A → B.
    pub a_to_b: DirectionReport,
    /// What happened B → A.
    pub b_to_a: DirectionReport,
    /// Counts per interval of the run (the CLI records one per second, at most
    /// [`MAX_INTERVALS`]); empty when nobody sampled.
    pub intervals: Vec<IntervalSample>,
}

/// Longest per-second record kept in [`RealtimeStats::intervals`] (a day); later seconds are
/// only in the totals.
pub const MAX_INTERVALS: usize = 86_400;

/// One end of the emulated path.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointInfo {
    /// Network namespace.
    pub netns: String,
    /// TUN device inside it.
    pub dev: String,
    /// Its address (a /30).
    pub addr: Ipv4Addr,
    /// Whether the emulator created the namespace (and deletes it at the end).
    pub created: bool,
}

/// Things created so far; undone in reverse order on drop, so a failure
/// half-way through [`Emulator::start`] leaves nothing behind.
struct Resources {
    created: Vec<String>,
    tuns: Vec<Arc<File>>,
    state_path: Option<PathBuf>,
}

impl Resources {
    fn teardown(&mut self) -> Result<(), RealtimeError> {
        // Closing the last descriptor destroys a non-persistent TUN device.
        self.tuns.clear();
        let mut first_err = None;
        for ns in self.created.drain(..).rev() {
            if let Err(e) = netns::delete_netns(&ns) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(path) = self.state_path.take() {
            let _ = std::fs::remove_file(path);
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Resources {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// A running emulator. Stop it with [`Emulator::shutdown`] to get the
/// statistics; dropping it also stops and cleans up.
pub struct Emulator {
    config: RealtimeConfig,
    started: Instant,
    stop: Arc<AtomicBool>,
    live: [Arc<forward::Live>; 2],
    threads: Vec<JoinHandle<std::io::Result<DirectionReport>>>,
    /// Namespaces created by `start` (a copy: teardown empties `resources`).
    created_netns: Vec<String>,
    // Declared after `threads`, but the threads are joined explicitly
    // before the devices are closed (see `stop_and_join`).
    resources: Resources,
}

impl Emulator {
    /// Sets up namespaces and devices and starts forwarding.
    pub fn start(config: RealtimeConfig) -> Result<Self, RealtimeError> {
        config.validate()?;
        if !Path::new("/dev/net/tun").exists() {
            return Err(RealtimeError::NoTun);
        }
        let mut res = Resources {
            created: Vec::new(),
            tuns: Vec::new(),
            state_path: None,
        };
        let pid = std::process::id();
        let (addr_a, addr_b) = config.addresses();
        let mut state = RunState {
            pid,
            start_time: sys::process_start_time(pid).unwrap_or(0),
            ns_a: config.ns_a.clone(),
            ns_b: config.ns_b.clone(),
            dev_a: config.dev_a.clone(),
            dev_b: config.dev_b.clone(),
            addr_a,
            addr_b,
            created_netns: Vec::new(),
            ready: false,
        };
        if let Some(dir) = &config.state_dir {
            let path = state_path(dir, &config.ns_a, &config.ns_b);
            if path.exists() {
                let old = read_state(&path)?;
                if is_running(&old) {
                    return Err(RealtimeError::AlreadyRunning { pid: old.pid, path });
                }
                return Err(RealtimeError::StaleState(path));
            }
            // Written before anything is created so that a crash at any
            // later point leaves a record for `down`.
            netns::write_state(&path, &state)?;
            res.state_path = Some(path);
        }
        for ns in [&config.ns_a, &config.ns_b] {
            if !netns_exists(ns) {
                netns::create_netns(ns)?;
                res.created.push(ns.clone());
                state.created_netns.push(ns.clone());
                if let Some(path) = &res.state_path {
                    netns::write_state(path, &state)?;
                }
            }
        }
        for (ns, dev, addr) in [
            (&config.ns_a, &config.dev_a, addr_a),
            (&config.ns_b, &config.dev_b, addr_b),
        ] {
            let dev_name = dev.clone();
            let tun = in_netns(ns, move || {
                let tun = sys::create_tun(&dev_name)?;
                netns::disable_ipv6_here(&dev_name);
                Ok(tun)
            })
            .map_err(|source| RealtimeError::Io {
                what: format!("creating TUN device {dev} in namespace {ns}"),
                source,
            })?;
            res.tuns.push(Arc::new(tun));
            netns::configure_tun(ns, dev, addr, 30, config.mtu)?;
        }
        state.ready = true;
        if let Some(path) = &res.state_path {
            netns::write_state(path, &state)?;
        }

        let stop = Arc::new(AtomicBool::new(false));
        let live = [Arc::new(forward::Live::default()), Arc::new(forward::Live::default())];
        let (tun_a, tun_b) = (res.tuns[0].clone(), res.tuns[1].clone());
        let links = match config.mode {
            Mode::Bare => [None, None],
            Mode::Model => {
                let duplex = linkemu::Duplex::<forward::Packet>::asymmetric(
                    config.a_to_b.clone(),
                    config.b_to_a.clone(),
                    config.seed,
                )?;
                [Some(duplex.a_to_b), Some(duplex.b_to_a)]
            }
        };
        let mut emu = Emulator {
            config,
            started: Instant::now(),
            stop: stop.clone(),
            live: live.clone(),
            threads: Vec::new(),
            created_netns: res.created.clone(),
            resources: res,
        };
        let [link_ab, link_ba] = links;
        let plan = [
            ("a_to_b", tun_a.clone(), tun_b.clone(), link_ab, 0),
            ("b_to_a", tun_b, tun_a, link_ba, 1),
        ];
        for (name, input, output, link, i) in plan {
            let dir = forward::Direction {
                input,
                output,
                link,
                // The MTU bounds what TUN hands us (no GSO without IFF_VNET_HDR).
                buf_len: emu.config.mtu as usize,
                queue_limit_bytes: emu.config.queue_limit_bytes,
                live: live[i].clone(),
                stop: stop.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("linkemu-{name}"))
                .spawn(move || dir.run())
                .map_err(|source| RealtimeError::Io {
                    what: "spawning a forwarding thread".into(),
                    source,
                })?;
            emu.threads.push(handle);
        }
        Ok(emu)
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &RealtimeConfig {
        &self.config
    }

    /// Current counters of A → B and B → A.
    pub fn live(&self) -> (LiveCounters, LiveCounters) {
        (self.live[0].snapshot(), self.live[1].snapshot())
    }

    /// Whether both forwarding threads still run (false after an I/O error).
    pub fn is_healthy(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Asks the threads to stop; they notice within 50 ms.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stop_and_join(&mut self) -> Vec<Result<DirectionReport, RealtimeError>> {
        self.request_stop();
        let names = ["a_to_b", "b_to_a"];
        self.threads
            .drain(..)
            .zip(names)
            .map(|(t, direction)| match t.join() {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(RealtimeError::Forwarding {
                    direction,
                    reason: e.to_string(),
                }),
                Err(_) => Err(RealtimeError::Forwarding {
                    direction,
                    reason: "thread panicked".into(),
                }),
            })
            .collect()
    }

    /// Stops forwarding, removes the TUN devices and the namespaces this
    /// emulator created, and returns the statistics.
    pub fn shutdown(mut self) -> Result<RealtimeStats, RealtimeError> {
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let mut reports = self.stop_and_join().into_iter();
        // Read while the devices still exist (closing them removes them).
        let drops = [
            netns::tx_dropped(&self.config.ns_a, &self.config.dev_a),
            netns::tx_dropped(&self.config.ns_b, &self.config.dev_b),
        ];
        let teardown = self.resources.teardown();
        let (ab, ba) = match (reports.next(), reports.next()) {
            (Some(ab), Some(ba)) => {
                let (mut ab, mut ba) = (ab?, ba?);
                ab.input_tx_dropped = drops[0];
                ba.input_tx_dropped = drops[1];
                (ab, ba)
            }
            _ => {
                return Err(RealtimeError::Forwarding {
                    direction: "a_to_b",
                    reason: "thread missing".into(),
                })
            }
        };
        teardown?;
        let (addr_a, addr_b) = self.config.addresses();
        let created = |ns: &String| self.created_netns.contains(ns);
        Ok(RealtimeStats {
            mode: self.config.mode,
            elapsed_s,
            a: EndpointInfo {
                netns: self.config.ns_a.clone(),
                dev: self.config.dev_a.clone(),
                addr: addr_a,
                created: created(&self.config.ns_a),
            },
            b: EndpointInfo {
                netns: self.config.ns_b.clone(),
                dev: self.config.dev_b.clone(),
                addr: addr_b,
                created: created(&self.config.ns_b),
            },
            mtu: self.config.mtu,
            seed: self.config.seed,
            a_to_b_config: self.config.a_to_b.clone(),
            b_to_a_config: self.config.b_to_a.clone(),
            intervals: Vec::new(),
            a_to_b: ab,
            b_to_a: ba,
        })
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // Threads first: they hold the TUN descriptors' Arcs until they end.
        let _ = self.stop_and_join();
        let _ = self.resources.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        let ok = RealtimeConfig::new("tel", "corr");
        ok.validate().unwrap();
        assert_eq!(
            ok.addresses(),
            (Ipv4Addr::new(10, 77, 0, 1), Ipv4Addr::new(10, 77, 0, 2))
        );
        let same = RealtimeConfig::new("x", "x");
        assert!(matches!(same.validate(), Err(RealtimeError::SameNamespace(_))));
        for subnet in [[10, 78, 0, 0], [10, 77, 0, 2], [192, 168, 0, 0]] {
            let c = RealtimeConfig {
                subnet: Ipv4Addr::from(subnet),
                ..ok.clone()
            };
            assert!(
                matches!(c.validate(), Err(RealtimeError::InvalidSubnet(_))),
                "{subnet:?}"
            );
        }
        let c = RealtimeConfig {
            subnet: Ipv4Addr::new(10, 77, 3, 4),
            ..ok.clone()
        };
        c.validate().unwrap();
        assert_eq!(c.addresses().1, Ipv4Addr::new(10, 77, 3, 6));
        let c = RealtimeConfig { mtu: 100, ..ok.clone() };
        assert!(matches!(c.validate(), Err(RealtimeError::InvalidMtu(100))));
        let c = RealtimeConfig {
            dev_a: "much-too-long-name".into(),
            ..ok
        };
        assert!(matches!(c.validate(), Err(RealtimeError::InvalidName(_))));
    }
}
