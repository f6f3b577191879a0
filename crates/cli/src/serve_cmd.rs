//! `evlbi serve`: the station recorder daemon, driven over VSI-S like jive5ab.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use daemon::paths::StationPaths;
use daemon::sessions::TransferEnv;
use daemon::vsi::VsiLimits;
use daemon::Daemon;
use recording::write::WriterPlacement;

use crate::metrics_flag::MetricsArgs;
use crate::serve_config::ServeConfig;
use crate::units::parse_positive_duration;
use crate::{usage, usage_of, ProblemsFound};

pub const ABOUT: &str = "The recorder daemon: takes VSI-S commands (jive5ab's protocol, what the Field System \
speaks) on --vsi and records scans, writes net2file recordings, relays to a correlator (net2net) or sends it \
a test stream of the mode (fill2net), one transfer at a time. Replies use jive5ab's return codes: 0 done, 1 initiated, 2 query only, \
4 failed, 6 not whilst a transfer is in progress, 7 no such keyword, 8 parameter error.\n\n\
Access: VSI-S has no authentication. The control port answers only peers on the loopback \
addresses and those given with --vsi-allow; every other connection is closed at once. The \
default --vsi binds 127.0.0.1, so out of the box only this host can command it.";

/// What `evlbi serve --help` says after the flags: every keyword the daemon answers, from the
/// table that parses them (vsis's `KEYWORDS`, so the list cannot drift), then examples.
pub fn after_help() -> String {
    let forms: Vec<&str> = vsis::command::KEYWORDS.iter().map(|k| k.forms).collect();
    format!("Keywords: {}\n\n{EXAMPLES}", forms.join(" "))
}

const EXAMPLES: &str = "Examples:\n  \
evlbi serve --root /data --metrics 127.0.0.1:9200\n  \
# a station's service: the settings in a file (contrib/evlbi-serve.toml), a flag overriding one\n  \
evlbi serve --config /etc/evlbi/serve.toml --metrics 127.0.0.1:9201\n  \
# the Field System's session, by hand:\n  \
printf 'mode = VDIF_8000-512-16-2 ;\\nnet_protocol = udps : 32M ;\\nnet_port = 46227 ;\\nrecord = on : exp_ef_no0001 ;\\n' | nc -q1 127.0.0.1 2620\n  \
printf 'evlbi? ;\\n' | nc -q1 127.0.0.1 2620\n  \
# the FS host at 10.1.1.5 commands it over the station LAN:\n  \
evlbi serve --vsi 0.0.0.0:2620 --vsi-allow 10.1.1.5 --root /data";

#[derive(Args)]
pub struct ServeArgs {
    /// Read the settings from this TOML file (e.g. /etc/evlbi/serve.toml; keys are the flags
    /// below with '_' for '-': vsi, vsi_allow, root, disks, metrics, interval,
    /// first_request_timeout, probe_server, recv_listen, key_file; contrib/evlbi-serve.toml is
    /// an example; relative paths in it are taken relative to its directory). A flag given on
    /// the command line overrides its key; a list flag given (--root, --disks, --vsi-allow)
    /// replaces the file's list.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The VSI-S control port, ADDR:PORT (2620 is the Mark5/jive5ab port). Default:
    /// 127.0.0.1:2620.
    #[arg(long, value_name = "ADDR:PORT")]
    vsi: Option<SocketAddr>,
    /// Also take commands from this peer address (repeat for several). Without it only
    /// loopback peers are answered. A peer's own address: 0.0.0.0, ::, multicast and broadcast
    /// addresses are refused (VSI-S has no authentication: there is no "allow everyone").
    #[arg(long, value_name = "IP")]
    vsi_allow: Vec<IpAddr>,
    /// A directory the recorder may write and read below (repeat for several): `set_disks`,
    /// `net2file` and `disk2file` paths are accepted inside these (and --disks) only, and
    /// nothing below is reached through a symbolic link. The first also takes relative
    /// `set_disks` entries and bare file names. Default: the current directory, when no
    /// --disks is given either.
    #[arg(long, value_name = "DIR")]
    root: Vec<PathBuf>,
    /// jive5ab-style disk patterns (repeat for several), e.g. '/mnt/disk*': the directories
    /// matching them may be disks (none of them a link), and they are the disks a recording
    /// goes to until the Field System's `set_disks`. Without it the first --root is the one
    /// disk. A pattern names its first directory (no wildcard right below /: '/*/*' is refused)
    /// and matches at most 256 directories.
    #[arg(long, value_name = "PATTERN")]
    disks: Vec<String>,
    /// How often a running transfer publishes its counts (evlbi?, tstat?, --metrics).
    /// Default: 500ms.
    #[arg(long, value_parser = parse_positive_duration)]
    interval: Option<Duration>,
    /// Time a control connection has to send its first request. Default: 60s.
    #[arg(long, value_parser = parse_positive_duration)]
    first_request_timeout: Option<Duration>,
    /// Also serve path measurements (`evlbi probe server`) on this control address, so the
    /// correlator can probe the path to the station between scans.
    #[arg(long, value_name = "ADDR:PORT")]
    probe_server: Option<SocketAddr>,
    /// Also receive files (`evlbi recv`: recorded scans shipped back, schedules) on this
    /// control address; they land below --root.
    #[arg(long, value_name = "ADDR:PORT")]
    recv_listen: Option<SocketAddr>,
    #[command(flatten)]
    key: crate::shared_args::KeyFileArg,
    #[command(flatten)]
    metrics: MetricsArgs,
    /// For measurements only: file writes in a thread of this process, not a writer process.
    #[arg(long, hide = true)]
    writer_in_thread: bool,
}

