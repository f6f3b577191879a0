//! `evlbi send`'s memory of each receiver's path: the rate and RTT its last session measured,
//! so the next one starts there (careful resume, [`transfer::ResumeHint`]) instead of at
//! 100 Mb/s. One small JSON file, `peer-rates.json`, in the state directory (`--state-dir`,
//! else `$XDG_STATE_HOME/evlbi`, else `~/.local/state/evlbi`), keyed by the receiver's
//! IP address (the path is the host's; its port says nothing of it). Nothing in it is trusted: it is read below its directory without following links
//! (crate `safedir`), at most [`MAX_FILE`] bytes, and a file that is not a regular one, too
//! large or not the expected JSON is ignored with a warning and replaced; entries older than
//! [`MAX_AGE`] or with an implausible rate or RTT are dropped (the controller checks the hint
//! against the connect's round trip as well). It holds at most [`MAX_PEERS`] receivers, the
//! least recently used dropped first, and is replaced atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The file's name in the state directory.
pub const FILE: &str = "peer-rates.json";
/// Largest file read.
pub const MAX_FILE: u64 = 64 << 10;
/// Most receivers remembered.
pub const MAX_PEERS: usize = 128;
/// A path measured longer ago than this says little about today's.
pub const MAX_AGE: Duration = Duration::from_secs(30 * 86_400);

/// One receiver's path as its last session measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerRate {
    /// The adaptive controller's bandwidth estimate at the end, wire bit/s.
    pub rate_bps: f64,
    /// The smallest RTT measured, µs.
    pub rtt_us: u64,
    /// When, seconds since the Unix epoch.
    pub saved_unix_s: u64,
}

impl PeerRate {
    fn plausible(&self, now_s: u64) -> bool {
        self.rate_bps.is_finite()
            && (1e3..=1e12).contains(&self.rate_bps)
            && (10..=10_000_000).contains(&self.rtt_us)
            && now_s.saturating_sub(self.saved_unix_s) <= MAX_AGE.as_secs()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerFile {
    version: u32,
    peers: BTreeMap<String, PeerRate>,
}

/// The state directory `evlbi send` remembers paths in.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| Path::new(x).is_absolute()) {
        return Some(PathBuf::from(x).join("evlbi"));
    }
    let home = std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute())?;
    Some(PathBuf::from(home).join(".local/state/evlbi"))
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The remembered paths in `dir`; what cannot be believed is dropped with a warning.
fn load(dir: &safedir::Dir) -> PeerFile {
    let why = match dir.stat(FILE) {
        Ok(None) => return PeerFile::default(),
        Ok(Some(st)) if st.kind != safedir::EntryKind::File => "not a regular file (a link?)".to_string(),
        Ok(Some(st)) if st.len > MAX_FILE => format!("{} bytes, more than {MAX_FILE}", st.len),
        Ok(Some(_)) => match dir.read_small(FILE, MAX_FILE) {
            None => "unreadable (or more than one link to it)".to_string(),
            Some(bytes) => match serde_json::from_slice::<PeerFile>(&bytes) {
                Ok(f) if f.version == 1 => {
                    let now = now_s();
                    let peers = f.peers.into_iter().filter(|(_, p)| p.plausible(now)).collect();
                    return PeerFile { version: 1, peers };
                }
                Ok(f) => format!("version {}, not 1", f.version),
                Err(e) => format!("not its JSON ({e})"),
            },
        },
        Err(e) => e.to_string(),
    };
    eprintln!(
        "evlbi: warning: {} ignored (starting at the default rate; it is replaced after this session): {why}",
        dir.display(FILE).display()
    );
    PeerFile::default()
}

fn open(dir: &Path, create: bool) -> Option<safedir::Dir> {
    let opened = if create {
        std::fs::create_dir_all(dir).ok();
        safedir::Dir::open(dir)
    } else {
        safedir::Dir::open(dir)
    };
    match opened {
        Ok(d) => Some(d),
        Err(e) if !create => {
            if dir.exists() {
                eprintln!("evlbi: warning: state directory {}: {e}", dir.display());
            }
            None
        }
        Err(e) => {
            eprintln!("evlbi: warning: state directory {}: {e}", dir.display());
            None
        }
    }
}

/// What `dir` remembers of `peer`, if anything believable.
pub fn recall(dir: &Path, peer: &str) -> Option<PeerRate> {
    let d = open(dir, false)?;
    load(&d).peers.get(peer).copied()
}

/// Remember `rate` for `peer` in `dir` (created if missing). Failure only warns: the transfer
/// itself succeeded.
pub fn remember(dir: &Path, peer: &str, rate_bps: f64, rtt: Duration) {
    let now = now_s();
    let entry = PeerRate {
        rate_bps,
        rtt_us: u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX),
        saved_unix_s: now,
    };
    if !entry.plausible(now) {
        return;
    }
    let Some(d) = open(dir, true) else { return };
    let mut f = load(&d);
    f.version = 1;
    f.peers.insert(peer.to_string(), entry);
    while f.peers.len() > MAX_PEERS {
        let oldest = f
            .peers
            .iter()
            .min_by_key(|(_, p)| p.saved_unix_s)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            f.peers.remove(&k);
        }
    }
    let written = serde_json::to_vec_pretty(&f)
        .map_err(std::io::Error::other)
        .and_then(|b| d.write_atomic(FILE, &b));
    if let Err(e) = written {
        eprintln!(
            "evlbi: warning: could not remember the path in {}: {e}",
            d.display(FILE).display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_recalls_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recall(dir.path(), "a"), None);
        remember(dir.path(), "10.0.0.1:5310", 0.98e9, Duration::from_millis(100));
        let p = recall(dir.path(), "10.0.0.1:5310").unwrap();
        assert_eq!((p.rate_bps, p.rtt_us), (0.98e9, 100_000));
        for i in 0..MAX_PEERS + 5 {
            remember(dir.path(), &format!("peer{i}"), 1e9, Duration::from_millis(10));
        }
        let d = safedir::Dir::open(dir.path()).unwrap();
        assert_eq!(load(&d).peers.len(), MAX_PEERS);
        // Implausible values are neither written nor believed.
        remember(dir.path(), "x", f64::NAN, Duration::from_millis(10));
        assert_eq!(recall(dir.path(), "x"), None);
    }
}
