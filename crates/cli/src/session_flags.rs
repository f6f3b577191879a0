//! The one table from a stream session's settings to the flags that set them: a session's
//! rule is written once, in stream-session (`validate()`), and its error is said here in flags
//! (`--arq-latency needs --seq-format native …`), as the daemon says it in VSI-S keywords.

use stream_session::{Setting, StreamSessionError};

use crate::UsageError;

/// The flag (with the value that matters, where one does) that sets `s`.
pub fn flag(s: Setting) -> &'static str {
    match s {
        Setting::Listen => "--listen",
        Setting::To => "--to",
        Setting::Inputs => "FILES",
        Setting::Senders => "--senders",
        Setting::Format => "--seq-format",
        Setting::InputFormat => "--seq-format-in",
        Setting::ArqLatency => "--arq-latency",
        Setting::Arq => "--arq",
        Setting::Fps => "--fps",
        Setting::Rate => "--rate",
        Setting::Threads => "--threads",
        Setting::Loop => "--loop",
        Setting::Out => "--out",
        Setting::Tee => "--tee",
        Setting::Recording => "--format vbs|mk6",
        Setting::Chunk => "--chunk",
        Setting::DirectIo => "--direct",
        Setting::SplitThreads => "--split thread",
        Setting::MaxStations => "--max-stations",
        Setting::Smoothing => "--smoothing",
        Setting::CatchUp => "--catch-up",
        Setting::Burst => "--burst",
        Setting::Spin => "--spin",
        Setting::MaxLag => "--max-lag",
        Setting::InjectLoss => "--inject-loss",
        Setting::Ack => "--ack",
        Setting::Interval => "--interval",
        Setting::Live => "--out sfxc:|difx:",
        Setting::Frames => "--frames",
    }
}

/// A stream session's error: what was asked cannot work (its settings, an input that cannot be
/// streamed as asked) is a usage error (exit 2) said in flags; anything that failed while running
/// (an input that cannot be read among it), exit 1.
pub fn session_error(e: StreamSessionError) -> anyhow::Error {
    if !e.is_usage() {
        return anyhow::Error::new(e);
    }
    let text = match &e {
        StreamSessionError::Config(c) => c.describe(&flag),
        StreamSessionError::Input { input, problem } => format!("{input}: {}", problem.describe(&flag)),
        _ => return anyhow::Error::new(e),
    };
    anyhow::Error::new(UsageError::of_session(text, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag of the table is one `stream send`, `recv` or `relay` takes: the table cannot
    /// name a flag that is gone.
    #[test]
    fn every_setting_is_a_flag_of_a_stream_command() {
        let cli = crate::Cli::command();
        let stream = cli.find_subcommand("stream").unwrap();
        let longs: Vec<String> = stream
            .get_subcommands()
            .flat_map(|c| c.get_arguments())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for s in Setting::ALL {
            let f = flag(s);
            if s == Setting::Inputs {
                continue;
            }
            let name = f.split(' ').next().unwrap_or(f);
            assert!(
                longs.iter().any(|l| l == name),
                "{s}: {f} is no flag of stream send|recv|relay"
            );
        }
    }

    #[test]
    fn a_sessions_error_is_said_in_flags() {
        let e = stream_session::ConfigError::ArqNeedsNative {
            setting: Setting::ArqLatency,
        };
        let u = session_error(e.into());
        assert_eq!(
            u.to_string(),
            "--arq-latency needs --seq-format native (NAKs name native sequence numbers)"
        );
        let typed = u.downcast_ref::<UsageError>().and_then(|u| u.session());
        assert!(matches!(typed, Some(StreamSessionError::Config(_))), "{typed:?}");
    }
}
