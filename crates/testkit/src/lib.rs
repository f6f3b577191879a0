//! Test fixtures shared between crates (a dev-dependency, never shipped).

pub mod flood;
pub mod netns;

use std::path::Path;
use std::process::Command;

/// Why a fixture could not be set up (the caller skips its test and prints it).
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// A temporary directory or a program could not be made or run.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A program ran and failed.
    #[error("{command}: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it wrote on stderr.
        stderr: String,
    },
}

impl FixtureError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FixtureError {
        let what = what.into();
        move |source| FixtureError::Io { what, source }
    }
}

/// A tmpfs of a given size mounted on a fresh temporary directory for one test, unmounted on
/// drop: the way to make "No space left on device" happen on demand. Mounting needs root.
pub struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    /// Mount `bytes` of tmpfs, or say why not (the caller skips its test and prints the reason).
    pub fn mount(bytes: u64) -> Result<SmallDisk, FixtureError> {
        SmallDisk::mount_with(&format!("size={bytes}"))
    }

    /// Mount tmpfs with mount `options` (`size=4m,nr_inodes=6`: a disk that runs out of
    /// files before it runs out of bytes), or say why not.
    pub fn mount_with(options: &str) -> Result<SmallDisk, FixtureError> {
        let d = tempfile::tempdir().map_err(FixtureError::io("make a temporary directory"))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "evlbi-test-full"])
            .arg(d.path())
            .output()
            .map_err(FixtureError::io("run mount"))?;
        if !out.status.success() {
            return Err(FixtureError::Command {
                command: format!("mount -t tmpfs {}", d.path().display()),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(SmallDisk(d))
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}
