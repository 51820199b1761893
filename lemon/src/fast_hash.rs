//! A hasher for keys that come from our own database (row ids, node ids,
//! node and user names): SipHash's resistance to chosen keys is not needed
//! there, and it showed in the profiles of the ingest, scoring and the
//! reliability report, which hash once per run or per node slot.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by ids or names from lemon.db.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// FNV-1a over bytes (names are short); integers by a multiplication
/// (Fibonacci hashing, odd: consecutive ids never collide in the low bits).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

impl FastHasher {
    fn mix(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(FIBONACCI);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_i64(&mut self, n: i64) {
        self.mix(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_land_in_different_buckets() {
        let hash = |n: i64| {
            let mut h = FastHasher::default();
            h.write_i64(n);
            h.finish()
        };
        let low: std::collections::BTreeSet<u64> = (0..1024).map(|n| hash(n) & 1023).collect();
        assert_eq!(low.len(), 1024);
    }

    #[test]
    fn maps_keyed_by_names_and_pairs_find_what_they_hold() {
        let mut m: FastMap<(u32, i64), u32> = FastMap::default();
        m.insert((1, 2), 3);
        m.insert((2, 1), 4);
        assert_eq!((m[&(1, 2)], m[&(2, 1)]), (3, 4));
        let mut names: FastMap<String, i64> = FastMap::default();
        names.insert("gpu001".into(), 1);
        assert_eq!(names.get("gpu001"), Some(&1));
        assert_eq!(names.get("gpu002"), None);
    }
}
