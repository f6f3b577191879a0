//! FlexBuff vbs: a scan is a directory `<scan>` on each disk holding header-less chunk files
//! `<scan>.<chunk number, 8 digits>`; the scan's bytes are the chunks in number order.
//!
//! The layout, as jive5ab writes it (threadfns/multisend.cc: `scanName << "/" << scanName << "."
//! << format("%08u", chunkCount)`, one chunk per block of the recording chain, handed to
//! whichever disk writer is free) and reads it (libvbs.cc: chunks matched by
//! `^<scan>\.[0-9]{8}$` in `<mountpoint>/<scan>/`, sorted by number, sizes from the files):
//!
//! ```text
//! /mnt/disk0/ev123_no0001/ev123_no0001.00000000   chunk 0: the first bytes of the scan
//! /mnt/disk1/ev123_no0001/ev123_no0001.00000001   chunk 1
//! /mnt/disk2/ev123_no0001/ev123_no0001.00000002   …
//! /mnt/disk0/ev123_no0001/ev123_no0001.00000003
//! ```
//!
//! A chunk holds whole frames. Its size is free (jive5ab's default minimum is 128 MiB, its
//! `net_protocol` sets it; the last chunk is shorter); readers take each file's size.

/// Digits of the chunk number in a chunk's name.
pub const CHUNK_DIGITS: usize = 8;
/// Chunks a scan can have: the number must fit in 8 digits for readers to find it.
pub const MAX_CHUNKS: u64 = 100_000_000;

/// The file name of chunk `n` of `scan` (inside the directory `<scan>`).
pub fn chunk_name(scan: &str, n: u32) -> String {
    format!("{scan}.{n:08}")
}

/// The chunk number of `file_name` if it is a chunk of `scan`: `<scan>.` and exactly eight
/// digits.
pub fn parse_chunk_name(scan: &str, file_name: &str) -> Option<u32> {
    let digits = file_name.strip_prefix(scan)?.strip_prefix('.')?;
    if digits.len() != CHUNK_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn chunk_names_are_the_scan_and_eight_digits() {
        // The issue's example, byte for byte.
        assert_eq!(chunk_name("ev123_ef_no0001", 42), "ev123_ef_no0001.00000042");
        assert_eq!(chunk_name("s", 99_999_999).as_bytes(), b"s.99999999");
        assert_eq!(
            parse_chunk_name("ev123_ef_no0001", "ev123_ef_no0001.00000042"),
            Some(42)
        );
        for bad in [
            "s.0000042",
            "s.000000042",
            "s.0000004x",
            "s00000042",
            "t.00000042",
            "s.+0000042",
            "s.00000042.tmp",
        ] {
            assert_eq!(parse_chunk_name("s", bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn names_round_trip(n in 0u32..100_000_000) {
            prop_assert_eq!(parse_chunk_name("scan_dsEf", &chunk_name("scan_dsEf", n)), Some(n));
        }

        #[test]
        fn any_file_name_parses_without_panic(name in "\\PC{0,30}") {
            let _ = parse_chunk_name("s", &name);
        }
    }
}
