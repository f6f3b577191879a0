//! Argument groups several commands take, each declared once with its typed parser and its
//! parse tests (ripgrep's flags): `--fps` (a [`FrameRate`]), `--rate` (a station's data rate),
//! `--key-file` (read and checked), `-q/--quiet`, and what `stream recv` and `stream relay` both
//! take in (`--listen`, `--from`, `--max-stations`, `--rcvbuf`) and stop by (`--duration`,
//! `--idle-timeout`, `--interval`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use stream::SourceFilter;
use vdif::FrameRate;

use crate::units::{parse_duration, parse_positive_duration, parse_size};

/// `--fps`: frames per second per VDIF thread, for data that cannot show it.
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FpsArg {
    /// Frames per second per VDIF thread (1 to 16777216), for VDIF whose headers state no
    /// sample rate and whose frames cross no second boundary (bare or jive5ab datagrams, a file
    /// under a second long). Without it such data are refused, said where they are met.
    #[arg(long, value_name = "N", value_parser = parse_frame_rate)]
    pub fps: Option<FrameRate>,
}

/// `--fps N`: a VDIF frame rate, by vdif's one rule (1 to 2^24, the frame number's range).
fn parse_frame_rate(s: &str) -> Result<FrameRate, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a whole number of frames per second, 1 to 16777216"))?;
    FrameRate::new(n).map_err(|e| e.to_string())
}

/// `--rate`: the data rate of a station, what it is paced at.
#[derive(Args, Clone, Copy, Debug, Default, PartialEq)]
pub struct DataRateArg {
    /// Data rate per station, sample bits without headers: 4096M, 2.048G. What each station is
    /// paced at; default: the rate its frames give (frames/s × threads × frame data).
    #[arg(long, value_parser = crate::units::parse_bit_rate)]
    pub rate: Option<vdif::BitRate>,
}

/// `--arq-latency`: how long a sender or relay keeps what it sent to answer NAKs (the daemon's
/// `arq_latency` keyword sets the same for `net2net`).
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArqLatencyArg {
    /// Keep this much of each stream to answer the receiver's NAKs (native framing): 300ms.
    #[arg(long, value_parser = parse_duration)]
    pub arq_latency: Option<Duration>,
}

/// `--key-file`: the pre-shared key both ends of a control connection prove.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyFileArg {
    /// File holding a pre-shared key (at least 16 bytes; surrounding whitespace ignored) the
    /// other end must prove too (HMAC-SHA256 challenge, per-line MACs).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
}

impl KeyFileArg {
    /// The key, read and checked ([`crate::read_key`]); `None` without `--key-file`.
    pub fn read(&self) -> Result<Option<Vec<u8>>> {
        crate::read_key(&self.key_file)
    }
}

/// `-q/--quiet`: no live lines or progress bar (the result still comes).
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuietArg {
    /// No live lines or progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What a receiving command (`stream recv`, `stream relay`) listens on and takes.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ListenArgs {
    /// PORT, ADDRESS:PORT, or a multicast GROUP@PORT (joined; %IFACE picks the interface by
    /// name, index or address: 239.1.2.3@46227%eth1) to receive on. Repeat for several ports
    /// (one per station or backend board, up to 64). Port 0 picks a free port (printed on
    /// stderr).
    #[arg(long, required = true)]
    pub listen: Vec<String>,
    /// Take data only from this host (IP alone: any port, so a restarted sender is still taken)
    /// or this exact IP:PORT.
    #[arg(long, value_name = "IP[:PORT]")]
    pub from: Option<SourceFilter>,
    /// Most stations (further ones are counted and dropped). A station that sent for under
    /// 100 ms and went quiet for 100 ms gives its slot to a new one sending for 100 ms (its
    /// frames held meanwhile); one silent for 10 s gives its slot to any. Sources not yet
    /// stations are checked in a table of 2×N (at least 64) sources, N streams each.
    #[arg(long, default_value_t = 16)]
    pub max_stations: usize,
    /// Receive socket buffer to ask for, per port.
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    pub rcvbuf: u64,
}

