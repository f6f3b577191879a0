//! The settings of a stream session, by name: what a [`ConfigError`](crate::ConfigError) or an
//! [`InputProblem`](crate::InputProblem) names when a value cannot run. Each front door says
//! them in its own words from one table of its own — the binary as flags (`--arq-latency`), the
//! daemon as VSI-S keywords (`net_port`) —, so a rule is written once, here, and read in the
//! words of whoever set the value.

/// One setting of [`SendConfig`](crate::send::SendConfig),
/// [`RecvConfig`](crate::recv::RecvConfig) or [`RelayRunConfig`](crate::relay::RelayRunConfig)
/// (and of the stream crate's receiver and relay settings they carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Setting {
    /// The addresses a receiver or relay listens on (`listen`).
    Listen,
    /// Where a sender or relay sends (`to`, and a sender's `board_to`).
    To,
    /// A sender's inputs, one station each (`inputs`).
    Inputs,
    /// A sender's sockets, one per simulated board (`senders`).
    Senders,
    /// The framing sent, or received by a receiver (`format`; a relay's `output`).
    Format,
    /// The framing a relay takes in (`input`).
    InputFormat,
    /// How long sent frames are kept to answer NAKs (`arq_latency`).
    ArqLatency,
    /// A receiver asks for lost frames (`arq`).
    Arq,
    /// Frames per second per thread (`fps`, `frames_per_second`).
    Fps,
    /// The data rate per station (`rate_bps`).
    Rate,
    /// VDIF threads per station (`threads`).
    Threads,
    /// A sender restarts each input at its end (`loop_files`).
    Loop,
    /// A receiver's output directory (`out_dir`).
    Out,
    /// A relay's copy of its input as files (`tee`).
    Tee,
    /// A vbs/Mark6 recording over many disks (`recording`, a relay's `tee_recording`).
    Recording,
    /// Bytes per file before a new one starts (`chunk`).
    Chunk,
    /// Writes past the page cache (`direct_io`).
    DirectIo,
    /// One file per VDIF thread (`split_threads`).
    SplitThreads,
    /// Most stations taken (`max_stations`).
    MaxStations,
    /// How long a frame may wait before its station catches up (a relay's `smoothing`).
    Smoothing,
    /// The rate a backlog leaves at, as a multiple of the stream's (`catch_up`).
    CatchUp,
    /// Most frames per departure (`burst`).
    Burst,
    /// How close to a departure a sender spins (`spin`).
    Spin,
    /// How far behind its timeline a sender may fall and catch up (`max_lag`).
    MaxLag,
    /// The share of datagrams dropped on purpose (`inject_loss`).
    InjectLoss,
    /// A relay's keep-alive back to each sender every N datagrams (`ack_every`).
    Ack,
    /// The live counts' cadence (`interval`).
    Interval,
    /// Live outputs to correlators' readers instead of a recording (`live`).
    Live,
    /// The frames a receiver takes, VDIF or Mark5B (`frame_format`).
    Frames,
}

impl Setting {
    /// Every setting, in declaration order (a front door's table is tested against it).
    pub const ALL: [Setting; 29] = [
        Setting::Listen,
        Setting::To,
        Setting::Inputs,
        Setting::Senders,
        Setting::Format,
        Setting::InputFormat,
        Setting::ArqLatency,
        Setting::Arq,
        Setting::Fps,
        Setting::Rate,
        Setting::Threads,
        Setting::Loop,
        Setting::Out,
        Setting::Tee,
        Setting::Recording,
        Setting::Chunk,
        Setting::DirectIo,
        Setting::SplitThreads,
        Setting::MaxStations,
        Setting::Smoothing,
        Setting::CatchUp,
        Setting::Burst,
        Setting::Spin,
        Setting::MaxLag,
        Setting::InjectLoss,
        Setting::Ack,
        Setting::Interval,
        Setting::Live,
        Setting::Frames,
    ];

    /// The field of the session configuration that holds it: what the library's own messages
    /// say.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Listen => "listen",
            Setting::To => "to",
            Setting::Inputs => "inputs",
            Setting::Senders => "senders",
            Setting::Format => "format",
            Setting::InputFormat => "input",
            Setting::ArqLatency => "arq_latency",
            Setting::Arq => "arq",
            Setting::Fps => "fps",
            Setting::Rate => "rate_bps",
            Setting::Threads => "threads",
            Setting::Loop => "loop_files",
            Setting::Out => "out_dir",
            Setting::Tee => "tee",
            Setting::Recording => "recording",
            Setting::Chunk => "chunk",
            Setting::DirectIo => "direct_io",
            Setting::SplitThreads => "split_threads",
            Setting::MaxStations => "max_stations",
            Setting::Smoothing => "smoothing",
            Setting::CatchUp => "catch_up",
            Setting::Burst => "burst",
            Setting::Spin => "spin",
            Setting::MaxLag => "max_lag",
            Setting::InjectLoss => "inject_loss",
            Setting::Ack => "ack_every",
            Setting::Interval => "interval",
            Setting::Live => "live",
            Setting::Frames => "frame_format",
        }
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The catch-up speeds a sender or relay takes, multiples of the rate: below 1 a backlog never
/// clears, above 16 it leaves at line rate on any path.
pub const CATCH_UP_RANGE: std::ops::RangeInclusive<f64> = 1.0..=16.0;

/// Most frames per departure of a sender or relay (one UDP GSO call takes 64 segments).
pub const MAX_BURST: usize = 64;

/// Most sockets (simulated boards) of one sender.
pub const MAX_SENDERS: usize = 64;

/// Shortest live interval of a receiver or relay: counts handed over more often cost more than
/// they tell.
pub const MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// How a front door names a setting in its messages (see [`ConfigError::describe`](crate::ConfigError::describe)).
pub type Namer<'a> = &'a dyn Fn(Setting) -> &'static str;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_listed_once_with_a_name_of_its_own() {
        let mut names: Vec<&str> = Setting::ALL.iter().map(|s| s.name()).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two settings share a name");
        // In declaration order, the last one last: none left out.
        for (i, s) in Setting::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i, "{s}");
        }
        assert_eq!(Setting::ALL.len(), Setting::Frames as usize + 1);
    }
}
