//! `evlbi linkemu`: a WAN emulator (delay, jitter, loss, bottleneck) between two
//! network namespaces, driven by the `linkemu` crate's real-time forwarder.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Args;
use linkemu::{ConfigError, LinkConfig, LossModel};
use linkemu_tun::{self as realtime, Emulator, LiveCounters, Mode, RealtimeConfig, RealtimeStats};

use crate::flags::JsonOutput;
use crate::units::{parse_duration, parse_fraction, parse_rate, parse_size, rate_fmt};
use crate::{usage, usage_in, usage_of};

const EXAMPLES: &str = "\
Examples:
  # A 1 Gb/s path with 100 ms RTT and 0.1 % loss in bursts of 3, iperf3 through it:
  evlbi linkemu --a ns:tel --b ns:corr --rate 1G --delay 50ms --loss 0.1% --burst 3 --buffer 2MB &
  ip netns exec corr iperf3 -s -D
  ip netns exec tel iperf3 -c 10.77.0.2 -t 10
  kill %1        # or Ctrl-C in its terminal: namespaces it created are removed

  # Scripted use: start in the background, test, take down.
  evlbi linkemu --up --a ns:tel --b ns:corr --delay 20ms --jitter 1ms --reorder
  ip netns exec tel ping -c 3 10.77.0.2
  evlbi linkemu --down --a ns:tel --b ns:corr

  # 30 s with a slower return path, JSON summary for `evlbi report`:
  evlbi linkemu --a ns:tel --b ns:corr --rate 4G --rate-ba 100M --delay 10ms \
      --duration 30s --json > run.json

Addresses: A gets 10.77.0.1/30 and B 10.77.0.2/30 on a TUN device (lkemu-a, lkemu-b) inside each
namespace; nothing is added outside them. Rates and buffers count whole IP packets.
State of running emulators: /run/evlbi-linkemu/<a>--<b>.json (log of --up runs beside it).";

