//! `evlbi probe server|client`: udpmon-style path measurement.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use probe_session::{run_client_live, ClientConfig, Server, ServerConfig, ServerEvent};

use crate::flags::{JsonOutput, ResultOutput};
use crate::probe_multi;
use crate::probe_print::{live_printer, print_host_jitter, print_result};
use crate::units::{parse_duration, parse_duration_within, parse_positive_duration, parse_rate, parse_size, si_fmt};
use crate::{usage, usage_in};

/// Default control port.
pub const DEFAULT_PORT: u16 = 5301;

#[derive(Subcommand)]
pub enum ProbeCommand {
    /// Wait for probe clients (one at a time): control on TCP PORT, data on an ephemeral UDP port.
    #[command(
        after_help = "Examples:\n  evlbi probe server                        # all addresses, port 5301\n  \
        evlbi probe server --bind 127.0.0.1 --port 5301 --once\n  \
        evlbi probe server --key-file /etc/evlbi/probe.key     # clients must prove the key"
    )]
    Server(ServerArgs),
    /// Send a paced UDP stream to a probe server and report what arrived: loss, duplicates,
    /// reordering, jitter, one-way delay, loss statistics with a Poisson fit, sender gaps.
    #[command(after_help = "Examples:\n  \
        evlbi probe client 127.0.0.1 --size 8192 --spacing 16us --count 100000   # 4.096 Gb/s of payload\n  \
        evlbi probe client 127.0.0.1 --size 8192 --rate 4.096G --count 100000    # same, spacing computed\n  \
        evlbi probe client corr.example.org:5301 --size 1472 --spacing 12us --count 1000000 --export-json r.json\n  \
        evlbi probe client 127.0.0.1 --size 8192 --rate 4.096G --count 200000 --trials 5     # spread over 5 runs\n  \
        evlbi probe client 127.0.0.1 --size 8192 --rate 4.096G --count 1000000 --interval 1s # live lines on stderr\n  \
        evlbi probe client 127.0.0.1 --size 8192 --rate 12G --count 1000000 --burst 8        # 8 per GSO call\n  \
        evlbi probe client 127.0.0.1 --count 50000 --sweep 'sizes=1472,8192 spacings=0..40us:10us' --export-json s.json --csv s.csv\n\n\
        TCP tests and host experiments (seeds 001 and 003):\n  \
        evlbi probe client 127.0.0.1 --tcp --duration 60s                     # memory to memory, per-second lines\n  \
        evlbi probe client corr.example.org --tcp --cc bbr --streams 4 --duration 3.3h --interval 10s --export-json long.json\n  \
        evlbi probe client 127.0.0.1 --tcp --duration 20s --cpu-load nice=10  # a CPU-bound task at nice 10 competes\n  \
        evlbi probe client 127.0.0.1 --tcp --duration 10s --cpu-load-sweep 19..0:3 --export-json cpu.json   # seed 001 Fig 2\n  \
        evlbi probe client 127.0.0.1 --size 1472 --rate 940M --count 500000 --rcvbuf-sweep 64K..512K --export-json rcv.json\n  \
        evlbi report long.json cpu.json rcv.json -o report.html                # the figures\n\n\
        Exit codes: 0 ok; 1 runtime failure, or a test that ended early (its JSON is still written, \
        with \"partial\": true and the reason in \"error\"); 2 usage error (e.g. an unknown --cc, \
        which lists the kernel's).")]
    Client(Box<ClientArgs>),
    /// Measure this host's timing floor: run the sender's pacer at a spacing for a while with
    /// nothing to send and report its departure gaps and what interrupted it (timer ticks,
    /// interrupts, the hypervisor, other tasks). No sender on this host can show a departure-gap
    /// p99 below this one at the same spacing, so read a probe client's or stream sender's gaps
    /// against it. Takes one core for the duration.
    #[command(after_help = "Examples:\n  \
        evlbi probe host-jitter --spacing 16us                  # 5 s, text\n  \
        evlbi probe host-jitter --size 8000 --rate 4.096G --duration 10s --export-json floor.json\n  \
        taskset -c 1 evlbi probe host-jitter --spacing 16us      # the core a sender would be pinned to\n\n\
        Reading it: \"gap p99 excess\" is the departure-gap p99 minus the spacing; \"interruptions\" are \
        moments (> 1 us) the spinning thread did not run; involuntary context switches > 0 mean \
        another task took the core, 0 with interruptions means interrupts or the hypervisor.")]
    HostJitter(HostJitterArgs),
    /// Internal: the CPU-bound task `--cpu-load` runs (spins on THREADS threads until SECONDS
    /// have passed or its parent PARENT is gone).
    #[command(hide = true)]
    BurnCpu {
        /// Spinning threads.
        #[arg(long, default_value_t = 1)]
        threads: u32,
        /// Longest run, seconds.
        #[arg(long, value_parser = parse_duration)]
        seconds: Duration,
        /// PID of the process that started it.
        #[arg(long)]
        parent: u32,
    },
}

