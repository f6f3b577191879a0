//! Directories held open by descriptor, and everything below them reached without following
//! symbolic links.
//!
//! A recorder writes below disks the operator chose (`/mnt/disk0`, which may itself be a link:
//! the operator's choice), a file receiver below its `--root`; both read back below them. Names
//! below such a directory come from the network, the Field System or a directory listing, and
//! the directory may be shared with other users. So a [`Dir`] is opened once from its path, and
//! every name below it is resolved *relative to the descriptor* (`openat`, `mkdirat`, `statat`,
//! `renameat`, `unlinkat`) with `O_NOFOLLOW`: a symbolic link planted anywhere below — a scan
//! directory, a chunk file, a `.part` — fails the call instead of being followed, and because
//! each step starts from a descriptor already checked, swapping a directory for a link between
//! two steps cannot redirect a write either (the check-then-open race of path-based code).
//! Files are created with `O_EXCL` (a planted file is never appended to); a file opened for
//! writing must be a regular file with one link (a hard link planted there would receive the
//! data); opens are non-blocking so a planted FIFO cannot hang them.
//!
//! std has no `openat`; rustix gives it safely (no `unsafe` here).

#![warn(missing_docs)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use thiserror::Error;

/// Why a name below a directory could not be used.
#[derive(Debug, Error)]
pub enum DirError {
    /// The name is a symbolic link or not a directory, where a directory was needed.
    #[error("{0} is a symbolic link or not a directory: refusing to go through it")]
    NotADirectory(PathBuf),
    /// The name is a symbolic link or not a regular file, where a file was needed.
    #[error("{0} is a symbolic link or not a regular file")]
    NotAFile(PathBuf),
    /// The file has other hard links: writing it would change another file too.
    #[error("{0} has {1} hard links: refusing to write a file that is also elsewhere")]
    MultiplyLinked(PathBuf, u64),
    /// The name exists where a new file or directory was to be made.
    #[error("{0} exists already")]
    Exists(PathBuf),
    /// Not a single path component (empty, `.`, `..`, or with a `/` or NUL).
    #[error("{0:?} is not a single name below the directory")]
    BadName(String),
    /// A file system call failed.
    #[error("{path}: {source}")]
    Io {
        /// What.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl DirError {
    /// The error as an `io::Error` (for code that speaks io), keeping this message.
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            DirError::Io { source, .. } => source.kind(),
            DirError::Exists(_) => io::ErrorKind::AlreadyExists,
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, self.to_string())
    }
}

/// What a directory entry is, read without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A unix-domain socket.
    Socket,
    /// Anything else: a symbolic link, a FIFO, a device.
    Other,
}

/// An entry's kind, length and modification time ([`Dir::stat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryStat {
    /// What it is.
    pub kind: EntryKind,
    /// Its length, bytes.
    pub len: u64,
    /// When its content last changed, seconds since 1970 (POSIX).
    pub modified_unix: i64,
}

/// How [`Dir::create_file`] opens a new file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Create {
    /// Also open it for reading (a header patched on disk is read back first).
    pub read: bool,
    /// `O_DIRECT`: writes bypass the page cache (aligned buffers and offsets needed).
    pub direct: bool,
}

/// Free and total space of a file system, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged writer may still use.
    pub free: u64,
    /// Size of the file system.
    pub total: u64,
}

/// A directory held open: every name below it is resolved relative to the descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn io_at(path: PathBuf) -> impl FnOnce(Errno) -> DirError {
    move |e| DirError::Io { path, source: e.into() }
}

/// `name` if it is one path component.
fn component(name: &str) -> Result<&str, DirError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        Err(DirError::BadName(name.to_string()))
    } else {
        Ok(name)
    }
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOFOLLOW);

