//! HMAC-SHA256 (RFC 2104 over FIPS 180-4) for challenge–response on a pre-shared key.
//!
//! Each side proves the key by a MAC over a label naming its role, both nonces (its peer's first,
//! so a proof can never be reflected back) and whatever parameters the protocol wants bound to
//! the proof. No I/O and no randomness here: the caller supplies nonces from a CSPRNG.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

/// Nonce length, bytes.
pub const NONCE_LEN: usize = 16;

/// Why a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MacError {
    /// An empty pre-shared key is a configuration mistake, not a key.
    #[error("the pre-shared key is empty")]
    EmptyKey,
    /// The proof is not hex or does not match.
    #[error("the key proof does not match (wrong pre-shared key?)")]
    BadMac,
}

/// Lower-case hex encoding.
pub fn hex_encode(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [D[usize::from(b >> 4)] as char, D[usize::from(b & 15)] as char])
        .collect()
}

/// Hex decoding; `None` on odd length or a non-hex digit.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let nib = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks(2).map(|p| Some(nib(p[0])? << 4 | nib(p[1])?)).collect()
}

/// 64 hex digits as 32 bytes (a key, a hash, a MAC); `None` for anything else.
pub fn hex32(s: &str) -> Option<[u8; 32]> {
    <[u8; 32]>::try_from(hex_decode(s)?).ok()
}

fn mac_over(key: &[u8], parts: &[&[u8]]) -> Result<Hmac<Sha256>, MacError> {
    if key.is_empty() {
        return Err(MacError::EmptyKey);
    }
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).map_err(|_| MacError::EmptyKey)?;
    for p in parts {
        // Length-prefix each part so ("ab","c") and ("a","bc") differ.
        m.update(&(p.len() as u64).to_be_bytes());
        m.update(p);
    }
    Ok(m)
}

/// Hex MAC over `parts` with `key`.
pub fn prove(key: &[u8], parts: &[&[u8]]) -> Result<String, MacError> {
    Ok(hex_encode(&mac_over(key, parts)?.finalize().into_bytes()))
}

/// The raw 32-byte MAC over `parts` with `key`: a key derived from a pre-shared key and both
/// nonces (HMAC as a PRF, as HKDF-Expand uses it), fresh for every session.
pub fn derive(key: &[u8], parts: &[&[u8]]) -> Result<[u8; 32], MacError> {
    Ok(mac_over(key, parts)?.finalize().into_bytes().into())
}

/// Check a hex MAC over `parts` in constant time (hmac's `verify_slice`).
pub fn verify(key: &[u8], parts: &[&[u8]], proof_hex: &str) -> Result<(), MacError> {
    let bytes = hex_decode(proof_hex).ok_or(MacError::BadMac)?;
    mac_over(key, parts)?.verify_slice(&bytes).map_err(|_| MacError::BadMac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_roundtrip_and_rejects() {
        assert_eq!(hex_encode(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(hex_decode("00abFF"), Some(vec![0, 0xab, 0xff]));
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(hex32(&"ab".repeat(32)), Some([0xab; 32]));
        assert_eq!(hex32(&"ab".repeat(31)), None);
    }

    #[test]
    fn proof_checks_key_and_every_part() {
        let p = prove(b"k1", &[b"client", b"sn", b"cn"]).unwrap();
        assert_eq!(p.len(), 64);
        verify(b"k1", &[b"client", b"sn", b"cn"], &p).unwrap();
        assert_eq!(verify(b"k2", &[b"client", b"sn", b"cn"], &p), Err(MacError::BadMac));
        assert_eq!(verify(b"k1", &[b"server", b"sn", b"cn"], &p), Err(MacError::BadMac));
        assert_eq!(verify(b"k1", &[b"client", b"s", b"ncn"], &p), Err(MacError::BadMac));
        assert_eq!(verify(b"k1", &[b"client", b"sn", b"cn"], "zz"), Err(MacError::BadMac));
        assert_eq!(prove(b"", &[]), Err(MacError::EmptyKey));
    }
}