/// A list flag: `None` when not given (the file's list stays).
fn given<T: Clone>(v: &[T]) -> Option<Vec<T>> {
    (!v.is_empty()).then(|| v.to_vec())
}

/// The VSI-S port when neither the flag nor the file names one.
const DEFAULT_VSI: ([u8; 4], u16) = ([127, 0, 0, 1], 2620);

impl ServeArgs {
    /// The settings the command line gives, as the config file's struct.
    fn flags(&self) -> ServeConfig {
        ServeConfig {
            vsi: self.vsi,
            vsi_allow: given(&self.vsi_allow),
            root: given(&self.root),
            disks: given(&self.disks),
            metrics: self.metrics.metrics,
            interval: self.interval,
            first_request_timeout: self.first_request_timeout,
            probe_server: self.probe_server,
            recv_listen: self.recv_listen,
            key_file: self.key.key_file.clone(),
        }
    }

    /// The file's settings (with --config) under the command line's.
    fn settings(&self) -> Result<ServeConfig> {
        let file = match &self.config {
            Some(path) => ServeConfig::load(path)?,
            None => ServeConfig::default(),
        };
        Ok(file.overlay(self.flags()))
    }
}

pub fn run(a: ServeArgs) -> Result<()> {
    let c = a.settings()?;
    // Read (and refused) before anything is bound: a key file that is a device or huge is a
    // usage error at once, never a read without end while the daemon runs.
    let key = crate::read_key(&c.key_file)?;
    check_vsi_allow(c.vsi_allow.as_deref().unwrap_or_default())?;
    let (root, disks) = (c.root.clone().unwrap_or_default(), c.disks.clone().unwrap_or_default());
    let roots = if root.is_empty() && disks.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        root
    };
    let paths = StationPaths::new(&roots, &disks).map_err(usage_of)?;
    let writer = if a.writer_in_thread {
        WriterPlacement::Thread
    } else {
        WriterPlacement::this_executable()?
    };
    let root = paths
        .first_root()
        .map(PathBuf::from)
        .or_else(|| paths.default_disks().into_iter().next())
        .unwrap_or_else(|| PathBuf::from("."));
    let allowed = paths.allowed();
    let disks = paths.default_disks();
    let env = TransferEnv {
        paths,
        writer,
        interval: c
            .interval
            .unwrap_or(Duration::from_millis(500))
            .max(Duration::from_millis(50)),
    };
    let metrics = MetricsArgs { metrics: c.metrics }.start("serve")?;
    let daemon = Daemon::new(env, env!("CARGO_PKG_VERSION"), metrics.hub())?;
    let vsi = c.vsi.unwrap_or_else(|| SocketAddr::from(DEFAULT_VSI));
    let listener = TcpListener::bind(vsi).with_context(|| format!("--vsi {vsi}: cannot listen"))?;
    let local = listener.local_addr()?;
    let vsi_allow = c.vsi_allow.clone().unwrap_or_default();
    let who = if vsi_allow.is_empty() {
        "loopback peers only".to_string()
    } else {
        format!(
            "loopback peers and {}",
            vsi_allow.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(", ")
        )
    };
    status!(
        "evlbi serve: VSI-S on {local} (TCP; {who}); may write below {allowed}; disks {}",
        disks
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if disks.is_empty() {
        status!("evlbi serve: warning: no disk matches --disks yet: record = on is refused until set_disks names one");
    }
    let stop = crate::stop_flag()?;
    let services = start_services(&c, key, &root, &metrics, &stop)?;
    let limits = VsiLimits {
        allow: vsi_allow,
        first_request: c.first_request_timeout.unwrap_or(Duration::from_secs(60)),
        ..VsiLimits::default()
    };
    // The disks' space and time left, looked at again every few seconds for the metrics.
    let stats = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                daemon.refresh();
                for _ in 0..50 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        let served = daemon::vsi::serve(&listener, &daemon, &limits, &stop);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        served
    })
    .context("serving the control port")?;
    let end = daemon.shutdown();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in services {
        let _ = s.join();
    }
    status!(
        "evlbi serve: stopped; {} control connection(s), {} closed while idle",
        stats.accepted,
        stats.evicted + stats.timed_out
    );
    match end {
        Some(e) => Err(ProblemsFound(format!("stopping the running transfer: {e}")).into()),
        None => Ok(()),
    }
}

