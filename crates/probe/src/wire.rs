//! The probe datagram (UDP payload), smoltcp style: [`Packet`] gives zero-copy field accessors
//! over any byte buffer, [`Repr`] is the parsed, validated high-level form.
//!
//! # Layout (version 1)
//!
//! All integers are big-endian (network order), so a capture is readable with any dissector.
//!
//! | offset | size | field      | meaning                                                           |
//! |-------:|-----:|------------|-------------------------------------------------------------------|
//! | 0      | 4    | `magic`    | `b"eVPB"` (e-VLBI ProBe); anything else is a stray               |
//! | 4      | 1    | `version`  | [`VERSION`] = 1                                                   |
//! | 5      | 1    | `flags`    | bit 0 [`FLAG_LAST`]: last packet of the trial; others reserved (0) |
//! | 6      | 2    | `reserved` | 0 when sent, ignored when received (room for a stream id)         |
//! | 8      | 8    | `test_id`  | session id negotiated on the control channel                      |
//! | 16     | 8    | `seq`      | 0, 1, 2, … per trial                                              |
//! | 24     | 8    | `send_ns`  | sender's clock at send time, ns (only differences are meaningful) |
//! | 32     | …    | padding    | byte at offset `i` is `i as u8` (see [`pad_byte`]) up to the size |
//!
//! The datagram size is the UDP payload size the user chose: at least [`HEADER_LEN`] (32) and at
//! most [`MAX_DATAGRAM`] (65 507 = 65 535 − 20 IPv4 − 8 UDP). The padding pattern is not zeros so
//! that a compressing or truncating middlebox shows up when [`Packet::padding_ok`] is checked.

use thiserror::Error;

/// Bytes of framing per datagram on Ethernet beyond the UDP payload (seed 004 §4.1: "an extra
/// 66 bytes"), as the wire model defines it.
pub const WIRE_OVERHEAD_BYTES: u64 = models::wire::ETHERNET_UDP_OVERHEAD as u64;

/// Magic bytes at offset 0.
pub const MAGIC: [u8; 4] = *b"eVPB";
/// Wire-format version written and accepted.
pub const VERSION: u8 = 1;
/// Flag bit: this is the last packet the sender will send in this trial.
pub const FLAG_LAST: u8 = 0x01;
/// Length of the fixed header; also the smallest valid datagram.
pub const HEADER_LEN: usize = 32;
/// Largest UDP payload over IPv4: 65 535 − 20 (IP header) − 8 (UDP header).
pub const MAX_DATAGRAM: usize = 65_507;

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 5;
    pub const RESERVED: Range<usize> = 6..8;
    pub const TEST_ID: Range<usize> = 8..16;
    pub const SEQ: Range<usize> = 16..24;
    pub const SEND_NS: Range<usize> = 24..32;
}

