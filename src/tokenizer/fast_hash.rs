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

/// Ids of distinct strings, found by text, for strings the caller already stores (the
/// vocabulary's token texts, the merge list's parts): open addressing over 4-byte slots. A
/// `HashMap<String, u32>` would copy every text (a heap block each) into 32-byte entries:
/// 150k-260k tokens cost 10-15 MB and a third of the tokenizer's load time.
///
/// A slot holds `id + 1` in its low `id_bits` bits (0: free) and the high bits of the text's
/// hash above them, so most mismatches are rejected without reading the text: a 262k-token
/// vocabulary leaves 13 bits of tag. The id field widens (and the tag narrows) if larger ids
/// come.
#[derive(Debug, Default)]
pub(crate) struct IdTable {
    slots: Vec<u32>,
    len: usize,
    id_bits: u32,
}

const FREE: u32 = 0;

/// Where [`IdTable::find`] stopped: the free slot a missing text goes to.
pub(crate) struct Vacant {
    slot: usize,
    hash: u64,
}

impl IdTable {
    /// A table for about `n` texts with ids below `n` (it grows past both).
    pub fn with_capacity(n: usize) -> IdTable {
        IdTable {
            slots: vec![FREE; Self::slots_for(n)],
            len: 0,
            id_bits: Self::bits_for(n as u64),
        }
    }

    /// Slots for `n` entries: at most four fifths full. A miss then probes about 13 slots, 52
    /// bytes (4-byte slots, 16 to a cache line), and the tags reject them without reading a
    /// text. Any size, not a power of two: a 262k vocabulary takes 1.3 MB (two thirds full:
    /// 1.5; a power of two: 2).
    fn slots_for(n: usize) -> usize {
        (n + n / 4 + 1).max(16)
    }

    /// Whether `len` entries overfill the table.
    fn over_full(&self) -> bool {
        4 * self.slots.len() < 5 * self.len
    }

    /// Width of an id field that holds `id + 1` for ids below `n`.
    fn bits_for(n: u64) -> u32 {
        (64 - n.leading_zeros()).clamp(1, 32)
    }

    /// Fx over the bytes, then a finalizer (splitmix64's) so that every bit depends on the
    /// whole text: Fx alone leaves the low bits of short texts to their first bytes.
    fn hash(text: &str) -> u64 {
        let mut h = FxHasher::default();
        h.write(text.as_bytes());
        h.write_usize(text.len());
        let mut x = h.finish();
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// The slot to start probing at, from the hash's high 32 bits scaled to the table.
    fn home(&self, hash: u64) -> usize {
        (((hash >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    /// The slot after `i`, wrapping.
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// The tag bits of a slot for `hash` (the id field's bits zero): the hash's low bits,
    /// independent of the high ones that chose the slot.
    fn tag(&self, hash: u64) -> u32 {
        if self.id_bits >= 32 {
            0
        } else {
            (hash as u32) << self.id_bits
        }
    }

    fn id_mask(&self) -> u32 {
        if self.id_bits >= 32 {
            u32::MAX
        } else {
            (1 << self.id_bits) - 1
        }
    }

    /// The id stored for `text`, or the free slot where it would go. `text_of(id)` gives the
    /// text of an id already in the table.
    pub fn find<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Result<u32, Vacant> {
        let mask = self.id_mask();
        self.probe(text, text_of)
            .map(|slot| (self.slots[slot] & mask) - 1)
    }

    /// [`IdTable::find`], giving the slot of a text that is present.
    fn probe<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Result<usize, Vacant> {
        let hash = Self::hash(text);
        let (tag, id_mask) = (self.tag(hash), self.id_mask());
        let mut i = self.home(hash);
        loop {
            let s = self.slots[i];
            if s == FREE {
                return Err(Vacant { slot: i, hash });
            }
            if s & !id_mask == tag && text_of((s & id_mask) - 1) == text {
                return Ok(i);
            }
            i = self.next(i);
        }
    }

    pub fn get<'t>(&self, text: &str, text_of: impl Fn(u32) -> &'t str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(text, text_of).ok()
    }

    /// Stores `id` where [`IdTable::find`] found no entry (no other insert in between), then
    /// rebuilds the table if it is over full or `id` needs a wider field (`text_of` must
    /// know `id` by then).
    pub fn fill<'t>(&mut self, at: Vacant, id: u32, text_of: impl Fn(u32) -> &'t str) {
        debug_assert_ne!(id, u32::MAX);
        self.len += 1;
        if Self::bits_for(id as u64 + 1) > self.id_bits {
            self.rebuild(Some(id), text_of);
            return;
        }
        self.slots[at.slot] = self.tag(at.hash) | (id + 1);
        if self.over_full() {
            self.rebuild(None, text_of);
        }
    }

    /// Rehashes every entry, plus `extra`, into a table with room for as many again (growth
    /// stays amortised), with an id field wide enough for `extra`.
    fn rebuild<'t>(&mut self, extra: Option<u32>, text_of: impl Fn(u32) -> &'t str) {
        let old_mask = self.id_mask();
        let mut ids: Vec<u32> = self
            .slots
            .iter()
            .filter(|&&s| s != FREE)
            .map(|&s| (s & old_mask) - 1)
            .collect();
        if let Some(id) = extra {
            ids.push(id);
            self.id_bits = self.id_bits.max(Self::bits_for(id as u64 + 1));
        }
        self.slots = vec![FREE; Self::slots_for(2 * self.len + 1)];
        for id in ids {
            let hash = Self::hash(text_of(id));
            let mut i = self.home(hash);
            while self.slots[i] != FREE {
                i = self.next(i);
            }
            self.slots[i] = self.tag(hash) | (id + 1);
        }
    }

    /// Points `text` at `id`, replacing the id it had.
    pub fn insert<'t>(&mut self, text: &str, id: u32, text_of: impl Fn(u32) -> &'t str + Copy) {
        match self.probe(text, text_of) {
            Ok(slot) if Self::bits_for(id as u64 + 1) > self.id_bits => {
                // Too wide for the field: drop the old entry and re-add the text through a
                // rebuild (the free slot's broken probe chain is rebuilt with the rest).
                self.slots[slot] = FREE;
                self.rebuild(Some(id), text_of);
            }
            Ok(slot) => self.slots[slot] = (self.slots[slot] & !self.id_mask()) | (id + 1),
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

    /// Ids wider than the table's id field: re-pointing a present text, adding a new one, and
    /// ids that leave no tag bits at all.
    #[test]
    fn id_table_widens_its_id_field() {
        let texts = ["a", "b", "c", "d"];
        // Each id's text: the id's low bits pick it, so huge ids still have a text.
        let text_of = |id: u32| texts[(id & 3) as usize];
        let mut table = IdTable::with_capacity(2);
        table.insert("a", 0, text_of);
        table.insert("b", 1, text_of);
        table.insert("a", 4 << 20, text_of);
        assert_eq!(table.get("a", text_of), Some(4 << 20));
        assert_eq!(table.get("b", text_of), Some(1));
        table.insert("c", (1 << 31) + 2, text_of);
        table.insert("d", u32::MAX - 4, text_of);
        for (t, id) in [
            ("a", 4 << 20),
            ("b", 1),
            ("c", (1 << 31) + 2),
            ("d", u32::MAX - 4),
        ] {
            assert_eq!(table.get(t, text_of), Some(id), "{t}");
        }
        assert_eq!(table.get("e", text_of), None);
    }
}
