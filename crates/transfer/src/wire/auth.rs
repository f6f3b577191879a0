//! Authentication of a keyed session's datagrams: the [`DataKey`] tags and the
//! [`PayloadDigest`] a DATA tag covers. See [`crate::wire`] for where the tag sits.

use super::{DATA_HEADER_LEN, TAG_LEN};

/// A session's datagram key: 32 bytes both ends derived on their authenticated control channel.
///
/// With a key, every datagram ends in a [`TAG_LEN`]-byte tag, the first 16 bytes of a BLAKE3
/// keyed hash (BLAKE3 paper §5.1, its MAC mode):
///
/// - REPORT, FIN and FIN-ACK: of everything before the tag;
/// - DATA: of its 40-byte header followed by the 32-byte [`PayloadDigest`] of its payload
///   (hash-then-MAC: the digest is collision resistant, and it is the BLAKE3 chaining value the
///   file's own hash is built from, so a keyed session hashes each payload once, not twice).
///
/// A datagram without a valid tag is dropped before any field of it is believed, so one forged
/// DATA or REPORT, even with the right session id from the right source port, moves no state. A
/// 128-bit tag leaves a forger a 2^-128 chance per try. Replays within a session are harmless (a
/// duplicate chunk, a stale report); the session id, random per session and covered by the tag,
/// keeps datagrams of one session out of another.
#[derive(Clone, PartialEq, Eq)]
pub struct DataKey(pub [u8; 32]);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("DataKey(..)")
    }
}

impl DataKey {
    fn tag(&self, data: &[u8]) -> [u8; TAG_LEN] {
        let h = blake3::keyed_hash(&self.0, data);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&h.as_bytes()[..TAG_LEN]);
        t
    }

    /// The tag of a DATA datagram: over its header and the digest of its payload.
    pub fn data_tag(&self, header: &[u8; DATA_HEADER_LEN], digest: &PayloadDigest) -> [u8; TAG_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(header);
        h.update(&digest.bytes);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&h.finalize().as_bytes()[..TAG_LEN]);
        t
    }

    /// Append the tag of `out` to `out` (REPORT, FIN, FIN-ACK).
    pub fn seal(&self, out: &mut Vec<u8>) {
        self.seal_from(out, 0);
    }

    /// Append the tag of `out[start..]` to `out` (REPORT, FIN, FIN-ACK written after `start`).
    pub fn seal_from(&self, out: &mut Vec<u8>, start: usize) {
        let t = self.tag(out.get(start..).unwrap_or(&[]));
        out.extend_from_slice(&t);
    }

    /// Append the tag of the DATA datagram at `out[start..]` whose payload digest is `digest`.
    pub fn seal_data(&self, out: &mut Vec<u8>, start: usize, digest: &PayloadDigest) {
        let header: Option<&[u8; DATA_HEADER_LEN]> =
            out.get(start..start + DATA_HEADER_LEN).and_then(|h| h.try_into().ok());
        let t = header.map_or([0; TAG_LEN], |h| self.data_tag(h, digest));
        out.extend_from_slice(&t);
    }

    /// The datagram without its tag if the tag is right, `None` otherwise (also when too short
    /// to have one): REPORT, FIN and FIN-ACK. The comparison takes the same time wherever the
    /// tags differ.
    pub fn open<'a>(&self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        let body_len = datagram.len().checked_sub(TAG_LEN)?;
        let (body, tag) = datagram.split_at(body_len);
        tags_equal(&self.tag(body), tag).then_some(body)
    }

    /// Whether `tag` is the tag of a DATA datagram with this header and payload digest
    /// (constant time).
    pub fn check_data(&self, header: &[u8; DATA_HEADER_LEN], digest: &PayloadDigest, tag: &[u8]) -> bool {
        tags_equal(&self.data_tag(header, digest), tag)
    }
}

