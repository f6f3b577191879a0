//! SFXC's mk5:// reader harness (scripts/build-sfxc.sh builds it from SFXC's own reader sources).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The harness `scripts/sfxc-path` finds; or, when it is not built, `None` after saying the
/// test is skipped (scripts/test.sh's summary counts the line).
pub fn harness_or_skip() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sfxc-path");
    let found = Command::new(script).output().ok().and_then(|out| {
        let p = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && p.is_file()).then_some(p)
    });
    if found.is_none() {
        println!("SKIPPED: no SFXC mk5:// reader harness (scripts/build-sfxc.sh builds it)");
    }
    found
}
