//! `evlbi`: the thin command-line front end. Parsing and printing live here; every capability
//! lives in a library crate.
//!
//! Exit codes: 0 success, 1 runtime failure (I/O, bad data found), 2 usage error, 141 the reader
//! of the output went away (`evlbi … | head`).

/// A status line on stderr from a long-running command (a recorder, a server, a sender): a
/// reader that went away (a closed log pipe, `| head`) must not stop the data, so a failed
/// write is ignored here instead of ending the process as other output does (exit 141).
macro_rules! status {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod addr;
mod flags;
mod linkemu_cmd;
mod metrics_flag;
mod model_cmd;
mod peer_rates;
mod probe_cmd;
mod probe_multi;
mod probe_print;
mod probe_tcp;
mod report_cmd;
mod scan_args;
mod serve_cmd;
mod serve_config;
mod session_flags;
mod shared_args;
mod stream_cmd;
mod stream_common;
mod stream_print;
mod stream_recv_cmd;
mod stream_relay_cmd;
mod transfer_cmd;
mod transfer_print;
mod units;
mod vdif_args;
mod vdif_cmd;
mod vdif_print;
mod vdif_scan_cmd;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use clap::{Parser, Subcommand};

/// A usage error found after parsing (inconsistent flag values): exit code 2. Its message says
/// what is wrong in flags; where a library refused the value, its typed error is kept as the
/// source ([`UsageError::session`] for a stream session's).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl UsageError {
    /// Flag values that do not go together, said in flags.
    pub fn new(text: String) -> UsageError {
        UsageError {
            message: text,
            source: None,
        }
    }

    /// A stream session's refusal (its settings, or an input), said in flags.
    pub fn of_session(text: String, e: stream_session::StreamSessionError) -> UsageError {
        UsageError {
            message: text,
            source: Some(Box::new(e)),
        }
    }

    /// The stream session's error it says in flags, if a session refused.
    pub fn session(&self) -> Option<&stream_session::StreamSessionError> {
        self.source.as_deref()?.downcast_ref()
    }
}

/// A progress bar on stderr in the given indicatif `template`; drawn only when stderr is a
/// terminal, and not at all when `hidden` (JSON output, --quiet, short work).
pub fn progress_bar(total: u64, hidden: bool, template: &str) -> indicatif::ProgressBar {
    if hidden {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}

/// A usage error as an `anyhow::Error` (exit code 2), found by the binary itself.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError {
        message: msg.into(),
        source: None,
    })
}

/// A library's refusal of what a flag gave as a usage error: its message, the error kept as the
/// source.
pub fn usage_of(e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
    anyhow::Error::new(UsageError {
        message: e.to_string(),
        source: Some(Box::new(e)),
    })
}

/// [`usage_of`], the message led by `what` (the flag): `--disks: …`.
pub fn usage_in(what: impl std::fmt::Display, e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
    anyhow::Error::new(UsageError {
        message: format!("{what}: {e}"),
        source: Some(Box::new(e)),
    })
}

/// A flag set when SIGINT/SIGTERM/SIGHUP arrives, so the loops stop and still report.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    netio::install_stop_signals().context("installing signal handlers")?;
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || loop {
        if netio::stop_signal().is_some() {
            f.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    });
    Ok(flag)
}

/// Fewest bytes a pre-shared key may have (128 bits if random): a short key falls to guessing
/// through the challenge-response, offline too, since a recorded proof can be checked per guess.
pub const MIN_KEY_BYTES: usize = 16;

/// Most bytes of a key file: a key is tens of bytes; anything longer is not one.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;

/// A small file the operator named (a key, a config, a result file, a font), read whole through
/// the one bounded reader ([`safedir::read_regular`]: a regular file, at most `max` bytes); the
/// reason it cannot be, for a message that names the file itself.
pub fn read_named(path: &std::path::Path, max: u64) -> Result<Vec<u8>, String> {
    safedir::read_regular(path, max).map_err(|e| match e {
        safedir::DirError::Io { source, .. } => source.to_string(),
        safedir::DirError::NotRegular(_) => "not a regular file".into(),
        safedir::DirError::TooLarge { max, .. } => format!("larger than {max} bytes"),
        e => e.to_string(),
    })
}

