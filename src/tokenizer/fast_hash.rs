//! A small multiplicative hasher (the Fx scheme used by rustc) for the tokenizer's lookup
//! tables: keys are vocabulary strings and id pairs from trusted model files, so SipHash's
//! flooding resistance buys nothing and costs a large share of load and encode time.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

pub(crate) fn fast_map<K, V>(capacity: usize) -> FastMap<K, V> {
    FastMap::with_capacity_and_hasher(capacity, Default::default())
}

/// Ids of distinct strings, found by text, for strings the caller already stores (the
/// vocabulary's token texts, the merge list's parts): open addressing over `(id, tag)` slots,
/// 8 bytes each. A `HashMap<String, u32>` would copy every text (a heap block each) into
/// 32-byte entries: 150k-260k tokens cost 10-15 MB and a third of the tokenizer's load time.
#[derive(Debug, Default)]
pub(crate) struct IdTable {
    slots: Vec<Slot>,
    len: usize,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// `EMPTY` for a free slot.
    id: u32,
    /// Low bits of the text's hash: most mismatches are rejected without reading the text.
    tag: u32,
}

const EMPTY: u32 = u32::MAX;

/// Where [`IdTable::find`] stopped: the free slot a missing text goes to.
pub(crate) struct Vacant {
    slot: usize,
    tag: u32,
}

impl IdTable {
    /// A table for about `n` texts (it grows past that).
    pub fn with_capacity(n: usize) -> IdTable {
        IdTable {
            slots: vec![Slot { id: EMPTY, tag: 0 }; Self::slots_for(n)],
            len: 0,
        }
    }

    /// At most half full: short probe runs.
    fn slots_for(n: usize) -> usize {
        (2 * n).next_power_of_two().max(16)
    }

    /// Fx over the bytes, then a finalizer (splitmix64's) so that every bit depends on the
    /// whole text: Fx alone leaves the low bits of short texts to their first bytes, and the
    /// tags are the low bits.
    fn hash(text: &str) -> u64 {
        let mut h = FxHasher::default();
        h.write(text.as_bytes());
        h.write_usize(text.len());
        let mut x = h.finish();
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// The slot to start probing at: the hash's high bits (the multiply leaves the low ones
    /// weak).
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// The id stored for `text`, or the free slot where it would go. `text_of(id)` gives the
    /// text of an id already in the table.
    pub fn find<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Result<u32, Vacant> {
        self.probe(text, text_of).map(|slot| self.slots[slot].id)
    }

    /// [`IdTable::find`], giving the slot of a text that is present.
    fn probe<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Result<usize, Vacant> {
        let hash = Self::hash(text);
        let tag = hash as u32;
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let s = self.slots[i];
            if s.id == EMPTY {
                return Err(Vacant { slot: i, tag });
            }
            if s.tag == tag && text_of(s.id) == text {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(text, text_of).ok()
    }

    /// Stores `id` where [`IdTable::find`] found no entry (no other insert in between), then
    /// grows the table if it is over half full (`text_of` must know `id` by then).
    pub fn fill<'t>(&mut self, at: Vacant, id: u32, text_of: impl Fn(u32) -> &'t str) {
        debug_assert_ne!(id, EMPTY);
        self.slots[at.slot] = Slot { id, tag: at.tag };
        self.len += 1;
        if 2 * self.len > self.slots.len() {
            let old = std::mem::replace(
                &mut self.slots,
                vec![Slot { id: EMPTY, tag: 0 }; Self::slots_for(self.len + 1)],
            );
            let mask = self.slots.len() - 1;
            for s in old.into_iter().filter(|s| s.id != EMPTY) {
                let mut i = self.home(Self::hash(text_of(s.id)));
                while self.slots[i].id != EMPTY {
                    i = (i + 1) & mask;
                }
                self.slots[i] = s;
            }
        }
    }

    /// Points `text` at `id`, replacing the id it had.
    pub fn insert<'t>(&mut self, text: &str, id: u32, text_of: impl Fn(u32) -> &'t str + Copy) {
        match self.probe(text, text_of) {
            Ok(slot) => self.slots[slot].id = id,
            Err(at) => self.fill(at, id, text_of),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a `HashMap` over many texts: growth from a small table, a replaced id, texts
    /// that share prefixes and lengths, and misses (the empty text among them).
    #[test]
    fn id_table_matches_a_hash_map() {
        let texts: Vec<String> = (0..5000)
            .map(|i| format!("Ġtok{}", i % 4000))
            .chain(["", "a", "ab", "ba"].map(String::from))
            .collect();
        let mut table = IdTable::with_capacity(3);
        let mut want = HashMap::new();
        let text_of = |id: u32| texts[id as usize].as_str();
        for (id, t) in texts.iter().enumerate() {
            table.insert(t, id as u32, text_of);
            want.insert(t.as_str(), id as u32);
        }
        for t in &texts {
            assert_eq!(
                table.get(t, text_of),
                want.get(t.as_str()).copied(),
                "{t:?}"
            );
        }
        // Duplicates: the last id wins.
        assert_eq!(table.get("Ġtok7", text_of), Some(4007));
        for miss in ["Ġtok4000", "Ġtok", "abc", "b"] {
            assert_eq!(table.get(miss, text_of), None);
        }
        assert_eq!(IdTable::default().get("a", text_of), None);
    }
}
