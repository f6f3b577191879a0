//! Normal-distribution helpers for sampler statistics.
//!
//! Hand-written because the one crate that offers them (statrs) pulls in a linear-algebra
//! stack we do not otherwise need; both formulas are short and cited.

/// Standard normal CDF Φ(x), via the complementary error function of Numerical Recipes
/// (`erfcc`, Chebyshev fit, |relative error| < 1.2e-7).
pub fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

/// Inverse standard normal CDF Φ⁻¹(p) for 0 < p < 1 (P. J. Acklam's rational approximation,
/// relative error < 1.15e-9). Returns ±infinity at 0 and 1 and NaN outside [0, 1].
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let low = 0.024_25;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

/// Decision threshold of the optimal (minimum mean-square error) 4-level quantiser of a unit
/// Gaussian: ±0.9816 σ (J. Max, "Quantizing for minimum distortion", IRE Trans. IT-6, 1960).
pub const OPTIMAL_2BIT_THRESHOLD_SIGMA: f64 = 0.9816;

/// Expected fractions of the four 2-bit states (−−, −, +, ++) for a Gaussian sampled with
/// thresholds at ±`threshold_sigma` σ: about 16.3 / 33.7 / 33.7 / 16.3 % at the optimum.
pub fn expected_2bit_fractions(threshold_sigma: f64) -> [f64; 4] {
    let outer = 1.0 - normal_cdf(threshold_sigma);
    [outer, 0.5 - outer, 0.5 - outer, outer]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_and_quantile_agree() {
        for &x in &[-4.0, -2.5, -1.0, -0.3, 0.0, 0.7, 1.5, 3.0] {
            assert!((normal_quantile(normal_cdf(x)) - x).abs() < 1e-5, "x = {x}");
        }
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-7);
        let f = expected_2bit_fractions(OPTIMAL_2BIT_THRESHOLD_SIGMA);
        assert!((f[0] - 0.1632).abs() < 5e-4 && (f[1] - 0.3368).abs() < 5e-4);
    }
}
