//! Where a received file may land: only below the receiver's `--root`, and never through a link.
//!
//! The offered path is untrusted. It must be relative, `/`-separated, at most [`MAX_DEPTH`]
//! components of at most [`MAX_NAME`] bytes, with no `..`, `.` or empty components, no NUL,
//! backslash or control character (a newline would split the receiver's log lines), and no
//! name ending in one of the receiver's own suffixes (`.part`, `.part.evlbi`, …). All of that is
//! checked before anything is created.
//!
//! Everything below the root is then reached *through directory descriptors*: each component is
//! opened relative to its parent with `O_NOFOLLOW` (a symbolic link anywhere on the way fails the
//! open instead of being followed), files are opened relative to their directory with
//! `O_NOFOLLOW`, a `.part` that has more than one link is refused (a hard link planted there
//! would receive the data), temporary files are created with `O_EXCL`, and names are replaced
//! only by `renameat`, which replaces a directory entry and never writes through it. Because
//! every step is relative to a descriptor already checked, a process that swaps a directory for
//! a link between two steps cannot redirect a write outside the root (the check-then-open race
//! of path-based code).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use thiserror::Error;

/// Most components in an offered path.
pub const MAX_DEPTH: usize = 32;
/// Longest component, bytes (NAME_MAX of common Linux file systems).
pub const MAX_NAME: usize = 255;
/// Suffixes of the receiver's own files beside a file being received.
pub const RESERVED_SUFFIXES: [&str; 3] = [".part", ".part.evlbi", ".part.evlbi.tmp"];

/// Why a path was refused.
#[derive(Debug, Error)]
pub enum PathError {
    /// Empty path.
    #[error("empty path")]
    Empty,
    /// Starts with `/`.
    #[error("absolute path {0:?}: paths are relative to the receiver's root")]
    Absolute(String),
    /// Has a `..`, `.` or empty component, a NUL, a backslash or a control character.
    #[error("path {0:?} has a `..`, `.` or empty component, a NUL, a backslash or a control character")]
    BadComponent(String),
    /// Too deep or a component too long.
    #[error("path {0:?} is longer than {MAX_DEPTH} components or has a component over {MAX_NAME} bytes")]
    TooLong(String),
    /// Ends in a suffix the receiver uses for its own files.
    #[error("path {0:?} ends in .part, .part.evlbi or .part.evlbi.tmp, names the receiver keeps for itself")]
    Reserved(String),
    /// A component below the root is a symbolic link or not a directory.
    #[error("{0} is a symbolic link or not a directory: refusing to write through it")]
    NotADirectory(PathBuf),
    /// The target exists and is a symbolic link or not a regular file.
    #[error("{0} exists and is a symbolic link or not a regular file")]
    NotAFile(PathBuf),
    /// The target has other hard links: writing it would change another file too.
    #[error("{0} has {1} hard links: refusing to write a file that is also elsewhere")]
    MultiplyLinked(PathBuf, u64),
    /// A file system call failed.
    #[error("{path}: {source}")]
    Io {
        /// What.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Check an offered path and return it as components.
pub fn check_relative(path: &str) -> Result<Vec<&str>, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute(path.to_string()));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == ".." || p.chars().any(|c| c == '\\' || c.is_control()))
    {
        return Err(PathError::BadComponent(path.to_string()));
    }
    if parts.len() > MAX_DEPTH || parts.iter().any(|p| p.len() > MAX_NAME) {
        return Err(PathError::TooLong(path.to_string()));
    }
    if RESERVED_SUFFIXES.iter().any(|s| path.ends_with(s)) {
        return Err(PathError::Reserved(path.to_string()));
    }
    Ok(parts)
}

fn io_at(path: PathBuf) -> impl FnOnce(Errno) -> PathError {
    move |e| PathError::Io { path, source: e.into() }
}

/// The receiver's root directory, held open.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
}

