//! The recording layouts' parsers (scanfmt): arbitrary bytes as a Mark6 file (either block
//! header version) are walked without a panic and every block stays inside the file; a parsed
//! header emits back to its bytes; the pieces found reassemble with `locate` consistent; chunk
//! and scan names parse without a panic and what parses is a valid name.
#![no_main]
use libfuzzer_sys::fuzz_target;
use scanfmt::index::{Piece, ScanIndex};
use scanfmt::mk6::{FileHeader, FileWalker};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = FileHeader::parse(data) {
        // Version 1 files parse too; re-emitting gives the same 20 bytes.
        assert_eq!(&h.emit()[..], &data[..20]);
    }
    let mut pieces = Vec::new();
    if let Ok(mut w) = FileWalker::new(data, data.len() as u64) {
        let mut steps = 0usize;
        while let Some((at, len)) = w.next_header() {
            steps += 1;
            assert!(steps <= data.len(), "the walk always advances");
            let Some(hdr) = data.get(at as usize..at as usize + len) else {
                panic!("a header outside the file");
            };
            match w.block(hdr) {
                Ok(b) => {
                    assert!(b.data_offset + b.data_len <= data.len() as u64);
                    pieces.push(Piece {
                        number: u64::from(b.number),
                        file: 0,
                        offset: b.data_offset,
                        len: b.data_len,
                    });
                }
                Err(_) => break,
            }
        }
    }
    let idx = ScanIndex::build(pieces);
    let mut at = 0u64;
    for (i, p) in idx.pieces().iter().enumerate() {
        if p.len > 0 {
            assert_eq!(idx.locate(at), Some((i, 0)));
        }
        at += p.len;
    }
    assert_eq!(at, idx.len());
    assert_eq!(idx.locate(at), None);
    if let Ok(text) = std::str::from_utf8(data) {
        let (scan, rest) = text.split_once('\n').unwrap_or((text, ""));
        if let Some(n) = scanfmt::vbs::parse_chunk_name(scan, rest) {
            assert_eq!(scanfmt::vbs::chunk_name(scan, n), rest);
        }
        if let Ok(t) = scanfmt::name::NameTemplate::new(scan, true) {
            assert!(scanfmt::name::is_valid(&t.expand(vdif::StationId(0x4566), Some(1023))));
        }
        let _ = scanfmt::parse_scan_url(text);
    }
});
