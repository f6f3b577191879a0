//! Where the recorder may write and read: the directories the operator allowed when starting
//! it, and nothing reached through a link below them.
//!
//! A station's jive5ab takes any path from the Field System (`set_disks = /mnt/disk0 :
//! /mnt/disk1 ;`, `net2file = open : /path/file,w ;`, `disk2file = /path/file : : : w ;`) and
//! writes there with its own rights. evlbi takes the same absolute paths, but only inside the
//! directories allowed with `--root DIR` (a directory the operator chose; a link to one is
//! followed) or `--disks PATTERN` (jive5ab-style disk patterns such as `/mnt/disk*`: the
//! directories matching them, none of them a link); every other path is refused with the
//! reason. Below an allowed directory every component is opened without following links
//! ([`safedir`]), so a link planted on a disk cannot lead a recording elsewhere; a disk given
//! twice (by two spellings) is refused too. A relative path names a directory below the first
//! root, as evlbi took `set_disks` before.

use std::path::{Component, Path, PathBuf};

use safedir::{Dir, DirError};
use thiserror::Error;

/// Why a path is refused.
#[derive(Debug, Error)]
pub enum PathsError {
    /// Neither a root nor a disk pattern was given.
    #[error("no directory is allowed: start evlbi serve with --root DIR or --disks PATTERN")]
    NothingAllowed,
    /// A `--root` that is no directory.
    #[error("--root {0}: not a directory")]
    BadRoot(PathBuf),
    /// A `--disks` pattern that is no glob.
    #[error("--disks {pattern}: {message}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        message: String,
    },
    /// A path with `.`, `..` or empty components.
    #[error("{0}: give a plain path (no '.', '..' or empty components)")]
    NotPlain(String),
    /// Outside every allowed directory.
    #[error("{path} is outside the directories this recorder may use ({allowed})")]
    Outside {
        /// The path.
        path: String,
        /// The allowed roots and patterns.
        allowed: String,
    },
    /// A pattern that matches nothing allowed.
    #[error("no directory matches {0}")]
    NoMatch(String),
    /// The same directory twice.
    #[error("{0} and {1} are the same directory")]
    Twice(PathBuf, PathBuf),
    /// Below an allowed directory: a link, not a directory, missing.
    #[error(transparent)]
    Below(#[from] DirError),
    /// Missing.
    #[error("{0}: no such directory")]
    Missing(PathBuf),
}

/// The directories the recorder may use.
#[derive(Debug, Clone)]
pub struct StationPaths {
    /// `--root`s: as given, and as the file system resolves them.
    roots: Vec<(PathBuf, PathBuf)>,
    /// `--disks` patterns.
    patterns: Vec<glob::Pattern>,
}

/// `p` as plain absolute components, or an error.
fn plain(p: &str) -> Result<Vec<&str>, PathsError> {
    let path = Path::new(p);
    if !path.is_absolute() || p.contains("//") || p.len() > 4096 {
        return Err(PathsError::NotPlain(p.to_string()));
    }
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => parts.push(n.to_str().ok_or_else(|| PathsError::NotPlain(p.to_string()))?),
            _ => return Err(PathsError::NotPlain(p.to_string())),
        }
    }
    if p.split('/').any(|c| c == "." || c == "..") {
        return Err(PathsError::NotPlain(p.to_string()));
    }
    Ok(parts)
}

/// Most directories a `--disks` pattern may match: a FlexBuff has 36 data disks, a Mark6 32.
pub const MAX_PATTERN_DISKS: usize = 256;

/// A `--disks` pattern, checked: absolute and plain, its first directory named rather than
/// matched, and matching at most [`MAX_PATTERN_DISKS`] directories now. `/*/*/*/*` made some
/// 900 system directories (/etc/ssl, /usr/lib/…) disks the Field System could record into.
fn disk_pattern(pattern: &str) -> Result<glob::Pattern, PathsError> {
    plain(pattern)?;
    let bad = |message: String| PathsError::BadPattern {
        pattern: pattern.to_string(),
        message,
    };
    let first = pattern.trim_start_matches('/').split('/').next().unwrap_or_default();
    if first.contains(['*', '?', '[']) {
        return Err(bad(format!(
            "a wildcard in the first directory ({first}) matches the system's own directories; name the \
             directory the disks are mounted in, e.g. /mnt/disk*"
        )));
    }
    let compiled = glob::Pattern::new(pattern).map_err(|e| bad(e.to_string()))?;
    let matched = glob::glob(pattern)
        .map_err(|e| bad(e.to_string()))?
        .filter_map(Result::ok)
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .take(MAX_PATTERN_DISKS + 1)
        .count();
    if matched > MAX_PATTERN_DISKS {
        return Err(bad(format!(
            "matches more than {MAX_PATTERN_DISKS} directories: a disk pattern names data disks (a FlexBuff \
             has 36, a Mark6 32), not a tree"
        )));
    }
    Ok(compiled)
}

