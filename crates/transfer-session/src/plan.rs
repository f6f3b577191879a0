//! What a sender sends: the files and directories asked for, walked and planned as items in
//! the order they are offered, each with the destination path it lands at.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use netio::{io_err, IoError};

use crate::error::{TransferSessionError, UsageError};
use crate::fileio::ReadAt;

/// What `send_items` sends.
#[derive(Clone)]
pub enum SendItem {
    /// A file or directory, under its own name in the destination.
    Path(PathBuf),
    /// A file under `dest`, a path relative to the destination (`a/b/name`; its directories
    /// are made).
    FileAs {
        /// The file.
        path: PathBuf,
        /// Where it lands.
        dest: String,
    },
    /// `size` bytes read from `source` (a recorded scan), landing as the file `dest`.
    Stream {
        /// Where it lands, relative to the destination.
        dest: String,
        /// Bytes.
        size: u64,
        /// Modification time to offer (ns since 1970).
        mtime_ns: u64,
        /// Shown as the source in the report.
        name: String,
        /// What is read.
        source: Arc<dyn ReadAt>,
    },
}

/// Where a file's bytes come from.
#[derive(Clone)]
pub(crate) enum Source {
    Path(PathBuf),
    Stream(String, Arc<dyn ReadAt>),
}

impl Source {
    /// Open it for reading, and its size now (`None` for a stream: the size it was planned
    /// with holds).
    pub(crate) fn open(&self) -> Result<(Arc<dyn ReadAt>, Option<u64>), IoError> {
        match self {
            Source::Path(p) => {
                // A regular file only: a device or a FIFO named as a file to send is refused
                // (a FIFO would hang the open, /dev/zero never end).
                let f = safedir::open_regular(p)
                    .map_err(safedir::DirError::into_io)
                    .map_err(io_err(format!("opening {}", p.display())))?;
                let size = f.metadata().map_err(io_err(format!("reading {}", p.display())))?.len();
                Ok((Arc::new(f), Some(size)))
            }
            Source::Stream(_, r) => Ok((r.clone(), None)),
        }
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Stream(n, _) => n.clone(),
        }
    }
}

/// One thing to send: a file or a directory to create.
#[derive(Clone)]
pub(crate) enum Item {
    Dir(String),
    File {
        source: Source,
        dest: String,
        size: u64,
        mtime_ns: u64,
    },
}

fn join(dest: &str, name: &str) -> String {
    if dest.is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", dest.trim_end_matches('/'))
    }
}

fn file_item(source: &Path, dest: String) -> Result<Item, TransferSessionError> {
    let m = fs::metadata(source).map_err(io_err(format!("reading {}", source.display())))?;
    if !m.is_file() {
        let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file or directory");
        return Err(io_err(format!("sending {}", source.display()))(e).into());
    }
    let mtime_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(Item::File {
        source: Source::Path(source.to_path_buf()),
        dest,
        size: m.len(),
        mtime_ns,
    })
}

fn walk(dir: &Path, dest: &str, out: &mut Vec<Item>) -> Result<(), TransferSessionError> {
    out.push(Item::Dir(dest.to_string()));
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(io_err(format!("listing {}", dir.display())))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e
            .file_type()
            .map_err(io_err(format!("reading {}", e.path().display())))?;
        // Symlinked directories are not followed (loops); symlinked files are sent as files.
        if ft.is_dir() {
            walk(&e.path(), &join(dest, &name), out)?;
        } else if fs::metadata(e.path()).is_ok_and(|m| m.is_file()) {
            out.push(file_item(&e.path(), join(dest, &name))?);
        }
    }
    Ok(())
}

/// The directories above `rel` (`a/b/c` → `a`, `a/b`) not yet in `out`, then nothing else.
fn parents(dest: &str, rel: &str, out: &mut Vec<Item>) {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for i in 1..parts.len() {
        let d = join(dest, &parts[..i].join("/"));
        if !out.iter().any(|it| matches!(it, Item::Dir(x) if *x == d)) {
            out.push(Item::Dir(d));
        }
    }
}

pub(crate) fn plan_items(items: &[SendItem], dest: &str) -> Result<Vec<Item>, TransferSessionError> {
    let mut out = Vec::new();
    for it in items {
        match it {
            SendItem::Path(p) => out.extend(plan(std::slice::from_ref(p), dest)?),
            SendItem::FileAs { path, dest: rel } => {
                parents(dest, rel, &mut out);
                out.push(file_item(path, join(dest, rel))?);
            }
            SendItem::Stream {
                dest: rel,
                size,
                mtime_ns,
                name,
                source,
            } => {
                parents(dest, rel, &mut out);
                out.push(Item::File {
                    source: Source::Stream(name.clone(), source.clone()),
                    dest: join(dest, rel),
                    size: *size,
                    mtime_ns: *mtime_ns,
                });
            }
        }
    }
    Ok(out)
}

fn plan(items: &[PathBuf], dest: &str) -> Result<Vec<Item>, TransferSessionError> {
    let mut out = Vec::new();
    for p in items {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| UsageError::NoFileName(p.clone()))?;
        let m = fs::metadata(p).map_err(io_err(format!("reading {}", p.display())))?;
        if m.is_dir() {
            walk(p, &join(dest, &name), &mut out)?;
        } else {
            out.push(file_item(p, join(dest, &name))?);
        }
    }
    Ok(out)
}
