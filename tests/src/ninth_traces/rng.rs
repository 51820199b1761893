//! The generator's only source of randomness: SplitMix64, so a seed gives
//! the same bytes on every platform and every Rust version.

pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6A09_E667_F3BC_C909)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub(super) fn f(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }

    /// Uniform integer in [lo, hi], both ends included.
    pub(super) fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }

    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.f() < p
    }

    /// Standard normal (Box-Muller; one of the pair is dropped, which costs
    /// speed but keeps the stream simple).
    pub(super) fn normal(&mut self) -> f64 {
        let u1 = self.f().max(1e-12);
        let u2 = self.f();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// One of `items`, drawn by weight.
    pub(super) fn pick<T: Copy>(&mut self, items: &[(T, f64)]) -> T {
        let total: f64 = items.iter().map(|(_, w)| w).sum();
        let mut x = self.f() * total;
        for (item, w) in items {
            if x < *w {
                return *item;
            }
            x -= w;
        }
        items[items.len() - 1].0
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic draw in [0, 1) from two keys, for per-(event, node)
/// offsets that need no stored state.
pub(super) fn unit2(a: u64, b: u64) -> f64 {
    (mix(a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ mix(b.wrapping_add(0x1234_5678))) >> 11) as f64
        / (1u64 << 53) as f64
}