impl Root {
    /// Open `path` (which must be a directory; the operator chose it, so a link to one is
    /// followed here and nowhere below).
    pub fn open(path: &Path) -> Result<Root, PathError> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| PathError::NotADirectory(path.to_path_buf()))?;
        Ok(Root {
            dir: Dir {
                fd,
                path: path.to_path_buf(),
            },
        })
    }

    /// The directory named by all of `rel`, created as needed.
    pub fn make_dirs(&self, rel: &str) -> Result<Dir, PathError> {
        let parts = check_relative(rel)?;
        self.walk(&parts)
    }

    /// The directory that will hold file `rel` (created as needed) and the file's name in it.
    pub fn parent_of<'a>(&self, rel: &'a str) -> Result<(Dir, &'a str), PathError> {
        let parts = check_relative(rel)?;
        let (name, dirs) = parts.split_last().ok_or(PathError::Empty)?;
        Ok((self.walk(dirs)?, name))
    }

    fn walk(&self, parts: &[&str]) -> Result<Dir, PathError> {
        let mut cur = self.dir.try_clone()?;
        for c in parts {
            cur = cur.subdir(c)?;
        }
        Ok(cur)
    }
}

/// A directory below the root, held open: every name below is resolved relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    fn try_clone(&self) -> Result<Dir, PathError> {
        let fd = self.fd.try_clone().map_err(|source| PathError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(Dir {
            fd,
            path: self.path.clone(),
        })
    }

    /// `name` in this directory, for messages.
    pub fn display(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Open (creating it if missing) the subdirectory `name`, never through a link.
    fn subdir(&self, name: &str) -> Result<Dir, PathError> {
        let path = self.display(name);
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
                    // Created concurrently by another session: fine, opened below.
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(io_at(path)(e)),
                }
                rustix::fs::openat(&self.fd, name, flags, Mode::empty())
                    .map_err(|_| PathError::NotADirectory(path.clone()))?
            }
            // ELOOP: a symlink; ENOTDIR: a file.
            Err(_) => return Err(PathError::NotADirectory(path)),
        };
        Ok(Dir { fd, path })
    }

    /// What `name` is, without following a link; `None` if it does not exist.
    pub fn kind(&self, name: &str) -> Result<Option<FileType>, PathError> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_at(self.display(name))(e)),
        }
    }

    /// Open regular file `name` for reading and writing, creating it if missing. Refused: a
    /// link, anything but a regular file, a file with other hard links.
    pub fn open_rw(&self, name: &str) -> Result<File, PathError> {
        let path = self.display(name);
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o644)).map_err(|e| match e {
            Errno::LOOP => PathError::NotAFile(path.clone()),
            e => io_at(path.clone())(e),
        })?;
        let f = regular_only(fd, &path)?;
        // Opened non-blocking so a planted FIFO cannot hang the open; a regular file ignores the
        // flag, but clear it to be plain.
        rustix::fs::fcntl_setfl(&f, OFlags::empty()).map_err(io_at(path))?;
        Ok(f)
    }

    /// Contents of regular file `name` if it exists, is no link, has one link and holds at
    /// most `max` bytes; `None` otherwise (a resume record that is not there or not ours).
    pub fn read_small(&self, name: &str, max: u64) -> Option<Vec<u8>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty()).ok()?;
        let mut f = regular_only(fd, &self.display(name)).ok()?;
        if f.metadata().ok()?.len() > max {
            return None;
        }
        let mut v = Vec::new();
        Read::by_ref(&mut f).take(max).read_to_end(&mut v).ok()?;
        Some(v)
    }

    /// Replace `name` with `bytes` atomically: write `name.tmp` (created with `O_EXCL`, after
    /// removing whatever entry had that name — a planted link is removed, not followed), then
    /// rename it over `name`. A crash leaves the old or the new content, never half.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = format!("{name}.tmp");
        match rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, tmp.as_str(), flags, Mode::from_raw_mode(0o644))?;
        File::from(fd).write_all(bytes)?;
        rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)?;
        Ok(())
    }

    /// Rename `from` to `to` in this directory; with `replace` false, fail if `to` exists
    /// (`RENAME_NOREPLACE`, atomic: no window in which another file could appear).
    pub fn rename(&self, from: &str, to: &str, replace: bool) -> io::Result<()> {
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        rustix::fs::renameat_with(&self.fd, from, &self.fd, to, flags)?;
        Ok(())
    }

    /// Remove the entry `name` (a file or a link, never what a link points to).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?;
        Ok(())
    }
}

