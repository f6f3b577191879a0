//! `evlbi serve --config FILE`: a station keeps the recorder's settings in a TOML file (e.g.
//! /etc/evlbi/serve.toml) instead of on a command line in a unit file.
//!
//! [`ServeConfig`] is the file's schema, and the only one: its keys are the flags of `evlbi
//! serve` with `_` for `-`, each optional. The command line is turned into the same struct and
//! laid over the file's ([`ServeConfig::overlay`]): a flag given wins over its key, a list flag
//! given (`--root`, `--disks`, `--vsi-allow`) replaces the file's list. contrib/evlbi-serve.toml
//! is a commented example; a test parses it and checks that it names every key.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Deserializer};

use crate::units::parse_positive_duration;
use crate::usage;

/// Most bytes of a `--config` file (the example is 2 KB): a regular file no larger is read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The settings of `evlbi serve`, from its `--config` file or its flags: `None` (or absent) is
/// "not set here". Unknown keys are refused, so a misspelt key is an error, not a setting
/// silently ignored.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The VSI-S control address, `"ADDR:PORT"` (`--vsi`; default 127.0.0.1:2620).
    pub vsi: Option<SocketAddr>,
    /// Peers besides the loopback addresses that may command the recorder, e.g.
    /// `["10.1.1.5"]` (`--vsi-allow`).
    pub vsi_allow: Option<Vec<IpAddr>>,
    /// Directories the recorder may write and read below (`--root`).
    pub root: Option<Vec<PathBuf>>,
    /// jive5ab-style disk patterns, e.g. `["/mnt/disk*"]` (`--disks`).
    pub disks: Option<Vec<String>>,
    /// Prometheus /metrics address, `"ADDR:PORT"` (`--metrics`).
    pub metrics: Option<SocketAddr>,
    /// How often a running transfer publishes its counts, e.g. `"500ms"` (`--interval`).
    #[serde(default, deserialize_with = "positive_duration")]
    pub interval: Option<Duration>,
    /// Time a control connection has to send its first request, e.g. `"60s"`
    /// (`--first-request-timeout`).
    #[serde(default, deserialize_with = "positive_duration")]
    pub first_request_timeout: Option<Duration>,
    /// Path-measurement server address (`--probe-server`).
    pub probe_server: Option<SocketAddr>,
    /// File receiver address (`--recv-listen`).
    pub recv_listen: Option<SocketAddr>,
    /// Pre-shared key file of the probe server and the file receiver (`--key-file`).
    pub key_file: Option<PathBuf>,
}

/// A duration key as the flags take it (`"500ms"`, `"60s"`, `"2m"`), greater than 0.
fn positive_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = Duration;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a duration as a string, such as \"500ms\" or \"60s\"")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Duration, E> {
            parse_positive_duration(s).map_err(E::custom)
        }
    }
    d.deserialize_str(Text).map(Some)
}

impl ServeConfig {
    /// Read and check the file at `path`. A file that cannot be read or parsed, a key it does
    /// not know, a value of the wrong type: a usage error (exit 2) naming the file and the
    /// problem. Relative paths in it are taken relative to the file's directory, so the file
    /// means the same whatever directory the daemon starts in.
    pub fn load(path: &Path) -> Result<ServeConfig> {
        let text = crate::read_named(path, MAX_CONFIG_BYTES)
            .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8 text".to_string()))
            .map_err(|why| usage(format!("--config {}: cannot read it: {why}", path.display())))?;
        let mut cfg: ServeConfig = toml::from_str(&text)
            .map_err(|e| usage(format!("--config {}: {}", path.display(), e.to_string().trim_end())))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        cfg.anchor(dir);
        Ok(cfg)
    }

    /// Relative paths made relative to `dir`.
    fn anchor(&mut self, dir: &Path) {
        for r in self.root.iter_mut().flatten() {
            if r.is_relative() {
                *r = dir.join(&*r);
            }
        }
        for p in self.disks.iter_mut().flatten() {
            if Path::new(p).is_relative() {
                *p = dir.join(&*p).to_string_lossy().into_owned();
            }
        }
        if let Some(k) = &mut self.key_file {
            if k.is_relative() {
                *k = dir.join(&*k);
            }
        }
    }