/// `--vsi-allow` names peers: an address no peer has (0.0.0.0, ::, a multicast or the
/// broadcast address) is refused rather than accepted to allow nobody — an operator who wrote
/// 0.0.0.0 meant "everyone", which VSI-S, having no authentication, must not be opened to.
fn check_vsi_allow(allow: &[IpAddr]) -> Result<()> {
    for ip in allow {
        let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
        if ip.is_unspecified() || ip.is_multicast() || broadcast {
            return Err(usage(format!(
                "--vsi-allow {ip}: not the address of a peer (it would allow nobody; VSI-S has no \
                 authentication, so there is no 'allow everyone'): give the Field System host's address, \
                 e.g. --vsi-allow 10.1.1.5"
            )));
        }
    }
    Ok(())
}

/// The probe server and the file receiver beside the recorder, each on its own thread until
/// `stop`, their counts published as `probe_server` and `transfer_recv`.
fn start_services(
    a: &ServeConfig,
    key: Option<Vec<u8>>,
    root: &std::path::Path,
    metrics: &crate::metrics_flag::Metrics,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let mut threads = Vec::new();
    if let Some(listen) = a.probe_server {
        let mut cfg = probe_session::ServerConfig::new(listen);
        cfg.key = key.clone();
        let server = probe_session::Server::bind(cfg).with_context(|| format!("--probe-server {listen}"))?;
        status!("evlbi serve: probe server on {} (TCP)", server.local_addr()?);
        let (publisher, stop) = (metrics.hub().source("probe_server")?, stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut counts = probe::results::ProbeServerStatus::default();
            let r = server.serve(&stop, None, |e| {
                crate::metrics_flag::probe_tally(&mut counts, &e);
                publisher.publish(metrics::Status::ProbeServer(counts.clone()));
            });
            if let Err(e) = r {
                status!("evlbi serve: probe server stopped: {e}");
            }
        }));
    }
    if let Some(listen) = a.recv_listen {
        let mut cfg = transfer_session::ServerConfig::new(listen, root.to_path_buf());
        cfg.key = key;
        let server = transfer_session::Server::bind(cfg).with_context(|| format!("--recv-listen {listen}"))?;
        status!(
            "evlbi serve: file receiver on {} (TCP), files below {}",
            server.local_addr()?,
            root.display()
        );
        let (publisher, stop) = (metrics.hub().source("transfer_recv")?, stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut counts = transfer::results::TransferRecvStatus::default();
            let r = server.serve(&stop, false, &mut |e| {
                crate::metrics_flag::transfer_tally(&mut counts, &e);
                publisher.publish(metrics::Status::TransferRecv(counts.clone()));
            });
            if let Err(e) = r {
                status!("evlbi serve: file receiver stopped: {e}");
            }
        }));
    }
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `evlbi serve --help` lists every keyword the daemon answers (the fresh clone's list lacked
    /// ten of them), each as its parser's table writes it.
    #[test]
    fn serve_help_lists_every_keyword_the_daemon_answers() {
        let mut cli = crate::Cli::command();
        let serve = cli.find_subcommand_mut("serve").expect("serve");
        // As printed, wrapped to the terminal: compared word by word.
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let help = words(&serve.render_long_help().to_string());
        for k in vsis::command::KEYWORDS {
            assert!(help.contains(&words(k.forms)), "{} missing from serve --help", k.name);
        }
        for asked in [
            "dts_id?",
            "os_rev?",
            "datastream=",
            "scan_set=",
            "scan_check?",
            "data_check?",
            "disk2file=",
            "reset=abort",
            "rtime?",
            "error?",
            "ack=N",
        ] {
            assert!(help.contains(asked), "{asked}");
        }
    }
}
