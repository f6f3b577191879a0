//! The text views of `evlbi vdif` results (inspect, stats, correlate); `--json` prints the
//! result structs themselves.

use vdif::stats::{Part, SamplerStats};

use crate::units::si_fmt;
use crate::vdif_args::{CorrelateArgs, FileReport};

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("?".to_string(), |x| x.to_string())
}

pub(crate) fn print_inspect(f: &FileReport) {
    let r = &f.report;
    println!("file       {} ({} bytes)", f.file.display(), r.file_bytes);
    if r.format.as_deref() == Some(vdif::inspect::mark5b::MARK5B_FORMAT) {
        print_mark5b_head(r);
    } else {
        print_vdif_head(r);
    }
    print_inspect_tail(r);
}

/// A Mark5B file's format lines: one stream of 10 016-byte frames, its rate.
fn print_mark5b_head(r: &vdif::inspect::InspectReport) {
    println!("format     Mark5B, one stream");
    println!(
        "frames     {} of {} bytes (16-byte header)",
        r.frames,
        opt(&r.frame_bytes)
    );
    match r.frames_per_second {
        Some(fps) => println!(
            "rate       {} (from {}), {}b/s",
            fps,
            opt(&r.frame_rate_source),
            si_fmt(r.data_rate_bps.unwrap_or(0.0))
        ),
        None => println!("rate       unknown (the frames do not cross a second; pass --fps)"),
    }
}

/// A VDIF file's format lines: stations, threads, frames, samples, rate.
fn print_vdif_head(r: &vdif::inspect::InspectReport) {
    if r.stations.len() > 1 {
        println!("stations   {}", r.stations.len());
        for s in &r.stations {
            println!(
                "  {:<8} (id {}) {} frames, threads {:?}",
                // The id as the number in the header (the station's name is beside it).
                s.station,
                s.station_id.0,
                s.frames,
                s.threads
            );
        }
    } else {
        println!(
            "station    {} (id {})",
            opt(&r.station),
            opt(&r.station_id.map(|id| id.0))
        );
    }
    println!("threads    {} {:?}", r.threads.len(), r.threads);
    println!(
        "frames     {} of {} bytes ({}-byte header{}, EDV {})",
        r.frames,
        opt(&r.frame_bytes),
        opt(&r.header_bytes),
        if r.legacy == Some(true) { ", legacy" } else { "" },
        opt(&r.edv)
    );
    println!(
        "samples    {}-bit {}, {} channel(s), {} samples/frame",
        opt(&r.bits_per_sample),
        if r.complex == Some(true) { "complex" } else { "real" },
        opt(&r.channels),
        opt(&r.samples_per_frame)
    );
    match r.frames_per_second {
        Some(fps) => println!(
            "rate       {} per thread (from {}), {}S/s per channel, {}b/s",
            fps,
            opt(&r.frame_rate_source),
            si_fmt(r.sample_rate_hz.unwrap_or(0.0)),
            si_fmt(r.data_rate_bps.unwrap_or(0.0))
        ),
        None => println!("rate       unknown (no thread crosses a second; pass --fps)"),
    }
}

/// The lines every format has: time, invalid and missing frames, garbage, notes, verdict.
fn print_inspect_tail(r: &vdif::inspect::InspectReport) {
    match (&r.start_utc, &r.first_second_utc) {
        (None, Some(sec)) => println!("time       in the second from {sec} (no frame rate: no time within it)"),
        _ => println!(
            "time       {} .. {} ({} s)",
            opt(&r.start_utc),
            opt(&r.end_utc),
            r.duration_s.map_or("?".into(), |d| format!("{d:.6}"))
        ),
    }
    println!("invalid    {} frame(s)", r.invalid_frames);
    println!(
        "missing    {} frame(s) in {} gap(s){}; {} out of order",
        r.missing_frames,
        r.gaps,
        if r.frames_per_second.is_none() {
            " within seconds"
        } else {
            ""
        },
        r.out_of_order_frames
    );
    println!(
        "garbage    {} byte(s) in {} region(s)",
        r.garbage_bytes, r.garbage_regions
    );
    for n in &r.notes {
        println!("note       {n}");
    }
    if r.problems.is_empty() {
        println!("verdict    OK");
    } else {
        println!("verdict    {} problem(s):", r.problems.len());
        for p in &r.problems {
            println!("  - {p}");
        }
    }
}

pub(crate) fn print_stats(name: &str, stats: &SamplerStats) {
    println!(
        "{name}: {} frames, {}-bit {}, {} invalid frame(s) skipped, {} byte(s) not frames",
        stats.frames,
        stats.bits,
        if stats.complex { "complex" } else { "real" },
        stats.invalid_frames_skipped,
        stats.bytes_skipped
    );
    let heads: &[&str] = if stats.bits == 2 {
        &["--", "-", "+", "++"]
    } else {
        &["-", "+"]
    };
    let stations = stats.channels.iter().any(|c| c.station != stats.channels[0].station);
    print!(
        "{}thread chan{}     samples",
        if stations { "station " } else { "" },
        if stats.complex { " part" } else { "" }
    );
    for h in heads {
        print!(" {h:>7}");
    }
    println!("  thresh/σ  verdict");
    for c in &stats.channels {
        if stations {
            print!("{:<8}", c.station);
        }
        print!("{:>6} {:>4}", c.thread, c.channel);
        if stats.complex {
            print!(" {:>4}", if c.part == Part::I { "I" } else { "Q" });
        }
        print!(" {:>11}", c.samples);
        for f in &c.fractions {
            print!(" {:>6.2}%", f * 100.0);
        }
        println!(
            "  {:>8}  {:?}",
            c.implied_threshold_sigma.map_or("-".into(), |t| format!("{t:.3}")),
            c.verdict
        );
    }
    if let Some(c) = stats.channels.first() {
        let width = 23 + if stats.complex { 5 } else { 0 } + if stations { 8 } else { 0 };
        print!("{:<width$}", "expected (Gaussian)");
        for f in &c.expected {
            print!(" {:>6.2}%", f * 100.0);
        }
        println!("  {:>8}", if stats.bits == 2 { "0.982" } else { "-" });
    }
    for p in &stats.problems {
        println!("problem: {p}");
    }
    println!("verdict: {:?}", stats.verdict);
}

pub(crate) fn print_fringe(a: &CorrelateArgs, fringe: &fxcorr::Fringe) {
    println!(
        "{} x {}: stations {} x {}, thread {} channel {}, {} frames paired, {} used ({:.2}% valid), {} {} samples",
        a.a.display(),
        a.b.display(),
        fringe.station_a,
        fringe.station_b,
        a.thread,
        a.channel,
        fringe.frames_paired,
        fringe.frames_used,
        fringe.valid_fraction * 100.0,
        fringe.samples,
        if fringe.complex { "complex" } else { "real" }
    );
    let delay = format!(
        "delay {} samples{}",
        fringe.delay_samples,
        fringe
            .delay_s
            .map_or(String::new(), |d| format!(" ({:.4} us)", d * 1e6))
    );
    if fringe.detected {
        println!(
            "fringe: {delay}, |amplitude| {:.5}, S/N {:.1}",
            fringe.amplitude, fringe.snr
        );
    } else {
        println!(
            "no fringe above S/N {}: the highest peak, {delay}, |amplitude| {:.5}, S/N {:.1}, is noise",
            fringe.config.min_snr, fringe.amplitude, fringe.snr
        );
    }
}