#[derive(Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
    /// TCP control port.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    #[command(flatten)]
    key: crate::shared_args::KeyFileArg,
    /// Serve one session, then exit.
    #[arg(long, conflicts_with = "sessions")]
    once: bool,
    /// Serve N sessions (e.g. a client's --trials N or a sweep's points), then exit. Only
    /// sessions that authenticated count; a connect-and-close spends nothing.
    #[arg(long, value_name = "N")]
    sessions: Option<u64>,
    /// Largest UDP receive buffer a client may ask for (--rcvbuf-sweep).
    #[arg(long, value_parser = parse_size, default_value = "256M")]
    max_rcvbuf: u64,
    /// Longest test a client may ask for (count x spacing, or a TCP test's duration).
    #[arg(long, value_parser = parse_max_duration, default_value = "1h")]
    max_duration: std::time::Duration,
    // --json: one JSON line per finished session on stdout instead of text; --export-json:
    // the same lines into FILE.
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    metrics: crate::metrics_flag::MetricsArgs,
}

#[derive(Args)]
pub struct HostJitterArgs {
    /// Spacing between releases: 16us.
    #[arg(long, value_parser = parse_positive_duration, conflicts_with = "rate")]
    spacing: Option<Duration>,
    /// Rate instead of a spacing (with --size): 4.096G.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Bytes per packet for --rate.
    #[arg(long, default_value_t = 8192)]
    size: u32,
    /// How long to measure (at most 1h).
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    duration: Duration,
    #[command(flatten)]
    output: ResultOutput,
}

