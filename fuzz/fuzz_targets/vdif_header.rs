//! Header (VDIF and Mark5B) and VTP datagram parsers: arbitrary bytes must give Ok or a typed error, and a parsed
//! header must emit back to the same words.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = vdif::VdifHeader::parse(data) {
        let _ = h.validate();
        let _ = h.samples_per_frame();
        let _ = h.header_sample_rate_hz();
        let bytes = h.to_bytes().expect("a parsed header always fits its fields");
        assert_eq!(&bytes[..], &data[..h.header_len()]);
    }
    if let Ok(m) = vdif::Mark5bHeader::parse(data) {
        let _ = m.crc_ok();
        let bytes = m.to_bytes().expect("a parsed Mark5B header always fits its fields");
        assert_eq!(&bytes[..], &data[..vdif::mark5b::MARK5B_HEADER_LEN]);
    }
    let _ = vdif::vtp::decode(data);
});