/// Emulate a long fat network between two network namespaces.
#[derive(Args, Debug, Clone)]
// The description is `before_long_help`, not `long_about`: a doc comment on
// the subcommand variant in main.rs would replace `long_about`.
#[command(
    before_long_help = "Emulate a wide-area path between two network namespaces on this machine: every IP packet \
from A to B (and back) goes through a TUN device into a model with a bottleneck rate and drop-tail buffer, \
random (Bernoulli) or bursty (Gilbert-Elliott) loss, one-way delay, jitter, optional reordering and \
duplication, then out of a TUN device on the other side. Needs root. Namespaces that do not exist are \
created and deleted again at exit (Ctrl-C, SIGTERM, --duration, or --down for --up runs); existing \
ones are left as they were, minus our TUN device.\n\nPrints a status line per second on stderr and a \
summary at the end (--json prints it as JSON instead, --export-json writes the JSON to a file).",
    after_help = EXAMPLES
)]
pub struct LinkemuArgs {
    /// Endpoint A, `ns:NAME`: a network namespace; gets the first address of the /30.
    #[arg(long, value_name = "ns:NAME")]
    pub a: Option<String>,
    /// Endpoint B, `ns:NAME`; gets the second address.
    #[arg(long, value_name = "ns:NAME")]
    pub b: Option<String>,
    /// Bottleneck rate, e.g. 1G, 512M, 4.096G (b/s of IP packets); unlimited when absent.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// One-way propagation delay, e.g. 50ms (RTT = 2 × delay when symmetric).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub delay: Duration,
    /// Extra random delay per packet, uniform on [0, JITTER].
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub jitter: Duration,
    /// Let jitter reorder packets (default: packets keep their order).
    #[arg(long)]
    pub reorder: bool,
    /// Random loss, e.g. 0.1% or 0.001.
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    pub loss: f64,
    /// Mean loss-burst length in packets; > 1 selects Gilbert-Elliott loss, 1 Bernoulli.
    #[arg(long, default_value_t = 1.0)]
    pub burst: f64,
    /// Bottleneck buffer, e.g. 2MB, 512KiB [default: one RTT at the rate, at least 10 ms and 64 KiB].
    #[arg(long, value_parser = parse_size)]
    pub buffer: Option<u64>,
    /// Probability that a packet is delivered twice, e.g. 0.01%.
    #[arg(long, default_value = "0%", value_parser = parse_fraction)]
    pub duplicate: f64,
    /// B→A rate, if different.
    #[arg(long, help_heading = "Return path (B to A) overrides", value_parser = parse_rate)]
    pub rate_ba: Option<f64>,
    /// B→A one-way delay.
    #[arg(long, help_heading = "Return path (B to A) overrides", value_parser = parse_duration)]
    pub delay_ba: Option<Duration>,
    /// B→A jitter.
    #[arg(long, help_heading = "Return path (B to A) overrides", value_parser = parse_duration)]
    pub jitter_ba: Option<Duration>,
    /// B→A loss.
    #[arg(long, help_heading = "Return path (B to A) overrides", value_parser = parse_fraction)]
    pub loss_ba: Option<f64>,
    /// B→A mean loss-burst length.
    #[arg(long, help_heading = "Return path (B to A) overrides")]
    pub burst_ba: Option<f64>,
    /// B→A buffer.
    #[arg(long, help_heading = "Return path (B to A) overrides", value_parser = parse_size)]
    pub buffer_ba: Option<u64>,
    /// MTU of both TUN devices (e.g. 9000 for jumbo frames).
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// The /30 shared by A and B; must be inside 10.77.0.0/16.
    #[arg(long, default_value = "10.77.0.0/30")]
    pub subnet: String,
    /// RNG seed (loss, jitter, duplication) for a reproducible run [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this long, e.g. 30s [default: until Ctrl-C or SIGTERM].
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub output: JsonOutput,
    #[command(flatten)]
    pub quiet: crate::shared_args::QuietArg,
    /// Bypass the model: plain TUN-to-TUN copy, to measure the plumbing alone.
    #[arg(long)]
    pub bare: bool,
    /// Most IP bytes held per direction (delay line + queue); beyond it packets are dropped as `overflow`.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub queue_limit: u64,
    /// Start in the background and return once it forwards; stop it with --down.
    #[arg(long, conflicts_with = "down")]
    pub up: bool,
    /// Stop a run started with --up (same --a/--b; optional if only one runs) and remove what it created.
    #[arg(long)]
    pub down: bool,
    /// Directory of state files of running emulators.
    #[arg(long, default_value = realtime::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Internal: this process is the background half of --up.
    #[arg(long, hide = true)]
    pub detached: bool,
    #[command(flatten)]
    pub metrics: crate::metrics_flag::MetricsArgs,
}

/// "ns:tel" → "tel".
fn parse_endpoint(flag: &str, s: &str) -> anyhow::Result<String> {
    let Some(name) = s.strip_prefix("ns:") else {
        return Err(usage(format!(
            "--{flag} {s:?}: expected ns:NAME (a network namespace), e.g. ns:tel"
        )));
    };
    realtime::check_netns_name(name).map_err(|e| usage_in(format!("--{flag}"), e))?;
    Ok(name.to_owned())
}

/// "10.77.0.4/30" → 10.77.0.4.
fn parse_subnet(s: &str) -> anyhow::Result<std::net::Ipv4Addr> {
    let (addr, prefix) = s.split_once('/').unwrap_or((s, "30"));
    if prefix != "30" {
        return Err(usage(format!("--subnet {s}: only a /30 is supported (two hosts)")));
    }
    addr.parse()
        .map_err(|_| usage(format!("--subnet {s}: not an IPv4 network address")))
}

/// The settings of one direction, as parsed.
struct DirectionArgs<'a> {
    suffix: &'a str,
    rate: Option<f64>,
    delay: Duration,
    jitter: Duration,
    loss: f64,
    burst: f64,
    buffer: Option<u64>,
}

