//! The flags and openers of recorded scans, shared by every command that records or reads one:
//! `--format vdif|vbs|mk6 --disks … --scan NAME` for the recorders (`stream recv`, the relay's
//! tee) and `vbs://SCAN` / `mk6://SCAN` with `--disks` wherever a VDIF file is read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use recording::write::RecordingConfig;
use recording::{Scan, ScanReader};
use scanfmt::Layout;

use crate::units::parse_size;
use crate::{usage, usage_in, usage_of};

/// `--disks`: where recorded scans are (reading).
#[derive(Args, Clone, Debug, Default)]
pub struct DisksArg {
    /// Disks holding `vbs://SCAN` and `mk6://SCAN` inputs: DIR[,DIR…] or a glob, repeatable.
    /// Default: /mnt/disk* for vbs (FlexBuff), /mnt/disks/*/* for mk6 (Mark6 modules).
    #[arg(long, value_name = "DIR|GLOB")]
    pub disks: Vec<String>,
}

impl DisksArg {
    /// The mount points for `layout` (the machine's default when none were given).
    pub fn expand(&self, layout: Layout) -> Result<Vec<PathBuf>> {
        let patterns = if self.disks.is_empty() {
            vec![layout.default_disks().to_string()]
        } else {
            self.disks.clone()
        };
        recording::disks::expand(&patterns).map_err(|e| usage_in("--disks", e))
    }
}

/// The scan `input` names (`vbs://SCAN`, `mk6://SCAN`), opened; `None` for a plain path. What
/// was wrong finding its pieces is printed as warnings.
pub fn open_scan(input: &Path, disks: &DisksArg) -> Result<Option<Arc<Scan>>> {
    let scan = find_scan(input, disks)?;
    if let Some(s) = &scan {
        for p in s.problems() {
            status!("warning: {}://{}: {p}", s.layout(), s.name());
        }
    }
    Ok(scan)
}

/// The scan `input` names, opened without a word said.
fn find_scan(input: &Path, disks: &DisksArg) -> Result<Option<Arc<Scan>>> {
    let Some((layout, name)) = input.to_str().and_then(scanfmt::parse_scan_url) else {
        return Ok(None);
    };
    let d = disks.expand(layout)?;
    // As jive5ab's scan_set opens a name: the recording and its data streams (`NAME_ds*`) as one.
    let scan = Scan::open_with_streams(layout, name, &d).map_err(|e| match e {
        recording::ScanError::Name(_) => usage_of(e),
        e => anyhow::anyhow!(e),
    })?;
    Ok(Some(Arc::new(scan)))
}

/// A VDIF file or a recorded scan, opened for reading.
pub struct OpenedInput {
    /// Its bytes.
    pub reader: Box<dyn Read + Send>,
    /// How many.
    pub len: u64,
    /// For a scan: what is wrong with it (missing, duplicate or truncated blocks, unreadable
    /// disks or files); the reader has to say these, as the bytes it reads have the missing
    /// blocks' data left out.
    pub problems: Vec<String>,
}

/// A reader over a VDIF file or a recorded scan.
pub fn open_input(input: &Path, disks: &DisksArg) -> Result<OpenedInput> {
    if let Some(scan) = find_scan(input, disks)? {
        return Ok(OpenedInput {
            len: scan.len(),
            problems: scan.info().problems,
            reader: Box::new(ScanReader::new(scan)),
        });
    }
    let f = std::fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(OpenedInput {
        reader: Box::new(f),
        len,
        problems: Vec::new(),
    })
}

/// How a recorder lays its data out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum RecordFormat {
    /// Continuous VDIF files in one directory (--out, --tee DIR).
    #[default]
    Vdif,
    /// FlexBuff vbs: chunk files DISK/SCAN/SCAN.NNNNNNNN spread over --disks.
    Vbs,
    /// Mark6 scatter-gather: one file DISK/SCAN per disk, blocks with headers.
    Mk6,
}

/// `--format --disks --scan --block --page-cache`: a recording over many disks.
#[derive(Args, Clone, Debug, Default)]
pub struct RecordArgs {
    /// Recording layout: vdif (one continuous file per station in --out), vbs (FlexBuff) or mk6
    /// (Mark6 scatter-gather) spread over --disks, one writer per disk.
    #[arg(long, value_enum, default_value = "vdif")]
    pub format: RecordFormat,
    /// With vbs/mk6: the disks (mount points), DIR[,DIR…] or a glob, repeatable. Directories
    /// named without a wildcard are made if missing. Default: /mnt/disk* (vbs),
    /// /mnt/disks/*/* (mk6).
    #[arg(long, value_name = "DIR|GLOB")]
    pub disks: Vec<String>,
    /// With vbs/mk6: the scan name. Each station gets its own recording, named as jive5ab names
    /// its data streams: NAME_ds<station> (NAME_ds<station>-<thread> with --split thread). With
    /// {station} (and {thread}) in NAME those are filled in instead: ev123_{station}_no0001 →
    /// ev123_Ef_no0001. A name already on a disk gets a letter appended (a, b, …).
    #[arg(long, value_name = "NAME")]
    pub scan: Option<String>,
    /// With vbs/mk6: data bytes per block (whole frames up to it): a vbs chunk file, a Mark6
    /// block. Default 128M for vbs, 8M for mk6 (jive5ab's minimums).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub block: Option<u64>,
    /// With vbs/mk6: write through the page cache even on disks that take O_DIRECT (by default
    /// each disk whose file system takes it, tmpfs excepted, is written with direct I/O).
    #[arg(long)]
    pub page_cache: bool,
}

