//! Header layout pinned with literal bytes (VDIF 1.1.1 Table 1), parse/emit round trips, and
//! the guarantee that arbitrary bytes never panic the parser.

use proptest::prelude::*;
use vdif::{HeaderError, VdifHeader};

/// A hand-assembled header: invalid=1, legacy=0, seconds=0x0123_4567, epoch=53, frame 0x00_0abc,
/// version 1, log2(ch)=3, length 1004 units (8032 B), real, 2-bit, thread 5, station "Ef",
/// EDV 3 with word 4 = 0x0380_0010 (MHz, 16), word 5 = 0xACAB_FEED.
const FIXTURE: [u8; 32] = [
    0x67, 0x45, 0x23, 0x81, // w0: invalid bit 31, seconds
    0xbc, 0x0a, 0x00, 0x35, // w1: epoch 53 in bits 29-24, frame 0xabc
    0xec, 0x03, 0x00, 0x23, // w2: version 1 (bits 31-29), log2ch 3, length 1004
    0x66, 0x45, 0x05, 0x04, // w3: real, bits-1 = 1, thread 5, station 0x4566 "Ef"
    0x10, 0x00, 0x80, 0x03, // w4: EDV 3, MHz unit, rate field 16
    0xed, 0xfe, 0xab, 0xac, // w5
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

#[test]
fn fixture_parses_to_every_field() {
    let h = VdifHeader::parse_valid(&FIXTURE).unwrap();
    assert!(h.invalid);
    assert!(!h.legacy);
    assert_eq!(h.seconds, 0x0123_4567);
    assert_eq!(h.ref_epoch, 53);
    assert_eq!(h.frame_number, 0xabc);
    assert_eq!(h.version, 1);
    assert_eq!(h.channels(), 8);
    assert_eq!(h.frame_len(), 8032);
    assert_eq!(h.data_len(), 8000);
    assert!(!h.complex);
    assert_eq!(h.bits_per_sample, 2);
    assert_eq!(h.thread_id, 5);
    assert_eq!(h.station_id.to_string(), "Ef");
    assert_eq!(h.edv(), 3);
    assert_eq!(h.extended, [0x0380_0010, 0xacab_feed, 0, 0]);
    // EDV 3 field 16 MHz is the complex rate: real sampling at 32 MS/s.
    assert_eq!(h.header_sample_rate_hz(), Some(32e6));
    assert_eq!(h.samples_per_frame(), 4000);
    assert_eq!(h.to_bytes().unwrap(), FIXTURE.to_vec());
}

/// VDIF packs whole values into each 32-bit word (§9): 5-bit complex data hold 3 samples
/// (30 bits) per word, so a 624-byte array holds 156 x 3 = 468 samples, not 624 x 8 / 10.
#[test]
fn odd_widths_pack_whole_samples_per_word() {
    let mut b = FIXTURE;
    b[11] = 0x20; // version 1, one channel
    b[15] = 0x80 | (4 << 2) | (b[15] & 0x03); // complex, 5 bits
    b[8..11].copy_from_slice(&((624u32 + 32) / 8).to_le_bytes()[..3]);
    let h = VdifHeader::parse_valid(&b).unwrap();
    assert_eq!((h.bits_per_sample, h.complex, h.channels()), (5, true, 1));
    assert_eq!(h.samples_per_frame(), 468);
    // The CHIME/DRAO layout (baseband's sample_drao_corrupted.vdif): 5-bit complex x 8
    // channels in 5000 bytes, 1250 words x 3 samples / 8 channels = 468 (not 5000 x 8 / 80).
    let mut chime = b;
    chime[11] = 0x23; // version 1, log2(channels) 3
    chime[8..11].copy_from_slice(&(5032u32 / 8).to_le_bytes()[..3]);
    assert_eq!(VdifHeader::parse_valid(&chime).unwrap().samples_per_frame(), 468);
    // 3-bit real: 10 per word; 12-bit real: 2 per word (8 bits unused).
    b[15] = (2 << 2) | (b[15] & 0x03);
    assert_eq!(VdifHeader::parse_valid(&b).unwrap().samples_per_frame(), 1560);
    b[15] = (11 << 2) | (b[15] & 0x03);
    assert_eq!(VdifHeader::parse_valid(&b).unwrap().samples_per_frame(), 312);
}

#[test]
fn legacy_header_is_16_bytes() {
    let mut b = FIXTURE[..16].to_vec();
    b[3] |= 0x40; // legacy bit 30 of word 0
    let h = VdifHeader::parse_valid(&b).unwrap();
    assert!(h.legacy);
    assert_eq!(h.header_len(), 16);
    assert_eq!(h.data_len(), 8016);
    assert_eq!(h.extended, [0; 4]);
    assert_eq!(h.header_sample_rate_hz(), None);
    assert_eq!(h.to_bytes().unwrap(), b);
}

#[test]
fn bad_headers_give_typed_errors() {
    assert_eq!(
        VdifHeader::parse(&FIXTURE[..15]),
        Err(HeaderError::TooShort { have: 15, need: 16 })
    );
    assert_eq!(
        VdifHeader::parse(&FIXTURE[..20]),
        Err(HeaderError::TooShort { have: 20, need: 32 })
    );
    let mut short = FIXTURE;
    short[8] = 4; // 4 units = 32 bytes: no data array
    short[9] = 0;
    assert!(matches!(
        VdifHeader::parse_valid(&short),
        Err(HeaderError::FrameShorterThanHeader { .. })
    ));
    let mut odd = FIXTURE;
    odd[15] = (odd[15] & 0x83) | (2 << 2); // 3 bits/sample x 8 channels: 10 values per word
                                           // Odd widths hold the whole samples that fit (2000 words x 10 values / 8 channels), as
                                           // baseband counts them; the remaining values of the frame are unused.
    assert_eq!(VdifHeader::parse_valid(&odd).unwrap().samples_per_frame(), 2500);
    // 8-bit complex x 8 channels = 16 bytes per time sample: an 8008-byte array holds 500.5.
    let mut incomplete = FIXTURE;
    incomplete[15] = 0x80 | (7 << 2) | (incomplete[15] & 0x03);
    incomplete[8..11].copy_from_slice(&(8040u32 / 8).to_le_bytes()[..3]);
    assert!(matches!(
        VdifHeader::parse_valid(&incomplete),
        Err(HeaderError::IncompleteSamples {
            bits_per_sample: 8,
            complex: true,
            ..
        })
    ));
    let mut h = VdifHeader::parse(&FIXTURE).unwrap();
    h.thread_id = 1024;
    assert!(matches!(
        h.to_bytes(),
        Err(HeaderError::FieldOutOfRange { field: "thread_id", .. })
    ));
}

#[test]
fn vtp_prefix_is_little_endian() {
    let mut frame = FIXTURE.to_vec();
    frame.resize(8032, 0);
    let mut dgram = Vec::new();
    vdif::vtp::encode(0x0102_0304_0506_0708, &frame, &mut dgram);
    assert_eq!(&dgram[..8], &[0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01]);
    let d = vdif::vtp::decode(&dgram).unwrap();
    assert_eq!(d.seq, 0x0102_0304_0506_0708);
    assert_eq!(d.frame.len(), 8032);
    assert!(matches!(
        vdif::vtp::decode(&dgram[..27]),
        Err(vdif::VtpError::Header(_))
    ));
    assert!(matches!(
        vdif::vtp::decode(&dgram[..20]),
        Err(vdif::VtpError::TooShort(20))
    ));
    assert!(matches!(
        vdif::vtp::decode(&dgram[..4000]),
        Err(vdif::VtpError::LengthMismatch {
            header: 8032,
            carried: 3992
        })
    ));
}

fn arb_header() -> impl Strategy<Value = VdifHeader> {
    (
        (
            any::<bool>(),
            any::<bool>(),
            0u32..(1 << 30),
            0u8..64,
            0u8..4,
            0u32..(1 << 24),
            0u8..8,
        ),
        (
            0u8..32,
            0u32..(1 << 24),
            any::<bool>(),
            1u8..=32,
            0u16..1024,
            any::<u16>(),
            any::<[u32; 4]>(),
        ),
    )
        .prop_map(
            |(
                (invalid, legacy, seconds, ref_epoch, unassigned, frame_number, version),
                (l2, len, complex, bits, thread_id, station_id, ext),
            )| {
                VdifHeader {
                    invalid,
                    legacy,
                    seconds,
                    ref_epoch,
                    unassigned,
                    frame_number,
                    version,
                    log2_channels: l2,
                    frame_len_units: len,
                    complex,
                    bits_per_sample: bits,
                    thread_id,
                    station_id: vdif::StationId(station_id),
                    extended: if legacy { [0; 4] } else { ext },
                }
            },
        )
}

proptest! {
    #[test]
    fn emit_parse_roundtrip(h in arb_header()) {
        let bytes = h.to_bytes().unwrap();
        prop_assert_eq!(VdifHeader::parse(&bytes).unwrap(), h);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(h) = VdifHeader::parse(&bytes) {
            let _ = h.validate();
            let _ = h.samples_per_frame();
            let _ = h.header_sample_rate_hz();
            let _ = h.station_id.to_string();
        }
        let _ = vdif::vtp::decode(&bytes);
    }
}

/// A frame's time and position, pinned: the fixture's second (epoch 53 = 2026-07-01 plus
/// 0x0123_4567 s) and its frame 0xabc at 16 000 frames/s.
#[test]
fn fixture_time_and_position() {
    let h = VdifHeader::parse_valid(&FIXTURE).unwrap();
    let unix = 1_782_864_000 + 0x0123_4567;
    assert_eq!(h.unix_seconds(), unix);
    let fps = vdif::FrameRate::new(16_000).unwrap();
    assert_eq!(h.frame_index(fps), unix as u64 * 16_000 + 0xabc);
    assert_eq!(h.unix_nanos(fps), Some(unix as u64 * 1_000_000_000 + 0xabc * 62_500));
    // EDV 3, 16 MHz of real samples: 32 MS/s over 4000 samples a frame (8 channels × 2 bits in
    // 8000 bytes) is 8000 frames/s.
    assert_eq!(h.frame_rate().map(u32::from), Some(8000));
}

proptest! {
    /// Setting a position and reading it back gives the position, wherever the epoch can
    /// express it (the seconds field holds 30 bits from the epoch's start).
    #[test]
    fn frame_index_round_trips(epoch in 0u8..64, seconds in 0u32..(1 << 30), fps in 1u32..=(1 << 24), number: u32) {
        let mut h = VdifHeader::parse_valid(&FIXTURE).unwrap();
        h.ref_epoch = epoch;
        h.seconds = seconds;
        h.frame_number = number % fps;
        let fps = vdif::FrameRate::new(fps).unwrap();
        let index = h.frame_index(fps);
        let mut g = h;
        g.seconds = 0;
        g.frame_number = 0;
        g.set_frame_index(index, fps);
        prop_assert_eq!((g.seconds, g.frame_number), (h.seconds, h.frame_number));
        prop_assert_eq!(g.frame_index(fps), index);
        prop_assert!(g.check_ranges().is_ok());
    }
}
