//! Where a received file may land: only below the receiver's `--root`, and never through a link.
//!
//! The offered path is untrusted. It must be relative, `/`-separated, at most [`MAX_DEPTH`]
//! components of at most [`MAX_NAME`] bytes, with no `..`, `.` or empty components, no NUL,
//! backslash or control character (a newline would split the receiver's log lines), and no
//! name ending in one of the receiver's own suffixes (`.part`, `.part.evlbi`, …). All of that is
//! checked before anything is created.
//!
//! Everything below the root is then reached through directory descriptors ([`safedir`], the
//! one path-safety module the recorder's writers use too): a symbolic link anywhere on the way
//! fails the open instead of being followed, a `.part` that has more than one link is refused
//! (a hard link planted there would receive the data), temporary files are created with
//! `O_EXCL`, and names are replaced only by `renameat`, which replaces a directory entry and
//! never writes through it.

use std::path::{Path, PathBuf};

pub use safedir::Dir;
use safedir::DirError;
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
    /// The root is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// Something below the root is a symbolic link, not what was needed, or failed.
    #[error(transparent)]
    Below(#[from] DirError),
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

/// The receiver's root directory, held open.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
}

impl Root {
    /// Open `path` (which must be a directory; the operator chose it, so a link to one is
    /// followed here and nowhere below).
    pub fn open(path: &Path) -> Result<Root, PathError> {
        let dir = Dir::open(path).map_err(|_| PathError::NotADirectory(path.to_path_buf()))?;
        Ok(Root { dir })
    }

    /// The directory named by all of `rel`, created as needed.
    pub fn make_dirs(&self, rel: &str) -> Result<Dir, PathError> {
        let parts = check_relative(rel)?;
        Ok(self.dir.make_path(&parts)?)
    }

    /// The directory that will hold file `rel` (created as needed) and the file's name in it.
    pub fn parent_of<'a>(&self, rel: &'a str) -> Result<(Dir, &'a str), PathError> {
        let parts = check_relative(rel)?;
        let (name, dirs) = parts.split_last().ok_or(PathError::Empty)?;
        Ok((self.dir.make_path(dirs)?, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The file-level guards (links, hard links, FIFOs, O_EXCL) are safedir's and tested there;
    /// here, that offered paths walk below the root through them.
    #[test]
    fn links_anywhere_below_the_root_are_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), root.path().join("f")).unwrap();
        let r = Root::open(root.path()).unwrap();
        let below_link = |e| matches!(e, Err(PathError::Below(DirError::NotADirectory(_))));
        assert!(below_link(r.parent_of("link/x").map(|_| ())));
        assert!(below_link(r.make_dirs("link/sub").map(|_| ())));
        let (d, name) = r.parent_of("f").unwrap();
        assert!(matches!(d.open_rw(name), Err(DirError::NotAFile(_))));
        let (nd, n) = r.parent_of("new/dir/f.vdif").unwrap();
        nd.open_rw(n).unwrap();
        assert!(root.path().join("new/dir/f.vdif").is_file());
        assert!(matches!(r.parent_of("../x"), Err(PathError::BadComponent(_))));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