impl Dir {
    /// Open the directory at `path`. A link *at* `path` is followed: the operator chose it (a
    /// disk mounted through a link is common); nothing below it will be.
    pub fn open(path: &Path) -> Result<Dir, DirError> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOTDIR => DirError::NotADirectory(path.to_path_buf()),
            e => io_at(path.to_path_buf())(e),
        })?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Open the directory at `path`, refusing a link at `path` itself too (for a path an
    /// untrusted party named, below a directory the operator allowed).
    pub fn open_nofollow(path: &Path) -> Result<Dir, DirError> {
        let fd = rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map_err(|e| match e {
            Errno::NOTDIR | Errno::LOOP => DirError::NotADirectory(path.to_path_buf()),
            e => io_at(path.to_path_buf())(e),
        })?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// A directory descriptor this process was handed (a writer process inherits its disk's),
    /// with the path it was opened by, for messages. Refused: a descriptor of anything but a
    /// directory.
    pub fn from_fd(fd: OwnedFd, path: PathBuf) -> Result<Dir, DirError> {
        let st = rustix::fs::fstat(&fd).map_err(io_at(path.clone()))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
            return Err(DirError::NotADirectory(path));
        }
        Ok(Dir { fd, path })
    }

    /// Its path, as opened (for messages and for handing to another process).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in this directory, for messages.
    pub fn display(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Its descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A second handle on the same directory.
    pub fn try_clone(&self) -> Result<Dir, DirError> {
        let fd = self.fd.try_clone().map_err(|source| DirError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(Dir {
            fd,
            path: self.path.clone(),
        })
    }

    /// The device and inode of the directory: two handles with the same identity are the same
    /// directory, whatever paths they were opened by.
    pub fn identity(&self) -> Result<(u64, u64), DirError> {
        let st = rustix::fs::fstat(&self.fd).map_err(io_at(self.path.clone()))?;
        Ok((st.st_dev as u64, st.st_ino as u64))
    }

    /// The existing subdirectory `name` (never through a link); `None` when there is none.
    pub fn subdir(&self, name: &str) -> Result<Option<Dir>, DirError> {
        let path = self.display(name);
        match rustix::fs::openat(&self.fd, component(name)?, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Some(Dir { fd, path })),
            Err(Errno::NOENT) => Ok(None),
            // ELOOP: a symlink; ENOTDIR: a file.
            Err(Errno::LOOP | Errno::NOTDIR) => Err(DirError::NotADirectory(path)),
            Err(e) => Err(io_at(path)(e)),
        }
    }

    /// The subdirectory `name`, made when missing (another process making it at the same time
    /// is fine), never through a link.
    pub fn make_subdir(&self, name: &str) -> Result<Dir, DirError> {
        if let Some(d) = self.subdir(name)? {
            return Ok(d);
        }
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_at(self.display(name))(e)),
        }
        self.subdir(name)?
            .ok_or_else(|| DirError::NotADirectory(self.display(name)))
    }

    /// A new subdirectory `name`: `Err(Exists)` when any entry of that name is there already
    /// (a link included — it is neither followed nor replaced).
    pub fn create_subdir(&self, name: &str) -> Result<Dir, DirError> {
        match rustix::fs::mkdirat(&self.fd, component(name)?, Mode::from_raw_mode(0o755)) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(DirError::Exists(self.display(name))),
            Err(e) => return Err(io_at(self.display(name))(e)),
        }
        self.subdir(name)?
            .ok_or_else(|| DirError::NotADirectory(self.display(name)))
    }

    /// The directory `parts` below this one (each made when missing), never through a link.
    pub fn make_path(&self, parts: &[&str]) -> Result<Dir, DirError> {
        let mut cur = self.try_clone()?;
        for p in parts {
            cur = cur.make_subdir(p)?;
        }
        Ok(cur)
    }

    /// What `name` is, without following a link; `None` if it does not exist.
    pub fn kind(&self, name: &str) -> Result<Option<EntryKind>, DirError> {
        Ok(self.stat(name)?.map(|s| s.kind))
    }

    /// What `name` is, its length and modification time, without following a link; `None` if
    /// it does not exist.
    pub fn stat(&self, name: &str) -> Result<Option<EntryStat>, DirError> {
        match rustix::fs::statat(&self.fd, component(name)?, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(EntryStat {
                kind: entry_kind(FileType::from_raw_mode(st.st_mode)),
                len: u64::try_from(st.st_size).unwrap_or(0),
                // i64 on 64-bit Linux, narrower elsewhere.
                #[allow(clippy::useless_conversion)]
                modified_unix: i64::from(st.st_mtime),
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_at(self.display(name))(e)),
        }
    }

    /// The regular file `name`, for reading (a link, a FIFO or anything else is refused).
    pub fn open_file(&self, name: &str) -> Result<File, DirError> {
        let path = self.display(name);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, component(name)?, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP => DirError::NotAFile(path.clone()),
            e => io_at(path.clone())(e),
        })?;
        let f = regular(fd, &path, false)?;
        rustix::fs::fcntl_setfl(&f, OFlags::empty()).map_err(io_at(path))?;
        Ok(f)
    }

    /// A new regular file `name` for writing (`O_EXCL`: an existing entry, a link included, is
    /// an error and is left alone).
    pub fn create_file(&self, name: &str, how: Create) -> Result<File, DirError> {
        let mut flags = OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        flags |= if how.read { OFlags::RDWR } else { OFlags::WRONLY };
        if how.direct {
            flags |= OFlags::DIRECT;
        }
        let path = self.display(name);
        let fd =
            rustix::fs::openat(&self.fd, component(name)?, flags, Mode::from_raw_mode(0o644)).map_err(|e| match e {
                Errno::EXIST => DirError::Exists(path.clone()),
                e => io_at(path.clone())(e),
            })?;
        Ok(File::from(fd))
    }

    /// Regular file `name` for reading and writing, made when missing. Refused: a link,
    /// anything but a regular file, a file with other hard links.
    pub fn open_rw(&self, name: &str) -> Result<File, DirError> {
        let path = self.display(name);
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&self.fd, component(name)?, flags, Mode::from_raw_mode(0o644)).map_err(|e| match e {
                Errno::LOOP => DirError::NotAFile(path.clone()),
                e => io_at(path.clone())(e),
            })?;
        let f = regular(fd, &path, true)?;
        // Opened non-blocking so a planted FIFO cannot hang the open; clear it to be plain.
        rustix::fs::fcntl_setfl(&f, OFlags::empty()).map_err(io_at(path))?;
        Ok(f)
    }

    /// Regular file `name` for writing, made when missing, emptied first unless `append` (then
    /// every write goes to its end). Refused: a link, anything but a regular file, a file with
    /// other hard links.
    pub fn open_write(&self, name: &str, append: bool) -> Result<File, DirError> {
        let path = self.display(name);
        let mut flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        if append {
            flags |= OFlags::APPEND;
        }
        let fd =
            rustix::fs::openat(&self.fd, component(name)?, flags, Mode::from_raw_mode(0o644)).map_err(|e| match e {
                Errno::LOOP => DirError::NotAFile(path.clone()),
                e => io_at(path.clone())(e),
            })?;
        // Checked before it is emptied: a planted hard link keeps its content.
        let f = regular(fd, &path, true)?;
        if !append {
            f.set_len(0).map_err(|source| DirError::Io {
                path: path.clone(),
                source,
            })?;
        }
        rustix::fs::fcntl_setfl(&f, if append { OFlags::APPEND } else { OFlags::empty() }).map_err(io_at(path))?;
        Ok(f)
    }

    /// Contents of regular file `name` if it exists, is no link, has one link and holds at
    /// most `max` bytes; `None` otherwise.
    pub fn read_small(&self, name: &str, max: u64) -> Option<Vec<u8>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, component(name).ok()?, flags, Mode::empty()).ok()?;
        let mut f = regular(fd, &self.display(name), true).ok()?;
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
        let tmp = format!("{}.tmp", component(name).map_err(DirError::into_io)?);
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
        let (from, to) = (
            component(from).map_err(DirError::into_io)?,
            component(to).map_err(DirError::into_io)?,
        );
        rustix::fs::renameat_with(&self.fd, from, &self.fd, to, flags)?;
        Ok(())
    }

    /// `name` through this directory's descriptor (`/proc/self/fd/N/name`): a path that the
    /// kernel resolves from the open directory, so no component of the directory's own path is
    /// looked up again. For the calls that take only a path (a unix socket's `bind`/`connect`).
    fn fd_path(&self, name: &str) -> Result<PathBuf, DirError> {
        use std::os::fd::AsRawFd;
        Ok(PathBuf::from(format!(
            "/proc/self/fd/{}/{}",
            self.fd.as_raw_fd(),
            component(name)?
        )))
    }

    /// A unix-domain socket listening at `name`, created in this directory. `bind` never follows
    /// a link at `name` (anything there, link or not, fails it: `AddrInUse`).
    pub fn bind_unix(&self, name: &str) -> io::Result<std::os::unix::net::UnixListener> {
        std::os::unix::net::UnixListener::bind(self.fd_path(name).map_err(DirError::into_io)?)
    }

    /// Connect to the unix-domain socket `name` in this directory (whether one listens there).
    /// A link at `name` is refused, not followed.
    pub fn connect_unix(&self, name: &str) -> io::Result<std::os::unix::net::UnixStream> {
        if self.kind(name).map_err(DirError::into_io)? != Some(EntryKind::Socket) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a socket"));
        }
        std::os::unix::net::UnixStream::connect(self.fd_path(name).map_err(DirError::into_io)?)
    }

    /// Remove the entry `name` (a file or a link, never what a link points to).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, component(name).map_err(DirError::into_io)?, AtFlags::empty())?;
        Ok(())
    }

    /// Remove the empty subdirectory `name` (a link is not a directory and is left alone).
    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(
            &self.fd,
            component(name).map_err(DirError::into_io)?,
            AtFlags::REMOVEDIR,
        )?;
        Ok(())
    }

    /// The entries' names and kinds, read from the descriptor (names that are not UTF-8 are
    /// left out: no name this project makes or reads has one).
    pub fn entries(&self) -> Result<Vec<(String, EntryKind)>, DirError> {
        let mut out = Vec::new();
        let mut list = rustix::fs::Dir::read_from(&self.fd).map_err(io_at(self.path.clone()))?;
        while let Some(e) = list.read() {
            let e = e.map_err(io_at(self.path.clone()))?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            let Some(name) = name.to_str() else { continue };
            if name == "." || name == ".." {
                continue;
            }
            let kind = match e.file_type() {
                // Some file systems do not say in the listing: ask without following.
                FileType::Unknown => match self.kind(name) {
                    Ok(Some(k)) => k,
                    _ => continue,
                },
                t => entry_kind(t),
            };
            out.push((name.to_string(), kind));
        }
        Ok(out)
    }

    /// Free and total space of the file system holding this directory.
    pub fn space(&self) -> Result<Space, DirError> {
        let s = rustix::fs::fstatvfs(&self.fd).map_err(io_at(self.path.clone()))?;
        Ok(Space {
            free: s.f_bavail.saturating_mul(s.f_frsize),
            total: s.f_blocks.saturating_mul(s.f_frsize),
        })
    }
}

