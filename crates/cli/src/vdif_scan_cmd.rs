//! `evlbi vdif gather` and `evlbi vdif scans`: recorded vbs / Mark6 scans as an operator sees
//! them (jive5ab's `scan_check?`, a Mark6's `list`), and written out as one continuous file.

use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use clap::{Args, ValueEnum};
use recording::ScanReader;
use scanfmt::results::{GatherReport, ScanInfo, ScanList};
use scanfmt::Layout;

use crate::flags::JsonOutput;
use crate::scan_args::DisksArg;
use crate::shared_args::QuietArg;
use crate::units::si_fmt;
use crate::{progress_bar, usage, ProblemsFound};

pub const GATHER_EXAMPLES: &str = "Examples:\n  \
    evlbi vdif gather vbs://ev123_no0001_dsEf --out ev123_no0001_Ef.vdif            # disks /mnt/disk*\n  \
    evlbi vdif gather --format mk6 --disks '/mnt/disks/1/*' ev123_ef_no0001 -o scan.vdif --json";

pub const SCANS_EXAMPLES: &str = "Examples:\n  \
    evlbi vdif scans                                   # FlexBuff /mnt/disk* and Mark6 /mnt/disks/*/*\n  \
    evlbi vdif scans --format vbs --disks /data/d0,/data/d1 --json";

/// A recording layout, as a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScanFormat {
    /// FlexBuff vbs (DISK/SCAN/SCAN.NNNNNNNN).
    Vbs,
    /// Mark6 scatter-gather (DISK/SCAN).
    Mk6,
}

impl From<ScanFormat> for Layout {
    fn from(f: ScanFormat) -> Layout {
        match f {
            ScanFormat::Vbs => Layout::Vbs,
            ScanFormat::Mk6 => Layout::Mk6,
        }
    }
}

#[derive(Args)]
pub struct GatherArgs {
    /// The scan: a name (with --format), or vbs://SCAN, mk6://SCAN.
    scan: String,
    /// Layout of the scan, when SCAN is a bare name.
    #[arg(long, value_enum)]
    format: Option<ScanFormat>,
    #[command(flatten)]
    disks: DisksArg,
    /// The continuous file to write (refused if it exists, unless --force).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    output: JsonOutput,
    #[command(flatten)]
    quiet: QuietArg,
}

#[derive(Args)]
pub struct ScansArgs {
    /// Only this layout (default: both).
    #[arg(long, value_enum)]
    format: Option<ScanFormat>,
    #[command(flatten)]
    disks: DisksArg,
    #[command(flatten)]
    output: JsonOutput,
}

/// The layout and name of `scan` (`vbs://NAME`, or NAME with `--format`).
fn layout_and_name(scan: &str, format: Option<ScanFormat>) -> Result<(Layout, String)> {
    match (scanfmt::parse_scan_url(scan), format) {
        (Some((l, n)), None) => Ok((l, n.to_string())),
        (Some((l, n)), Some(f)) if Layout::from(f) == l => Ok((l, n.to_string())),
        (Some(_), Some(_)) => Err(usage(format!("{scan}: --format says otherwise"))),
        (None, Some(f)) => Ok((f.into(), scan.to_string())),
        (None, None) => Err(usage(format!(
            "{scan}: name the layout: vbs://{scan}, mk6://{scan}, or --format vbs|mk6"
        ))),
    }
}

