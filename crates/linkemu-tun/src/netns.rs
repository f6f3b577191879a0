//! Named network namespaces (`ip netns`), TUN address set-up, and the state
//! file that lets `--down` undo what a previous run created.
//!
//! Namespaces are created and deleted with iproute2's `ip` command, present on
//! every machine we target; it also owns the `/run/netns/<name>` bind-mount
//! convention that users' own `ip netns exec` relies on, so doing it the same
//! way keeps us compatible with it.

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::RealtimeError;
use crate::sys;

/// Where `ip netns add` binds namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Default directory of state files, one per running emulator.
pub const DEFAULT_STATE_DIR: &str = "/run/evlbi-linkemu";

/// Checks that `name` is usable as a namespace name: it becomes a file name
/// under `/run/netns`, so only `[A-Za-z0-9_.-]`, not `.`/`..`, ≤ 64 bytes.
pub fn check_netns_name(name: &str) -> Result<(), RealtimeError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(RealtimeError::InvalidName(name.to_owned()))
    }
}

/// Whether namespace `name` exists (is bound under `/run/netns`).
pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// Runs `ip args…`, turning a failure into an error carrying its stderr.
pub(crate) fn ip(args: &[&str]) -> Result<(), RealtimeError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| RealtimeError::Io {
            what: "running the `ip` command (iproute2)".into(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(RealtimeError::Command {
        command: format!("ip {}", args.join(" ")),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

/// Creates namespace `name` and brings its loopback up (tools such as
/// iperf3 expect a working `lo`).
pub(crate) fn create_netns(name: &str) -> Result<(), RealtimeError> {
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "dev", "lo", "up"])
}

/// Deletes namespace `name` (its devices go with it).
pub(crate) fn delete_netns(name: &str) -> Result<(), RealtimeError> {
    ip(&["netns", "delete", name])
}

/// Packets the kernel may queue on a TUN device before the emulator reads
/// them. The default (500) overflows during TCP bursts when the emulator's
/// thread is busy for a moment, and those drops would happen outside the
/// model; 5000 absorbs them (drops that still happen are reported as
/// `input_tx_dropped`).
const TUN_TXQUEUELEN: &str = "5000";

/// Sets MTU, queue length, address and up state of TUN device `dev` inside
/// namespace `ns`. The address is point-to-point within its /30: the only
/// route it creates is the connected one to the peer.
pub(crate) fn configure_tun(ns: &str, dev: &str, addr: Ipv4Addr, prefix: u8, mtu: u32) -> Result<(), RealtimeError> {
    let mtu = mtu.to_string();
    let cidr = format!("{addr}/{prefix}");
    ip(&[
        "-n",
        ns,
        "link",
        "set",
        "dev",
        dev,
        "mtu",
        &mtu,
        "txqueuelen",
        TUN_TXQUEUELEN,
    ])?;
    ip(&["-n", ns, "addr", "add", &cidr, "dev", dev])?;
    ip(&["-n", ns, "link", "set", "dev", dev, "up"])
}

/// Turns IPv6 off on `dev` in the calling thread's namespace, best effort.
///
/// Otherwise the kernel sends router solicitations and DAD probes through
/// the emulated link, which then perturb exact packet counts. `/proc/sys/net`
/// shows the namespace of the thread that opens it, so this must run on a
/// thread inside the namespace (see [`sys::in_netns`]).
pub(crate) fn disable_ipv6_here(dev: &str) {
    // Fails harmlessly on kernels without IPv6: nothing to disable then.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
}

/// Transmit drops of device `dev` in namespace `ns`: packets the kernel
/// discarded because the emulator did not read them in time. `None` if the
/// counter cannot be read.
pub(crate) fn tx_dropped(ns: &str, dev: &str) -> Option<u64> {
    // /proc/thread-self/net follows the namespace of the reading thread.
    let text = sys::in_netns(ns, || std::fs::read_to_string("/proc/thread-self/net/dev")).ok()?;
    parse_tx_dropped(&text, dev)
}

/// Finds `dev`'s transmit-drop counter in the text of `/proc/net/dev`:
/// `name: rx_bytes rx_packets rx_errs rx_drop rx_fifo rx_frame rx_compressed
/// rx_multicast tx_bytes tx_packets tx_errs tx_drop …`.
fn parse_tx_dropped(text: &str, dev: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, counters) = line.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        counters.split_whitespace().nth(11)?.parse().ok()
    })
}

/// What a running emulator created, written to `<state_dir>/<a>--<b>.json`
/// so that `--down` (or a later run) can find and undo it even after the
/// emulator was killed with SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    /// Emulator process id.
    pub pid: u32,
    /// Its start time (ticks since boot) so that a reused pid is not mistaken for it.
    pub start_time: u64,
    /// Namespace of endpoint A.
    pub ns_a: String,
    /// Namespace of endpoint B.
    pub ns_b: String,
    /// TUN device name in `ns_a`.
    pub dev_a: String,
    /// TUN device name in `ns_b`.
    pub dev_b: String,
    /// Address of endpoint A.
    pub addr_a: Ipv4Addr,
    /// Address of endpoint B.
    pub addr_b: Ipv4Addr,
    /// Namespaces this emulator created (and only these are ever deleted).
    pub created_netns: Vec<String>,
    /// True once both TUN devices are up and packets are forwarded.
    pub ready: bool,
}