fn link_config(d: &DirectionArgs<'_>, duplicate: f64, reorder: bool) -> anyhow::Result<LinkConfig> {
    let flag = |name: &str| format!("{name}{}", d.suffix);
    let rate_bps = d.rate.map(|bps| bps.round().max(1.0) as u64);
    let (delay, jitter) = (d.delay, d.jitter);
    let loss = LossModel::from_mean_loss_and_burst(d.loss, d.burst).map_err(|e| match e {
        ConfigError::InvalidBurstLength(b) => usage(format!("--{} {b}: must be >= 1 packet", flag("burst"))),
        e => usage(format!("--{} with --{}: {e}", flag("loss"), flag("burst"))),
    })?;
    let buffer_bytes = match (d.buffer, rate_bps) {
        (Some(b), _) => b,
        // One round trip's worth (the classic router rule of thumb), at
        // least 10 ms and 64 KiB so that short paths still absorb bursts.
        (None, Some(rate)) => {
            let secs = (2.0 * delay.as_secs_f64()).max(0.010);
            ((rate as f64 * secs / 8.0) as u64).max(64 << 10)
        }
        (None, None) => LinkConfig::default().buffer_bytes,
    };
    let config = LinkConfig {
        rate_bps,
        buffer_bytes,
        delay,
        jitter,
        reorder,
        loss,
        duplicate,
    };
    config.validate().map_err(usage_of)?;
    Ok(config)
}

/// Validated emulator configuration from the flags.
fn build_config(args: &LinkemuArgs) -> anyhow::Result<RealtimeConfig> {
    let (Some(a), Some(b)) = (&args.a, &args.b) else {
        return Err(usage("--a ns:NAME and --b ns:NAME are required"));
    };
    let ns_a = parse_endpoint("a", a)?;
    let ns_b = parse_endpoint("b", b)?;
    let duplicate = args.duplicate;
    let ab = DirectionArgs {
        suffix: "",
        rate: args.rate,
        delay: args.delay,
        jitter: args.jitter,
        loss: args.loss,
        burst: args.burst,
        buffer: args.buffer,
    };
    let ba = DirectionArgs {
        suffix: "-ba",
        rate: args.rate_ba.or(ab.rate),
        delay: args.delay_ba.unwrap_or(ab.delay),
        jitter: args.jitter_ba.unwrap_or(ab.jitter),
        loss: args.loss_ba.unwrap_or(ab.loss),
        burst: args.burst_ba.unwrap_or(ab.burst),
        buffer: args.buffer_ba.or(ab.buffer),
    };
    let seed = args.seed.unwrap_or_else(|| {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()).rotate_left(32)
    });
    let config = RealtimeConfig {
        subnet: parse_subnet(&args.subnet)?,
        mtu: args.mtu,
        a_to_b: link_config(&ab, duplicate, args.reorder)?,
        b_to_a: link_config(&ba, duplicate, args.reorder)?,
        seed,
        mode: if args.bare { Mode::Bare } else { Mode::Model },
        queue_limit_bytes: args.queue_limit,
        state_dir: Some(args.state_dir.clone()),
        ..RealtimeConfig::new(ns_a, ns_b)
    };
    config.validate().map_err(usage_of)?;
    Ok(config)
}

