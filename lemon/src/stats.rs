//! The little statistics lemon needs, in one place: the Poisson tail that
//! decides whether a node's failures are improbable, the chi-square
//! quantiles of the reliability report's MTTF intervals (which rest on the
//! same tail), and empirical quantiles and medians.

/// Below this many degrees of freedom the chi-square quantile is computed
/// exactly (through the Poisson identity); above, the Wilson–Hilferty
/// approximation is accurate to well under 0.1%.
const EXACT_DOF_LIMIT: u64 = 400;

/// Quantile `p` of the chi-square distribution with `dof` degrees of
/// freedom, for even `dof` (the only kind the exponential interval needs).
pub fn chi2_quantile_even(p: f64, dof: u64) -> f64 {
    assert!(dof >= 2 && dof & 1 == 0, "even dof expected, got {dof}");
    assert!(p > 0.0 && p < 1.0, "probability expected, got {p}");
    if dof > EXACT_DOF_LIMIT {
        let k = dof as f64;
        let z = normal_quantile(p);
        let h = 2.0 / (9.0 * k);
        return k * (1.0 - h + z * h.sqrt()).powi(3);
    }
    let k = u32::try_from(dof / 2).expect("dof is at most EXACT_DOF_LIMIT");
    // P(χ²_{2k} ≤ x) = P(Poisson(x/2) ≥ k): bisect on x.
    let cdf = |x: f64| poisson_tail(k, x / 2.0);
    let (mut lo, mut hi) = (0.0, dof as f64 + 40.0 * (dof as f64).sqrt() + 50.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// P(X >= k) for X ~ Poisson(mu), summed from k upward so that tiny tails
/// keep their precision (a lemon's p-value can be 1e-30; `1 - cdf` would
/// read 0).
pub fn poisson_tail(k: u32, mu: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if mu <= 0.0 {
        return 0.0;
    }
    let mut log_term = -mu + f64::from(k) * mu.ln() - ln_factorial(k);
    let mut sum = 0.0;
    let mut i = k;
    loop {
        let term = log_term.exp();
        sum += term;
        i += 1;
        log_term += mu.ln() - f64::from(i).ln();
        if (term < sum * 1e-15 && f64::from(i) > mu) || i > k + 100_000 {
            break;
        }
    }
    sum.min(1.0)
}

fn ln_factorial(n: u32) -> f64 {
    (2..=n).map(|i| f64::from(i).ln()).sum()
}

/// Quantile of the standard normal distribution (Acklam's rational
/// approximation, relative error below 1.2e-9).
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
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Empirical quantile of sorted values (nearest rank).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Empirical quantile of unsorted values (nearest rank; sorts them).
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    quantile_sorted(values, q)
}

/// Median of unsorted values (reorders them).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mid = values.len() / 2;
    let (_, m, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    Some(*m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi2_matches_tables() {
        // Standard table values.
        assert!((chi2_quantile_even(0.025, 2) - 0.0506).abs() < 1e-3);
        assert!((chi2_quantile_even(0.975, 2) - 7.378).abs() < 1e-3);
        assert!((chi2_quantile_even(0.975, 20) - 34.170).abs() < 1e-2);
        assert!((chi2_quantile_even(0.025, 20) - 9.591).abs() < 1e-2);
        // Approximation branch against the exact one at the seam.
        let exact = chi2_quantile_even(0.975, 400);
        let approx = {
            let k = 400.0;
            let h = 2.0 / (9.0 * k);
            k * (1.0 - h + normal_quantile(0.975) * f64::sqrt(h)).powi(3)
        };
        assert!((exact - approx).abs() / exact < 1e-3);
    }

    #[test]
    fn poisson_tail_matches_known_values() {
        assert!((poisson_tail(1, 1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        assert!((poisson_tail(3, 2.0) - 0.323_323_583_816_936_5).abs() < 1e-12);
        assert!(poisson_tail(20, 0.1) < 1e-30);
        assert_eq!(poisson_tail(0, 5.0), 1.0);
    }

    #[test]
    fn normal_quantile_known_points() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-6);
        assert!(normal_quantile(0.5).abs() < 1e-12);
    }

    #[test]
    fn quantiles() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.5), 2.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert_eq!(quantile(&mut [4.0, 1.0, 3.0, 2.0], 0.5), 2.0);
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
    }
}