#[derive(Args)]
pub struct ClientArgs {
    /// Server: HOST or HOST:PORT.
    server: String,
    /// UDP payload bytes per datagram (32..=65507).
    #[arg(long, default_value_t = 1472)]
    size: u32,
    /// Spacing between datagram departures: 16us (0 = as fast as possible).
    #[arg(long, value_parser = parse_duration, conflicts_with = "rate")]
    spacing: Option<Duration>,
    /// Payload rate instead of a spacing: 4.096G.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Datagrams to send.
    #[arg(long, default_value_t = 100_000)]
    count: u64,
    /// Hand N datagrams to one system call (UDP GSO), released together at the deadline of the
    /// last of them (1..=64): rates past one core's per-datagram budget, at the cost of bursts of
    /// N on the wire (the departure gaps show them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    burst: u32,
    #[command(flatten)]
    key: crate::shared_args::KeyFileArg,
    #[command(flatten)]
    output: ResultOutput,
    /// Run N trials back to back (one session each) and report every trial and the spread
    /// (min / median / max) of rate, loss, jitter p99 and sender gap p99.
    #[arg(long, default_value_t = 1, value_name = "N", conflicts_with = "sweep")]
    trials: u32,
    /// Sweep a grid, one trial of --count datagrams per point, sizes × spacings, size-major:
    /// "sizes=1472,8192 spacings=0..40us:10us". Values are lists (a,b,c) or ranges A..B[:STEP]
    /// with both ends included (no step: 5 evenly spaced points); spacings take ns/us/ms units.
    /// A parameter not swept keeps --size/--spacing. JSON (--json/--export-json) is a SweepResult.
    #[arg(long, value_name = "SPEC")]
    sweep: Vec<String>,
    /// Print a live line on stderr every INTERVAL (e.g. 1s, at least 100ms) during each trial,
    /// from counters the server sends over the control connection: seconds since the server was
    /// ready; the received user-data rate over the last interval; packets received so far;
    /// "missing": packets below the highest sequence number seen that have not arrived (yet) —
    /// lost, or still to come out of order, the final result decides; reordered (RFC 4737) and
    /// duplicate packets so far. With --tcp: the interval of the per-interval lines (on stdout)
    /// and figures, 1s when not given.
    #[arg(long, value_parser = parse_positive_duration, value_name = "INTERVAL")]
    interval: Option<Duration>,
    /// With --sweep: also write one CSV row per point to FILE.
    #[arg(long, value_name = "FILE", requires = "sweep")]
    csv: Option<PathBuf>,
    /// A TCP test instead of UDP: memory to memory over --streams connections for --duration;
    /// prints a line per --interval (default 1s: throughput, retransmits, cwnd, srtt, pacing
    /// and delivery rate from TCP_INFO), then totals, CPU of both ends and the Mathis bound for
    /// the measured RTT and retransmit rate beside the achieved rate.
    #[arg(long, conflicts_with_all = ["size", "spacing", "rate", "count", "trials", "sweep", "rcvbuf_sweep", "burst"])]
    tcp: bool,
    /// TCP: congestion control of the sending sockets (cubic, bbr, reno, … as this kernel
    /// offers: /proc/sys/net/ipv4/tcp_available_congestion_control). Default: the kernel's.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// TCP: how long to write (e.g. 60s, 3.3h) [default: 10s].
    #[arg(long, value_parser = parse_positive_duration)]
    duration: Option<Duration>,
    /// TCP: parallel connections (1..=64) [default: 1].
    #[arg(long)]
    streams: Option<u16>,
    /// TCP: bytes per write [default: 128KiB, as iperf3].
    #[arg(long, value_parser = parse_size)]
    write_size: Option<u64>,
    /// TCP: run a CPU-bound task at nice level N (-20..19) on this (the sending) host while
    /// the data flows: "nice=N" or "nice=N,threads=K" (default one thread per CPU); the result
    /// records the CPU it took and the CPU left (seed 001 §4).
    #[arg(long, value_parser = crate::probe_tcp::parse_cpu_load, value_name = "nice=N")]
    cpu_load: Option<crate::probe_tcp::CpuLoadArg>,
    /// TCP: one test without load, then one per nice level of the competing task: "19..0"
    /// (5 levels), "19..0:1" (every level), "19,10,0". A CpuLoadSweepResult: throughput against
    /// nice level and available CPU (seed 001 Fig 2, right). With --cpu-load, its threads=K
    /// applies. The server must serve one session per point plus one.
    #[arg(long, value_parser = crate::probe_tcp::nice_levels_arg, value_name = "LEVELS")]
    cpu_load_sweep: Option<crate::probe_tcp::NiceLevels>,
    /// UDP: one trial per receive-buffer size of the server's socket: "64K..512K" (5 sizes),
    /// "64K..512K:32K", "64K,128K,230K"; loss against buffer, with the datagrams the kernel
    /// dropped at the socket and the host's RcvbufErrors beside the application's loss (seed 003
    /// Fig 2c). The server must serve one session per size.
    #[arg(long, value_parser = crate::probe_tcp::rcvbufs_arg, value_name = "SIZES", conflicts_with_all = ["trials", "sweep"])]
    rcvbuf_sweep: Option<crate::probe_tcp::RcvbufSizes>,
}

pub fn run(cmd: ProbeCommand) -> Result<()> {
    match cmd {
        ProbeCommand::Server(a) => server(a),
        ProbeCommand::Client(a) => client(*a),
        ProbeCommand::HostJitter(a) => host_jitter(a),
        ProbeCommand::BurnCpu {
            threads,
            seconds,
            parent,
        } => match probe_session::burn::burn(threads, seconds.min(Duration::from_secs(10_000_000)), parent) {
            0 => Ok(()),
            _ => Err(anyhow!("burn-cpu: the parent process {parent} is gone")),
        },
    }
}

fn parse_max_duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration_within(
        s,
        Duration::from_secs(1),
        Duration::from_secs(30 * 86400),
        "1s and 30 days",
    )
}

fn server(a: ServerArgs) -> Result<()> {
    // Parsed as an address alone, so that an IPv6 --bind (::1) works and a port in it is refused.
    let ip: std::net::IpAddr = a
        .bind
        .parse()
        .map_err(|_| usage(format!("--bind {}: not an IP address (the port is --port)", a.bind)))?;
    let listen = SocketAddr::new(ip, a.port);
    let mut cfg = ServerConfig::new(listen);
    cfg.key = a.key.read()?;
    cfg.max_rcvbuf = a.max_rcvbuf;
    cfg.max_duration = a.max_duration;
    let server = Server::bind(cfg)?;
    status!(
        "probe server: control on {} (TCP){}",
        server.local_addr()?,
        if a.key.key_file.is_some() { ", key required" } else { "" }
    );
    let mut lines = a.output.lines()?;
    let metrics = a.metrics.start("probe server")?;
    let publisher = metrics.publisher("probe_server");
    let mut counts = probe::results::ProbeServerStatus::default();
    let stop = AtomicBool::new(false);
    server.serve(&stop, if a.once { Some(1) } else { a.sessions }, |e| {
        if let Some(p) = &publisher {
            crate::metrics_flag::probe_tally(&mut counts, &e);
            p.publish(metrics::Status::ProbeServer(counts.clone()));
        }
        probe_event(e, &mut lines)
    })?;
    Ok(())
}

