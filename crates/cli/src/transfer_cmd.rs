//! `evlbi send` / `evlbi recv`: reliable bulk transfer of recorded scans.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use transfer_session::{send_items, CcChoice, SendConfig, Server, ServerConfig, ServerEvent, StartHint};

use crate::flags::{JsonOutput, ResultOutput};
use crate::transfer_print::print_summary;
use crate::units::{parse_duration_within, parse_rate, parse_size, rate_fmt};
use crate::{usage, ProblemsFound};

/// Default control port of `evlbi recv`.
pub const DEFAULT_PORT: u16 = 5310;

/// Receive files into a directory: control on TCP, data on UDP.
#[derive(Args)]
#[command(
    after_help = "Files land as NAME.part (with NAME.part.evlbi, the resume record) and get their final name \
only after the BLAKE3 of every block and of the whole file match the sender's. Run the same `evlbi send` again \
after an interruption (either side killed, network down): blocks already received are not sent again, and \
everything is re-verified.\n\nExamples:\n  evlbi recv --root /data/incoming                  # port 5310, all addresses\n  \
evlbi recv --listen 127.0.0.1:5310 --root /tmp/in --once\n  \
evlbi recv --root /data/incoming --key-file /etc/evlbi/transfer.key   # senders must prove the key"
)]
pub struct RecvArgs {
    /// Control address: PORT, or ADDRESS:PORT.
    #[arg(long, default_value = "0.0.0.0:5310")]
    listen: String,
    /// Directory the files land in (nothing is ever written outside it).
    #[arg(long)]
    root: PathBuf,
    #[command(flatten)]
    key: crate::shared_args::KeyFileArg,
    /// Serve one authenticated session, then exit (exit code 1 if a file failed). Connections
    /// that never authenticate do not count.
    #[arg(long)]
    once: bool,
    /// Replace files that already exist below the root (otherwise such an offer is refused and
    /// the existing file is kept).
    #[arg(long)]
    overwrite: bool,
    /// Sessions served at once; one more is told the receiver is busy.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_sessions: u32,
    /// Connections that sent something but have not authenticated yet, at once; for a new one
    /// the oldest of the peer holding the most is closed (connections that sent nothing yet wait
    /// apart, up to 4096: a flood of idle connections cannot lock a sender out).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_pending: u32,
    /// Time a connection has to authenticate.
    #[arg(long, default_value = "10s", value_parser = parse_handshake_timeout)]
    handshake_timeout: Duration,
    // --json: one JSON line per received file on stdout instead of text; --export-json: the
    // same lines into FILE.
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
}

fn parse_handshake_timeout(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::from_millis(100), Duration::from_secs(3600), "100ms and 1h")
}

/// Congestion control.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Cc {
    /// Model-based (BBR-like): finds the bottleneck rate, ignores isolated random loss, yields
    /// when the queue grows; `--rate` caps it.
    Adaptive,
    /// Exactly `--rate` on the wire: dedicated lightpaths.
    Fixed,
}

