//! Results of `evlbi stream send` and `stream recv`, defined once; JSON is the source of truth.
//!
//! The host figures a run reports (UDP counters, CPU share, socket buffers) are crate
//! `hostcounters`' types, which the socket layer (`netio`) fills, so a view can read every result
//! without linking the socket code.

use histogram::HistSummary;
use serde::{Deserialize, Serialize};

use crate::arq::RetransmitStats;

mod received;
mod relayed;

pub use received::{BoardSummary, DatagramCounters, RefusedSource, SenderChange, StationSummary};
pub use relayed::{InputSender, OtherSenders, RelayedStation};

pub use hostcounters::{BufferGrant, ProcessCpuShare, UdpCounters};

/// One station's stream at the sender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentStation {
    /// Source file.
    pub file: String,
    /// Station code.
    pub station: String,
    /// Native stream index.
    pub stream: u16,
    /// Frames per second per thread.
    pub frames_per_second: vdif::FrameRate,
    /// Threads.
    pub threads: u16,
    /// Frame length, header included.
    pub frame_len: usize,
    /// Data rate paced at (sample bits, headers excluded), b/s (a float in the JSON, as always).
    #[serde(with = "vdif::bitrate::as_f64")]
    pub rate_bps: vdif::BitRate,
    /// Nominal spacing between this station's datagrams, µs.
    pub spacing_us: f64,
    /// Frames handed to the socket (first transmissions; injected drops included).
    pub frames_sent: u64,
    /// Datagram bytes handed to the socket.
    pub bytes_sent: u64,
    /// Frames dropped on purpose by `--inject-loss` (never sent).
    pub injected_drops: u64,
    /// Achieved data rate over the run, b/s.
    pub achieved_rate_bps: f64,
    /// Times the file was restarted (`--loop`).
    pub loops: u64,
    /// Times the reader could not keep up and the sender waited for data.
    pub source_underruns: u64,
    /// Garbage bytes skipped in the file.
    pub garbage_bytes: u64,
    /// Departure gaps between consecutive datagrams (bursts) of this station, ns.
    pub departure_gap_ns: HistSummary,
    /// How late after its due time each datagram (burst) left, ns.
    pub lateness_ns: HistSummary,
    /// Times the timeline was re-anchored because the sender fell more than its catch-up bound
    /// (`--max-lag`) behind.
    pub slips: u64,
    /// Time given up at those slips: the station's data rate fell short by this much time.
    #[serde(default)]
    pub slipped_s: f64,
    /// Frames never sent because their time had passed by more than the catch-up bound: a
    /// backend simulator (`--generate --start now`) keeps its frames at their VDIF time, as a
    /// backend does, so a held-up sender loses frames instead of sending them late.
    #[serde(default)]
    pub skipped_late: u64,
}

/// One sending socket of `evlbi stream send --senders K` (one board of a simulated backend):
/// where it sent from and which share of the stations' threads it carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentBoard {
    /// Local address of its socket (IP:PORT), the source a receiver sees.
    #[serde(default)]
    pub local_addr: String,
    /// Local UDP port of its socket.
    #[serde(default)]
    pub local_port: u16,
    /// Where it sent (HOST:PORT): boards may each have their own destination.
    #[serde(default)]
    pub to: String,
    /// VDIF thread ids it carried, of every station (each station's threads are split alike).
    #[serde(default)]
    pub threads: Vec<u16>,
    /// Frames (datagrams) it handed to its socket, over all stations.
    #[serde(default)]
    pub frames_sent: u64,
    /// Datagram bytes it handed to its socket.
    #[serde(default)]
    pub bytes_sent: u64,
    /// Its achieved data rate (sample bits), b/s.
    #[serde(default)]
    pub achieved_rate_bps: f64,
    /// Times its timelines were re-anchored (`--max-lag`).
    #[serde(default)]
    pub slips: u64,
}

/// `evlbi stream send` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendReport {
    /// Destination.
    pub to: String,
    /// Framing.
    pub format: crate::wire::SeqFormat,
    /// Seconds from first to last datagram.
    pub duration_s: f64,
    /// Per station (with several senders: every board's share added up).
    pub stations: Vec<SentStation>,
    /// Per sending socket (one, or `--senders K` boards); empty in results of older versions.
    #[serde(default)]
    pub senders: Vec<SentBoard>,
    /// Path MTU to the receiver as the kernel knows it.
    pub path_mtu: Option<usize>,
    /// Things the operator should know (e.g. frames larger than the path MTU).
    pub warnings: Vec<String>,
    /// Retransmissions, if ARQ was on.
    pub arq: Option<RetransmitStats>,
    /// Datagrams on the socket that were not valid NAKs.
    pub rejected_control: u64,
    /// Every datagram the destination sent back (NAKs, and e.g. the keep-alives a jive5ab sends
    /// every N datagrams so switches learn the station's address); the sender reads them all,
    /// so they never fill its socket buffer.
    #[serde(default)]
    pub returned_datagrams: u64,
    /// Send calls that found the socket buffer full and retried.
    pub send_would_block: u64,
    /// CPU of this process, % of one core.
    pub cpu: ProcessCpuShare,
    /// Host UDP counters over the run.
    pub udp: UdpCounters,
    /// Stopped by a signal before the end.
    pub interrupted: bool,
}

