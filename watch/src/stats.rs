//! Robust statistics over small scratch slices (the slices are reordered).

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for an empty slice. Reorders `values`.
pub fn median(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    let (low, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = low.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lower + upper) / 2.0)
}

/// The median absolute deviation from `center`, scaled by 1.4826 so that it
/// estimates a normal distribution's standard deviation. Overwrites `values`.
pub fn scaled_mad(values: &mut [f64], center: f64) -> f64 {
    for v in values.iter_mut() {
        *v = (*v - center).abs();
    }
    1.4826 * median(values).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn one_wild_value_does_not_move_the_mad() {
        let mut v = [1.0, 1.1, 0.9, 1.0, 1000.0];
        let mad = scaled_mad(&mut v, 1.0);
        assert!(mad < 0.2, "{mad}");
    }
}