impl ListenArgs {
    /// Each `--listen`, in netio's grammar.
    pub fn specs(&self) -> Result<Vec<netio::ListenSpec>> {
        self.listen.iter().map(|l| crate::addr::listen("--listen", l)).collect()
    }

    /// `--rcvbuf` in bytes.
    pub fn rcvbuf(&self) -> usize {
        usize::try_from(self.rcvbuf).unwrap_or(usize::MAX)
    }
}

/// When a receiving command stops, and how often it says how it goes.
#[derive(Args, Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntilArgs {
    /// Stop after this long.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop when no datagram arrived for this long, once the first has (before it,
    /// --first-datagram-timeout counts).
    #[arg(long, value_parser = parse_positive_duration)]
    pub idle_timeout: Option<Duration>,
    /// Stop when no first datagram arrived for this long from the start, or `forever` (no
    /// deadline). Default: with --idle-timeout T, the longer of T and 60s (a receiver started
    /// before its sender waits for it); without, none.
    #[arg(long, value_parser = parse_first_wait)]
    pub first_datagram_timeout: Option<FirstWait>,
    /// Live line cadence (at least 50ms).
    #[arg(long, value_parser = parse_positive_duration, default_value = "1s")]
    pub interval: Duration,
}

/// How long a receiving command waits for its first datagram (`--first-datagram-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstWait {
    /// Stop after this long without one.
    After(Duration),
    /// Wait without a deadline.
    Forever,
}

/// The default wait for the first datagram with an idle timeout: a recorder is often started
/// a little before its sender (by hand, or by a schedule a minute ahead).
const FIRST_DATAGRAM_WAIT: Duration = Duration::from_secs(60);

fn parse_first_wait(s: &str) -> Result<FirstWait, String> {
    if s == "forever" {
        return Ok(FirstWait::Forever);
    }
    parse_positive_duration(s).map(FirstWait::After)
}

impl UntilArgs {
    /// How long to wait for the first datagram (`None`: no deadline).
    pub fn first_datagram_timeout(&self) -> Option<Duration> {
        match self.first_datagram_timeout {
            Some(FirstWait::After(d)) => Some(d),
            Some(FirstWait::Forever) => None,
            None => self.idle_timeout.map(|t| t.max(FIRST_DATAGRAM_WAIT)),
        }
    }
}

/// How a long-running receiving command runs: when it stops, `--metrics`, `--quiet`.
#[derive(Args, Clone, Debug)]
pub struct LiveArgs {
    #[command(flatten)]
    pub until: UntilArgs,
    #[command(flatten)]
    pub metrics: crate::metrics_flag::MetricsArgs,
    #[command(flatten)]
    pub quiet: QuietArg,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct All {
        #[command(flatten)]
        fps: FpsArg,
        #[command(flatten)]
        rate: DataRateArg,
        #[command(flatten)]
        key: KeyFileArg,
        #[command(flatten)]
        quiet: QuietArg,
    }

    #[derive(Parser, Debug)]
    struct Receiving {
        #[command(flatten)]
        listen: ListenArgs,
        #[command(flatten)]
        until: UntilArgs,
    }

