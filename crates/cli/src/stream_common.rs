//! What `stream send`, `stream recv` and `stream relay` share: the framing and split flags,
//! the summary lines of a recording and of refused datagrams, and how a stream session's error
//! becomes an exit code.

use clap::ValueEnum;
use stream::SeqFormat;
use stream_session::StreamSessionError;

use crate::units::parse_multiple;
use crate::usage;

/// How recordings are split into files.
#[derive(Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Split {
    /// One continuous file per station, its threads interleaved in time order.
    #[default]
    Station,
    /// One continuous file per VDIF thread of each station (STATION_tTHREAD_UTC.vdif), as
    /// correlators that read threads apart want.
    Thread,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// evlbi's 24-byte prefix: sequence number, stream, frame rate, threads.
    Native,
    /// jive5ab udps: 8-byte little-endian sequence number.
    Jive5ab,
    /// Bare VDIF frames.
    None,
}

impl From<Format> for SeqFormat {
    fn from(f: Format) -> SeqFormat {
        match f {
            Format::Native => SeqFormat::Native,
            Format::Jive5ab => SeqFormat::Jive5ab,
            Format::None => SeqFormat::None,
        }
    }
}

/// What a vbs/Mark6 recording wrote: per scan, per disk, and each disk that left the set.
pub fn recording_lines(rec: &scanfmt::results::RecordingReport) {
    let layout = rec.layout.map_or("?", |l| l.as_str());
    for s in &rec.scans {
        status!(
            "  {layout}://{}: {} frames ({} filled) in {} blocks, {} bytes",
            s.scan,
            s.frames,
            s.filled,
            s.blocks,
            s.bytes
        );
    }
    for d in &rec.disks {
        let free = d.free_bytes.map_or(String::new(), |f| format!(", {f} bytes free"));
        let full = if d.passed_over_full > 0 {
            format!(" (full: passed over for {} blocks)", d.passed_over_full)
        } else {
            String::new()
        };
        status!(
            "  disk {}: {} blocks, {} bytes{free}{full}{}",
            d.path,
            d.blocks,
            d.bytes,
            d.error
                .as_ref()
                .map_or(String::new(), |e| format!(" — DROPPED from the set: {e}"))
        );
    }
    if rec.disks_dropped > 0 || rec.frames_not_written > 0 {
        status!(
            "{} disk(s) dropped, {} frames not written; the scans are readable on the other disks",
            rec.disks_dropped,
            rec.frames_not_written
        );
    }
}

/// The lines on refused datagrams of a receiving command (`recv`, `relay`).
pub fn rejected_lines(d: &stream::DatagramCounters, first_problem: Option<&str>) {
    if d.rejected() > 0 {
        status!("rejected datagrams: {} ({})", d.rejected(), first_problem.unwrap_or(""));
    }
    if d.phantoms_dropped > 0 {
        // Not "never sent a run": a source refused beside a station's sender, or waiting for a
        // slot, is forgotten too, with a run (issue 36: "never sent a run (0 datagrams)").
        status!(
            "{} source(s) forgotten without becoming a station: {} datagrams never formed a run, {} refused \
             as a station's second sender or not its board, {} beyond --max-stations",
            d.phantoms_dropped,
            d.unconfirmed,
            d.foreign_source,
            d.too_many_stations
        );
    }
}

/// `--catch-up`: a multiple of the rate, 1 to 16.
pub fn parse_catch_up(s: &str) -> Result<f64, String> {
    parse_multiple(s, 1.0, 16.0)
}

/// A stream session's error: what was asked cannot work (bad configuration, an input that
/// cannot be streamed) is a usage error (exit 2), anything that failed while running exit 1.
pub fn session_error(e: StreamSessionError) -> anyhow::Error {
    if e.is_usage() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}
