//! The other formats that turn up where VDIF is expected, named from a stream's first bytes,
//! so that "not VDIF" can say what the bytes are instead.
//!
//! Each is recognised only by a signature that random or VDIF bytes do not show by chance:
//!
//! - **Mark5B** (Mark 5B System User's Manual, Haystack, Appendix "Mark 5B data format"):
//!   10 016-byte frames, a 16-byte header whose word 0 is the sync word 0xABADDEED (stored
//!   little-endian), then 10 000 bytes of data. Named when the sync word appears twice, one
//!   frame apart (or once at offset 0 of a stream shorter than two frames).
//! - **Mark4** (Mark IIIA/IV/VLBA tape formats, Haystack Mark 4 memo 230.3, and baseband's
//!   `mark4.header`): `ntrack` (8, 16, 32 or 64) bit streams recorded side by side, one bit of
//!   every track per `ntrack/8` bytes; a frame is 20 000 bits of each track (2 500 × ntrack
//!   bytes) starting with a 160-bit track header whose word 2 is the sync pattern, 32 ones. In
//!   the recording that is 4 × ntrack bytes of 0xFF at byte 8 × ntrack of the frame, after a
//!   bit of all tracks that is 0 (the last bit of word 1, as mark5access and baseband assume).
//!   Named when that pattern appears twice, one frame apart.
//! - **DADA** (PSRDADA software specification, §"Header"): an ASCII header of `KEY value`
//!   lines, HDR_SIZE bytes long (4096 by default), with HDR_VERSION and HDR_SIZE among its keys,
//!   before the data. Named when the stream starts with text holding both keys.
//! - **GUPPI raw** (NRAO GUPPI raw format; Lebofsky et al. 2019, PASP 131, 124505, App. A): blocks,
//!   each a FITS-like header of 80-character ASCII cards `KEYWORD = value` ending with an
//!   `END` card, then BLOCSIZE bytes of data. Named when the stream starts with such cards, an
//!   END card among them, and a BLOCSIZE card (its BACKEND — GUPPI, PUPPI, VEGAS, BLP… — is
//!   quoted). A plain FITS file (first card `SIMPLE  =`, FITS 4.0 §4.4.1.1) is named as FITS.
//! - **GSB** (the GMRT software backend) data files are *not* recognised: its raw-voltage and
//!   phased files are bare samples, with no header, sync word or time stamp in them, so nothing
//!   in their bytes tells them from any other samples (baseband's `file_info` cannot tell them
//!   either). Their times are in a separate ASCII `.timestamp` file, one line per block
//!   (`YYYY MM DD HH MM SS 0.fraction`, seven numbers, then more for phased data); that file is
//!   named when given instead of the data.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Word 0 of a Mark5B frame header, the sync word. Found in words 4–7 of an EDV 0 VDIF header
/// it means Mark5B frames were wrapped in VDIF headers without saying so (EDV 0xab would).
pub const MARK5B_SYNC_WORD: u32 = 0xABAD_DEED;
/// Bytes of a Mark5B frame: a 16-byte header and 10 000 bytes of data.
pub const MARK5B_FRAME_LEN: usize = 10_016;
/// Bytes of a Mark4 frame per track (20 000 bits).
pub const MARK4_FRAME_BYTES_PER_TRACK: usize = 2_500;
/// Track counts of Mark4 recordings, most first (a 64-track sync pattern contains a 32-track one).
const MARK4_TRACKS: [usize; 4] = [64, 32, 16, 8];
/// Bytes of the start of a stream kept to name its format: two frames of 64-track Mark4
/// (2 × 160 000 bytes) wherever the first begins, and more than a DADA or GUPPI header.
pub const IDENTIFY_BYTES: usize = 512 << 10;
/// Length of a GUPPI (FITS) header card.
const CARD_LEN: usize = 80;