pub fn gather(a: GatherArgs) -> Result<()> {
    let (layout, name) = layout_and_name(&a.scan, a.format)?;
    let url = PathBuf::from(format!("{layout}://{name}"));
    let scan = crate::scan_args::open_scan(&url, &a.disks)?.ok_or_else(|| anyhow!("{} is no scan", url.display()))?;
    let info = scan.info();
    let started = Instant::now();
    let file = std::fs::File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .create_new(!a.force)
        .open(&a.out)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    let mut w = BufWriter::with_capacity(4 << 20, file);
    let bar = progress_bar(scan.len(), a.quiet.quiet || a.output.json, crate::vdif_args::BYTES_BAR);
    let mut r = ScanReader::new(scan);
    let mut buf = vec![0u8; 4 << 20];
    let mut written = 0u64;
    loop {
        let n = r.read(&mut buf).with_context(|| format!("reading {}", url.display()))?;
        if n == 0 {
            break;
        }
        w.write_all(&buf[..n])
            .with_context(|| format!("writing {}", a.out.display()))?;
        written += n as u64;
        bar.set_position(written);
    }
    w.flush().with_context(|| format!("writing {}", a.out.display()))?;
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let report = GatherReport {
        out: a.out.display().to_string(),
        bytes_written: written,
        elapsed_s: elapsed,
        rate_bytes_per_s: written as f64 / elapsed.max(1e-9),
        scan: info,
    };
    if a.output.emit(&report)? {
        print_scan(&report.scan);
        println!(
            "wrote {} ({} bytes) in {:.2} s, {}B/s",
            report.out,
            written,
            elapsed,
            si_fmt(report.rate_bytes_per_s)
        );
    }
    verdict(std::slice::from_ref(&report.scan))
}

pub fn scans(a: ScansArgs) -> Result<()> {
    let layouts: Vec<Layout> = match a.format {
        Some(f) => vec![f.into()],
        None => vec![Layout::Vbs, Layout::Mk6],
    };
    let mut list = ScanList::default();
    let mut found_disks = false;
    for (i, &layout) in layouts.iter().enumerate() {
        // Explicit disks are searched once for every layout; the defaults differ per layout.
        if !a.disks.disks.is_empty() && i > 0 {
            continue;
        }
        let disks = match a.disks.expand(layout) {
            Ok(d) => d,
            Err(e) if a.disks.disks.is_empty() && a.format.is_none() => {
                status!("note: {e}");
                continue;
            }
            Err(e) => return Err(e),
        };
        found_disks = true;
        let search: &[Layout] = if a.disks.disks.is_empty() {
            &layouts[i..=i]
        } else {
            &layouts
        };
        let l = recording::list_scans(search, &disks);
        list.disks.extend(l.disks);
        list.scans.extend(l.scans);
    }
    if !found_disks {
        return Err(usage(
            "no disks found at /mnt/disk* or /mnt/disks/*/*: give --disks DIR|GLOB",
        ));
    }
    if a.output.emit(&list)? {
        println!("{} scan(s) on {} disk(s)", list.scans.len(), list.disks.len());
        for s in &list.scans {
            print_row(s);
        }
    }
    verdict(&list.scans)
}

/// Exit 1 when a scan has lost blocks or unreadable parts.
fn verdict(scans: &[ScanInfo]) -> Result<()> {
    let bad: Vec<String> = scans
        .iter()
        .filter(|s| !s.problems.is_empty())
        .map(|s| format!("{}: {}", s.url, s.problems.join("; ")))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(ProblemsFound(bad.join("\n"))))
    }
}

fn span_text(s: &ScanInfo) -> String {
    s.span.as_ref().map_or("no VDIF".into(), |p| {
        format!(
            "{} {} frame {} .. {} frame {}",
            p.station, p.start_utc, p.start_frame, p.stop_utc, p.stop_frame
        )
    })
}

fn print_row(s: &ScanInfo) {
    println!(
        "  {:<40} {:>10}B  {:>6} blocks  {:>4} missing  {}  on {} disk(s)",
        s.url,
        si_fmt(s.bytes as f64),
        s.blocks,
        s.missing_blocks,
        span_text(s),
        s.disks.len()
    );
    for p in &s.problems {
        println!("      problem: {p}");
    }
}

fn print_scan(s: &ScanInfo) {
    println!(
        "scan       {} ({} bytes in {} blocks, {} files)",
        s.url, s.bytes, s.blocks, s.files
    );
    println!("disks      {}", s.disks.join(" "));
    println!("time       {}", span_text(s));
    println!(
        "missing    {} block(s){}",
        s.missing_blocks,
        if s.missing.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                s.missing
                    .iter()
                    .map(|[a, b]| if b - a == 1 {
                        a.to_string()
                    } else {
                        format!("{a}-{}", b - 1)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    for p in &s.problems {
        println!("problem    {p}");
    }
}
