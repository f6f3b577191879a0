//! `evlbi probe client --tcp` (one TCP test, optionally with a competing CPU load), its
//! `--cpu-load-sweep`, and the UDP `--rcvbuf-sweep`: parse the options, run, print the text view,
//! write the JSON. A test or sweep that ended early still writes its (partial) JSON, then exits 1.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use probe::tcp_results::{CpuLoadPoint, CpuLoadSweepResult, RcvbufPoint, RcvbufSweepResult};
use probe_session::burn::{online_cpus, CpuLoadSpec, NICE_MAX, NICE_MIN};
use probe_session::control::{MAX_RCVBUF, MIN_RCVBUF};
use probe_session::{run_client_live, run_tcp_client, ClientConfig, TcpClientConfig};

use crate::flags::ResultOutput;
use crate::probe_print::{interval_line, live_printer, print_rcvbuf, print_tcp};
use crate::units::{parse_size, parse_values, rate_fmt, with_default_unit};
use crate::usage_of;

/// The competing task of `--cpu-load nice=N[,threads=K]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLoadArg {
    /// Nice level.
    pub nice: i32,
    /// Spinning threads (default: one per online CPU).
    pub threads: Option<u32>,
}

fn nice_level(s: &str) -> Result<i32, String> {
    let n: i32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: a nice level is a whole number"))?;
    if !(NICE_MIN..=NICE_MAX).contains(&n) {
        return Err(format!(
            "nice level {n} outside {NICE_MIN}..={NICE_MAX} (-20 is the highest priority, 19 the lowest)"
        ));
    }
    Ok(n)
}

/// Parse `nice=N[,threads=K]` (a bare `N` is the nice level).
pub fn parse_cpu_load(s: &str) -> Result<CpuLoadArg, String> {
    let mut nice = None;
    let mut threads = None;
    for part in s.split(',').map(str::trim) {
        match part.split_once('=') {
            Some(("nice", v)) => nice = Some(nice_level(v)?),
            Some(("threads", v)) => {
                let t: u32 = v.trim().parse().map_err(|_| format!("threads={v:?}: a whole number"))?;
                if !(1..=1024).contains(&t) {
                    return Err(format!("threads={t}: 1..=1024"));
                }
                threads = Some(t);
            }
            None if nice.is_none() && !part.is_empty() => nice = Some(nice_level(part)?),
            _ => return Err(format!("{part:?}: expected nice=N or threads=K")),
        }
    }
    Ok(CpuLoadArg {
        nice: nice.ok_or("give the nice level: nice=N (-20..19)")?,
        threads,
    })
}

/// Nice levels of a `--cpu-load-sweep`, in the order to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NiceLevels(pub Vec<i32>);

/// Receive-buffer sizes of a `--rcvbuf-sweep`, bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcvbufSizes(pub Vec<u64>);

/// [`parse_nice_levels`] for clap.
pub fn nice_levels_arg(s: &str) -> Result<NiceLevels, String> {
    parse_nice_levels(s).map(NiceLevels)
}

/// [`parse_rcvbufs`] for clap.
pub fn rcvbufs_arg(s: &str) -> Result<RcvbufSizes, String> {
    parse_rcvbufs(s).map(RcvbufSizes)
}

/// Parse a `--cpu-load-sweep`: a list (`19,10,0`) or a range `A..B[:STEP]` in either direction,
/// both ends included (no step: 5 evenly spaced levels).
pub fn parse_nice_levels(s: &str) -> Result<Vec<i32>, String> {
    let out = match s.split_once("..") {
        Some((a, rest)) => {
            let (b, step) = match rest.split_once(':') {
                Some((b, st)) => (b, Some(st)),
                None => (rest, None),
            };
            let (a, b) = (nice_level(a)?, nice_level(b)?);
            let dir = if b >= a { 1 } else { -1 };
            match step {
                Some(st) => {
                    let st: i32 = st.trim().parse().map_err(|_| format!("step {st:?}: a whole number"))?;
                    if st <= 0 {
                        return Err(format!("step {st}: must be at least 1"));
                    }
                    let mut v: Vec<i32> = (0..)
                        .map(|k| a + dir * k * st)
                        .take_while(|&x| if dir > 0 { x <= b } else { x >= b })
                        .collect();
                    if v.last() != Some(&b) {
                        v.push(b);
                    }
                    v
                }
                None => {
                    let mut v: Vec<i32> = (0..5)
                        .map(|k| a + ((b - a) as f64 * f64::from(k) / 4.0).round() as i32)
                        .collect();
                    v.dedup();
                    v
                }
            }
        }
        None => s.split(',').map(nice_level).collect::<Result<Vec<_>, _>>()?,
    };
    if out.is_empty() {
        return Err(format!("{s:?}: no nice levels"));
    }
    Ok(out)
}

