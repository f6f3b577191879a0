//! Sample codec (VDIF 1.1.1 §9–10): offset binary, whole values packed into 32-bit
//! little-endian words starting at the least significant bits, channels interleaved per time
//! sample (t0c0, t0c1, …, t1c0, …), a complex sample as I then Q.
//!
//! Because the 32-bit words are little-endian, "first value in the least significant bits of
//! the word" is the same as "first value in the least significant bits of the first byte" for
//! widths that divide 8 (1, 2, 4, 8 bits), so those work byte by byte; other widths unpack word
//! by word with the top bits of each word unused.
//!
//! Reconstruction levels are those of mark5access and baseband (the reference implementation we
//! cross-check against): 1-bit codes 0,1 → −1, +1; 2-bit codes 0..3 → −H, −1, +1, +H with the
//! optimal-quantiser H = 3.316505; 4-bit (c − 8)/2.95 and 8-bit (c − 127.5)/35.5, scalings that
//! put one σ of Gaussian noise where 2-bit data has it. Other widths decode to codes only.

use crate::error::CodecError;

/// High reconstruction level of the optimal 2-bit quantiser (low level = 1).
pub const OPTIMAL_2BIT_HIGH: f32 = 3.316_505;
/// Decision threshold between low and high magnitudes, in units where the low level is 1
/// (the `TWO_BIT_1_SIGMA` of baseband and mark5access).
pub const TWO_BIT_THRESHOLD: f32 = 2.174_564;

/// Decoded value of each 2-bit code.
pub const LEVELS_2BIT: [f32; 4] = [-OPTIMAL_2BIT_HIGH, -1.0, 1.0, OPTIMAL_2BIT_HIGH];
/// Decoded value of each 1-bit code.
pub const LEVELS_1BIT: [f32; 2] = [-1.0, 1.0];

/// 4-bit scaling of baseband/mark5access: code − 8 over this many units is one low level.
pub const FOUR_BIT_SCALE: f32 = 2.95;
/// 8-bit scaling of baseband/mark5access: code − 127.5 over this many units.
pub const EIGHT_BIT_SCALE: f32 = 35.5;

fn check_bits(bits: u8) -> Result<(), CodecError> {
    match bits {
        1 | 2 => Ok(()),
        _ => Err(CodecError::Encoding { bits }),
    }
}

/// Decoded value of code `c` of a `bits`-bit sample, for the widths evlbi decodes.
fn level(bits: u8, c: u32) -> f32 {
    match bits {
        1 => LEVELS_1BIT[(c & 1) as usize],
        2 => LEVELS_2BIT[(c & 3) as usize],
        4 => (c as f32 - 8.0) / FOUR_BIT_SCALE,
        _ => (c as f32 - 127.5) / EIGHT_BIT_SCALE,
    }
}

/// Whether [`decode_values`] turns `bits`-bit codes into sample values (1, 2, 4 or 8 bits).
pub fn decodable(bits: u8) -> bool {
    matches!(bits, 1 | 2 | 4 | 8)
}

/// Decode a data array to sample values in wire order (time-major, channels interleaved, I
/// then Q for complex data) with the levels of the module notes. Widths other than 1, 2, 4
/// and 8 bits have no agreed levels: [`CodecError::Unsupported`].
pub fn decode_values(data: &[u8], bits: u8, complex: bool) -> Result<Vec<f32>, CodecError> {
    if !decodable(bits) {
        return Err(CodecError::Unsupported { bits, complex });
    }
    let table: Vec<f32> = (0..1u32 << bits).map(|c| level(bits, c)).collect();
    let per_byte = 8 / usize::from(bits);
    let mask = (1u32 << bits) - 1;
    let mut out = Vec::with_capacity(data.len() * per_byte);
    for &b in data {
        for k in 0..per_byte {
            out.push(table[((u32::from(b) >> (k * usize::from(bits))) & mask) as usize]);
        }
    }
    Ok(out)
}

/// Unpack `data` into one code (0..2^bits) per sample, in wire order (time-major, channels
/// interleaved). Returns `data.len() * 8 / bits` codes.
pub fn unpack_codes(data: &[u8], bits: u8) -> Result<Vec<u8>, CodecError> {
    check_bits(bits)?;
    let per_byte = 8 / bits as usize;
    let mask = (1u8 << bits) - 1;
    let mut out = Vec::with_capacity(data.len() * per_byte);
    for &b in data {
        for k in 0..per_byte {
            out.push((b >> (k * bits as usize)) & mask);
        }
    }
    Ok(out)
}

/// Pack codes (each < 2^bits) in wire order into `out`, which must be exactly
/// `codes.len() * bits / 8` bytes long.
pub fn pack_codes(codes: &[u8], bits: u8, out: &mut [u8]) -> Result<(), CodecError> {
    check_bits(bits)?;
    let per_byte = 8 / bits as usize;
    let need = codes.len().div_ceil(per_byte);
    if out.len() != need || !codes.len().is_multiple_of(per_byte) {
        return Err(CodecError::Length { have: out.len(), need });
    }
    let mask = (1u8 << bits) - 1;
    for (byte, chunk) in out.iter_mut().zip(codes.chunks_exact(per_byte)) {
        let mut v = 0u8;
        for (k, c) in chunk.iter().enumerate() {
            v |= (c & mask) << (k * bits as usize);
        }
        *byte = v;
    }
    Ok(())
}