fn regular_only(fd: OwnedFd, path: &Path) -> Result<File, PathError> {
    let st = rustix::fs::fstat(&fd).map_err(io_at(path.to_path_buf()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(PathError::NotAFile(path.to_path_buf()));
    }
    if st.st_nlink > 1 {
        return Err(PathError::MultiplyLinked(path.to_path_buf(), st.st_nlink));
    }
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn plain_relative_paths_pass() {
        assert_eq!(check_relative("a/b.vdif").unwrap(), vec!["a", "b.vdif"]);
        assert_eq!(check_relative("ef..vdif").unwrap(), vec!["ef..vdif"]);
        assert_eq!(check_relative("scan 1/ef é.vdif").unwrap(), vec!["scan 1", "ef é.vdif"]);
    }

    #[test]
    fn escapes_control_characters_depth_and_reserved_names_refused() {
        let deep = "a/".repeat(2047) + "a";
        let long = "x".repeat(256);
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a/.",
            "a\\..\\b",
            "a\0b",
            "a/",
            "evil\nline.bin",
            "tab\there",
            "del\u{7f}",
            deep.as_str(),
            long.as_str(),
            "f.part",
            "d/f.part.evlbi",
            "f.part.evlbi.tmp",
        ] {
            assert!(check_relative(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn links_anywhere_below_the_root_are_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), root.path().join("f")).unwrap();
        let r = Root::open(root.path()).unwrap();
        assert!(matches!(r.parent_of("link/x"), Err(PathError::NotADirectory(_))));
        assert!(matches!(r.make_dirs("link/sub"), Err(PathError::NotADirectory(_))));
        let (d, name) = r.parent_of("f").unwrap();
        assert!(matches!(d.open_rw(name), Err(PathError::NotAFile(_))));
        // A planted temporary-file link is removed, not written through.
        std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("rec.tmp")).unwrap();
        d.write_atomic("rec", b"{}").unwrap();
        assert_eq!(fs::read(root.path().join("rec")).unwrap(), b"{}");
        assert!(!outside.path().join("victim").exists());
        // A hard link to a file elsewhere is refused.
        fs::write(outside.path().join("hl"), b"precious").unwrap();
        fs::hard_link(outside.path().join("hl"), root.path().join("g.part")).unwrap();
        assert!(matches!(d.open_rw("g.part"), Err(PathError::MultiplyLinked(_, 2))));
        assert_eq!(fs::read(outside.path().join("hl")).unwrap(), b"precious");
        // A FIFO neither hangs nor passes.
        let fifo = root.path().join("p.part");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(matches!(d.open_rw("p.part"), Err(PathError::NotAFile(_))));
        assert!(d.read_small("p.part", 100).is_none());
        // New directories and files land where they should.
        let (nd, n) = r.parent_of("new/dir/f.vdif").unwrap();
        nd.open_rw(n).unwrap();
        assert!(root.path().join("new/dir/f.vdif").is_file());
        // No replace without asking.
        nd.write_atomic("other", b"x").unwrap();
        assert!(nd.rename("other", "f.vdif", false).is_err());
        nd.rename("other", "f.vdif", true).unwrap();
        assert_eq!(fs::read(root.path().join("new/dir/f.vdif")).unwrap(), b"x");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1, "only hl");
    }
}