/// A format that is not VDIF, recognised from a stream's first bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "snake_case")]
pub enum KnownFormat {
    /// Mark5B frames.
    Mark5b {
        /// Offsets of the sync words found (one or two).
        sync_offsets: Vec<u64>,
    },
    /// Mark4 frames.
    Mark4 {
        /// Tracks (bit streams) recorded.
        tracks: u32,
        /// Offsets of the two sync patterns found, one frame apart.
        sync_offsets: [u64; 2],
    },
    /// A DADA file.
    Dada {
        /// Its HDR_VERSION value.
        hdr_version: String,
        /// Its HDR_SIZE value.
        hdr_size: String,
    },
    /// GUPPI raw data (also written by PUPPI, VEGAS and Breakthrough Listen).
    GuppiRaw {
        /// The BACKEND card's value, if any.
        backend: Option<String>,
        /// Bytes of the first header, END card included.
        header_bytes: u64,
    },
    /// A FITS file.
    Fits,
    /// A GSB time-stamp file (its samples are in a separate headerless file).
    GsbTimestamps,
}

impl fmt::Display for KnownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let offsets = |o: &[u64]| o.iter().map(u64::to_string).collect::<Vec<_>>().join(" and ");
        match self {
            KnownFormat::Mark5b { sync_offsets } => write!(
                f,
                "Mark5B data (the Mark5B sync word 0xABADDEED at offset {}; {MARK5B_FRAME_LEN}-byte frames)",
                offsets(sync_offsets)
            ),
            KnownFormat::Mark4 { tracks, sync_offsets } => write!(
                f,
                "Mark4 data, {tracks} tracks (the sync pattern, a word of ones in every track, at offsets {}; {}-byte frames)",
                offsets(sync_offsets),
                *tracks as usize * MARK4_FRAME_BYTES_PER_TRACK
            ),
            KnownFormat::Dada { hdr_version, hdr_size } => write!(
                f,
                "a DADA file (ASCII header at offset 0: HDR_VERSION {hdr_version}, HDR_SIZE {hdr_size})"
            ),
            KnownFormat::GuppiRaw { backend, header_bytes } => write!(
                f,
                "GUPPI raw data (FITS-like 80-character header cards to END in its first {header_bytes} bytes{})",
                backend.as_ref().map_or(String::new(), |b| format!(", BACKEND = '{b}'"))
            ),
            KnownFormat::Fits => write!(f, "a FITS file (first header card SIMPLE)"),
            KnownFormat::GsbTimestamps => write!(
                f,
                "a GSB time-stamp file (lines of YYYY MM DD HH MM SS 0.fraction; the GSB samples are in a separate file without header, which nothing can recognise)"
            ),
        }
    }
}

/// The known format of a stream whose first bytes are `prefix` (at most [`IDENTIFY_BYTES`] are
/// looked at); `whole` says that `prefix` is the entire stream.
pub fn identify(prefix: &[u8], whole: bool) -> Option<KnownFormat> {
    let prefix = &prefix[..prefix.len().min(IDENTIFY_BYTES)];
    dada(prefix)
        .or_else(|| cards(prefix))
        .or_else(|| gsb_timestamps(prefix))
        .or_else(|| mark5b(prefix, whole))
        .or_else(|| mark4(prefix))
}

/// The first offset `p` (in order) where `needle` occurs at `p` and again at `p + period`.
fn twice(hay: &[u8], needle: &[u8], period: usize) -> Option<usize> {
    memchr::memmem::find_iter(hay, needle).find(|&p| hay.get(p + period..).is_some_and(|r| r.starts_with(needle)))
}

fn mark5b(b: &[u8], whole: bool) -> Option<KnownFormat> {
    let sync = MARK5B_SYNC_WORD.to_le_bytes();
    if let Some(p) = twice(b, &sync, MARK5B_FRAME_LEN) {
        return Some(KnownFormat::Mark5b {
            sync_offsets: vec![p as u64, (p + MARK5B_FRAME_LEN) as u64],
        });
    }
    (whole && b.len() < 2 * MARK5B_FRAME_LEN && b.starts_with(&sync))
        .then(|| KnownFormat::Mark5b { sync_offsets: vec![0] })
}

