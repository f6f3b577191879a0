//! The one check every reader of VDIF applies: frames come from the [`FrameScanner`] (only runs
//! of frames back to back are believed), [`Inspector`] accounts for every byte, and a stream
//! with under [`MIN_VALID_FRACTION`](crate::inspect::MIN_VALID_FRACTION) of its bytes in
//! frames is "not VDIF", naming the format it is when its first bytes show one
//! ([`crate::formats`]). `inspect`, `stats`, `dump`, `correlate` and `stream send` all go
//! through [`CheckedFrames`], so they agree on what is VDIF.

pub use crate::inspect::checked::{check_start, CheckedFrames};