/// A file the receiver wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// Path.
    pub path: String,
    /// Station code.
    pub station: String,
    /// The VDIF thread id, when each thread has its own file (`--split thread`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u16>,
    /// Bytes written (whole frames).
    pub bytes: u64,
    /// Frames written.
    pub frames: u64,
    /// Of which filled invalid.
    pub filled: u64,
}

/// `evlbi stream recv` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecvReport {
    /// Address listened on.
    pub listen: String,
    /// Framing expected.
    pub format: crate::wire::SeqFormat,
    /// Output directory, or null for the memory sink.
    pub out_dir: Option<String>,
    /// Seconds from first to last datagram.
    pub duration_s: f64,
    /// Datagram counters (what never reached a station).
    pub datagrams: DatagramCounters,
    /// The first rejected datagram's reason.
    pub first_problem: Option<String>,
    /// Per station.
    pub stations: Vec<StationSummary>,
    /// Files written.
    pub files: Vec<WrittenFile>,
    /// A vbs or Mark6 recording over many disks (`--format vbs|mk6`): its disks and scans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<scanfmt::results::RecordingReport>,
    /// Frames that could not be written (disk full, unwritable output).
    pub frames_not_written: u64,
    /// The first write error.
    pub write_error: Option<String>,
    /// Received datagram rate over the run (payload bytes), b/s.
    pub received_rate_bps: f64,
    /// Receive buffer granted by the kernel.
    pub rcvbuf: BufferGrant,
    /// Host UDP counters over the run: every socket of the host, other processes' included
    /// (for context; `socket_drops` is this receiver's).
    pub udp: UdpCounters,
    /// Datagrams the kernel dropped at this receiver's socket because its buffer was full
    /// (/proc/net/udp `drops` of the socket, SO_RXQ_OVFL): this stream's loss in the host, no
    /// other process's.
    #[serde(default)]
    pub socket_drops: u64,
    /// Of those, the drops after the last datagram received: frames lost at the end of the
    /// stream, which no later frame revealed (counted as the station's `lost_at_end` when one
    /// station was receiving). 0 when the kernel gives no per-datagram drop count.
    #[serde(default)]
    pub dropped_after_last: u64,
    /// Most datagrams (frames) the kernel handed over as one buffer (UDP GRO, from a sender
    /// using GSO bursts): the kernel's drop counters count such buffers, so one drop may be up
    /// to this many frames. 1 without coalescing.
    #[serde(default)]
    pub gro_most_coalesced: u32,
    /// recvmmsg calls that returned datagrams: `datagrams.datagrams / receive_calls` is the mean
    /// batch, the system calls and wake-ups a frame costs.
    #[serde(default)]
    pub receive_calls: u64,
    /// CPU of this process, % of one core.
    pub cpu: ProcessCpuShare,
    /// CPU of the file writer process (`--out` from the CLI), % of one core; null when the
    /// writes ran in this process.
    #[serde(default)]
    pub writer_cpu: Option<ProcessCpuShare>,
    /// NAK datagrams sent.
    pub naks_sent: u64,
    /// Seconds the receiver waited for the file writer because the write buffer was full (the
    /// output takes less than the stream's rate). Kernel drops during such waits are the disk's
    /// doing, not the network's.
    #[serde(default)]
    pub writer_stall_s: f64,
    /// Times the write buffer was full.
    #[serde(default)]
    pub writer_stalls: u64,
    /// Memory between the receiver and the file writer, bytes (null for the memory sink).
    #[serde(default)]
    pub write_buffer: Option<u64>,
    /// What absorbed the output's stalls, the first of the two buffers a frame passes: the most
    /// bytes the file writer process had at once, handed over and not yet written (the most
    /// of any one disk's writer in a vbs/Mark6 recording, whose share of `write_buffer` is its
    /// own). Below its share, every stall fit in the write buffer; at it, the receiver waited
    /// (`writer_stall_s`) and the socket buffer took the rest. Null for a writer thread.
    #[serde(default)]
    pub write_buffer_peak: Option<u64>,
    /// The second buffer: the most bytes queued in the receive socket, looked at after each
    /// receive batch that came back full and each wait for the writer (SO_MEMINFO: each
    /// datagram with the kernel's overhead, as `rcvbuf.granted_rcv` counts them). Near the
    /// granted size, the socket overflowed: `socket_drops`. Null where the kernel does not say.
    #[serde(default)]
    pub socket_queue_peak: Option<u64>,
    /// The files were written with direct I/O (O_DIRECT, `--direct`).
    #[serde(default)]
    pub direct_io: bool,
    /// Why the receiver stopped.
    pub stopped_by: String,
    /// Arrival time less the VDIF time of the data (the first datagram of each receive batch),
    /// ns: from a backend sending in real time, the whole path's latency; across hosts it also
    /// holds their clocks' offset (a negative age is recorded as 1 ns).
    #[serde(default)]
    pub data_age_ns: Option<histogram::HistSummary>,
    /// Live outputs to a correlator's reader (`--out sfxc:SOCK`, `net2sfxc`): what each
    /// delivered and dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveOutputStatus>,
}