/// Why a datagram is not a valid probe packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the 32-byte header.
    #[error("datagram of {len} bytes is shorter than the {HEADER_LEN}-byte probe header")]
    TooShort {
        /// Length received.
        len: usize,
    },
    /// More bytes than a UDP/IPv4 payload can hold (only possible with a corrupt length).
    #[error("datagram of {len} bytes exceeds the {MAX_DATAGRAM}-byte UDP maximum")]
    Oversized {
        /// Length received.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    #[error("bad magic {found:02x?}")]
    BadMagic {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// The version byte is not one this build understands.
    #[error("unsupported probe wire version {0}")]
    UnsupportedVersion(u8),
    /// A [`Repr`] asked to emit a size outside `HEADER_LEN..=MAX_DATAGRAM` or into a buffer of a
    /// different length.
    #[error("cannot emit a {size}-byte datagram into a {buf}-byte buffer")]
    BadEmitSize {
        /// Size requested by the representation.
        size: usize,
        /// Length of the buffer offered.
        buf: usize,
    },
}

/// The padding byte at absolute offset `i` of a datagram.
#[inline]
pub fn pad_byte(i: usize) -> u8 {
    i as u8
}

/// Zero-copy view of a probe datagram. Accessors read fixed offsets and assume the buffer holds
/// at least [`HEADER_LEN`] bytes; use [`Packet::new_checked`] on untrusted input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without any check.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap a buffer after [`Packet::check_len`] and magic/version checks, so every accessor is
    /// safe to call and the contents are a probe packet of a version we understand.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        let magic = p.magic();
        if magic != MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        if p.version() != VERSION {
            return Err(WireError::UnsupportedVersion(p.version()));
        }
        Ok(p)
    }

    /// Check that the length is within `HEADER_LEN..=MAX_DATAGRAM`.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            Err(WireError::TooShort { len })
        } else if len > MAX_DATAGRAM {
            Err(WireError::Oversized { len })
        } else {
            Ok(())
        }
    }

    /// Consume the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Total datagram length.
    pub fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// True for a zero-length buffer (never a valid packet).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Magic bytes.
    pub fn magic(&self) -> [u8; 4] {
        let mut m = [0u8; 4];
        m.copy_from_slice(&self.buffer.as_ref()[field::MAGIC]);
        m
    }

    /// Version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Reserved 16 bits.
    pub fn reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::RESERVED];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Test (session) id.
    pub fn test_id(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::TEST_ID])
    }

    /// Sequence number.
    pub fn seq(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::SEQ])
    }

    /// Sender timestamp, ns.
    pub fn send_ns(&self) -> u64 {
        be_u64(&self.buffer.as_ref()[field::SEND_NS])
    }

    /// True when every padding byte matches [`pad_byte`].
    pub fn padding_ok(&self) -> bool {
        let b = self.buffer.as_ref();
        b.iter().enumerate().skip(HEADER_LEN).all(|(i, &x)| x == pad_byte(i))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Write the magic.
    pub fn set_magic(&mut self, m: [u8; 4]) {
        self.buffer.as_mut()[field::MAGIC].copy_from_slice(&m);
    }

    /// Write the version.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    /// Write the flags.
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::FLAGS] = f;
    }

    /// Write the reserved field.
    pub fn set_reserved(&mut self, r: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&r.to_be_bytes());
    }

    /// Write the test id.
    pub fn set_test_id(&mut self, id: u64) {
        self.buffer.as_mut()[field::TEST_ID].copy_from_slice(&id.to_be_bytes());
    }

    /// Write the sequence number.
    pub fn set_seq(&mut self, seq: u64) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&seq.to_be_bytes());
    }

    /// Write the send timestamp. The sender calls this last, just before the syscall, so the
    /// timestamp is as close to departure as user space allows.
    pub fn set_send_ns(&mut self, ns: u64) {
        self.buffer.as_mut()[field::SEND_NS].copy_from_slice(&ns.to_be_bytes());
    }

    /// Fill everything after the header with the padding pattern.
    pub fn fill_padding(&mut self) {
        for (i, b) in self.buffer.as_mut().iter_mut().enumerate().skip(HEADER_LEN) {
            *b = pad_byte(i);
        }
    }
}

/// Parsed probe datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Flags byte (see [`FLAG_LAST`]).
    pub flags: u8,
    /// Test (session) id.
    pub test_id: u64,
    /// Sequence number.
    pub seq: u64,
    /// Sender timestamp, ns.
    pub send_ns: u64,
    /// Whole datagram length (header + padding).
    pub size: usize,
}