fn mark4(b: &[u8]) -> Option<KnownFormat> {
    MARK4_TRACKS.iter().find_map(|&tracks| {
        // One time step of all tracks at 0 (the bit before the sync word), then 32 of all ones.
        let unit = tracks / 8;
        let mut needle = vec![0u8; unit];
        needle.resize(unit + 32 * unit, 0xff);
        let period = tracks * MARK4_FRAME_BYTES_PER_TRACK;
        twice(b, &needle, period).map(|p| KnownFormat::Mark4 {
            tracks: tracks as u32,
            sync_offsets: [(p + unit) as u64, (p + unit + period) as u64],
        })
    })
}

/// The value of `key` on a `KEY value` line of a DADA header.
fn dada_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some(key)).then(|| words.next().unwrap_or(""))
    })
}

fn dada(b: &[u8]) -> Option<KnownFormat> {
    // The header is text up to its first NUL (the rest of HDR_SIZE is padding).
    let head = &b[..b.len().min(4096)];
    let text = &head[..head.iter().position(|&c| c == 0).unwrap_or(head.len())];
    if text.is_empty() || !text.iter().all(|&c| c.is_ascii_graphic() || c.is_ascii_whitespace()) {
        return None;
    }
    let text = std::str::from_utf8(text).ok()?;
    Some(KnownFormat::Dada {
        hdr_version: dada_value(text, "HDR_VERSION")?.to_string(),
        hdr_size: dada_value(text, "HDR_SIZE")?.to_string(),
    })
}

/// A GSB time-stamp file: its first lines (all of them, up to the first four) each start with a
/// date and time as numbers, a year from 1990, a month, a day, hours, minutes, seconds and a
/// fraction `0.…` of the second.
fn gsb_timestamps(b: &[u8]) -> Option<KnownFormat> {
    let text = std::str::from_utf8(&b[..b.len().min(4096)]).ok()?;
    let lines: Vec<&str> = text.lines().take(4).collect();
    let stamp = |l: &str| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let num = |i: usize, lo: u32, hi: u32| {
            f.get(i)
                .and_then(|v| v.parse::<u32>().ok())
                .is_some_and(|v| (lo..=hi).contains(&v))
        };
        f.len() >= 7
            && num(0, 1990, 2100)
            && num(1, 1, 12)
            && num(2, 1, 31)
            && num(3, 0, 23)
            && num(4, 0, 59)
            && num(5, 0, 60)
            && f[6]
                .strip_prefix("0.")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
    };
    (lines.len() >= 2 && lines.iter().take(lines.len() - 1).all(|l| stamp(l))).then_some(KnownFormat::GsbTimestamps)
}