    #[test]
    fn a_receiving_command_takes_its_ports_sources_and_limits() {
        let r = Receiving::try_parse_from([
            "x",
            "--listen",
            "46227",
            "--listen",
            "239.1.2.3@46228",
            "--from",
            "10.0.0.1",
            "--rcvbuf",
            "8M",
            "--idle-timeout",
            "5s",
        ])
        .unwrap();
        let specs = r.listen.specs().unwrap();
        assert_eq!(specs[0].port(), 46227);
        assert!(specs[1].is_multicast());
        assert_eq!(r.listen.from, Some(SourceFilter::Host("10.0.0.1".parse().unwrap())));
        assert_eq!((r.listen.rcvbuf(), r.listen.max_stations), (8_000_000, 16));
        assert_eq!(r.until.idle_timeout, Some(Duration::from_secs(5)));
        assert_eq!(r.until.first_datagram_timeout(), Some(Duration::from_secs(60)));
        let wait = |extra: &[&str]| {
            let args = ["x", "--listen", "1"].iter().chain(extra).copied();
            Receiving::try_parse_from(args).unwrap().until.first_datagram_timeout()
        };
        assert_eq!(wait(&[]), None, "no deadline without an idle timeout");
        assert_eq!(wait(&["--idle-timeout", "90s"]), Some(Duration::from_secs(90)));
        let two = Some(Duration::from_secs(2));
        assert_eq!(wait(&["--idle-timeout", "5s", "--first-datagram-timeout", "2s"]), two);
        assert_eq!(
            wait(&["--idle-timeout", "5s", "--first-datagram-timeout", "forever"]),
            None
        );
        assert_eq!((r.until.duration, r.until.interval), (None, Duration::from_secs(1)));
        // --listen is required; a bad one names the flag; an idle timeout of 0 is refused.
        assert_eq!(Receiving::try_parse_from(["x"]).unwrap_err().exit_code(), 2);
        let bad = Receiving::try_parse_from(["x", "--listen", "1.2.3.4:5:6"]).unwrap();
        assert!(bad.listen.specs().unwrap_err().to_string().starts_with("--listen "));
        let zero = Receiving::try_parse_from(["x", "--listen", "1", "--idle-timeout", "0s"]);
        assert_eq!(zero.unwrap_err().exit_code(), 2);
    }

    fn parse(args: &[&str]) -> Result<All, clap::Error> {
        All::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
    }

    #[test]
    fn fps_parses_to_a_frame_rate_in_vdifs_range() {
        assert_eq!(
            parse(&["--fps", "8000"]).unwrap().fps.fps.map(FrameRate::get),
            Some(8000)
        );
        assert_eq!(
            parse(&["--fps", "16777216"]).unwrap().fps.fps.map(FrameRate::get),
            Some(1 << 24)
        );
        assert_eq!(parse(&[]).unwrap().fps, FpsArg::default());
        for bad in ["0", "16777217", "-1", "8k", "1.5"] {
            let e = parse(&[&format!("--fps={bad}")]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("--fps"), "{e}");
        }
        let e = parse(&["--fps", "0"]).unwrap_err().to_string();
        assert!(e.contains("0 frames per second"), "{e}");
    }

    #[test]
    fn rate_parses_a_bit_rate() {
        let bps = |args: &[&str]| parse(args).unwrap().rate.rate.map(vdif::BitRate::get);
        assert_eq!(bps(&["--rate", "4096M"]), Some(4_096_000_000));
        assert_eq!(bps(&["--rate", "2.048G"]), Some(2_048_000_000));
        // Whole bits per second, or refused (a float once took 0.5 b/s and paced by it).
        assert!(parse(&["--rate", "1.0000005k"]).is_err());
        assert_eq!(parse(&[]).unwrap().rate.rate, None);
        assert_eq!(parse(&["--rate", "fast"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn key_file_is_read_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let (good, short) = (d.path().join("k"), d.path().join("s"));
        std::fs::write(&good, "0123456789abcdef0123\n").unwrap();
        std::fs::write(&short, "short").unwrap();
        let a = parse(&["--key-file", good.to_str().unwrap()]).unwrap();
        assert_eq!(a.key.read().unwrap().as_deref(), Some(&b"0123456789abcdef0123"[..]));
        assert_eq!(parse(&[]).unwrap().key.read().unwrap(), None);
        let a = parse(&["--key-file", short.to_str().unwrap()]).unwrap();
        let e = a.key.read().unwrap_err();
        assert!(e.downcast_ref::<crate::UsageError>().is_some(), "{e}");
    }

    #[test]
    fn quiet_has_a_short_form() {
        assert!(parse(&["-q"]).unwrap().quiet.quiet);
        assert!(parse(&["--quiet"]).unwrap().quiet.quiet);
        assert!(!parse(&[]).unwrap().quiet.quiet);
    }
}
