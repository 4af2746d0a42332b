//! splitmix64: a tiny seeded generator for the randomised tests, so every failure names
//! the seed that replays it.

/// The generator; `Rng(seed)` starts it at a fixed seed.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `WEIR_SEED` if set, else from the clock; prints the seed under `label`.
    pub fn from_env(label: &str) -> Rng {
        let seed = std::env::var("WEIR_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        println!("{label}: seed {seed} (rerun with WEIR_SEED={seed})");
        Rng(seed)
    }

    /// The seed it would replay from now.
    pub fn state(&self) -> u64 {
        self.0
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}