fn tags_equal(want: &[u8; TAG_LEN], got: &[u8]) -> bool {
    if got.len() != TAG_LEN {
        return false;
    }
    want.iter().zip(got).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// BLAKE3's chunk: the leaf of its hash tree (BLAKE3 paper §2.1), 1024 bytes.
pub const BLAKE3_CHUNK_LEN: u64 = 1024;

/// The 32-byte digest of a DATA payload that a keyed session's tag covers.
///
/// If the payload is a whole subtree of its source's BLAKE3 tree — its offset in the source
/// (the layout's digest offset, [`crate::layout::ChunkPlace::digest_offset`]) is a multiple of
/// 1024, its length `n` a power of two of at least 1024, and the offset a multiple of `n` — the
/// digest is that subtree's chaining value (BLAKE3 §2.1; `blake3::hazmat`, set_input_offset and
/// finalize_non_root), which the session merges into the file's hash without hashing the
/// payload again. Otherwise (odd chunk sizes, a segment's short last chunk) it is the BLAKE3
/// hash of the payload alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadDigest {
    /// The digest.
    pub bytes: [u8; 32],
    /// `Some(offset)` when `bytes` is the chaining value of the subtree starting at `offset` of
    /// the source; `None` when it is the plain BLAKE3 hash of the payload.
    pub subtree_at: Option<u64>,
}

/// Whether `len` bytes at `offset` form a complete subtree of a BLAKE3 tree (see
/// [`PayloadDigest`]).
pub fn is_subtree(offset: u64, len: u64) -> bool {
    len >= BLAKE3_CHUNK_LEN
        && len.is_power_of_two()
        && offset.is_multiple_of(BLAKE3_CHUNK_LEN)
        && (offset / BLAKE3_CHUNK_LEN).is_multiple_of(len / BLAKE3_CHUNK_LEN)
}

