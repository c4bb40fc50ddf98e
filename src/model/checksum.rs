//! A fast 64-bit checksum for files Kolibri writes and reads back (repacked weights, saved
//! state): four multiply-rotate lanes over little-endian words, then the tail and the length.
//! It catches torn, truncated or corrupted data, not adversaries.

const K: u64 = 0x9E37_79B9_7F4A_7C15;
/// Bytes the four lanes take per step.
const STEP: usize = 32;

/// The checksum of `bytes` in one call.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut c = Checksum::new();
    c.update(bytes);
    c.finish()
}

/// The checksum fed in pieces: any split of the same bytes gives [`checksum`]'s value.
#[derive(Clone, Debug)]
pub struct Checksum {
    lanes: [u64; 4],
    /// Bytes not yet making a whole step.
    pending: [u8; STEP],
    n_pending: usize,
    len: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    pub fn new() -> Checksum {
        Checksum {
            lanes: [K, K.rotate_left(16), K.rotate_left(32), K.rotate_left(48)],
            pending: [0; STEP],
            n_pending: 0,
            len: 0,
        }
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.n_pending > 0 {
            let take = (STEP - self.n_pending).min(bytes.len());
            self.pending[self.n_pending..self.n_pending + take].copy_from_slice(&bytes[..take]);
            self.n_pending += take;
            bytes = &bytes[take..];
            if self.n_pending < STEP {
                return;
            }
            let step = self.pending;
            self.mix(&step);
            self.n_pending = 0;
        }
        let mut steps = bytes.chunks_exact(STEP);
        for s in &mut steps {
            self.mix(s);
        }
        let rest = steps.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.n_pending = rest.len();
    }

    fn mix(&mut self, step: &[u8]) {
        for (i, h) in self.lanes.iter_mut().enumerate() {
            let w = u64::from_le_bytes(step[8 * i..8 * i + 8].try_into().expect("8 bytes"));
            *h = (*h ^ w).wrapping_mul(K).rotate_left(29);
        }
    }

    pub fn finish(&self) -> u64 {
        let mut h = self.len;
        for (i, &b) in self.pending[..self.n_pending].iter().enumerate() {
            h = (h ^ (b as u64) << (8 * (i % 8))).wrapping_mul(K);
        }
        for l in self.lanes {
            h = (h ^ l).wrapping_mul(K).rotate_left(31);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_split_gives_the_one_call_value() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let whole = checksum(&bytes);
        for cut in [0, 1, 31, 32, 33, 64, 500, 999, 1000] {
            for cut2 in [cut, (cut + 5).min(1000), 1000] {
                let mut c = Checksum::new();
                c.update(&bytes[..cut]);
                c.update(&bytes[cut..cut2]);
                c.update(&bytes[cut2..]);
                assert_eq!(c.finish(), whole, "cuts at {cut}, {cut2}");
            }
        }
    }

    #[test]
    fn a_changed_byte_or_length_changes_it() {
        let bytes = vec![0u8; 100];
        let base = checksum(&bytes);
        for i in [0, 31, 32, 99] {
            let mut b = bytes.clone();
            b[i] = 1;
            assert_ne!(checksum(&b), base, "byte {i}");
        }
        assert_ne!(checksum(&bytes[..99]), base);
    }
}