/// Parse a `--rcvbuf-sweep`: sizes as a list (`64K,128K,230K`) or a range `A..B[:STEP]` (no
/// step: 5 evenly spaced sizes); units as `--size`'s (K/M decimal, KiB/MiB binary).
pub fn parse_rcvbufs(s: &str) -> Result<Vec<u64>, String> {
    // A unitless start takes the end's unit, as in --sweep ("64..512K").
    let v = parse_values(s, &|x: &str, unit: Option<&str>| {
        parse_size(&with_default_unit(x, unit))
    })?;
    if v.len() > 1000 {
        return Err(format!("{} sizes, more than 1000", v.len()));
    }
    if let Some(bad) = v.iter().find(|&&b| !(MIN_RCVBUF..=MAX_RCVBUF).contains(&b)) {
        return Err(format!("{bad} B outside {MIN_RCVBUF}..={MAX_RCVBUF}"));
    }
    Ok(v)
}

/// What the TCP options ask for.
pub struct TcpArgs {
    /// Server control address.
    pub server: SocketAddr,
    /// Pre-shared key.
    pub key: Option<Vec<u8>>,
    /// Streams.
    pub streams: u16,
    /// Test length.
    pub duration: Duration,
    /// Interval of the per-interval figures.
    pub interval: Duration,
    /// Bytes per write.
    pub write_size: u32,
    /// Congestion control.
    pub cc: Option<String>,
    /// One competing task.
    pub cpu_load: Option<CpuLoadArg>,
    /// A sweep of nice levels.
    pub cpu_load_sweep: Option<Vec<i32>>,
}

fn load_spec(l: CpuLoadArg, duration: Duration) -> Result<CpuLoadSpec> {
    Ok(CpuLoadSpec {
        program: std::env::current_exe().context("finding the evlbi executable for the CPU load")?,
        args: vec!["probe".into(), "burn-cpu".into()],
        nice: l.nice,
        threads: l.threads.unwrap_or_else(online_cpus),
        // The test ends the task; this only bounds a task whose test went wrong.
        max_run: duration + probe_session::RESULTS_WAIT + Duration::from_secs(30),
    })
}

/// Run `--tcp` (with `--cpu-load` or `--cpu-load-sweep` if given).
pub fn run(a: TcpArgs, output: &ResultOutput) -> Result<()> {
    if let Some(cc) = &a.cc {
        // Refuse an unknown name before any connection, listing what the kernel has.
        probe_session::tcpsock::check_congestion(cc).map_err(usage_of)?;
    }
    let config = |load: Option<CpuLoadArg>| -> Result<TcpClientConfig> {
        let mut c = TcpClientConfig::new(a.server);
        c.key = a.key.clone();
        c.streams = a.streams;
        c.duration = a.duration;
        c.interval = a.interval;
        c.write_size = a.write_size;
        c.cc = a.cc.clone();
        c.cpu_load = load.map(|l| load_spec(l, a.duration)).transpose()?;
        Ok(c)
    };
    let text = !output.json();
    if let Some(levels) = &a.cpu_load_sweep {
        return cpu_sweep(levels, a.cpu_load.and_then(|l| l.threads), &config, output);
    }
    let cfg = config(a.cpu_load)?;
    if text {
        println!(
            "tcp: {} stream(s) for {:.1} s to {}, {}-byte writes, congestion control {}",
            cfg.streams,
            cfg.duration.as_secs_f64(),
            a.server,
            cfg.write_size,
            cfg.cc.as_deref().unwrap_or("(kernel default)")
        );
    }
    let r = run_tcp_client(&cfg, |iv| {
        if text {
            println!("{}", interval_line(iv));
        }
    })?;
    if output.emit(&r)? {
        print_tcp(&r);
    }
    partial_exit(r.partial, r.error.as_deref(), output)
}

/// A partial result was written: exit 1 saying so.
fn partial_exit(partial: bool, error: Option<&str>, output: &ResultOutput) -> Result<()> {
    if !partial {
        return Ok(());
    }
    let where_ = match (output.export_path(), output.json()) {
        (Some(p), _) => format!("; the partial result is in {}", p.display()),
        (None, true) => "; the partial result was printed".into(),
        (None, false) => String::new(),
    };
    Err(anyhow!(
        "the test ended early: {}{where_}",
        error.unwrap_or("no reason recorded")
    ))
}