/// Decode the data array of a frame of real samples to sample values,
/// `[time][channel]` flattened (time-major), using the optimal-quantiser levels.
pub fn decode(data: &[u8], bits: u8) -> Result<Vec<f32>, CodecError> {
    decode_values(data, bits, false)
}

/// Quantise one value in the decoded scale (low level = 1) to its code, as mark5access and
/// baseband do: 1-bit by sign (0 → 1), 2-bit with thresholds −T, 0, +T.
pub fn quantise(value: f32, bits: u8) -> u8 {
    if bits == 1 {
        u8::from(value >= 0.0)
    } else {
        u8::from(value >= -TWO_BIT_THRESHOLD) + u8::from(value >= 0.0) + u8::from(value >= TWO_BIT_THRESHOLD)
    }
}

/// Encode sample values (time-major, channels interleaved) into a data array.
pub fn encode(values: &[f32], bits: u8, out: &mut [u8]) -> Result<(), CodecError> {
    check_bits(bits)?;
    let codes: Vec<u8> = values.iter().map(|&v| quantise(v, bits)).collect();
    pack_codes(&codes, bits, out)
}

/// Split interleaved samples `[t][c]` into per-channel vectors.
pub fn deinterleave<T: Copy>(samples: &[T], channels: usize) -> Vec<Vec<T>> {
    let mut out = vec![Vec::with_capacity(samples.len() / channels.max(1)); channels];
    if channels == 0 {
        return out;
    }
    for t in samples.chunks_exact(channels) {
        for (c, v) in t.iter().enumerate() {
            out[c].push(*v);
        }
    }
    out
}

/// Interleave per-channel vectors (all of equal length) into `[t][c]` order.
pub fn interleave<T: Copy>(channels: &[Vec<T>]) -> Vec<T> {
    let n = channels.iter().map(Vec::len).min().unwrap_or(0);
    let mut out = Vec::with_capacity(n * channels.len());
    for t in 0..n {
        for ch in channels {
            out.push(ch[t]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_sample_in_lsb() {
        // Codes 0,1,2,3 → 0b11_10_01_00: first sample in the two least significant bits.
        let mut out = [0u8; 1];
        pack_codes(&[0, 1, 2, 3], 2, &mut out).unwrap();
        assert_eq!(out, [0b1110_0100]);
        assert_eq!(
            decode(&out, 2).unwrap(),
            vec![-OPTIMAL_2BIT_HIGH, -1.0, 1.0, OPTIMAL_2BIT_HIGH]
        );
        let mut one = [0u8; 1];
        pack_codes(&[1, 0, 0, 0, 0, 0, 0, 1], 1, &mut one).unwrap();
        assert_eq!(one, [0b1000_0001]);
    }

    #[test]
    fn thresholds_match_baseband() {
        assert_eq!(quantise(-2.2, 2), 0);
        assert_eq!(quantise(-2.1, 2), 1);
        assert_eq!(quantise(-0.0001, 2), 1);
        assert_eq!(quantise(0.0, 2), 2);
        assert_eq!(quantise(2.2, 2), 3);
        assert_eq!(quantise(0.0, 1), 1);
        assert_eq!(quantise(-0.1, 1), 0);
    }

    #[test]
    fn wider_codes_match_baseband_levels() {
        // 4-bit: two values per byte, low nibble first; 8-bit: one per byte.
        assert_eq!(
            decode_values(&[0x8f, 0x00, 0x00, 0x00], 4, false).unwrap()[..2],
            [7.0 / 2.95, 0.0]
        );
        assert_eq!(
            decode_values(&[0, 255, 128, 127], 8, true).unwrap(),
            [-127.5 / 35.5, 127.5 / 35.5, 0.5 / 35.5, -0.5 / 35.5]
        );
        assert!(matches!(
            decode_values(&[0; 4], 5, true),
            Err(CodecError::Unsupported { bits: 5, complex: true })
        ));
    }

    #[test]
    fn unsupported_bits_rejected() {
        assert!(matches!(unpack_codes(&[0], 4), Err(CodecError::Encoding { bits: 4 })));
        assert!(pack_codes(&[0, 1, 2], 2, &mut [0u8; 1]).is_err());
    }

    proptest! {
        #[test]
        fn codes_and_samples_pack_and_unpack_to_themselves(bits in 1u8..=2, nbytes in 0usize..64, seed in any::<u64>()) {
            let per = 8 / bits as usize;
            let mut s = seed;
            let codes: Vec<u8> = (0..nbytes * per).map(|_| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 33) as u8) & ((1 << bits) - 1) }).collect();
            let mut packed = vec![0u8; nbytes];
            pack_codes(&codes, bits, &mut packed).unwrap();
            prop_assert_eq!(unpack_codes(&packed, bits).unwrap(), codes.clone());
            let levels: &[f32] = if bits == 1 { &LEVELS_1BIT } else { &LEVELS_2BIT };
            let values: Vec<f32> = codes.iter().map(|&c| levels[c as usize]).collect();
            let mut again = vec![0u8; nbytes];
            encode(&values, bits, &mut again).unwrap();
            prop_assert_eq!(again, packed);
        }

        #[test]
        fn channels_interleave_and_deinterleave_to_themselves(ch in 1usize..9, n in 0usize..50) {
            let v: Vec<u32> = (0..(ch * n) as u32).collect();
            prop_assert_eq!(interleave(&deinterleave(&v, ch)), v);
        }
    }
}