/// What `probe server` says about one event.
fn probe_event(e: ServerEvent, lines: &mut crate::flags::JsonLines) {
    match e {
        ServerEvent::Ready {
            peer,
            hello,
            udp_port,
            grant,
        } => match (&hello.tcp, grant) {
            (Some(t), _) => status!(
                "{peer}: TCP test, {} stream(s) for {:.1} s{}, data on TCP {udp_port}",
                t.streams,
                t.duration_ms as f64 / 1e3,
                t.cc.as_ref().map_or(String::new(), |c| format!(" with {c}"))
            ),
            (None, grant) => {
                let grant = grant.unwrap_or_default();
                status!(
                    "{peer}: {} x {} B every {} ns, data on UDP {udp_port} (receive buffer {} B granted, {} B usable)",
                    hello.count,
                    hello.size,
                    hello.spacing_ns,
                    grant.granted_rcv,
                    grant.usable_rcv()
                );
                for w in &grant.warnings {
                    status!("warning: {w}");
                }
            }
        },
        ServerEvent::Finished { peer, report } => {
            lines.emit(&report);
            if !lines.to_stdout() {
                status!(
                    "{peer}: received {} of {} ({} lost, {} strays)",
                    report.unique_packets,
                    report.expected_packets,
                    report.lost_packets,
                    report.strays.total()
                );
            }
        }
        ServerEvent::TcpFinished { peer, report } => {
            lines.emit(&report);
            if !lines.to_stdout() {
                status!(
                    "{peer}: TCP test {}: received {} B in {:.2} s ({}b/s){}",
                    if report.partial {
                        "ended early (partial)"
                    } else {
                        "done"
                    },
                    report.bytes,
                    report.duration_s,
                    si_fmt(report.rate_bps.unwrap_or(0.0)),
                    report.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
                );
            }
        }
        ServerEvent::Failed { peer, error } => status!(
            "{}: session failed: {error}",
            peer.map_or("?".into(), |p| p.to_string())
        ),
    }
}

/// The server argument, HOST or HOST:PORT: a malformed one is a usage error, a name that does
/// not resolve a runtime failure.
fn resolve(s: &str) -> Result<SocketAddr> {
    let hp = netio::HostPort::parse(s, Some(DEFAULT_PORT)).map_err(|e| usage_in("server", e))?;
    Ok(hp.resolve()?)
}

fn host_jitter(a: HostJitterArgs) -> Result<()> {
    let spacing = match (a.spacing, a.rate) {
        (Some(s), None) if s <= Duration::from_secs(1) => pacing::Spacing::from_nanos(s.as_nanos() as u64),
        (None, Some(r)) if r >= 1.0 && a.size > 0 => pacing::Spacing::from_rate(u64::from(a.size), r.round() as u64),
        (None, None) => return Err(usage("give --spacing (e.g. 16us) or --rate (e.g. 4.096G, with --size)")),
        _ => {
            return Err(usage(
                "--spacing must be > 0 and at most 1s; --rate at least 1 bit/s, --size > 0",
            ))
        }
    };
    if spacing.is_zero() {
        return Err(usage("the spacing rounds to 0 ns"));
    }
    let max = probe_session::host_jitter::MAX_DURATION;
    if !(Duration::from_millis(10)..=max).contains(&a.duration) {
        return Err(usage("--duration must be between 10ms and 1h"));
    }
    let bar = a.output.bar(1000, "{bar:40} {percent}% ETA {eta}");
    let r = probe_session::host_jitter::measure(spacing, a.duration, |done| {
        bar.set_position((done.clamp(0.0, 1.0) * 1000.0) as u64)
    });
    bar.finish_and_clear();
    if a.output.emit(&r)? {
        print_host_jitter(&r);
    }
    Ok(())
}

