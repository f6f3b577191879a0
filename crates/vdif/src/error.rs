//! Typed errors of the VDIF crate.

use thiserror::Error;

/// A VDIF header that cannot be parsed, emitted or trusted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Fewer bytes than a header needs.
    #[error("header needs {need} bytes, only {have} available")]
    TooShort {
        /// Bytes available.
        have: usize,
        /// Bytes a header needs.
        need: usize,
    },
    /// A field value does not fit its width in the header.
    #[error("header field {field} = {value} exceeds its maximum {max}")]
    FieldOutOfRange {
        /// The header field.
        field: &'static str,
        /// The value asked for.
        value: u64,
        /// The largest value its width holds.
        max: u64,
    },
    /// The frame-length field is not larger than the header itself.
    #[error("frame length {frame_len} bytes is not larger than the {header_len}-byte header")]
    FrameShorterThanHeader {
        /// Frame length from the header, bytes.
        frame_len: usize,
        /// Header length, bytes (16 or 32).
        header_len: usize,
    },
    /// The data array does not hold a whole number of complete samples.
    #[error(
        "data array of {data_len} bytes does not hold whole samples of {bits_per_sample} bit(s) x {channels} channel(s){}",
        if *complex { " (complex)" } else { "" }
    )]
    IncompleteSamples {
        /// Data array length, bytes.
        data_len: usize,
        /// Bits per sample.
        bits_per_sample: u8,
        /// Channels per frame.
        channels: u32,
        /// Complex samples (two values each).
        complex: bool,
    },
    /// A station name that is neither a code (a letter, then a letter or digit) nor a number 0..=65535.
    #[error("station {0:?} is neither a code (a letter, then a letter or digit: Ef, O8) nor a number 0..=65535")]
    BadStation(String),
}

/// A frame layout requested by a user that VDIF cannot represent.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LayoutError {
    /// Data array length is not a multiple of 8 bytes (VDIF 1.1.1 §3, note 4).
    #[error("frame data size {0} bytes is not a multiple of 8 (VDIF frames are counted in 8-byte units)")]
    NotMultipleOf8(usize),
    /// Data array length of zero or larger than the frames the scanner believes
    /// ([`crate::scan::MAX_SCAN_FRAME_LEN`]).
    #[error("frame data size {0} bytes is outside 8..={max}", max = crate::sizes::MAX_SCAN_FRAME_LEN - crate::sizes::HEADER_LEN)]
    FrameSize(usize),
    /// Bits per sample not supported by the sample codec.
    #[error("{0} bits per sample is not supported (1 or 2)")]
    Bits(u8),
    /// Channel count is not a power of two, or threads do not divide it.
    #[error("{channels} channel(s) over {threads} thread(s): channels per thread must be a power of two 1..=2^31")]
    Channels {
        /// Channels asked for.
        channels: u32,
        /// Threads asked for.
        threads: u32,
    },
    /// Thread count outside 1..=1024.
    #[error("{0} threads: VDIF thread ids have 10 bits, so 1..=1024")]
    Threads(u32),
    /// The data rate does not give a whole number of frames per second.
    #[error("{rate_bps} b/s over {threads} thread(s) with {data_len}-byte frames is {fps} frames/s per thread; VDIF needs a whole number (try another --frame or --rate)")]
    FractionalFrameRate {
        /// Data rate asked for, b/s.
        rate_bps: f64,
        /// Threads it is spread over.
        threads: u32,
        /// Data array length, bytes.
        data_len: usize,
        /// Frames per second per thread that gives.
        fps: f64,
    },
    /// The data array does not hold a whole number of time samples.
    #[error("{data_len}-byte frames do not hold a whole number of {bits}-bit x {channels}-channel samples")]
    IncompleteSamples {
        /// Data array length, bytes.
        data_len: usize,
        /// Bits per sample.
        bits: u8,
        /// Channels per thread.
        channels: u32,
    },
    /// Frames per second exceed the 24-bit frame-number field.
    #[error("{0} frames per second exceed the 24-bit frame-number field")]
    TooManyFrames(u64),
}

/// Sample encoding/decoding failures.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// No agreed reconstruction levels for this width (the decoder takes 1, 2, 4 and 8 bits).
    #[error("cannot decode {bits}-bit{} samples (evlbi decodes 1-, 2-, 4- and 8-bit samples, real or complex)", if *complex { " complex" } else { "" })]
    Unsupported {
        /// Bits per sample of the frames.
        bits: u8,
        /// Complex samples.
        complex: bool,
    },
    /// The encoder (packing codes) writes 1- and 2-bit samples only.
    #[error("cannot encode {bits}-bit samples (the encoder writes 1- and 2-bit)")]
    Encoding {
        /// Bits per sample asked for.
        bits: u8,
    },
    /// Buffer length does not match the sample count.
    #[error("buffer of {have} bytes, {need} needed")]
    Length {
        /// Bytes given.
        have: usize,
        /// Bytes the sample count needs.
        need: usize,
    },
}

/// VTP/udps datagram errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VtpError {
    /// Datagram shorter than the 8-byte sequence number plus a header.
    #[error("datagram of {0} bytes is too short for an 8-byte sequence number and a VDIF header")]
    TooShort(usize),
    /// The frame inside has a bad header.
    #[error("bad VDIF header in datagram: {0}")]
    Header(#[from] HeaderError),
    /// The frame-length field disagrees with the datagram length.
    #[error("VDIF header says {header} bytes but the datagram carries {carried}")]
    LengthMismatch {
        /// Frame length the header states, bytes.
        header: usize,
        /// Bytes the datagram carries after the sequence number.
        carried: usize,
    },
}
