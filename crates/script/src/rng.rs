//! A table's generator: SplitMix64, 64 bits of state saved with the table.
//!
//! Why SplitMix64: one `u64` of state (saved as a JSON string), a full
//! period of 2^64, good enough statistics for shuffling dice and cards, and
//! a few lines that the TypeScript SDK's harness (game-harness.ts) repeats
//! exactly, so a module draws the same numbers under the harness as in the
//! server. Not for secrets: it is seeded unpredictably per table, and its
//! state never leaves the server.

/// See the module's doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// A generator seeded from the operating system.
    pub fn from_os() -> SplitMix {
        let mut b = [0u8; 8];
        // Without OS randomness (never seen on Linux) the seed is the time:
        // still different per table, only less unpredictable.
        if getrandom::fill(&mut b).is_err() {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            b = t.to_le_bytes();
        }
        SplitMix(u64::from_le_bytes(b))
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1): the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // SplitMix64 seeded with 0: the published first outputs.
        let mut g = SplitMix(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let x = SplitMix(1).next_f64();
        assert!((0.0..1.0).contains(&x));
    }
}