/// A live output's counts: a station's frames, in time order, written to the stream socket a
/// correlator reads (SFXC's `mk5://` reader through a unix socket or TCP, as jive5ab's
/// `net2sfxc` serves it). Every frame handed to it is sent or counted in one of the `dropped_*`,
/// `skipped_at_start` or `behind`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveOutputStatus {
    /// Where readers connect: `unix:/path` or `tcp:ADDRESS:PORT`.
    pub endpoint: String,
    /// The station it carries (the first whose frames came, unless one was named).
    pub station: Option<String>,
    /// A reader is connected now.
    pub connected: bool,
    /// Readers that connected and made their request.
    pub clients: u64,
    /// Readers refused because another one was connected (closed at once).
    pub clients_refused: u64,
    /// Connections closed without a well-formed request in time.
    pub bad_requests: u64,
    /// Frames handed to this output by the receiver (filled ones included).
    pub frames_in: u64,
    /// Frames written to readers.
    pub frames_sent: u64,
    /// Of those, filled invalid frames (lost, or nothing arrived).
    pub filled_sent: u64,
    /// Bytes written to readers.
    pub bytes_sent: u64,
    /// Frames that came while no reader was connected (not kept: the stream is live).
    pub dropped_no_reader: u64,
    /// Frames dropped because the reader took them slower than the station sent (the output's
    /// buffer was full): the receiver never waits for a reader.
    pub dropped_slow_reader: u64,
    /// Frames not sent at a reader's start (or after a drop) until a time step began, and those
    /// queued when a reader went away.
    pub skipped_at_start: u64,
    /// Frames not after the last one sent in time (the stream went back): never sent, so a
    /// reader never sees time go back.
    pub behind: u64,
    /// Bytes queued for the reader now.
    pub queued_bytes: u64,
    /// Most bytes ever queued.
    pub queued_peak_bytes: u64,
    /// How the last reader's connection ended, in words.
    pub last_disconnect: Option<String>,
}

/// What a relay's tee recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeeReport {
    /// Directory of the recordings.
    pub dir: String,
    /// Files written.
    pub files: Vec<WrittenFile>,
    /// A vbs or Mark6 recording over many disks: its disks and scans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<scanfmt::results::RecordingReport>,
    /// Frames the writer could not write (a write error).
    pub frames_not_written: u64,
    /// The first write error.
    pub write_error: Option<String>,
}

/// `evlbi stream relay` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayReport {
    /// Input addresses.
    pub listen: Vec<String>,
    /// Destination.
    pub to: String,
    /// Framing of the input.
    pub input_format: crate::wire::SeqFormat,
    /// Framing of the output.
    pub output_format: crate::wire::SeqFormat,
    /// Seconds from the first input datagram to the last.
    pub duration_s: f64,
    /// Every input datagram, by reason when refused.
    pub datagrams: DatagramCounters,
    /// The first reason a datagram was refused, in words.
    pub first_problem: Option<String>,
    /// Datagrams of senders beyond the 256 counted one by one, while all of those were live.
    pub untracked_datagrams: u64,
    /// Per sender (input, address): datagrams, lost, reordered (jive5ab `udpsnor` style); the 16
    /// that gave the most frames.
    pub senders: Vec<InputSender>,
    /// The other senders, summed.
    #[serde(default)]
    pub other_senders: OtherSenders,
    /// Per station: input continuity, queue, frames out.
    pub stations: Vec<RelayedStation>,
    /// The output streams, as a sender reports them.
    pub output: Vec<SentStation>,
    /// Repeats (native output with ARQ).
    pub arq: Option<RetransmitStats>,
    /// Datagrams the destination sent back.
    pub returned_datagrams: u64,
    /// Of those, not NAKs for a stream with ARQ.
    pub rejected_control: u64,
    /// The local recording, if `--tee`.
    pub tee: Option<TeeReport>,
    /// Datagrams the kernel dropped at the input sockets (their buffers full).
    pub socket_drops: u64,
    /// Datagrams the receive thread read but dropped: its hand-over to the relay's thread was
    /// full (`--buffer` bytes waiting to be taken: the relay's thread held up that long).
    #[serde(default)]
    pub handover_dropped: u64,
    /// Receive buffer granted per input.
    pub rcvbuf: Vec<BufferGrant>,
    /// Sends that found the socket buffer full (retried).
    pub send_would_block: u64,
    /// Host UDP counters over the run.
    pub udp: UdpCounters,
    /// Relay CPU (all threads).
    pub cpu: ProcessCpuShare,
    /// The tee's writer process CPU.
    pub writer_cpu: Option<ProcessCpuShare>,
    /// What ended the run.
    pub stopped_by: String,
    /// The output to a DiFX datastream over TCP (`--to tcp:HOST:PORT`), if so.
    #[serde(default)]
    pub live_out: Option<LiveOutputStatus>,
    /// Its last connection attempt's error while no job had the port open.
    #[serde(default)]
    pub live_out_error: Option<String>,
}

