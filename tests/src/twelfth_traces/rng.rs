//! A small deterministic PRNG (splitmix64) and stateless hash noise.
//!
//! The generator must give identical bytes for a seed on every platform, so
//! it carries its own generator instead of depending on `rand`'s algorithms.

/// splitmix64: tiny, fast and good enough for synthetic traces.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5eed_1e40_0d0c_7a11)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f()
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.f() < p
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.f().max(1e-12);
        let v = self.f();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Index drawn with the given weights.
    pub fn weighted(&mut self, w: &[f64]) -> usize {
        let total: f64 = w.iter().sum();
        let mut x = self.f() * total;
        for (i, wi) in w.iter().enumerate() {
            if x < *wi {
                return i;
            }
            x -= wi;
        }
        w.len() - 1
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.int(0, xs.len() as i64 - 1) as usize]
    }
}

/// The splitmix64 finaliser.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Stateless noise in [0, 1) keyed by a few integers, so an effect can ask
/// "what happened on node n in block b" without keeping state per node.
pub fn h01(a: u64, b: u64, c: u64) -> f64 {
    let z = mix(a ^ mix(b.wrapping_add(0x1234_5678) ^ mix(c.wrapping_add(0xabcd))));
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Stateless standard-ish normal noise (sum of three uniforms, centred).
pub fn hn(a: u64, b: u64, c: u64) -> f64 {
    (h01(a, b, c) + h01(a ^ 0x77, b, c) + h01(a ^ 0x99, b, c) - 1.5) * 2.0
}