fn client(a: ClientArgs) -> Result<()> {
    if a.interval
        .is_some_and(|s| !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&s))
    {
        return Err(usage("--interval must be between 100ms and 1h"));
    }
    if a.tcp {
        return tcp_client(a);
    }
    for (given, flag) in [
        (a.cc.is_some(), "--cc"),
        (a.duration.is_some(), "--duration"),
        (a.streams.is_some(), "--streams"),
        (a.write_size.is_some(), "--write-size"),
        (a.cpu_load.is_some(), "--cpu-load"),
        (a.cpu_load_sweep.is_some(), "--cpu-load-sweep"),
    ] {
        if given {
            return Err(usage(format!("{flag} is an option of TCP tests: add --tcp")));
        }
    }
    if !(32..=65_507).contains(&a.size) {
        return Err(usage(format!(
            "--size {}: a probe datagram is 32..=65507 bytes",
            a.size
        )));
    }
    if a.count == 0 {
        return Err(usage("--count must be at least 1"));
    }
    let sweeping = !a.sweep.is_empty();
    let spacing_ns = match (a.spacing, a.rate) {
        // At most 1e18 ns (the parser's bound): fits a u64.
        (Some(s), None) => s.as_nanos() as u64,
        (None, Some(r)) => (f64::from(a.size) * 8.0 / r * 1e9).round() as u64,
        (None, None) if sweeping => 0,
        (None, None) => return Err(usage("give --spacing (e.g. 16us) or --rate (e.g. 4.096G)")),
        (Some(_), Some(_)) => return Err(usage("give --spacing or --rate, not both")),
    };
    if a.trials == 0 {
        return Err(usage("--trials must be at least 1"));
    }
    let spec = if sweeping {
        let spec =
            probe_multi::parse_sweep(&a.sweep, a.size, spacing_ns).map_err(|e| usage(format!("--sweep: {e}")))?;
        if a.spacing.is_none() && a.rate.is_none() && !a.sweep.iter().any(|t| t.contains("spacing")) {
            return Err(usage("--sweep without spacings=…: give --spacing or --rate"));
        }
        Some(spec)
    } else {
        None
    };
    let server = resolve(&a.server)?;
    let config = ClientConfig {
        server,
        size: a.size,
        count: a.count,
        spacing_ns,
        key: a.key.read()?,
        test_id: None,
        sndbuf: 16 << 20,
        interval: a.interval.map(|s| s.max(Duration::from_millis(100))),
        rcvbuf: None,
        burst: a.burst,
    };
    if let Some(spec) = spec {
        return probe_multi::sweep(&config, &spec, &a.output, a.csv.as_ref());
    }
    if let Some(bufs) = &a.rcvbuf_sweep {
        return crate::probe_tcp::rcvbuf_sweep(&config, &bufs.0, &a.output);
    }
    if a.trials > 1 {
        return probe_multi::trials(&config, a.trials, &a.output);
    }
    let bar = a.output.bar(a.count, "{bar:40} {pos}/{len} datagrams ETA {eta}");
    let result = run_client_live(&config, |_| {}, |n| bar.set_position(n), live_printer(bar.clone()))?;
    bar.finish_and_clear();
    if a.output.emit(&result)? {
        print_result(&result);
    }
    Ok(())
}

fn tcp_client(a: ClientArgs) -> Result<()> {
    let max = Duration::from_millis(probe_session::control::MAX_DURATION_MS);
    let duration = a.duration.unwrap_or(Duration::from_secs(10));
    if !(Duration::from_millis(100)..=max).contains(&duration) {
        return Err(usage(format!(
            "--duration must be between 100ms and {} s",
            max.as_secs_f64()
        )));
    }
    let streams = a.streams.unwrap_or(1);
    if !(1..=probe_session::control::MAX_STREAMS).contains(&streams) {
        return Err(usage(format!(
            "--streams {streams}: 1..={}",
            probe_session::control::MAX_STREAMS
        )));
    }
    let (lo, hi) = (
        probe_session::control::MIN_WRITE_SIZE,
        probe_session::control::MAX_WRITE_SIZE,
    );
    let asked = a.write_size.unwrap_or(128 * 1024);
    let write_size = u32::try_from(asked)
        .ok()
        .filter(|w| (lo..=hi).contains(w))
        .ok_or_else(|| usage(format!("--write-size {asked}: {lo}..={hi} bytes")))?;
    if let Some(cc) = &a.cc {
        probe_session::control::check_cc_name(cc).map_err(|e| usage(format!("--cc {e}")))?;
    }
    crate::probe_tcp::run(
        crate::probe_tcp::TcpArgs {
            server: resolve(&a.server)?,
            key: a.key.read()?,
            streams,
            duration,
            interval: a.interval.unwrap_or(Duration::from_secs(1)),
            write_size,
            cc: a.cc.clone(),
            cpu_load: a.cpu_load,
            cpu_load_sweep: a.cpu_load_sweep.clone().map(|l| l.0),
        },
        &a.output,
    )
}