impl RecordArgs {
    /// The multi-disk recording asked for; `None` for VDIF files.
    pub fn config(&self) -> Result<Option<RecordingConfig>> {
        let layout = match self.format {
            RecordFormat::Vdif => {
                if !self.disks.is_empty() || self.scan.is_some() || self.block.is_some() {
                    return Err(usage(
                        "--disks, --scan and --block go with --format vbs or mk6 (VDIF files go to --out DIR)",
                    ));
                }
                return Ok(None);
            }
            RecordFormat::Vbs => Layout::Vbs,
            RecordFormat::Mk6 => Layout::Mk6,
        };
        let scan = self.scan.clone().ok_or_else(|| {
            usage(format!(
                "--format {layout} needs --scan NAME (e.g. --scan ev123_no0001)"
            ))
        })?;
        if let Some(b) = self.block {
            scanfmt::plan::BlockPlan::new(layout, b, 1).map_err(|e| usage_in("--block", e))?;
        }
        scanfmt::name::NameTemplate::new(&scan, true)
            .or_else(|_| scanfmt::name::NameTemplate::new(&scan, false))
            .map_err(|e| usage_in("--scan", e))?;
        let patterns = if self.disks.is_empty() {
            vec![layout.default_disks().to_string()]
        } else {
            self.disks.clone()
        };
        for p in patterns.iter().flat_map(|p| p.split(',')).map(str::trim) {
            if !p.is_empty() && !p.contains(['*', '?', '[']) && !Path::new(p).exists() {
                std::fs::create_dir_all(p).with_context(|| format!("--disks: cannot make {p}"))?;
            }
        }
        let disks = recording::disks::expand(&patterns).map_err(|e| usage_in("--disks", e))?;
        Ok(Some(RecordingConfig {
            layout,
            disks,
            names: recording::write::RecordingNames::Template(scan),
            block_bytes: self.block,
            direct: !self.page_cache,
            opened: Vec::new(),
        }))
    }
}

/// A `stream send` input: a VDIF file, or a recorded scan read through its disks (opened anew
/// for each pass with --loop).
pub fn stream_input(input: &Path, disks: &DisksArg) -> Result<stream_session::send::Input> {
    use stream_session::send::{Input, Opener};
    let Some(scan) = open_scan(input, disks)? else {
        return Ok(Input::File(input.to_path_buf()));
    };
    let len = scan.len();
    let open = Opener::new(move || Ok(Box::new(ScanReader::new(scan.clone())) as Box<dyn Read + Send>));
    Ok(Input::Reader {
        name: input.display().to_string(),
        len,
        open,
    })
}

/// A scan read at offsets by the transfer (its sender and hasher share it).
struct ScanAt(ScanReader);

impl transfer_session::ReadAt for ScanAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.0.read_at(buf, offset)
    }
}

/// Each disk's directory name at the destination with `--keep-layout`: its path below the
/// disks' common parent, which must be plain names (a disk given as `DIR/d0/../d0` or `/` would
/// name files `d0/../d0/…` or with no directory at all) and differ between disks (two disks of
/// the same name would land on each other).
fn keep_layout_labels(disks: &[PathBuf]) -> Result<Vec<PathBuf>> {
    use std::path::Component;
    let labels: Vec<PathBuf> = disks.iter().map(|d| recording::disk_label(disks, d)).collect();
    for (d, label) in disks.iter().zip(&labels) {
        let plain = label.components().count() > 0 && label.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(usage(format!(
                "--keep-layout: disk {} would land as {:?}, not a plain directory name below the destination; \
                 give the disks as plain paths",
                d.display(),
                label.display().to_string()
            )));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (d, label) in disks.iter().zip(&labels) {
        if !seen.insert(label) {
            return Err(usage(format!(
                "--keep-layout: two disks would land as {} (the second is {}); give each disk once",
                label.display(),
                d.display()
            )));
        }
    }
    Ok(labels)
}

/// What `evlbi send` sends for `input`: a path as it is; a recorded scan as one continuous
/// file `SCAN.vdif`, or with `keep_layout` its files under `DISK/…` as they lie (vbs
/// `DISK/SCAN/SCAN.NNNNNNNN`, Mark6 `DISK/SCAN`; DISK the disk's name among the others).
pub fn send_items(input: &str, disks: &DisksArg, keep_layout: bool) -> Result<Vec<transfer_session::SendItem>> {
    use transfer_session::SendItem;
    let Some(scan) = open_scan(Path::new(input), disks)? else {
        if keep_layout {
            return Err(usage(format!(
                "--keep-layout is for recorded scans (vbs://, mk6://), not {input}"
            )));
        }
        if !Path::new(input).exists() {
            return Err(usage(format!("{input}: no such file or directory")));
        }
        return Ok(vec![SendItem::Path(PathBuf::from(input))]);
    };
    let missing = scan.index().missing_count();
    if missing > 0 && !keep_layout {
        status!(
            "warning: {input}: {missing} block(s) missing; the file sent holds the {} present, back to back",
            scan.index().pieces().len()
        );
    }
    let mtime_ns = scan
        .files()
        .iter()
        .filter_map(|f| std::fs::metadata(&f.path).ok()?.modified().ok())
        .max()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    if keep_layout {
        let labels = keep_layout_labels(scan.disks())?;
        return Ok(scan
            .files()
            .iter()
            .map(|f| {
                let below = f.path.strip_prefix(&scan.disks()[f.disk]).unwrap_or(&f.path);
                SendItem::FileAs {
                    path: f.path.clone(),
                    dest: labels[f.disk].join(below).display().to_string(),
                }
            })
            .collect());
    }
    Ok(vec![SendItem::Stream {
        dest: format!("{}.vdif", scan.name()),
        size: scan.len(),
        mtime_ns,
        name: input.to_string(),
        source: std::sync::Arc::new(ScanAt(ScanReader::new(scan))),
    }])
}