/// GUPPI raw or FITS: header cards of 80 printable characters from offset 0.
fn cards(b: &[u8]) -> Option<KnownFormat> {
    let mut backend = None;
    let mut blocsize = false;
    for (i, card) in b.chunks_exact(CARD_LEN).enumerate() {
        if !card.iter().all(|&c| (0x20..0x7f).contains(&c)) {
            return None;
        }
        let key = std::str::from_utf8(&card[..8]).ok()?.trim_end();
        if i == 0 && key == "SIMPLE" && &card[8..10] == b"= " {
            return Some(KnownFormat::Fits);
        }
        if key == "END" && card[3..].iter().all(|&c| c == b' ') {
            return blocsize.then(|| KnownFormat::GuppiRaw {
                backend,
                header_bytes: ((i + 1) * CARD_LEN) as u64,
            });
        }
        let keyword = !key.is_empty()
            && key
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
        if !keyword || &card[8..10] != b"= " {
            return None;
        }
        let value = std::str::from_utf8(&card[10..]).ok()?.trim();
        match key {
            "BLOCSIZE" => blocsize = true,
            "BACKEND" => backend = Some(value.trim_matches('\'').trim().to_string()),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn card(s: &str) -> Vec<u8> {
        format!("{s:<80}").into_bytes()
    }

    #[test]
    fn guppi_and_fits_cards() {
        let mut g: Vec<u8> = ["BACKEND = 'GUPPI   '", "BLOCSIZE=              33554432", "END"]
            .iter()
            .flat_map(|c| card(c))
            .collect();
        g.extend([0x5a; 1000]);
        assert_eq!(
            identify(&g, true),
            Some(KnownFormat::GuppiRaw {
                backend: Some("GUPPI".into()),
                header_bytes: 240
            })
        );
        // Cards without BLOCSIZE are no GUPPI block; an unended header is not named.
        let no_bloc: Vec<u8> = ["BACKEND = 'GUPPI'", "END"].iter().flat_map(|c| card(c)).collect();
        assert_eq!(identify(&no_bloc, true), None);
        assert_eq!(identify(&g[..160], true), None);
        let fits: Vec<u8> = ["SIMPLE  =                    T", "END"]
            .iter()
            .flat_map(|c| card(c))
            .collect();
        assert_eq!(identify(&fits, true), Some(KnownFormat::Fits));
    }

    #[test]
    fn a_dada_header_is_named_dada() {
        let mut d = b"HEADER       DADA\nHDR_VERSION  1.0\nHDR_SIZE     4096\n".to_vec();
        d.resize(4096, 0);
        d.extend([0x80; 100]);
        assert_eq!(
            identify(&d, true),
            Some(KnownFormat::Dada {
                hdr_version: "1.0".into(),
                hdr_size: "4096".into()
            })
        );
        assert_eq!(identify(b"HDR_VERSION 1.0\n", true), None, "no HDR_SIZE");
    }

    #[test]
    fn mark5b_needs_two_sync_words_a_frame_apart() {
        let mut m = vec![0x11u8; 3 * MARK5B_FRAME_LEN];
        for k in 0..3 {
            m[5 + k * MARK5B_FRAME_LEN..][..4].copy_from_slice(&MARK5B_SYNC_WORD.to_le_bytes());
        }
        assert_eq!(
            identify(&m, false),
            Some(KnownFormat::Mark5b {
                sync_offsets: vec![5, 5 + MARK5B_FRAME_LEN as u64]
            })
        );
        // One sync word in a long stream is not enough; at offset 0 of a one-frame file it is.
        assert_eq!(identify(&m[..MARK5B_FRAME_LEN], false), None);
        assert!(identify(&m[5..5 + MARK5B_FRAME_LEN], true).is_some());
    }

    #[test]
    fn mark4_tracks_from_the_sync_pattern_spacing() {
        for tracks in [8usize, 16, 32, 64] {
            let frame = tracks * MARK4_FRAME_BYTES_PER_TRACK;
            let mut m = vec![0x33u8; 2 * frame + 4000];
            for k in 0..2 {
                let sync = 1000 + k * frame + 8 * tracks;
                m[sync - tracks / 8..sync].fill(0);
                m[sync..sync + 4 * tracks].fill(0xff);
            }
            assert_eq!(
                identify(&m, false),
                Some(KnownFormat::Mark4 {
                    tracks: tracks as u32,
                    sync_offsets: [(1000 + 8 * tracks) as u64, (1000 + 8 * tracks + frame) as u64]
                }),
                "{tracks} tracks"
            );
        }
    }

    #[test]
    fn gsb_time_stamps_but_not_its_samples() {
        let raw =
            b"2015 04 27 18 45 00 0.000000240 \n2015 04 27 18 45 00 0.251658480 \n2015 04 27 18 45 00 0.503316720 \n";
        assert_eq!(identify(raw, true), Some(KnownFormat::GsbTimestamps));
        let phased = b"2013 07 28 02 53 55 0.517535 2013 07 28 02 53 55 0.324108800 9995 3 \n2013 07 28 02 53 55 0.769434 2013 07 28 02 53 55 0.575767040 9996 4 \n";
        assert_eq!(identify(phased, true), Some(KnownFormat::GsbTimestamps));
        assert_eq!(
            identify(b"2015 13 27 18 45 00 0.1\n2015 13 27 18 45 00 0.2\n", true),
            None
        );
    }

    proptest! {
        /// Random bytes are no known format, and nothing panics on any input.
        #[test]
        fn random_bytes_are_no_known_format(b in proptest::collection::vec(any::<u8>(), 0..30_000), whole in any::<bool>()) {
            prop_assert_eq!(identify(&b, whole), None);
        }
    }
}