    /// `self` (the file) with every setting of `flags` (the command line) laid over it.
    pub fn overlay(self, flags: ServeConfig) -> ServeConfig {
        ServeConfig {
            vsi: flags.vsi.or(self.vsi),
            vsi_allow: flags.vsi_allow.or(self.vsi_allow),
            root: flags.root.or(self.root),
            disks: flags.disks.or(self.disks),
            metrics: flags.metrics.or(self.metrics),
            interval: flags.interval.or(self.interval),
            first_request_timeout: flags.first_request_timeout.or(self.first_request_timeout),
            probe_server: flags.probe_server.or(self.probe_server),
            recv_listen: flags.recv_listen.or(self.recv_listen),
            key_file: flags.key_file.or(self.key_file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../contrib/evlbi-serve.toml");

    fn parse(text: &str) -> Result<ServeConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_example_file_parses_and_names_every_key() {
        let cfg = parse(EXAMPLE).unwrap();
        assert_eq!(cfg.vsi, Some("0.0.0.0:2620".parse().unwrap()));
        assert_eq!(cfg.disks, Some(vec!["/mnt/disk*".to_string()]));
        // Its commented-out keys too: uncommented, every one parses and every field is set
        // (the destructuring has no `..`: a new field fails to compile here until the example
        // documents it).
        let all: String = EXAMPLE
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(kv) if kv.split_once(" = ").is_some_and(|(k, _)| !k.contains(' ')) => kv,
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let ServeConfig {
            vsi,
            vsi_allow,
            root,
            disks,
            metrics,
            interval,
            first_request_timeout,
            probe_server,
            recv_listen,
            key_file,
        } = parse(&all).unwrap_or_else(|e| panic!("{e}\n{all}"));
        assert!(vsi.is_some() && vsi_allow.is_some() && root.is_some() && disks.is_some());
        assert!(metrics.is_some() && interval.is_some() && first_request_timeout.is_some());
        assert!(probe_server.is_some() && recv_listen.is_some() && key_file.is_some());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_by_name() {
        let e = parse("vsi = \"127.0.0.1:2620\"\nroots = [\"/data\"]\n").unwrap_err();
        assert!(e.contains("unknown field `roots`") && e.contains("line 2"), "{e}");
        let e = parse("interval = 5\n").unwrap_err();
        assert!(
            e.contains("interval") && e.contains("integer") && e.contains("\"500ms\""),
            "{e}"
        );
        let e = parse("interval = \"0s\"\n").unwrap_err();
        assert!(e.contains("greater than 0"), "{e}");
        let e = parse("vsi = \"2620\"\n").unwrap_err();
        assert!(e.contains("vsi") && e.contains("socket address"), "{e}");
        let e = parse("root = \"/data\"\n").unwrap_err();
        assert!(e.contains("root") && e.contains("sequence"), "{e}");
    }

    #[test]
    fn flags_win_and_relative_paths_follow_the_file() {
        let mut file = parse(
            "vsi = \"127.0.0.1:2620\"\nroot = [\"data\"]\ndisks = [\"/mnt/disk*\", \"more/d*\"]\n\
             key_file = \"key\"\ninterval = \"2s\"\n",
        )
        .unwrap();
        file.anchor(Path::new("/etc/evlbi"));
        assert_eq!(file.root, Some(vec![PathBuf::from("/etc/evlbi/data")]));
        assert_eq!(
            file.disks,
            Some(vec!["/mnt/disk*".to_string(), "/etc/evlbi/more/d*".to_string()])
        );
        assert_eq!(file.key_file, Some(PathBuf::from("/etc/evlbi/key")));
        let flags = ServeConfig {
            vsi: Some("0.0.0.0:2620".parse().unwrap()),
            disks: Some(vec!["/data/d*".into()]),
            ..ServeConfig::default()
        };
        let cfg = file.overlay(flags);
        assert_eq!(cfg.vsi, Some("0.0.0.0:2620".parse().unwrap()));
        assert_eq!(cfg.disks, Some(vec!["/data/d*".to_string()]), "a list flag replaces");
        assert_eq!(cfg.root, Some(vec![PathBuf::from("/etc/evlbi/data")]), "kept");
        assert_eq!(cfg.interval, Some(Duration::from_secs(2)));
    }
}
