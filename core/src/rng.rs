//! Injected randomness: a seeded SplitMix64, so every id and jitter the core makes is
//! reproducible from the seed in the config (the core reads no global randomness).

#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The stream of start `epoch` on one store: the first start (`epoch` 0) draws exactly what
    /// [`Rng::new`] does, and each later one another stream, so a device restarted with the same
    /// seed never makes an id again that its store already holds.
    pub fn for_start(seed: u64, epoch: u64) -> Self {
        if epoch == 0 {
            return Rng::new(seed);
        }
        Rng::new(seed ^ Rng::new(epoch).next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound` > 0); the tiny modulo bias does not matter for ids or jitter.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        self.next_u64() % bound.max(1)
    }

    /// `n` lowercase base-36 characters, for ids such as `ses_…`.
    pub fn token(&mut self, n: usize) -> String {
        const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        (0..n)
            .map(|_| ALPHABET[self.below(36) as usize] as char)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert_eq!(a.token(12), b.token(12));
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }
}
