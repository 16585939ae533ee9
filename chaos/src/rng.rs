//! A small seeded generator (SplitMix64): the whole run follows from one
//! seed, and every decision is drawn from a generator derived from the seed
//! and what it is about (a request, a completion call), so that a failure
//! can be replayed with the same seed.

#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for one thing: the seed mixed with the thing's name.
    pub fn derived(seed: u64, parts: &[u64]) -> Rng {
        let mut rng = Rng(seed);
        for part in parts {
            rng.0 ^= part.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            rng.next();
        }
        rng
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= probability
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A stable hash of text, to derive generators from it.
pub fn hash(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}