/// Send files and directories to an `evlbi recv`.
#[derive(Args)]
#[command(
    after_help = "DEST is HOST[:PORT][/PATH]: PATH is a directory below the receiver's --root (default: the \
root itself). Directories are sent recursively; empty files and directories too.\n\nExamples:\n  \
evlbi send scan01.vdif corr.example.org:/exp42                 # adaptive rate\n  \
evlbi send scans/ corr.example.org:/exp42                      # a directory: one stream for all its files\n  \
evlbi send --cc fixed --rate 4G scans/ corr.example.org:5310/exp42\n  \
evlbi send big.vdif 127.0.0.1:5310 --sync false --export-json send.json   # verdict without fsync\n  \
evlbi send --disks '/mnt/disk*' vbs://ev123_no0001_dsEf corr:/exp42     # lands as exp42/ev123_no0001_dsEf.vdif\n  \
evlbi send --keep-layout mk6://ev123_ef_no0001 corr:/exp42              # exp42/1/0/ev123_ef_no0001, … as on the module\n\n\
A recorded scan (vbs://SCAN, mk6://SCAN) is read from its disks in block order and lands as one continuous \
VDIF file, SCAN.vdif, verified end to end like any file (BLAKE3 of what was read from the disks against what \
was written at the receiver). With --keep-layout its files are sent as they lie, each verified, below a \
directory per disk; `evlbi vdif gather --disks 'DEST/*'` reads them there.\n\nThe JSON report has per file: bytes \
resumed, bytes per round, the BLAKE3 the receiver verified, the fsync it took and the time from the file's last \
datagram to its verdict; for the data stream: datagrams, retransmissions, loss seen, RTT and the rate every 100 ms."
)]
pub struct SendArgs {
    /// Files, directories or recorded scans (vbs://SCAN, mk6://SCAN), then DEST
    /// (HOST[:PORT][/PATH]).
    #[arg(required = true, num_args = 2.., value_name = "FILE|DIR|SCAN... DEST")]
    args: Vec<String>,
    #[command(flatten)]
    disks: crate::scan_args::DisksArg,
    /// Send a recorded scan's files as they lie on its disks (vbs chunks, Mark6 files), below
    /// a directory per disk, instead of as one continuous file.
    #[arg(long)]
    keep_layout: bool,
    /// Congestion control.
    #[arg(long, value_enum, default_value_t = Cc::Adaptive)]
    cc: Cc,
    /// Wire rate: the rate with --cc fixed, the cap with adaptive (e.g. 1G, 4.096G).
    #[arg(long, value_parser = parse_rate, default_value = "10G")]
    rate: f64,
    /// Start the adaptive rate here instead of at the rate remembered for this receiver (or
    /// 100 Mb/s): from the first datagram, kept if the path carries it, left at the first loss
    /// burst or queue (e.g. 1G on a path known to carry 1 Gb/s).
    #[arg(long, value_parser = parse_rate)]
    start_rate: Option<f64>,
    /// Where the rate each receiver's last session measured is remembered (peer-rates.json;
    /// default $XDG_STATE_HOME/evlbi, else ~/.local/state/evlbi); the next session to it starts
    /// at that rate. `--remember false`: neither read nor written.
    #[arg(long, value_name = "DIR")]
    state_dir: Option<std::path::PathBuf>,
    /// Remember this receiver's path rate for the next session, and start from what was
    /// remembered.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false")]
    remember: bool,
    /// Payload bytes per datagram: 8192 needs jumbo frames end to end (or loopback); 1416 fits
    /// a 1500-byte MTU.
    #[arg(long, default_value_t = 8192)]
    chunk: u32,
    /// Block size for verification and resume (rounded up to a power of two, 4K to 1G).
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    block: u64,
    #[command(flatten)]
    key: crate::shared_args::KeyFileArg,
    /// Whether the receiver fsyncs each file before its verdict: `true` (default) means
    /// "verified" also means "on the receiver's disk" — safe to delete the source; `false`
    /// only means the verified bytes are in the receiver's page cache (faster; the JSON says
    /// what the fsync cost, `sync_s`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false")]
    sync: bool,
    #[command(flatten)]
    output: ResultOutput,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
}

/// `HOST[:PORT][/PATH]` → address and path.
fn parse_dest(s: &str) -> Result<(SocketAddr, String)> {
    let (host, path) = match s.find('/') {
        Some(i) => (&s[..i], s[i + 1..].trim_matches('/')),
        None => (s, ""),
    };
    // "HOST:/PATH" is the default port, as in scp.
    let host = host.strip_suffix(':').unwrap_or(host);
    if host.is_empty() {
        return Err(usage(format!("destination {s:?}: expected HOST[:PORT][/PATH]")));
    }
    let what = if host == s {
        "destination".to_string()
    } else {
        format!("destination {s:?}")
    };
    let (_, addr) = crate::addr::peer(&what, host, Some(DEFAULT_PORT))?;
    Ok((addr, path.to_string()))
}