impl Repr {
    /// Parse and validate a datagram.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, WireError> {
        let p = Packet::new_checked(packet.buffer.as_ref())?;
        Ok(Repr {
            flags: p.flags(),
            test_id: p.test_id(),
            seq: p.seq(),
            send_ns: p.send_ns(),
            size: p.len(),
        })
    }

    /// Parse straight from bytes.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Repr, WireError> {
        Self::parse(&Packet::new_unchecked(bytes))
    }

    /// Bytes needed to emit this representation.
    pub fn buffer_len(&self) -> usize {
        self.size
    }

    /// Emit header and padding into `packet`, whose buffer must be exactly `self.size` long.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<(), WireError> {
        let buf = packet.len();
        if buf != self.size || !(HEADER_LEN..=MAX_DATAGRAM).contains(&self.size) {
            return Err(WireError::BadEmitSize { size: self.size, buf });
        }
        packet.set_magic(MAGIC);
        packet.set_version(VERSION);
        packet.set_flags(self.flags);
        packet.set_reserved(0);
        packet.set_test_id(self.test_id);
        packet.set_seq(self.seq);
        packet.set_send_ns(self.send_ns);
        packet.fill_padding();
        Ok(())
    }

    /// Convenience: emit into a fresh `Vec`.
    pub fn to_vec(&self) -> Result<Vec<u8>, WireError> {
        let mut v = vec![0u8; self.size.min(MAX_DATAGRAM + 1)];
        self.emit(&mut Packet::new_unchecked(&mut v[..]))?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 40-byte packet: test id 0x0102030405060708, seq 9, send time 1e9 ns, LAST flag.
    const FIXTURE: [u8; 40] = [
        b'e', b'V', b'P', b'B', // magic
        0x01, 0x01, 0x00, 0x00, // version 1, flags LAST, reserved
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // test id
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, // seq
        0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xca, 0x00, // send_ns = 1_000_000_000
        32, 33, 34, 35, 36, 37, 38, 39, // padding: byte i = i
    ];

    fn fixture_repr() -> Repr {
        Repr {
            flags: FLAG_LAST,
            test_id: 0x0102_0304_0506_0708,
            seq: 9,
            send_ns: 1_000_000_000,
            size: 40,
        }
    }

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&FIXTURE[..]).expect("valid fixture");
        assert_eq!(p.version(), 1);
        assert_eq!(p.reserved(), 0);
        assert!(p.padding_ok());
        assert_eq!(Repr::parse(&p), Ok(fixture_repr()));
    }

    #[test]
    fn emit_fixture() {
        assert_eq!(fixture_repr().to_vec().as_deref(), Ok(&FIXTURE[..]));
    }

    #[test]
    fn header_only_packet_is_valid() {
        let r = Repr {
            size: HEADER_LEN,
            ..fixture_repr()
        };
        let v = r.to_vec().expect("emit");
        assert_eq!(v[..], FIXTURE[..HEADER_LEN]);
        assert_eq!(Repr::parse_bytes(&v), Ok(r));
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(Repr::parse_bytes(&FIXTURE[..31]), Err(WireError::TooShort { len: 31 }));
        assert_eq!(Repr::parse_bytes(&[]), Err(WireError::TooShort { len: 0 }));
        let big = vec![0u8; MAX_DATAGRAM + 1];
        assert_eq!(
            Repr::parse_bytes(&big),
            Err(WireError::Oversized { len: MAX_DATAGRAM + 1 })
        );
        let mut bad = FIXTURE;
        bad[0] = b'X';
        assert_eq!(Repr::parse_bytes(&bad), Err(WireError::BadMagic { found: *b"XVPB" }));
        let mut v2 = FIXTURE;
        v2[4] = 2;
        assert_eq!(Repr::parse_bytes(&v2), Err(WireError::UnsupportedVersion(2)));
    }

    #[test]
    fn max_size_roundtrip_and_bad_emit_sizes() {
        let r = Repr {
            size: MAX_DATAGRAM,
            ..fixture_repr()
        };
        let v = r.to_vec().expect("emit max");
        assert_eq!(Repr::parse_bytes(&v), Ok(r));
        let small = Repr {
            size: 31,
            ..fixture_repr()
        };
        assert_eq!(small.to_vec(), Err(WireError::BadEmitSize { size: 31, buf: 31 }));
        let mut buf = [0u8; 50];
        assert_eq!(
            fixture_repr().emit(&mut Packet::new_unchecked(&mut buf[..])),
            Err(WireError::BadEmitSize { size: 40, buf: 50 })
        );
    }

    #[test]
    fn corrupted_padding_detected() {
        let mut v = FIXTURE;
        v[39] = 0;
        assert!(!Packet::new_unchecked(&v[..]).padding_ok());
    }
}
