//! Where a received file may land: only below the receiver's `--root`.
//!
//! The offered path is untrusted. It must be relative, `/`-separated, with no `..`, no empty or
//! `.` components, no NUL or backslash, and every directory on the way that already exists
//! must be a real directory, not a symbolic link (a link planted inside the root could otherwise
//! point anywhere). The final name must not be a symlink either, and files are opened with
//! O_NOFOLLOW. A process that can race us by changing the root's contents between the check and
//! the open already has write access to the root; that race is not defended here.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a path was refused.
#[derive(Debug, Error)]
pub enum PathError {
    /// Empty path.
    #[error("empty path")]
    Empty,
    /// Starts with `/`.
    #[error("absolute path {0:?}: paths are relative to the receiver's root")]
    Absolute(String),
    /// Has a `..`, `.` or empty component, a NUL or a backslash.
    #[error("path {0:?} has a `..`, `.` or empty component, a NUL or a backslash")]
    BadComponent(String),
    /// A component below the root is a symbolic link or not a directory.
    #[error("{0} is a symbolic link or not a directory: refusing to write through it")]
    NotADirectory(PathBuf),
    /// The target exists and is a symbolic link or not a regular file.
    #[error("{0} exists and is a symbolic link or not a regular file")]
    NotAFile(PathBuf),
    /// Creating a directory failed.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
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
        .any(|p| p.is_empty() || *p == "." || *p == ".." || p.contains('\0') || p.contains('\\'))
    {
        return Err(PathError::BadComponent(path.to_string()));
    }
    // Belt and braces: the OS's own reading of the path must agree it is plain and relative.
    if !Path::new(path).components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(PathError::BadComponent(path.to_string()));
    }
    Ok(parts)
}

fn ensure_dir(p: &Path) -> Result<(), PathError> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(_) => Err(PathError::NotADirectory(p.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(p) {
            Ok(()) => Ok(()),
            // Created concurrently by another session: check again what it is.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs::symlink_metadata(p) {
                Ok(m) if m.file_type().is_dir() => Ok(()),
                _ => Err(PathError::NotADirectory(p.to_path_buf())),
            },
            Err(source) => Err(PathError::Io {
                path: p.to_path_buf(),
                source,
            }),
        },
        Err(source) => Err(PathError::Io {
            path: p.to_path_buf(),
            source,
        }),
    }
}

/// Create (as needed) the directories of `rel` below `root` and return the full path of a
/// directory named by all of `rel`.
pub fn make_dir_under(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    let mut p = root.to_path_buf();
    for c in check_relative(rel)? {
        p.push(c);
        ensure_dir(&p)?;
    }
    Ok(p)
}

/// The full path of file `rel` below `root`, its parent directories created; refuses if the
/// file exists as anything but a regular file.
pub fn file_under(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    let parts = check_relative(rel)?;
    let (name, dirs) = parts.split_last().ok_or(PathError::Empty)?;
    let mut p = root.to_path_buf();
    for c in dirs {
        p.push(c);
        ensure_dir(&p)?;
    }
    p.push(name);
    refuse_non_file(&p)?;
    Ok(p)
}

/// `Err` if `p` exists and is not a regular file (a symlink in particular).
pub fn refuse_non_file(p: &Path) -> Result<(), PathError> {
    match fs::symlink_metadata(p) {
        Ok(m) if !m.file_type().is_file() => Err(PathError::NotAFile(p.to_path_buf())),
        _ => Ok(()),
    }
}

/// `path` with `suffix` appended to its file name (`a/b.vdif` → `a/b.vdif.part`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_paths_pass() {
        assert_eq!(check_relative("a/b.vdif").unwrap(), vec!["a", "b.vdif"]);
        assert_eq!(check_relative("ef..vdif").unwrap(), vec!["ef..vdif"]);
    }

    #[test]
    fn escapes_refused() {
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
        ] {
            assert!(check_relative(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn symlinked_directory_and_file_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
        assert!(matches!(
            file_under(root.path(), "link/x"),
            Err(PathError::NotADirectory(_))
        ));
        std::os::unix::fs::symlink(outside.path().join("f"), root.path().join("f")).unwrap();
        assert!(matches!(file_under(root.path(), "f"), Err(PathError::NotAFile(_))));
        let p = file_under(root.path(), "new/dir/f.vdif").unwrap();
        assert_eq!(p, root.path().join("new/dir/f.vdif"));
        assert!(root.path().join("new/dir").is_dir());
        assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
    }
}
