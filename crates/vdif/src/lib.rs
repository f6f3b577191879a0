//! VDIF (VLBI Data Interchange Format, release 1.1.1) for evlbi: frame headers, the VTP/udps
//! datagram prefix, the 1/2/4/8-bit real and complex sample codec, a garbage-tolerant frame
//! scanner with bounded memory, the one "is this VDIF" check every reader applies (naming
//! Mark5B, Mark4, DADA and GUPPI data when seen), file inspection, sampler statistics, VDIF
//! time (leap seconds counted) and a multi-station signal generator (real or complex).
//!
//! The crate does no I/O of its own beyond `std::io::Read`/`Write` handed to it.
//!
//! ```
//! use vdif::{FrameLayout, VdifHeader};
//! let layout = FrameLayout::new(512e6, 2, 8, 1, 8000).unwrap();
//! let mut h = layout.header(vdif::StationId::parse("Ef").unwrap());
//! h.seconds = 12;
//! let bytes = h.to_bytes().unwrap();
//! assert_eq!(VdifHeader::parse_valid(&bytes).unwrap(), h);
//! assert_eq!(h.station_id.to_string(), "Ef");
//! ```

pub mod bitrate;
pub mod check;
pub mod codec;
pub mod error;
pub mod formats;
pub mod frame_format;
pub mod gauss;
pub mod gen;
pub mod header;
pub mod inspect;
pub mod layout;
pub mod mark5b;
pub mod mark5b_file;
pub mod rate;
pub mod scan;
mod sizes;
pub mod station;
pub mod stats;
pub mod time;
pub mod vtp;

pub use bitrate::{BitRate, BitRateError};
pub use check::CheckedFrames;
pub use error::{CodecError, HeaderError, LayoutError, VtpError};
pub use frame_format::{FrameError, FrameFormat};
pub use header::{VdifHeader, HEADER_LEN, LEGACY_HEADER_LEN};
pub use layout::FrameLayout;
pub use mark5b::{Mark5bError, Mark5bHeader};
pub use rate::{FrameRate, RateError, RateSource, SourcedRate};
pub use scan::{FrameScanner, ScanEvent};
pub use station::StationId;
