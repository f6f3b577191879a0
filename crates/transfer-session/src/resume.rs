//! The resume record beside a `.part` file (`NAME.part.evlbi`, a [`ResumeState`] as JSON), read
//! and written below the receiver's root.

use std::io;

use transfer::blocks::ResumeState;

use crate::paths::Dir;

/// Largest resume record read (a hostile or corrupt one must not exhaust memory).
const MAX_STATE_BYTES: u64 = 16 << 20;

/// Reading and writing a [`ResumeState`] in a directory of the root.
pub trait ResumeFile: Sized {
    /// Read record `name` in `dir`; `None` if absent, unreadable, a link or not ours (the
    /// transfer then starts over).
    fn load(dir: &Dir, name: &str) -> Option<ResumeState>;

    /// Write record `name` in `dir` atomically (see [`Dir::write_atomic`]: never through a link
    /// planted there), so a crash leaves the old or the new record, never half of one. Nothing
    /// is fsync'd: this runs on the receiving thread every second,
    /// and a sync of gigabytes of dirty `.part` data there stalls the socket loop for hundreds
    /// of milliseconds (the sender then probes and repeats data). After a power loss the record
    /// may list a block that never reached the disk; that costs a re-fetch, not a bad file,
    /// because every block is verified against the sender's hash before the file is accepted.
    fn save(&self, dir: &Dir, name: &str) -> io::Result<()>;
}

impl ResumeFile for ResumeState {
    fn load(dir: &Dir, name: &str) -> Option<ResumeState> {
        let s: ResumeState = serde_json::from_slice(&dir.read_small(name, MAX_STATE_BYTES)?).ok()?;
        s.is_current().then_some(s)
    }

    fn save(&self, dir: &Dir, name: &str) -> io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        dir.write_atomic(name, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use transfer::blocks::RESUME_STATE_VERSION;

    #[test]
    fn state_survives_a_roundtrip_and_rejects_garbage() {
        let d = tempfile::tempdir().unwrap();
        let root = crate::paths::Root::open(d.path()).unwrap();
        let (dir, name) = root.parent_of("x").unwrap();
        let name = format!("{name}.part.evlbi");
        let p = d.path().join(&name);
        let s = ResumeState {
            version: RESUME_STATE_VERSION,
            size: 5,
            mtime_ns: 7,
            chunk_size: 512,
            block_size: 4096,
            have: vec![[0, 1]],
        };
        s.save(&dir, &name).unwrap();
        assert_eq!(ResumeState::load(&dir, &name), Some(s));
        fs::write(&p, b"{not json").unwrap();
        assert_eq!(ResumeState::load(&dir, &name), None);
    }
}