/// The [`PayloadDigest`] of `payload` lying at `digest_offset` of its source.
pub fn payload_digest(digest_offset: u64, payload: &[u8]) -> PayloadDigest {
    use blake3::hazmat::HasherExt;
    if is_subtree(digest_offset, payload.len() as u64) {
        // The conditions above are exactly what set_input_offset, update and finalize_non_root
        // assert (chunk-aligned offset, at most max_subtree_len bytes, not empty): no panic.
        let cv = blake3::Hasher::new()
            .set_input_offset(digest_offset)
            .update(payload)
            .finalize_non_root();
        PayloadDigest {
            bytes: cv,
            subtree_at: Some(digest_offset),
        }
    } else {
        PayloadDigest {
            bytes: *blake3::hash(payload).as_bytes(),
            subtree_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DataHeader;

    /// The DATA tag: first 16 bytes of BLAKE3 keyed(key, header ‖ payload digest), the digest a
    /// subtree chaining value where the payload is a whole subtree, else BLAKE3 of the payload.
    #[test]
    fn data_tags_cover_header_and_payload_digest() {
        let key = DataKey([7; 32]);
        let payload = vec![0xA5u8; 8192];
        let mut d = Vec::new();
        DataHeader {
            session_id: 5,
            seq: 0,
            offset: 8192,
            timestamp_us: 1,
            retransmit: false,
        }
        .write(&mut d);
        d.extend_from_slice(&payload);
        // At source offset 16384 the 8 KiB payload is the subtree of chunks 16..24.
        let digest = payload_digest(16384, &payload);
        assert_eq!(digest.subtree_at, Some(16384));
        key.seal_data(&mut d, 0, &digest);
        assert_eq!(d.len(), DATA_HEADER_LEN + 8192 + TAG_LEN);
        let mut by_hand = blake3::Hasher::new_keyed(&[7; 32]);
        by_hand.update(&d[..DATA_HEADER_LEN]);
        by_hand.update(&digest.bytes);
        assert_eq!(&d[DATA_HEADER_LEN + 8192..], &by_hand.finalize().as_bytes()[..TAG_LEN]);
        // Pinned: a change of the rule or the field order changes this value.
        assert_eq!(
            ctl_hex(&d[DATA_HEADER_LEN + 8192..]),
            ctl_hex(&key.data_tag(d[..DATA_HEADER_LEN].try_into().unwrap(), &digest))
        );
        assert_eq!(
            ctl_hex(&d[DATA_HEADER_LEN + 8192..]),
            "cae9a3d62f5e7e09113ca4df7a46d1ef"
        );
        // Not a subtree: misaligned, odd length, or an offset the length does not divide.
        let long = vec![0x5Au8; 16384];
        for (off, len) in [(16384 + 512, 8192), (16384, 8000), (8192 * 3, 8192 * 2), (0, 512)] {
            let p = payload_digest(off, &long[..len]);
            assert_eq!(p.subtree_at, None, "{off} {len}");
            assert_eq!(p.bytes, *blake3::hash(&long[..len]).as_bytes());
        }
    }

    fn ctl_hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Subtree digests are the chaining values BLAKE3's own tree is made of: merging the digests
    /// of aligned pieces of 2^k KiB gives `blake3::hash` of the whole. `false` where the pieces
    /// do not tile BLAKE3's left subtree (nothing to check).
    fn subtree_digests_merge(data: &[u8], k: u32) -> bool {
        use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, HasherExt, Mode};
        let piece = 1024usize << k;
        // BLAKE3's left subtree: the largest power of two of whole 1 KiB chunks that leaves at
        // least one byte to the right (the BLAKE3 paper, section 2.1). Not "the power of two
        // below the length in bytes": at 16 385 bytes that gave 8 KiB, and the right part then
        // did not fit one subtree at its offset (blake3 panicked; proptest found it).
        let left = (1usize << ((data.len() - 1) / 1024).ilog2()) * 1024;
        if left < piece || !left.is_multiple_of(piece) {
            return false;
        }
        let cvs: Vec<[u8; 32]> = data[..left]
            .chunks(piece)
            .enumerate()
            .map(|(i, c)| {
                let d = payload_digest((i * piece) as u64, c);
                assert_eq!(d.subtree_at, Some((i * piece) as u64));
                d.bytes
            })
            .collect();
        let mut level = cvs;
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|p| merge_subtrees_non_root(&p[0], &p[1], Mode::Hash))
                .collect();
        }
        // The right part as one subtree hashed at its offset.
        let right = blake3::Hasher::new()
            .set_input_offset(left as u64)
            .update(&data[left..])
            .finalize_non_root();
        assert_eq!(merge_subtrees_root(&level[0], &right, Mode::Hash), blake3::hash(data));
        true
    }

    #[test]
    fn subtree_digests_merge_where_the_length_is_a_power_of_two_and_one() {
        // The lengths just past a power of two, where the left subtree is all but one byte.
        for len in [2049, 4097, 8193, 16_385, 32_769] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
            for k in 0..4 {
                subtree_digests_merge(&data, k);
            }
        }
    }

    proptest::proptest! {
        /// [`subtree_digests_merge`] over any data of 2-40 KB and pieces of 1-8 KiB.
        #[test]
        fn subtree_digests_merge_to_the_blake3_hash(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 2049..40_000),
            k in 0u32..4,
        ) {
            proptest::prop_assume!(subtree_digests_merge(&data, k));
        }

        /// Any change of a sealed DATA datagram (header, payload or tag) fails the check.
        #[test]
        fn a_changed_data_datagram_fails_its_tag(pos in 0usize..(DATA_HEADER_LEN + 3000 + TAG_LEN), bit in 0u8..8) {
            let key = DataKey([9; 32]);
            let mut d = Vec::new();
            DataHeader { session_id: 1, seq: 2, offset: 3000, timestamp_us: 4, retransmit: false }.write(&mut d);
            d.extend((0..3000u32).map(|i| i as u8));
            let digest = payload_digest(3000, &d[DATA_HEADER_LEN..]);
            key.seal_data(&mut d, 0, &digest);
            d[pos] ^= 1 << bit;
            let (body, tag) = d.split_at(d.len() - TAG_LEN);
            let header: &[u8; DATA_HEADER_LEN] = body[..DATA_HEADER_LEN].try_into().unwrap();
            let digest = payload_digest(3000, &body[DATA_HEADER_LEN..]);
            proptest::prop_assert!(!key.check_data(header, &digest, tag));
        }
    }
}
