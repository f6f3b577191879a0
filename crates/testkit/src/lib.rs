//! Test fixtures shared between crates (a dev-dependency, never shipped).

pub mod flood;
pub mod netns;

use std::path::Path;
use std::process::Command;

/// A tmpfs of a given size mounted on a fresh temporary directory for one test, unmounted on
/// drop: the way to make "No space left on device" happen on demand. Mounting needs root.
pub struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    /// Mount `bytes` of tmpfs, or say why not (the caller skips its test and prints the reason).
    pub fn mount(bytes: u64) -> Result<SmallDisk, String> {
        let d = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "evlbi-test-full"])
            .arg(d.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
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