/// Runs `evlbi linkemu`.
pub fn run(args: LinkemuArgs) -> anyhow::Result<()> {
    if args.down {
        return run_down(&args);
    }
    let config = build_config(&args)?;
    let deadline = args.duration;
    if args.up {
        return run_up(&config);
    }
    if args.detached {
        realtime::detach_from_terminal().context("detaching from the terminal")?;
    }
    netio::install_stop_signals().context("installing signal handlers")?;
    let emu = Emulator::start(config).context("starting the emulator")?;
    // From here until `shutdown` the namespaces and devices exist: a closed stderr must stop the
    // run like a signal, not end the process in the print macros (exit code 141, see main.rs)
    // before they are removed. Hence `say`, which reports a failed write instead.
    let say = |line: std::fmt::Arguments<'_>| writeln!(std::io::stderr(), "{line}").is_ok();
    let c = emu.config();
    let (addr_a, addr_b) = c.addresses();
    let mut stderr_open = say(format_args!(
        "linkemu: {} {addr_a} ({}) <-> {} {addr_b} ({}), mtu {}, seed {}{}; Ctrl-C to stop",
        c.ns_a,
        c.dev_a,
        c.ns_b,
        c.dev_b,
        c.mtu,
        c.seed,
        if c.mode == Mode::Bare { ", BARE (no model)" } else { "" }
    ));
    let metrics = args.metrics.start("linkemu")?;
    let publisher = metrics.publisher("linkemu");
    let started = Instant::now();
    let mut last = (Instant::now(), emu.live());
    let mut next_status = started + Duration::from_secs(1);
    let mut intervals = Vec::new();
    let stop_reason = loop {
        std::thread::sleep(Duration::from_millis(50));
        if !stderr_open {
            break STDERR_CLOSED.to_owned();
        }
        if let Some(sig) = netio::stop_signal() {
            break format!("signal {sig}");
        }
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break "duration reached".to_owned();
        }
        if !emu.is_healthy() {
            break "a forwarding thread stopped".to_owned();
        }
        let now = Instant::now();
        if now >= next_status {
            next_status += Duration::from_secs(1);
            let live = emu.live();
            if let Some(p) = &publisher {
                p.publish(metrics::Status::Linkemu(linkemu::LinkemuStatus {
                    elapsed_s: started.elapsed().as_secs_f64(),
                    a_to_b: live.0,
                    b_to_a: live.1,
                }));
            }
            let sample = realtime::IntervalSample {
                t_s: started.elapsed().as_secs_f64(),
                dt_s: (now - last.0).as_secs_f64(),
                a_to_b: live.0.since(&last.1 .0),
                b_to_a: live.1.since(&last.1 .1),
            };
            if !args.quiet.quiet {
                stderr_open = say(format_args!(
                    "[{:>5.0}s] a->b {} | b->a {}",
                    sample.t_s,
                    status(&sample.a_to_b, sample.dt_s),
                    status(&sample.b_to_a, sample.dt_s)
                ));
            }
            if intervals.len() < realtime::MAX_INTERVALS {
                intervals.push(sample);
            }
            last = (now, live);
        }
    };
    say(format_args!(
        "linkemu: stopping ({stop_reason}), removing what we created"
    ));
    let mut stats = emu.shutdown().context("stopping the emulator")?;
    stats.intervals = intervals;
    if args.output.emit(&stats)? {
        print_summary(&stats);
    }
    if stop_reason == STDERR_CLOSED {
        // Cleaned up and summarised: now end as a print into the closed pipe would have.
        crate::exit_output_closed();
    }
    Ok(())
}

/// Stop reason when the reader of the status lines went away.
const STDERR_CLOSED: &str = "stderr closed";

/// One direction's live status from its counts over the last `dt` seconds.
fn status(d: &LiveCounters, dt: f64) -> String {
    let bits = d.forwarded_bytes as f64 * 8.0;
    let pkts = d.forwarded_packets as f64;
    format!(
        "{:>9} {:>7.1} kpkt/s lost {} qdrop {}{}",
        rate_fmt(bits / dt.max(1e-9)),
        pkts / dt.max(1e-9) / 1e3,
        d.dropped_loss,
        d.dropped_queue,
        match d.overflow + d.write_errors {
            0 => String::new(),
            n => format!(" overflow/write-err {n}"),
        }
    )
}

fn print_summary(s: &RealtimeStats) {
    println!(
        "linkemu summary: {:.1} s, mode {:?}, mtu {}, seed {}",
        s.elapsed_s, s.mode, s.mtu, s.seed
    );
    for (name, d) in [("a->b", &s.a_to_b), ("b->a", &s.b_to_a)] {
        println!(
            "  {name}: received {} pkt ({} B), forwarded {} pkt ({} B, mean {}), overflow {}, write errors {}",
            d.received.packets,
            d.received.bytes,
            d.forwarded.packets,
            d.forwarded.bytes,
            rate_fmt(d.forwarded.bytes as f64 * 8.0 / s.elapsed_s.max(1e-9)),
            d.overflow.packets,
            d.write_errors
        );
        if let Some(n) = d.input_tx_dropped.filter(|&n| n > 0) {
            println!(
                "        WARNING: the kernel dropped {n} packets at the input TUN device before the emulator read \
them (CPU overload): these losses are not part of the model"
            );
        }
        if let Some(m) = &d.model {
            println!(
                "        model: lost {} ({:.4} %), queue drops {} ({:.4} %), duplicated {}, max queue {} B, \
queue delay p50 {:?} p99 {:?} max {:?}",
                m.dropped_loss.packets,
                100.0 * m.loss_fraction(),
                m.dropped_queue.packets,
                100.0 * m.queue_drop_fraction(),
                m.duplicated.packets,
                m.max_queue_bytes,
                m.queue_delay_p50(),
                m.queue_delay_p99(),
                m.queue_delay_max()
            );
        }
    }
}

