//! What a relay reports of its inputs: each sender (input, address) counted like jive5ab's
//! `udpsnor`, and each station as it came in and went out.

use serde::{Deserialize, Serialize};
use vdif::StationId;

use super::RefusedSource;

/// One sender (input and address) as the relay saw it, counted like jive5ab's `udpsnor`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSender {
    /// Index of the input (the `--listen` it came to).
    pub input: u16,
    /// Its address.
    pub source: String,
    /// Datagrams from it (valid or not).
    pub datagrams: u64,
    /// Frames from it that were taken.
    pub frames: u64,
    /// Bytes from it.
    pub bytes: u64,
    /// Lowest and highest packet serial number seen (jive5ab/native framing).
    pub seq_first: Option<u64>,
    /// Highest packet serial number seen.
    pub seq_last: Option<u64>,
    /// Serial numbers between the lowest and the highest that did not come.
    pub lost: u64,
    /// Datagrams whose serial number was below one already seen (RFC 4737 §3.3).
    pub reordered: u64,
    /// Largest reordering extent (RFC 4737 §4.2.2): how many datagrams with a higher serial
    /// number came before a reordered one, over the last [`crate::relay::EXTENT_HISTORY`].
    pub reorder_extent_max: u64,
    /// Keep-alives sent back to it (`--ack`).
    pub acks_sent: u64,
    /// VDIF stations it sent.
    pub stations: Vec<String>,
    /// VDIF thread ids it sent.
    pub threads: Vec<u16>,
}

/// The senders not reported one by one, summed: beyond the [`crate::relay::REPORTED_SENDERS`] that gave the
/// most frames, and those no longer counted one by one (quiet, their place taken).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherSenders {
    /// How many.
    pub senders: u64,
    /// Datagrams from them.
    pub datagrams: u64,
    /// Frames from them that were taken.
    pub frames: u64,
    /// Bytes from them.
    pub bytes: u64,
    /// Keep-alives sent back to them.
    pub acks_sent: u64,
}

impl OtherSenders {
    pub(crate) fn add(&mut self, s: &InputSender) {
        self.senders += 1;
        self.datagrams += s.datagrams;
        self.frames += s.frames;
        self.bytes += s.bytes;
        self.acks_sent += s.acks_sent;
    }
}

/// A station's input, as the relay saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayedStation {
    /// Station code.
    pub station: String,
    /// VDIF station id.
    pub station_id: StationId,
    /// Output stream index (native framing).
    pub stream: Option<u16>,
    /// Frames per second per thread.
    pub frames_per_second: vdif::FrameRate,
    /// VDIF thread ids, in output order.
    pub thread_ids: Vec<u16>,
    /// Frame length, header included.
    pub frame_len: usize,
    /// Frames taken from the input (tee'd).
    pub frames_in: u64,
    /// Frames missing from the input, by the VDIF time of each thread (never invented).
    pub lost_in_input: u64,
    /// Frames that came after a later frame of their thread.
    pub reordered_in: u64,
    /// Second copies of a frame (same thread and time as the previous).
    pub duplicates_in: u64,
    /// Frames of a thread beyond the station's set (tee'd, not forwarded).
    pub unexpected_thread: u64,
    /// Frames of another format than the station's first (length, bits, channels).
    pub wrong_format: u64,
    /// Frames dropped because the station's queue was full (`buffer_bytes`).
    pub overflow_dropped: u64,
    /// Frames handed out for sending.
    pub frames_out: u64,
    /// Time each frame spent in the relay (arrival → sent), ns.
    pub queue_delay_ns: histogram::HistSummary,
    /// Sources refused as its boards (not in step with them, beside a live one, beyond its
    /// threads): neither relayed nor recorded, counted in `foreign_source`.
    #[serde(default)]
    pub refused_sources: Vec<RefusedSource>,
}

impl RelayedStation {
    /// A station first seen with these frames, nothing counted yet.
    pub fn new(station_id: StationId, frames_per_second: vdif::FrameRate, frame_len: usize) -> RelayedStation {
        RelayedStation {
            station: station_id.to_string(),
            station_id,
            stream: None,
            frames_per_second,
            thread_ids: Vec::new(),
            frame_len,
            frames_in: 0,
            lost_in_input: 0,
            reordered_in: 0,
            duplicates_in: 0,
            unexpected_thread: 0,
            wrong_format: 0,
            overflow_dropped: 0,
            frames_out: 0,
            queue_delay_ns: histogram::HistSummary::default(),
            refused_sources: Vec::new(),
        }
    }
}