fn cpu_sweep(
    levels: &[i32],
    threads: Option<u32>,
    config: &dyn Fn(Option<CpuLoadArg>) -> Result<TcpClientConfig>,
    output: &ResultOutput,
) -> Result<()> {
    let mut sweep = CpuLoadSweepResult::new(levels.to_vec());
    let points: Vec<Option<i32>> = std::iter::once(None).chain(levels.iter().copied().map(Some)).collect();
    let bar = output.bar(points.len() as u64, "{bar:40} point {pos}/{len} {msg} ETA {eta}");
    for nice in points {
        bar.set_message(nice.map_or("no load".into(), |n| format!("nice {n}")));
        let cfg = config(nice.map(|nice| CpuLoadArg { nice, threads }))?;
        match run_tcp_client(&cfg, |_| {}) {
            Ok(r) => {
                let (partial, error) = (r.partial, r.error.clone());
                sweep.points.push(CpuLoadPoint::of(r));
                if partial {
                    sweep.partial = true;
                    sweep.error = Some(format!("{}: {}", point_name(nice), error.unwrap_or_default()));
                    break;
                }
            }
            Err(e) => {
                sweep.partial = true;
                sweep.error = Some(format!("{}: {}", point_name(nice), netio::error_chain(&e)));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if output.emit(&sweep)? {
        println!(
            "{:>8} {:>14} {:>12} {:>14} {:>10} {:>9}",
            "nice", "rate", "CPU left %", "task CPU %", "idle %", "retrans"
        );
        for p in &sweep.points {
            let c = p.result.cpu_load.as_ref();
            println!(
                "{:>8} {:>14} {:>12} {:>14} {:>10} {:>9}",
                point_name(p.nice),
                rate_fmt(p.rate_bps.unwrap_or(0.0)),
                p.available_cpu_pct.map_or("-".into(), |v| format!("{v:.1}")),
                c.and_then(|c| c.task_cpu_pct).map_or("-".into(), |v| format!("{v:.1}")),
                p.sender_idle_pct.map_or("-".into(), |v| format!("{v:.1}")),
                p.result.retransmits
            );
        }
        if let Some(e) = &sweep.error {
            println!("PARTIAL  {e}");
        }
    }
    partial_exit(sweep.partial, sweep.error.as_deref(), output)
}

fn point_name(nice: Option<i32>) -> String {
    nice.map_or("no load".into(), |n| n.to_string())
}

/// Run one UDP trial of `config` per receive-buffer size (seed 003 Fig 2c).
pub fn rcvbuf_sweep(config: &ClientConfig, rcvbufs: &[u64], output: &ResultOutput) -> Result<()> {
    let mut sweep = RcvbufSweepResult::new(config.size, config.spacing_ns, config.count, rcvbufs.to_vec());
    let bar = output.bar(rcvbufs.len() as u64, "{bar:40} point {pos}/{len} {msg} ETA {eta}");
    for &b in rcvbufs {
        bar.set_message(format!("receive buffer {b} B"));
        let cfg = ClientConfig {
            rcvbuf: Some(b),
            ..config.clone()
        };
        match run_client_live(&cfg, |_| {}, |_| {}, live_printer(bar.clone())) {
            Ok(r) => sweep.points.push(RcvbufPoint::of(b, r)),
            Err(e) => {
                sweep.partial = true;
                sweep.error = Some(format!("receive buffer {b} B: {}", netio::error_chain(&e)));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if output.emit(&sweep)? {
        print_rcvbuf(&sweep);
    }
    partial_exit(sweep.partial, sweep.error.as_deref(), output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_load_values() {
        assert_eq!(
            parse_cpu_load("nice=10").unwrap(),
            CpuLoadArg {
                nice: 10,
                threads: None
            }
        );
        assert_eq!(
            parse_cpu_load("nice=-5,threads=3").unwrap(),
            CpuLoadArg {
                nice: -5,
                threads: Some(3)
            }
        );
        assert_eq!(parse_cpu_load("19").unwrap().nice, 19);
        for bad in [
            "nice=20",
            "nice=-21",
            "nice=x",
            "threads=2",
            "nice=1,threads=0",
            "nice=1,speed=2",
            "",
        ] {
            assert!(parse_cpu_load(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nice_level_sweeps() {
        assert_eq!(parse_nice_levels("19..0").unwrap(), vec![19, 14, 9, 5, 0]);
        assert_eq!(parse_nice_levels("19..10:3").unwrap(), vec![19, 16, 13, 10]);
        assert_eq!(parse_nice_levels("0..19:5").unwrap(), vec![0, 5, 10, 15, 19]);
        assert_eq!(parse_nice_levels("-20..-18:1").unwrap(), vec![-20, -19, -18]);
        assert_eq!(parse_nice_levels("19,10,0").unwrap(), vec![19, 10, 0]);
        assert_eq!(parse_nice_levels("5..5").unwrap(), vec![5]);
        for bad in ["19..20", "x..0", "19..0:0", "19..0:-1", "1,2,30", ""] {
            assert!(parse_nice_levels(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rcvbuf_sweeps_take_ranges_steps_and_lists() {
        assert_eq!(
            parse_rcvbufs("64K..512K").unwrap(),
            vec![64_000, 176_000, 288_000, 400_000, 512_000]
        );
        assert_eq!(
            parse_rcvbufs("64..256K:64K").unwrap(),
            vec![64_000, 128_000, 192_000, 256_000]
        );
        assert_eq!(parse_rcvbufs("64KiB,230K").unwrap(), vec![65_536, 230_000]);
        for bad in ["512K..64K", "100", "2GiB", "64K..512K:0", "big"] {
            assert!(parse_rcvbufs(bad).is_err(), "{bad}");
        }
    }
}
