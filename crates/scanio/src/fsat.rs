//! Opening below a disk without following symlinks: the disk directory is opened once (the
//! operator's mount point, which may itself be a link), everything below it with `openat` and
//! `O_NOFOLLOW`, so a symlink planted on a disk is refused rather than followed.
//!
//! std has no `openat`; rustix would add a dependency for two calls, so this is libc.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An open directory and its path (for listing and messages).
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What a directory entry is, from the listing (never following a link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Dir,
    File,
    Other,
}

fn openat(dir: Option<&OwnedFd>, name: &Path, flags: i32) -> io::Result<OwnedFd> {
    let c = CString::new(name.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a NUL-terminated path and a directory descriptor we own (or AT_FDCWD); the
    // result is checked before it is owned.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Dir {
    /// A disk's directory (following a link: the operator chose it).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        Ok(Dir {
            fd: openat(None, path, libc::O_RDONLY | libc::O_DIRECTORY)?,
            path: path.to_path_buf(),
        })
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `name` inside (not a link); `None` when there is none.
    pub(crate) fn subdir(&self, name: &str) -> io::Result<Option<Dir>> {
        match openat(
            Some(&self.fd),
            Path::new(name),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        ) {
            Ok(fd) => Ok(Some(Dir {
                fd,
                path: self.path.join(name),
            })),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The regular file `name` inside, for reading (a link or anything else is refused).
    pub(crate) fn file(&self, name: &str) -> io::Result<File> {
        let fd = openat(Some(&self.fd), Path::new(name), libc::O_RDONLY | libc::O_NOFOLLOW)?;
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(f)
    }

    /// Names and kinds of the entries (names that are not UTF-8 are left out: no scan has one).
    pub(crate) fn entries(&self) -> io::Result<Vec<(String, Kind)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.path)? {
            let e = e?;
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => Kind::Dir,
                Ok(t) if t.is_file() => Kind::File,
                _ => Kind::Other,
            };
            out.push((name, kind));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_below_a_disk_are_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("secret");
        std::fs::write(&outside, b"x").unwrap();
        let disk = d.path().join("disk0");
        std::fs::create_dir_all(disk.join("scan")).unwrap();
        std::fs::write(disk.join("scan/chunk"), b"data").unwrap();
        std::os::unix::fs::symlink(&outside, disk.join("link")).unwrap();
        std::os::unix::fs::symlink(d.path(), disk.join("dirlink")).unwrap();
        let dir = Dir::open(&disk).unwrap();
        assert!(dir.file("link").is_err(), "a link to a file");
        assert!(dir.subdir("dirlink").is_err(), "a link to a directory");
        assert!(dir.subdir("nothing").unwrap().is_none());
        let scan = dir.subdir("scan").unwrap().unwrap();
        assert_eq!(std::io::read_to_string(scan.file("chunk").unwrap()).unwrap(), "data");
        assert!(dir.file("scan").is_err(), "a directory is no file");
        let mut names = dir.entries().unwrap();
        names.sort();
        assert_eq!(names[0], ("dirlink".to_string(), Kind::Other));
        assert_eq!(names[2], ("scan".to_string(), Kind::Dir));
    }
}
