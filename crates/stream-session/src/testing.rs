//! What the unit tests of the session configurations share.

use recording::write::{RecordingConfig, RecordingNames};

use crate::{ConfigError, Setting};

/// A vbs recording over one disk, as a configuration holds it (nothing is opened).
pub fn scan() -> RecordingConfig {
    RecordingConfig {
        layout: scanfmt::Layout::Vbs,
        disks: vec!["/d0".into()],
        opened: Vec::new(),
        names: RecordingNames::Template("s".into()),
        block_bytes: None,
        direct: false,
    }
}

/// The refusal of `value` for `setting`, which takes `range`.
pub fn out_of_range(setting: Setting, value: &str, range: &'static str) -> ConfigError {
    ConfigError::OutOfRange {
        setting,
        value: value.into(),
        range,
    }
}