/// `--up`: re-runs this command detached, waits until it forwards, returns.
fn run_up(config: &RealtimeConfig) -> anyhow::Result<()> {
    let state_dir = config
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(realtime::DEFAULT_STATE_DIR));
    std::fs::create_dir_all(&state_dir).with_context(|| format!("creating {}", state_dir.display()))?;
    let state = realtime::state_path(&state_dir, &config.ns_a, &config.ns_b);
    // Refuse here, before touching the log of a run that may still write to it.
    if let Ok(old) = realtime::read_state(&state) {
        if realtime::is_running(&old) {
            bail!(
                "an emulator for this pair is already running as pid {} ({})",
                old.pid,
                state.display()
            );
        }
        bail!(
            "stale state file {}: run `evlbi linkemu --down` with the same --a/--b first",
            state.display()
        );
    }
    let log = state.with_extension("log");
    let log_file = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let log_err = log_file.try_clone()?;
    // Same arguments, minus --up, plus --detached: the child is a normal
    // foreground run that has left the terminal's session.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--up").collect();
    let exe = std::env::current_exe().context("finding our own executable")?;
    let mut child = Command::new(exe)
        .args(&args)
        .args(["--detached", "--quiet"])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .context("starting the background emulator")?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait()? {
            let text = read_log(&log);
            bail!("background emulator exited ({status}):\n{}", text.trim());
        }
        if let Ok(s) = realtime::read_state(&state) {
            if s.ready && s.pid == child.id() {
                println!(
                    "linkemu up: pid {}, {} {} <-> {} {}; log {}\nstop with: evlbi linkemu --down --a ns:{} --b ns:{}",
                    s.pid,
                    s.ns_a,
                    s.addr_a,
                    s.ns_b,
                    s.addr_b,
                    log.display(),
                    s.ns_a,
                    s.ns_b
                );
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "background emulator (pid {}) not ready after 15 s; see {}",
                child.id(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--down`: stops the run recorded for --a/--b (or the only one running).
fn run_down(args: &LinkemuArgs) -> anyhow::Result<()> {
    let path = match (&args.a, &args.b) {
        (Some(a), Some(b)) => realtime::state_path(&args.state_dir, &parse_endpoint("a", a)?, &parse_endpoint("b", b)?),
        (None, None) => only_state(&args.state_dir)?,
        _ => return Err(usage("--down needs both --a and --b, or neither")),
    };
    if !path.exists() {
        bail!("no emulator recorded in {}", path.display());
    }
    let report = realtime::down(&path, Duration::from_secs(10))?;
    match report.stopped_pid {
        Some(pid) => eprintln!("linkemu: stopped pid {pid}"),
        None => eprintln!("linkemu: emulator was not running; cleaned up after it"),
    }
    for ns in &report.deleted_netns {
        eprintln!("linkemu: deleted leftover namespace {ns}");
    }
    let log = read_log(&path.with_extension("log"));
    // The detached run's final summary is the tail of its log.
    print!("{log}");
    let _ = std::fs::remove_file(path.with_extension("log"));
    Ok(())
}

/// Most bytes shown of a background emulator's log (its summary is a few kilobytes).
const MAX_LOG_BYTES: u64 = 16 << 20;

/// A background emulator's log, read through the one bounded reader; empty when it cannot be.
fn read_log(path: &Path) -> String {
    crate::read_named(path, MAX_LOG_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn only_state(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut states = realtime::list_states(dir)?;
    match states.len() {
        0 => bail!("no emulator recorded in {}", dir.display()),
        1 => Ok(states.remove(0).0),
        _ => {
            let names: Vec<String> = states
                .iter()
                .map(|(_, s)| format!("--a ns:{} --b ns:{}", s.ns_a, s.ns_b))
                .collect();
            Err(usage(format!(
                "several emulators are recorded; choose one of: {}",
                names.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UsageError;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LinkemuArgs,
    }

    fn parse(extra: &[&str]) -> LinkemuArgs {
        let mut v = vec!["evlbi", "--a", "ns:tel", "--b", "ns:corr"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).args
    }

    #[test]
    fn endpoints_and_subnets() {
        assert_eq!(parse_endpoint("a", "ns:tel").unwrap(), "tel");
        assert!(parse_endpoint("a", "tel").is_err());
        assert!(parse_endpoint("a", "ns:../etc").is_err());
        assert_eq!(
            parse_subnet("10.77.0.4/30").unwrap(),
            std::net::Ipv4Addr::new(10, 77, 0, 4)
        );
        assert!(parse_subnet("10.77.0.0/24").is_err());
    }

    #[test]
    fn burst_selects_gilbert_elliott() {
        let c = build_config(&parse(&[
            "--loss", "0.1%", "--burst", "3", "--rate", "1G", "--delay", "50ms",
        ]))
        .unwrap();
        let LossModel::GilbertElliott(ge) = c.a_to_b.loss else {
            panic!("expected Gilbert-Elliott, got {:?}", c.a_to_b.loss)
        };
        assert!((ge.mean_loss() - 0.001).abs() < 1e-12);
        assert!((ge.p_bad_to_good - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.a_to_b.rate_bps, Some(1_000_000_000));
        // Default buffer: one RTT (100 ms) at 1 Gb/s.
        assert_eq!(c.a_to_b.buffer_bytes, 12_500_000);
        assert_eq!(c.b_to_a, c.a_to_b);
        let c = build_config(&parse(&["--loss", "1%"])).unwrap();
        assert_eq!(c.a_to_b.loss, LossModel::Bernoulli { p: 0.01 });
        assert!(build_config(&parse(&["--loss", "1%", "--burst", "0.5"])).is_err());
    }

    #[test]
    fn return_path_overrides() {
        let c = build_config(&parse(&[
            "--rate",
            "4G",
            "--rate-ba",
            "100M",
            "--delay",
            "10ms",
            "--buffer",
            "2MB",
        ]))
        .unwrap();
        assert_eq!(c.a_to_b.rate_bps, Some(4_000_000_000));
        assert_eq!(c.b_to_a.rate_bps, Some(100_000_000));
        assert_eq!(c.b_to_a.delay, Duration::from_millis(10));
        assert_eq!(c.b_to_a.buffer_bytes, 2_000_000);
        assert_eq!(c.b_to_a.loss, LossModel::None);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for extra in [&["--mtu", "100"][..], &["--subnet", "192.168.1.0/30"]] {
            let e = build_config(&parse(extra)).unwrap_err();
            assert!(e.downcast_ref::<UsageError>().is_some(), "{extra:?}: {e}");
        }
        // Quantities are refused while parsing, naming the option.
        for extra in [
            "--delay=fast",
            "--jitter=-1ms",
            "--delay-ba=1e30s",
            "--duration=inf",
            "--rate=1X",
            "--rate-ba=-1G",
            "--loss=5",
            "--loss-ba=-1%",
            "--duplicate=200%",
            "--buffer=2 parsecs",
            "--buffer-ba=0",
            "--queue-limit=1e30",
        ] {
            let e = match Cli::try_parse_from(["evlbi", "--a", "ns:tel", "--b", "ns:corr", extra]) {
                Ok(_) => panic!("{extra} was accepted"),
                Err(e) => e,
            };
            assert_eq!(e.exit_code(), 2, "{extra}");
            let flag = extra.split('=').next().unwrap_or(extra);
            assert!(e.to_string().contains(flag), "{extra}: {e}");
        }
        let mut no_b = parse(&[]);
        no_b.b = None;
        assert!(build_config(&no_b).is_err());
    }
}