/// Read a pre-shared key file (surrounding whitespace ignored, so an editor's trailing newline
/// does not count): a file that is not a regular one, or holds more than
/// [`MAX_KEY_FILE_BYTES`] or fewer than [`MIN_KEY_BYTES`], is a usage error; a file others may
/// read is used, with a warning on stderr.
pub fn read_key(path: &Option<std::path::PathBuf>) -> anyhow::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::PermissionsExt;
    let Some(p) = path else { return Ok(None) };
    let k = read_named(p, MAX_KEY_FILE_BYTES)
        .map_err(|why| usage(format!("cannot read key file {}: {why}", p.display())))?;
    let k = k.trim_ascii().to_vec();
    if k.len() < MIN_KEY_BYTES {
        return Err(usage(format!(
            "key file {} holds {} byte(s); a pre-shared key needs at least {MIN_KEY_BYTES}. Make one with \
             `(umask 077; head -c 32 /dev/urandom | base64 > {0})` and copy it to the other end",
            p.display(),
            k.len()
        )));
    }
    // Warn, not refuse: who else may read it is a local decision (e.g. a group of service
    // accounts), and the key itself is sound.
    if let Ok(meta) = std::fs::metadata(p) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "warning: key file {} is readable by group or others (mode {:03o}); restrict it with `chmod 600 {0}`",
                p.display(),
                mode & 0o777
            );
        }
    }
    Ok(Some(k))
}

/// A run that completed but found problems worth a non-zero exit (report already printed).
#[derive(Debug)]
pub struct ProblemsFound(pub String);

impl std::fmt::Display for ProblemsFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProblemsFound {}

impl ProblemsFound {
    /// A receiver or relay that got no datagram at all on `addrs`, and where to look.
    pub fn nothing_arrived(addrs: &[String]) -> ProblemsFound {
        ProblemsFound(format!(
            "no datagram arrived on {} (UDP): is the sender pointed at this address and port, and does a firewall let UDP through?",
            addrs.join(", ")
        ))
    }
}

#[derive(Parser)]
#[command(
    name = "evlbi",
    version,
    about = "e-VLBI data transport and network measurement",
    long_about = "evlbi moves VLBI telescope data (VDIF) across research networks and tells the operator \
exactly what the network did to it.\n\nStart with `evlbi vdif --help`.",
    after_help = "Examples:\n  evlbi vdif gen --stations Ef,Wb --rate 512M --seconds 2 --delay Wb=1.5us --out data/\n  evlbi vdif inspect data/Ef.vdif\n  evlbi vdif stats data/Wb.vdif --json\n  evlbi linkemu --a ns:tel --b ns:corr --rate 1G --delay 50ms --loss 0.1% --burst 3 --buffer 2MB\n\nExit codes: 0 ok, 1 runtime failure or problems found in the data, 2 usage error, 141 output closed (e.g. piped into head)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// VDIF files: generate synthetic stations, inspect, sampler statistics, dump.
    #[command(subcommand)]
    Vdif(vdif_cmd::VdifCommand),
    /// WAN emulator: two network namespaces joined through a link with delay, jitter, loss,
    /// a bottleneck rate and a drop-tail buffer (this kernel has no netem).
    Linkemu(Box<linkemu_cmd::LinkemuArgs>),
    /// Measure a network path: a paced UDP stream, and what arrived (udpmon successor).
    #[command(subcommand)]
    Probe(probe_cmd::ProbeCommand),
    /// Real-time VDIF over UDP: paced sender, receiver writing continuous VDIF, optional ARQ.
    #[command(subcommand)]
    Stream(stream_cmd::StreamCommand),
    /// Models: VLBI S/N under packet loss, the Mathis TCP bound, wire rate and packet spacing.
    #[command(subcommand)]
    Model(model_cmd::ModelCommand),
    /// Reliable bulk transfer: send files and directories to an `evlbi recv` over UDP, paced
    /// by congestion control that ignores random loss, verified with BLAKE3, resumable.
    Send(transfer_cmd::SendArgs),
    /// Receive files from `evlbi send` into a directory.
    Recv(transfer_cmd::RecvArgs),
    /// Figures (PNG, SVG) and a self-contained HTML page from result JSON files.
    Report(report_cmd::ReportArgs),
    /// The station recorder daemon the Field System drives over VSI-S (jive5ab's control
    /// protocol): record scans, relay to the correlator, evlbi?/tstat?/status? while data flow.
    #[command(long_about = serve_cmd::ABOUT, after_help = serve_cmd::after_help())]
    Serve(Box<serve_cmd::ServeArgs>),
}