/// The directory `below` (components) under `dir`, each one opened without following links.
fn walk(dir: Dir, below: &[&str]) -> Result<Dir, PathsError> {
    let mut cur = dir;
    for c in below {
        let next = cur.subdir(c)?.ok_or_else(|| PathsError::Missing(cur.display(c)))?;
        cur = next;
    }
    Ok(cur)
}

impl StationPaths {
    /// Allow `roots` and the directories matching `patterns`.
    pub fn new(roots: &[PathBuf], patterns: &[String]) -> Result<StationPaths, PathsError> {
        if roots.is_empty() && patterns.is_empty() {
            return Err(PathsError::NothingAllowed);
        }
        let mut r = Vec::new();
        for root in roots {
            let abs = std::path::absolute(root).map_err(|_| PathsError::BadRoot(root.clone()))?;
            let canonical = abs.canonicalize().map_err(|_| PathsError::BadRoot(root.clone()))?;
            if !canonical.is_dir() {
                return Err(PathsError::BadRoot(root.clone()));
            }
            r.push((abs, canonical));
        }
        let mut p = Vec::new();
        for pattern in patterns {
            p.push(disk_pattern(pattern)?);
        }
        Ok(StationPaths { roots: r, patterns: p })
    }

    /// The roots and patterns, for messages and `set_disks?` defaults.
    pub fn allowed(&self) -> String {
        let mut v: Vec<String> = self.roots.iter().map(|(a, _)| a.display().to_string()).collect();
        v.extend(self.patterns.iter().map(|p| p.as_str().to_string()));
        v.join(", ")
    }

    /// The first root (where relative `set_disks` entries and bare file names go), if any.
    pub fn first_root(&self) -> Option<&Path> {
        self.roots.first().map(|(a, _)| a.as_path())
    }

