//! `evlbi probe client --trials N` and `--sweep`: many trials against one server, one session
//! each, gathered in one documented result (`TrialsResult`, `SweepResult`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use probe::results::{ProbeResult, Spread, SweepResult, TrialsResult};
use probe_session::{run_client_live, ClientConfig};

use crate::probe_print::live_printer;

use crate::flags::ResultOutput;
use crate::units::{parse_duration, parse_size, parse_values, rate_fmt, si_fmt, us_fmt, with_default_unit};
use crate::usage;

/// The grid of a `--sweep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    /// Datagram sizes, bytes.
    pub sizes: Vec<u32>,
    /// Spacings, ns.
    pub spacings_ns: Vec<u64>,
}

/// Parse `--sweep` values: each is one or more space-separated `sizes=…` / `spacings=…` terms.
/// A term's value is a list (`1472,8192`; `0,10us,20us`) or a range `A..B[:STEP]` (`64..8972:1024`,
/// `0..40us:10us`), ends included; a range without a step gives 5 evenly spaced points. Spacings
/// take ns/us/ms/s units (a unitless start or step takes the end's unit; a lone unitless number is
/// ns). A parameter left out keeps the client's `--size` / `--spacing`.
pub fn parse_sweep(terms: &[String], size: u32, spacing_ns: u64) -> Result<SweepSpec, String> {
    let mut spec = SweepSpec {
        sizes: vec![size],
        spacings_ns: vec![spacing_ns],
    };
    for term in terms.iter().flat_map(|t| t.split_whitespace()) {
        let (key, value) = term
            .split_once('=')
            .ok_or_else(|| format!("{term:?}: expected sizes=… or spacings=…"))?;
        match key {
            "sizes" | "size" => {
                spec.sizes = parse_values(value, &|s, unit| parse_size(&with_default_unit(s, unit)))?
                    .into_iter()
                    .map(|v| u32::try_from(v).map_err(|_| format!("size {v} too large")))
                    .collect::<Result<_, _>>()?;
                if let Some(bad) = spec.sizes.iter().find(|s| !(32..=65_507).contains(*s)) {
                    return Err(format!("size {bad}: a probe datagram is 32..=65507 bytes"));
                }
            }
            "spacings" | "spacing" => spec.spacings_ns = parse_values(value, &parse_ns)?,
            _ => return Err(format!("{key:?}: unknown sweep parameter (use sizes= or spacings=)")),
        }
    }
    Ok(spec)
}

/// A spacing in ns; `unit` is the unit to assume when `s` has none (from the range's end).
fn parse_ns(s: &str, unit: Option<&str>) -> Result<u64, String> {
    // At most 1e18 ns (the parser's bound): fits a u64.
    Ok(parse_duration(&with_default_unit(s, Some(unit.unwrap_or("ns"))))?.as_nanos() as u64)
}