pub fn run_recv(a: RecvArgs) -> Result<()> {
    let listen = crate::addr::listen_unicast("--listen", &a.listen)?;
    let mut cfg = ServerConfig::new(listen, a.root.clone());
    cfg.key = a.key.read()?;
    cfg.overwrite = a.overwrite;
    cfg.limits = transfer_session::Limits {
        max_pending: a.max_pending as usize,
        handshake_timeout: a.handshake_timeout,
        max_active: a.max_sessions as usize,
        ..Default::default()
    };
    let server = match Server::bind(cfg) {
        Err(transfer_session::TransferSessionError::Usage(m)) => return Err(usage(m.to_string())),
        r => r?,
    };
    status!(
        "evlbi recv: control on {} (TCP), files below {}{}",
        server.local_addr()?,
        a.root.display(),
        if a.key.key_file.is_some() { ", key required" } else { "" }
    );
    let mut lines = a.output.lines()?;
    let metrics = a.metrics.start("recv")?;
    let publisher = metrics.publisher("transfer_recv");
    let mut counts = transfer::results::TransferRecvStatus::default();
    let stop = AtomicBool::new(false);
    let mut failed = 0u32;
    server.serve(&stop, a.once, &mut |e| {
        if let Some(p) = &publisher {
            crate::metrics_flag::transfer_tally(&mut counts, &e);
            p.publish(metrics::Status::TransferRecv(counts.clone()));
        }
        recv_event(e, &mut lines, &mut failed)
    })?;
    if a.once && failed > 0 {
        return Err(anyhow::anyhow!(ProblemsFound(format!(
            "{failed} file(s) or session(s) failed"
        ))));
    }
    Ok(())
}

/// What `evlbi recv` says about one event; failures counted in `failed`.
fn recv_event(e: ServerEvent, lines: &mut crate::flags::JsonLines, failed: &mut u32) {
    match e {
        ServerEvent::Connected(peer) => status!("{peer}: connected"),
        // Not counted as a failure: it never became a session (a port scan, a wrong key).
        ServerEvent::Rejected(peer, why) => status!("{peer}: refused before the session: {}", one_line(&why)),
        ServerEvent::Directory(d) => status!("  {d}/"),
        ServerEvent::DataPort(peer, port) => status!("{peer}: data on UDP {port}"),
        ServerEvent::Stream(peer, st) => status!(
            "{peer}: {} datagrams, {} duplicate, {} refused by the protocol, {} from elsewhere, loss {:.2e}",
            st.datagrams_received,
            st.duplicate_datagrams,
            st.rejected,
            st.foreign.other_host + st.foreign.other_port + st.foreign.oversized,
            st.loss_fraction
        ),
        ServerEvent::File(f) => {
            if !f.verified {
                *failed += 1;
            }
            lines.emit(&f);
            if lines.to_stdout() {
                // The JSON line says it all.
            } else if f.verified {
                status!(
                    "  {}  {} B  verified BLAKE3 {}  ({} B resumed, {} round(s), {})",
                    f.path,
                    f.size,
                    f.blake3.as_deref().map_or("", |h| &h[..16]),
                    f.resumed_bytes,
                    f.rounds,
                    match f.sync_s {
                        Some(s) => format!("fsync {:.1} ms", s * 1e3),
                        None => "not fsync'd".into(),
                    },
                );
            } else {
                status!("  {}  FAILED: {}", f.path, f.error.as_deref().unwrap_or("unknown"));
            }
        }
        ServerEvent::Ended(peer, err) => match err {
            None => status!("{peer}: session ended"),
            Some(e) => {
                *failed += 1;
                status!(
                    "{peer}: session failed: {} (run the same `evlbi send` again to resume)",
                    one_line(&e)
                )
            }
        },
    }
}

/// Peer-supplied text on one line: a newline in it cannot forge a log line of ours.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