fn entry_kind(t: FileType) -> EntryKind {
    match t {
        FileType::Directory => EntryKind::Dir,
        FileType::RegularFile => EntryKind::File,
        FileType::Socket => EntryKind::Socket,
        _ => EntryKind::Other,
    }
}

/// `fd` as a file if it is a regular file (and, with `one_link`, has no other hard links).
fn regular(fd: OwnedFd, path: &Path, one_link: bool) -> Result<File, DirError> {
    let st = rustix::fs::fstat(&fd).map_err(io_at(path.to_path_buf()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(DirError::NotAFile(path.to_path_buf()));
    }
    if one_link && st.st_nlink > 1 {
        return Err(DirError::MultiplyLinked(path.to_path_buf(), st.st_nlink as u64));
    }
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn links_anywhere_below_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"x").unwrap();
        let disk = d.path().join("disk0");
        fs::create_dir_all(disk.join("scan")).unwrap();
        fs::write(disk.join("scan/chunk"), b"data").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), disk.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), disk.join("dirlink")).unwrap();
        let dir = Dir::open(&disk).unwrap();
        assert!(matches!(dir.open_file("link"), Err(DirError::NotAFile(_))));
        assert!(matches!(dir.subdir("dirlink"), Err(DirError::NotADirectory(_))));
        assert!(matches!(dir.make_subdir("dirlink"), Err(DirError::NotADirectory(_))));
        assert!(matches!(dir.create_subdir("dirlink"), Err(DirError::Exists(_))));
        assert!(matches!(
            dir.make_path(&["dirlink", "x"]),
            Err(DirError::NotADirectory(_))
        ));
        assert!(matches!(
            dir.create_file("link", Create::default()),
            Err(DirError::Exists(_))
        ));
        assert!(matches!(dir.open_rw("link"), Err(DirError::NotAFile(_))));
        assert!(dir.subdir("nothing").unwrap().is_none());
        let scan = dir.subdir("scan").unwrap().unwrap();
        assert_eq!(io::read_to_string(scan.open_file("chunk").unwrap()).unwrap(), "data");
        assert!(dir.open_file("scan").is_err(), "a directory is no file");
        let mut names = dir.entries().unwrap();
        names.sort();
        assert_eq!(
            names,
            vec![
                ("dirlink".to_string(), EntryKind::Other),
                ("link".to_string(), EntryKind::Other),
                ("scan".to_string(), EntryKind::Dir),
            ]
        );
        assert_eq!(dir.kind("scan").unwrap(), Some(EntryKind::Dir));
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(matches!(dir.subdir(bad), Err(DirError::BadName(_))), "{bad:?}");
            assert!(dir.create_file(bad, Create::default()).is_err(), "{bad:?}");
        }
        // Nothing reached the outside.
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
        assert_eq!(fs::read(outside.path().join("secret")).unwrap(), b"x");
    }

    #[test]
    fn files_are_new_single_linked_and_atomic() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let d = Dir::open(root.path()).unwrap();
        let mut f = d.create_file("a", Create::default()).unwrap();
        f.write_all(b"1").unwrap();
        assert!(matches!(
            d.create_file("a", Create::default()),
            Err(DirError::Exists(_))
        ));
        // A planted temporary-file link is removed, not written through.
        std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("rec.tmp")).unwrap();
        d.write_atomic("rec", b"{}").unwrap();
        assert_eq!(fs::read(root.path().join("rec")).unwrap(), b"{}");
        assert!(!outside.path().join("victim").exists());
        // A hard link to a file elsewhere is refused for writing.
        fs::write(outside.path().join("hl"), b"precious").unwrap();
        fs::hard_link(outside.path().join("hl"), root.path().join("g")).unwrap();
        assert!(matches!(d.open_rw("g"), Err(DirError::MultiplyLinked(_, 2))));
        assert!(matches!(d.open_write("g", false), Err(DirError::MultiplyLinked(_, 2))));
        assert_eq!(fs::read(outside.path().join("hl")).unwrap(), b"precious");
        // A FIFO neither hangs nor passes.
        let fifo = root.path().join("p");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(matches!(d.open_rw("p"), Err(DirError::NotAFile(_))));
        assert!(matches!(d.open_file("p"), Err(DirError::NotAFile(_))));
        assert!(d.read_small("p", 100).is_none());
        // Truncate or append, never through a link.
        let mut w = d.open_write("t", false).unwrap();
        w.write_all(b"abc").unwrap();
        let mut w = d.open_write("t", true).unwrap();
        w.write_all(b"de").unwrap();
        assert_eq!(fs::read(root.path().join("t")).unwrap(), b"abcde");
        d.open_write("t", false).unwrap();
        assert_eq!(fs::read(root.path().join("t")).unwrap(), b"");
        std::os::unix::fs::symlink(outside.path().join("v2"), root.path().join("l2")).unwrap();
        assert!(matches!(d.open_write("l2", true), Err(DirError::NotAFile(_))));
        assert!(!outside.path().join("v2").exists());
        // No replace without asking.
        d.write_atomic("other", b"x").unwrap();
        assert!(d.rename("other", "a", false).is_err());
        d.rename("other", "a", true).unwrap();
        assert_eq!(fs::read(root.path().join("a")).unwrap(), b"x");
        // New directories, and the same directory known by its identity.
        let sub = d.create_subdir("s").unwrap();
        assert!(matches!(d.create_subdir("s"), Err(DirError::Exists(_))));
        let again = Dir::open(&root.path().join("s")).unwrap();
        assert_eq!(sub.identity().unwrap(), again.identity().unwrap());
        assert_ne!(sub.identity().unwrap(), d.identity().unwrap());
        assert!(d.space().unwrap().total > 0);
        let deep = d.make_path(&["x", "y", "z"]).unwrap();
        deep.create_file("f", Create::default()).unwrap();
        assert!(root.path().join("x/y/z/f").is_file());
    }

    #[test]
    fn a_link_at_the_path_itself_is_followed_only_when_asked() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("real")).unwrap();
        std::os::unix::fs::symlink(root.path().join("real"), root.path().join("mnt")).unwrap();
        assert!(Dir::open(&root.path().join("mnt")).is_ok());
        assert!(matches!(
            Dir::open_nofollow(&root.path().join("mnt")),
            Err(DirError::NotADirectory(_))
        ));
        assert!(Dir::open_nofollow(&root.path().join("real")).is_ok());
    }
}