/// Run `trials` sessions of `config` back to back and report their spread.
pub fn trials(config: &ClientConfig, trials: u32, output: &ResultOutput) -> Result<()> {
    let (quiet, json) = (output.quiet.quiet, output.json());
    let bar = output.bar(u64::from(trials), "{bar:40} trial {pos}/{len} ETA {eta}");
    let mut results = Vec::new();
    for i in 0..trials {
        let r = run_client_live(config, |_| {}, |_| {}, live_printer(bar.clone()))
            .with_context(|| format!("trial {} of {trials}", i + 1))?;
        if !quiet && !json {
            bar.suspend(|| println!("{}", trial_line(i + 1, &r)));
        }
        results.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let all = TrialsResult::new(results);
    if output.emit(&all)? {
        if quiet {
            for (i, r) in all.trials.iter().enumerate() {
                println!("{}", trial_line(i as u32 + 1, r));
            }
        }
        let s = &all.summary;
        println!("spread over {} trials (min / median / max):", s.trials);
        println!("  received rate     {}", spread(s.received_user_rate_bps, rate_fmt));
        println!(
            "  loss fraction     {}",
            spread(s.loss_fraction, |v| format!("{v:.3e}"))
        );
        println!("  lost packets      {}", spread(s.lost_packets, |v| format!("{v:.0}")));
        println!(
            "  jitter p99        {}",
            spread(s.inter_arrival_p99_ns, |v| format!("{:.2} us", v / 1e3))
        );
        println!(
            "  sender gap p99    {}",
            spread(s.departure_gap_p99_ns, |v| format!("{:.2} us", v / 1e3))
        );
        println!(
            "  one-way delay p99 {}",
            spread(s.one_way_delay_p99_ns, |v| format!("{:.2} us", v / 1e3))
        );
    }
    Ok(())
}

fn spread(s: Option<Spread>, fmt: impl Fn(f64) -> String) -> String {
    s.map_or("-".into(), |s| {
        format!("{} / {} / {}", fmt(s.min), fmt(s.median), fmt(s.max))
    })
}

fn trial_line(i: u32, r: &ProbeResult) -> String {
    let rx = r.receiver.as_ref();
    format!(
        "trial {i}: {}b/s received, {} of {} lost ({:.3e}), {} reordered, jitter p99 {} us, sender gap p99 {} us",
        si_fmt(rx.and_then(|x| x.user_rate_bps).unwrap_or(0.0)),
        rx.map_or(0, |x| x.lost_packets),
        rx.map_or(0, |x| x.expected_packets),
        rx.and_then(|x| x.loss_fraction).unwrap_or(0.0),
        rx.map_or(0, |x| x.reordering.reordered_packets),
        us_fmt(rx.and_then(|x| x.inter_arrival_ns.p99)),
        us_fmt(r.sender.as_ref().and_then(|s| s.departure_gap_ns.p99)),
    )
}

/// Run one trial per grid point (size-major) and write the sweep as JSON (and CSV).
pub fn sweep(config: &ClientConfig, spec: &SweepSpec, output: &ResultOutput, csv: Option<&PathBuf>) -> Result<()> {
    let mut sweep = SweepResult::new(spec.sizes.clone(), spec.spacings_ns.clone());
    let grid: Vec<(u32, u64)> = sweep.grid().collect();
    if grid.len() > 10_000 {
        return Err(usage(format!("--sweep: {} points, more than 10000", grid.len())));
    }
    let bar = output.bar(grid.len() as u64, "{bar:40} point {pos}/{len} {msg} ETA {eta}");
    for (size, spacing_ns) in grid {
        bar.set_message(format!("{size} B every {spacing_ns} ns"));
        let cfg = ClientConfig {
            size,
            spacing_ns,
            ..config.clone()
        };
        let r = run_client_live(&cfg, |_| {}, |_| {}, live_printer(bar.clone()))
            .with_context(|| format!("sweep point {size} B, {spacing_ns} ns"))?;
        sweep.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let text = output.emit(&sweep)?;
    let table = sweep.to_csv();
    if let Some(p) = csv {
        std::fs::write(p, &table).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if text {
        println!(
            "{:>6} {:>11} {:>12} {:>12} {:>10} {:>7} {:>10} {:>10}",
            "size", "spacing_us", "offered", "received", "loss", "reord", "jitter99", "gap99"
        );
        for p in &sweep.points {
            let r = &p.result;
            let rx = r.receiver.as_ref();
            println!(
                "{:>6} {:>11.3} {:>12} {:>12} {:>10.3e} {:>7} {:>10} {:>10}",
                p.size,
                p.spacing_ns as f64 / 1e3,
                r.offered_user_rate_bps.map_or("max".into(), rate_fmt),
                rate_fmt(rx.and_then(|x| x.user_rate_bps).unwrap_or(0.0)),
                rx.and_then(|x| x.loss_fraction).unwrap_or(0.0),
                rx.map_or(0, |x| x.reordering.reordered_packets),
                us_fmt(rx.and_then(|x| x.inter_arrival_ns.p99)),
                us_fmt(r.sender.as_ref().and_then(|s| s.departure_gap_ns.p99)),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &[&str]) -> Result<SweepSpec, String> {
        parse_sweep(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 1472, 16_000)
    }

    #[test]
    fn lists_ranges_and_steps() {
        let s = parse(&["sizes=1472,8192 spacings=0..40us:10us"]).unwrap();
        assert_eq!(s.sizes, vec![1472, 8192]);
        assert_eq!(s.spacings_ns, vec![0, 10_000, 20_000, 30_000, 40_000]);
        let s = parse(&["sizes=64..8972:2048", "spacings=5us,12us,16000"]).unwrap();
        assert_eq!(s.sizes, vec![64, 2112, 4160, 6208, 8256, 8972]);
        assert_eq!(s.spacings_ns, vec![5_000, 12_000, 16_000]);
        let s = parse(&["spacings=10..20us"]).unwrap();
        assert_eq!(s.sizes, vec![1472]);
        assert_eq!(s.spacings_ns, vec![10_000, 12_500, 15_000, 17_500, 20_000]);
        // Sizes take the one size parser's forms.
        let s = parse(&["sizes=1.5K,9KiB"]).unwrap();
        assert_eq!(s.sizes, vec![1500, 9216]);
        // A unitless start and step take the end's unit.
        let s = parse(&["sizes=1..2kB:0.5"]).unwrap();
        assert_eq!(s.sizes, vec![1000, 1500, 2000]);
        let e = parse(&["sizes=2parsecs"]).unwrap_err();
        assert!(e.contains("expected a size in bytes"), "{e}");
        let s = parse(&["sizes=1000B..2kB:500B"]).unwrap();
        assert_eq!(s.sizes, vec![1000, 1500, 2000]);
        let s = parse(&["spacings=1us..2ms:500us"]).unwrap();
        assert_eq!(s.spacings_ns, vec![1_000, 501_000, 1_001_000, 1_501_000, 2_000_000]);
    }

    #[test]
    fn bad_sweeps_are_refused() {
        for bad in [
            "sizes=8",
            "sizes=100..50",
            "spacings=0..40us:0",
            "widths=1",
            "sizes",
            "sizes=a,b",
            "spacings=0..1s:1ns",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }
}