pub fn run_send(a: SendArgs) -> Result<()> {
    let (dest, items) = a.args.split_last().ok_or_else(|| usage("expected FILE|DIR... DEST"))?;
    let (server, path) = parse_dest(dest)?;
    let mut to_send = Vec::new();
    for i in items {
        to_send.extend(crate::scan_args::send_items(i, &a.disks, a.keep_layout)?);
    }
    if !transfer_session::control::CHUNK_RANGE.contains(&a.chunk) {
        return Err(usage(format!(
            "--chunk {}: must be in {:?}",
            a.chunk,
            transfer_session::control::CHUNK_RANGE
        )));
    }
    if a.rate <= 0.0 {
        return Err(usage("--rate must be positive"));
    }
    if a.start_rate.is_some_and(|r| r <= 0.0) {
        return Err(usage("--start-rate must be positive"));
    }
    let state_dir = a
        .remember
        .then(|| a.state_dir.clone().or_else(crate::peer_rates::default_dir))
        .flatten();
    // Keyed by the receiver's host: its port says nothing of the path.
    let peer = server.ip().to_string();
    let start = match (a.start_rate, &state_dir) {
        (Some(r), _) => Some(StartHint {
            rate_bps: r,
            rtt: None,
            from: "--start-rate".into(),
        }),
        (None, Some(dir)) => crate::peer_rates::recall(dir, &peer).map(|p| StartHint {
            rate_bps: p.rate_bps,
            rtt: Some(std::time::Duration::from_micros(p.rtt_us)),
            from: "remembered".into(),
        }),
        (None, None) => None,
    };
    let cfg = SendConfig {
        server,
        dest: path,
        key: a.key.read()?,
        cc: match a.cc {
            Cc::Fixed => CcChoice::Fixed(a.rate),
            Cc::Adaptive => CcChoice::Adaptive(a.rate),
        },
        chunk_size: a.chunk,
        block_size: a.block,
        sync: a.sync,
        start,
    };
    let bar = a.output.bar(
        0,
        "{msg:30!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
    );
    let stop = AtomicBool::new(false);
    let metrics = a.metrics.start("send")?;
    let publisher = metrics.publisher("transfer_send");
    let mut last_publish: Option<std::time::Instant> = None;
    let report = send_items(
        &cfg,
        &to_send,
        &mut |p| {
            bar.set_length(p.total_bytes);
            bar.set_position(p.done_bytes);
            bar.set_message(format!("{} @ {}", p.file, rate_fmt(p.rate_bps)));
            // Progress comes every few milliseconds: a count a second is enough.
            if let Some(pb) = publisher
                .as_ref()
                .filter(|_| last_publish.is_none_or(|t| t.elapsed().as_secs() >= 1))
            {
                last_publish = Some(std::time::Instant::now());
                pb.publish(metrics::Status::TransferSend(transfer::results::TransferSendStatus {
                    file: p.file.clone(),
                    done_bytes: p.done_bytes,
                    total_bytes: p.total_bytes,
                    retransmitted_bytes: p.retransmitted_bytes,
                    rate_bps: p.rate_bps,
                    srtt_s: p.srtt.map(|d| d.as_secs_f64()),
                }));
            }
        },
        &stop,
    )
    .with_context(|| format!("sending to {server}"))?;
    bar.finish_and_clear();
    // What the path carried, for the next session to this receiver (adaptive only: a fixed
    // rate measures nothing).
    if let (Some(dir), Some(d), Cc::Adaptive) = (&state_dir, &report.data, a.cc) {
        if let (Some(rate), Some(rtt)) = (d.bandwidth_estimate_bps, d.rtt_min_us) {
            crate::peer_rates::remember(dir, &peer, rate, std::time::Duration::from_micros(rtt));
        }
    }
    if a.output.emit(&report)? {
        print_summary(&report);
    }
    if !report.ok {
        let n = report.files.iter().filter(|f| f.error.is_some()).count();
        return Err(anyhow::anyhow!(ProblemsFound(format!("{n} file(s) not delivered"))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_host_port_and_a_directory() {
        let (a, p) = parse_dest("127.0.0.1:6000/exp42/scans").unwrap();
        assert_eq!(a, "127.0.0.1:6000".parse().unwrap());
        assert_eq!(p, "exp42/scans");
        let (a, p) = parse_dest("127.0.0.1").unwrap();
        assert_eq!(a.port(), DEFAULT_PORT);
        assert_eq!(p, "");
        let (a, p) = parse_dest("127.0.0.1:/x/").unwrap();
        assert_eq!(a.port(), DEFAULT_PORT);
        assert_eq!(p, "x");
        assert!(parse_dest("/x").is_err());
        let (a, _) = parse_dest("[::1]:6000/x").unwrap();
        assert_eq!(a, "[::1]:6000".parse().unwrap());
        for (bad, why) in [
            ("127.0.0.1:70000:5310", "too many colons"),
            ("127.0.0.1:70000", "out of range"),
            ("127.0.0.1:0/x", "out of range"),
            ("127.0.0.1:ssh/x", "not a number"),
        ] {
            let e = parse_dest(bad).unwrap_err();
            assert!(e.downcast_ref::<crate::UsageError>().is_some(), "{bad}: {e}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}