/// Path of the state file for the pair `(ns_a, ns_b)` in `dir`.
pub fn state_path(dir: &Path, ns_a: &str, ns_b: &str) -> PathBuf {
    // Names are checked to contain no '/', and "--" separates them readably.
    dir.join(format!("{ns_a}--{ns_b}.json"))
}

/// Writes `state` atomically (temporary file, then rename).
pub(crate) fn write_state(path: &Path, state: &RunState) -> Result<(), RealtimeError> {
    let io_err = |what: &str, source| RealtimeError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_err("creating the directory of", e))?;
    }
    let json = serde_json::to_vec_pretty(state).map_err(|e| io_err("serialising", io::Error::other(e)))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(|e| io_err("writing", e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err("renaming into", e))
}

/// Reads a state file.
pub fn read_state(path: &Path) -> Result<RunState, RealtimeError> {
    let bytes = std::fs::read(path).map_err(|source| RealtimeError::Io {
        what: format!("reading state file {}", path.display()),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| RealtimeError::BadStateFile {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// All state files in `dir` (an absent directory has none).
pub fn list_states(dir: &Path) -> Result<Vec<(PathBuf, RunState)>, RealtimeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RealtimeError::Io {
                what: format!("listing {}", dir.display()),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            out.push((path.clone(), read_state(&path)?));
        }
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    Ok(out)
}

/// Whether the process recorded in `state` is still running.
pub fn is_running(state: &RunState) -> bool {
    sys::process_start_time(state.pid) == Some(state.start_time)
}

/// What [`down`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DownReport {
    /// Pid that was sent SIGTERM, if it was still running.
    pub stopped_pid: Option<u32>,
    /// Namespaces that the emulator had left behind (it died without
    /// cleaning up) and that were deleted here.
    pub deleted_netns: Vec<String>,
}

/// Undoes the run recorded in `path`: stops its process (SIGTERM, then waits
/// up to `timeout` for it to tear down by itself), deletes namespaces it
/// created that still exist (only if it died without cleaning up), and
/// removes the state file. Never touches a namespace it did not create.
pub fn down(path: &Path, timeout: Duration) -> Result<DownReport, RealtimeError> {
    let state = read_state(path)?;
    let mut report = DownReport {
        stopped_pid: None,
        deleted_netns: Vec::new(),
    };
    if is_running(&state) {
        sys::terminate(state.pid).map_err(|source| RealtimeError::Io {
            what: format!("signalling emulator pid {}", state.pid),
            source,
        })?;
        report.stopped_pid = Some(state.pid);
        let deadline = Instant::now() + timeout;
        while is_running(&state) {
            if Instant::now() >= deadline {
                return Err(RealtimeError::StillRunning { pid: state.pid });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for ns in &state.created_netns {
        if netns_exists(ns) {
            delete_netns(ns)?;
            report.deleted_netns.push(ns.clone());
        }
    }
    match std::fs::remove_file(path) {
        // The emulator removes its own file when it exits cleanly.
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(RealtimeError::Io {
            what: format!("removing {}", path.display()),
            source: e,
        }),
        _ => Ok(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_dev_tx_drops() {
        let text = "Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\nlkemu-a: 3164107   57306    0    0    0     0          0         0 444116814  296142    0 11070    0     0       0          0\n";
        assert_eq!(parse_tx_dropped(text, "lkemu-a"), Some(11070));
        assert_eq!(parse_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_tx_dropped(text, "lkemu-b"), None);
    }

    #[test]
    fn netns_names() {
        for ok in ["tel", "corr", "a-b_c.1", "X9"] {
            assert!(check_netns_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "ns:tel", &"x".repeat(65)] {
            assert!(check_netns_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn state_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("linkemu-state-{}", std::process::id()));
        let path = state_path(&dir, "tel", "corr");
        assert!(path.ends_with("tel--corr.json"));
        let state = RunState {
            pid: 42,
            start_time: 7,
            ns_a: "tel".into(),
            ns_b: "corr".into(),
            dev_a: "lkemu-a".into(),
            dev_b: "lkemu-b".into(),
            addr_a: Ipv4Addr::new(10, 77, 0, 1),
            addr_b: Ipv4Addr::new(10, 77, 0, 2),
            created_netns: vec!["tel".into()],
            ready: true,
        };
        write_state(&path, &state).unwrap();
        assert_eq!(read_state(&path).unwrap(), state);
        let all = list_states(&dir).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1, state);
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(read_state(&path), Err(RealtimeError::BadStateFile { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(list_states(&dir).unwrap().is_empty());
    }
}