    /// The disks a recorder starts with: the directories the patterns match now, else the
    /// first root.
    pub fn default_disks(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for p in &self.patterns {
            if let Ok(paths) = glob::glob(p.as_str()) {
                out.extend(
                    paths
                        .filter_map(Result::ok)
                        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir())),
                );
            }
        }
        out.sort();
        out.dedup();
        if out.is_empty() {
            out.extend(self.first_root().map(Path::to_path_buf));
        }
        out
    }

    /// Open directory `p` (absolute), which must be an allowed directory or below one, with
    /// nothing below the allowed part reached through a link.
    pub fn open_dir(&self, p: &str) -> Result<Dir, PathsError> {
        let parts = plain(p)?;
        let path = Path::new(p);
        for (given, canonical) in &self.roots {
            for root in [given, canonical] {
                if let Ok(rest) = path.strip_prefix(root) {
                    let below: Vec<&str> = rest.iter().filter_map(|c| c.to_str()).collect();
                    return walk(Dir::open(root)?, &below);
                }
            }
        }
        for pattern in &self.patterns {
            let n = Path::new(pattern.as_str()).components().count() - 1;
            if parts.len() < n {
                continue;
            }
            let disk: PathBuf = std::iter::once("/").chain(parts[..n].iter().copied()).collect();
            if !pattern.matches_path(&disk) {
                continue;
            }
            // The matched disk itself may not be a link either: open its parent (the
            // pattern's fixed part, the operator's) and the disk below it without following.
            let parent = disk.parent().unwrap_or(Path::new("/"));
            let name = parts[n - 1];
            let disk_dir = Dir::open(parent)?
                .subdir(name)?
                .ok_or_else(|| PathsError::Missing(disk.clone()))?;
            return walk(disk_dir, &parts[n..]);
        }
        Err(PathsError::Outside {
            path: p.to_string(),
            allowed: self.allowed(),
        })
    }

    /// `set_disks`: each entry an absolute directory, a glob of them, or a directory below the
    /// first root; all allowed, none twice. The directories, opened.
    pub fn disks(&self, entries: &[String]) -> Result<Vec<(PathBuf, Dir)>, PathsError> {
        let mut out: Vec<(PathBuf, Dir)> = Vec::new();
        let mut ids = Vec::new();
        for e in entries {
            let full = if e.starts_with('/') {
                e.clone()
            } else {
                let root = self.first_root().ok_or_else(|| PathsError::Outside {
                    path: e.clone(),
                    allowed: self.allowed(),
                })?;
                let joined = e
                    .split('/')
                    .filter(|c| !c.is_empty() && *c != ".")
                    .collect::<Vec<_>>()
                    .join("/");
                if joined.is_empty() {
                    root.display().to_string()
                } else {
                    format!("{}/{joined}", root.display())
                }
            };
            let matches: Vec<String> = if full.contains(['*', '?', '[']) {
                plain(&full)?;
                let mut m: Vec<String> = glob::glob(&full)
                    .map_err(|er| PathsError::BadPattern {
                        pattern: full.clone(),
                        message: er.to_string(),
                    })?
                    .filter_map(Result::ok)
                    .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
                    .map(|d| d.display().to_string())
                    .collect();
                m.sort();
                if m.is_empty() {
                    return Err(PathsError::NoMatch(full));
                }
                m
            } else {
                vec![full]
            };
            for m in matches {
                let dir = self.open_dir(&m)?;
                let id = dir.identity()?;
                if let Some(i) = ids.iter().position(|x| *x == id) {
                    let first: &(PathBuf, Dir) = &out[i];
                    return Err(PathsError::Twice(first.0.clone(), PathBuf::from(&m)));
                }
                ids.push(id);
                out.push((PathBuf::from(m), dir));
            }
        }
        Ok(out)
    }

    /// A file to write (`net2file`, `disk2file`): an absolute path in an allowed directory, or
    /// a bare name in `default_dir`. Its directory (opened) and its name.
    pub fn file(&self, p: &str, default_dir: &Path) -> Result<(Dir, String), PathsError> {
        let (dir, name) = match p.rsplit_once('/') {
            Some((d, n)) if p.starts_with('/') => (self.open_dir(if d.is_empty() { "/" } else { d })?, n),
            Some(_) => return Err(PathsError::NotPlain(p.to_string())),
            None => (self.open_dir(&default_dir.display().to_string())?, p),
        };
        if name.is_empty() || name == "." || name == ".." {
            return Err(PathsError::NotPlain(p.to_string()));
        }
        Ok((dir, name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: &Path) -> String {
        p.display().to_string()
    }

    #[test]
    fn only_allowed_directories_and_never_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let mnt = t.path().join("mnt");
        for d in ["disk0", "disk1", "disk2/sub"] {
            std::fs::create_dir_all(mnt.join(d)).unwrap();
        }
        let data = t.path().join("data");
        std::fs::create_dir_all(data.join("x")).unwrap();
        let outside = t.path().join("etc");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, mnt.join("disk9")).unwrap();
        std::os::unix::fs::symlink(&outside, data.join("link")).unwrap();
        let pattern = format!("{}/disk*", s(&mnt));
        let sp = StationPaths::new(std::slice::from_ref(&data), std::slice::from_ref(&pattern)).unwrap();
        // The patterns' matches are the default disks; a link matching is not one.
        assert_eq!(
            sp.default_disks(),
            vec![mnt.join("disk0"), mnt.join("disk1"), mnt.join("disk2")]
        );
        let got = sp
            .disks(&[s(&mnt.join("disk0")), s(&mnt.join("disk2/sub")), "x".into(), s(&data)])
            .unwrap();
        let paths: Vec<_> = got.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            paths,
            vec![mnt.join("disk0"), mnt.join("disk2/sub"), data.join("x"), data.clone()]
        );
        assert_eq!(
            sp.disks(std::slice::from_ref(&pattern)).unwrap().len(),
            3,
            "a glob, links left out"
        );
        for bad in [
            s(&outside),
            "/etc".to_string(),
            s(&mnt.join("disk9")),
            s(&data.join("link")),
            s(&data.join("link/deeper")),
            format!("{}/../etc", s(&data)),
            s(&mnt.join("nodisk")),
            format!("{}/disk0//x", s(&mnt)),
        ] {
            assert!(sp.disks(std::slice::from_ref(&bad)).is_err(), "{bad} accepted");
        }
        let twice = sp.disks(&[s(&data.join("x")), "x".into()]).unwrap_err();
        assert!(matches!(twice, PathsError::Twice(..)), "{twice}");
        let msg = sp.disks(&["/etc".into()]).unwrap_err().to_string();
        assert!(msg.contains("outside the directories this recorder may use"), "{msg}");
        // Files: absolute in an allowed directory, or a bare name in the default one.
        let (d, n) = sp.file(&format!("{}/scan.vdif", s(&mnt.join("disk1"))), &data).unwrap();
        assert_eq!((d.path().to_path_buf(), n.as_str()), (mnt.join("disk1"), "scan.vdif"));
        let (d, n) = sp.file("plain.m5a", &data).unwrap();
        assert_eq!((d.path().to_path_buf(), n.as_str()), (data.clone(), "plain.m5a"));
        assert!(sp.file("/etc/passwd", &data).is_err());
        assert!(sp.file(&format!("{}/f", s(&data.join("link"))), &data).is_err());
        assert!(sp.file("a/b", &data).is_err());
        assert!(StationPaths::new(&[], &[]).is_err());
        // A pattern that matches from the top, or a tree of directories, is no disk pattern.
        for wild in ["/*/*/*/*", "/*", "/[a-z]*/disk*", "/?nt/disk*"] {
            let e = StationPaths::new(&[], &[wild.to_string()]).unwrap_err().to_string();
            assert!(e.contains("first directory"), "{wild}: {e}");
        }
        let tree = t.path().join("tree");
        for i in 0..=MAX_PATTERN_DISKS {
            std::fs::create_dir_all(tree.join(format!("d{i}"))).unwrap();
        }
        let e = StationPaths::new(&[], &[format!("{}/d*", s(&tree))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 256 directories"), "{e}");
        assert!(StationPaths::new(&[], &[format!("{}/d1*", s(&tree))]).is_ok());
        assert!(StationPaths::new(&[t.path().join("none")], &[]).is_err());
    }
}