/// Exit status when the reader of our output went away: 128 + SIGPIPE, what a shell shows for
/// `ls | head` when `ls` is killed by the signal.
const CLOSED_OUTPUT_EXIT: i32 = 141;

/// EPIPE on Linux (the only platform evlbi runs on).
const EPIPE: i32 = 32;

/// Whether a panic message is `print!`/`println!`/`eprintln!` failing on a closed pipe: std
/// panics with "failed printing to stdout: Broken pipe (os error 32)".
fn is_closed_output_panic(msg: &str) -> bool {
    (msg.starts_with("failed printing to stdout") || msg.starts_with("failed printing to stderr"))
        && msg.ends_with(&format!("(os error {EPIPE})"))
}

/// End the process quietly (status 141, no panic message) when a print finds its reader gone,
/// e.g. `evlbi vdif inspect F | head -1`. Not by restoring SIGPIPE's default action: evlbi
/// writes to TCP peers (probe, transfer) and to the `stream recv` writer process through a pipe,
/// and there EPIPE must stay an error that is reported, not a silent death of a receiver. Every
/// print goes through std's print macros, which panic on such a failure; the hook catches exactly
/// that panic and lets any other reach the default hook.
fn exit_quietly_when_output_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload_as_str().is_some_and(is_closed_output_panic) {
            exit_output_closed();
        }
        default(info)
    }));
}

/// End the process as the hook above does when a write found its reader gone.
pub fn exit_output_closed() -> ! {
    std::process::exit(CLOSED_OUTPUT_EXIT)
}

fn main() -> ExitCode {
    // A recorder's file writer is this binary started again: it writes, then exits.
    if let Some(code) = recording::write::run_if_child() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    exit_quietly_when_output_closes();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Vdif(c) => vdif_cmd::run(c),
        Command::Linkemu(a) => linkemu_cmd::run(*a),
        Command::Model(c) => model_cmd::run(c),
        Command::Probe(c) => probe_cmd::run(c),
        Command::Stream(c) => stream_cmd::run(c),
        Command::Send(a) => transfer_cmd::run_send(a),
        Command::Recv(a) => transfer_cmd::run_recv(a),
        Command::Report(a) => report_cmd::run(a),
        Command::Serve(a) => serve_cmd::run(*a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(u) = e.downcast_ref::<UsageError>() {
                say_last(format!("error: {u}\n\nFor more information, try '--help'.\n"));
                return ExitCode::from(2);
            }
            if e.downcast_ref::<ProblemsFound>().is_some() {
                say_last(format!("evlbi: {e}\n"));
                return ExitCode::from(1);
            }
            say_last(format!("error: {e:#}\n"));
            ExitCode::from(1)
        }
    }
}

/// The run's last word on stderr in one write: `eprintln!` writes a formatted line in pieces
/// (stderr is unbuffered), so a pipe's last output (`vdif inspect --json … | head`) could land
/// inside the line (seen: "evlbi: [" then the rest of the error after the JSON). A closed
/// stderr ends the run as a closed stdout does (141); any other failure to say it is ignored,
/// as the run's exit status still says it failed.
fn say_last(text: String) {
    use std::io::Write;
    if let Err(e) = std::io::stderr().lock().write_all(text.as_bytes()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            exit_output_closed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_output_panics_are_recognised() {
        assert!(is_closed_output_panic(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(is_closed_output_panic(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        assert!(!is_closed_output_panic(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_output_panic(
            "index out of bounds: the len is 0 but the index is 32"
        ));
        assert!(!is_closed_output_panic(
            "called `Result::unwrap()` on an `Err` value: Broken pipe (os error 32)"
        ));
    }
}