/// `evlbi stream send --to tcp:HOST:PORT` of one file to a DiFX datastream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DifxFileReport {
    /// The file.
    pub file: String,
    /// The datastream's port.
    pub to: String,
    /// Seconds from the start until the job accepted the connection.
    pub connected_after_s: f64,
    /// Frames read from the file.
    pub frames_read: u64,
    /// Frames written.
    pub frames_sent: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes between frames that were not VDIF (skipped).
    pub garbage_bytes: u64,
    /// The start rule and the fill rewriting ([`crate::feed::FeedCounts`]).
    pub feed: crate::feed::FeedCounts,
    /// Stopped before the file's end (a signal).
    pub interrupted: bool,
}

/// A running receiver's counts, handed out once per live interval (`--metrics`, `evlbi serve`):
/// totals since the start, and the last interval's rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecvStatus {
    /// Seconds since the first datagram.
    pub elapsed_s: f64,
    /// Datagram bytes per second over the last interval, bits.
    pub rate_bps: f64,
    /// Every datagram, by reason when refused.
    pub datagrams: DatagramCounters,
    /// Per station, as the final report gives them.
    pub stations: Vec<StationSummary>,
    /// Frames written (or counted, memory sink), filled ones included.
    pub frames_written: u64,
    /// Filled (invalid) frames written.
    pub frames_filled: u64,
    /// Datagrams the kernel dropped at the receive sockets.
    pub kernel_drops: u64,
    /// Seconds the receiver waited for the file writer.
    pub writer_stall_s: f64,
    /// Times the write buffer was full.
    pub writer_stalls: u64,
    /// NAK datagrams sent.
    pub naks_sent: u64,
    /// Disks that have left a multi-disk recording (vbs, Mark6) after a write error, so far;
    /// the scan goes on over the others.
    #[serde(default)]
    pub disks_dropped: u64,
    /// Frames that reached the receiver but no file or disk (a disk that failed mid-scan, a
    /// write error), so far: lost, though the network delivered them.
    #[serde(default)]
    pub frames_not_written: u64,
    /// Live outputs to a correlator's reader, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveOutputStatus>,
}

/// A running relay's counts, handed out once per live interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayStatus {
    /// Seconds since the first input datagram.
    pub elapsed_s: f64,
    /// Input datagram bytes per second over the last interval, bits.
    pub in_rate_bps: f64,
    /// Every input datagram, by reason when refused.
    pub datagrams: DatagramCounters,
    /// Per input sender: datagrams, lost, reordered; the 16 that gave the most frames.
    pub senders: Vec<InputSender>,
    /// The other senders, summed.
    #[serde(default)]
    pub other_senders: OtherSenders,
    /// Per station: input continuity, queue, frames out.
    pub stations: Vec<RelayedStation>,
    /// The output streams.
    pub output: Vec<SentStation>,
    /// Repeats (native output with ARQ).
    pub arq: Option<RetransmitStats>,
    /// Datagrams the kernel dropped at the input sockets.
    pub kernel_drops: u64,
    /// Datagrams the receive thread read but dropped: its hand-over to the relay's thread was
    /// full (the relay's thread held up for longer than `--buffer` holds).
    #[serde(default)]
    pub handover_dropped: u64,
    /// Frames waiting to be sent now.
    pub queued: u64,
}

/// A running sender's counts, handed out once per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SendStatus {
    /// Seconds since the first departure was due.
    pub elapsed_s: f64,
    /// Per station (all sockets together).
    pub stations: Vec<SentStation>,
    /// Per sending socket (`--senders K`).
    pub senders: Vec<SentBoard>,
    /// Repeats answered (ARQ).
    pub arq: Option<RetransmitStats>,
}
