//! The BPE merge table: `(left part, right part) → (rank, merged part)`, grouped by left part
//! (compressed rows). A hash map of the same pairs took 5.5 MB for Qwen's 151k merges (20-byte
//! entries in a power-of-two table); this takes 2.4 MB (a start per part, then 12 bytes per
//! merge), and a lookup is two loads and a binary search over the right parts of one left part
//! (one or two for most parts, a few thousand for the commonest).

/// What merging a pair gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Merge {
    /// The merge's line in the merge list: lower merges first.
    pub rank: u32,
    /// Interned id of the merged text when that text is itself the part of some merge.
    pub result: Option<u32>,
}

/// `result` as stored: [`NO_PART`] for none.
const NO_PART: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct MergeTable {
    /// Merges of left part `l` are at `starts[l]..starts[l + 1]`.
    starts: Vec<u32>,
    /// Their right parts, ascending within each left part.
    rights: Vec<u32>,
    /// Beside `rights`: (rank, result or [`NO_PART`]).
    merges: Vec<(u32, u32)>,
}

impl MergeTable {
    /// The table of `(left, right, merge)`, left and right below `n_parts`; of pairs given
    /// more than once the lowest rank wins.
    pub fn new(n_parts: usize, mut pairs: Vec<(u32, u32, Merge)>) -> MergeTable {
        pairs.sort_unstable_by_key(|&(l, r, m)| (l, r, m.rank));
        pairs.dedup_by_key(|&mut (l, r, _)| (l, r));
        let mut starts = vec![0u32; n_parts + 1];
        for &(l, _, _) in &pairs {
            starts[l as usize + 1] += 1;
        }
        for i in 0..n_parts {
            starts[i + 1] += starts[i];
        }
        MergeTable {
            starts,
            rights: pairs.iter().map(|&(_, r, _)| r).collect(),
            merges: pairs
                .iter()
                .map(|&(_, _, m)| (m.rank, m.result.unwrap_or(NO_PART)))
                .collect(),
        }
    }

    pub fn get(&self, left: u32, right: u32) -> Option<Merge> {
        let l = left as usize;
        let (&from, &to) = (self.starts.get(l)?, self.starts.get(l + 1)?);
        let (from, to) = (from as usize, to as usize);
        let at = from + self.rights[from..to].binary_search(&right).ok()?;
        let (rank, result) = self.merges[at];
        Some(Merge {
            rank,
            result: (result != NO_PART).then_some(result),
        })
    }

    /// Heap bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        4 * (self.starts.capacity() + self.rights.capacity()) + 8 * self.merges.capacity()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn merge(rank: u32, result: Option<u32>) -> Merge {
        Merge { rank, result }
    }

    #[test]
    fn finds_what_a_hash_map_of_the_first_ranks_finds() {
        // A pseudo-random list with repeated pairs, parts that merge with nothing, and left
        // parts with many right parts.
        let n_parts = 300u32;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as u32
        };
        let mut pairs = Vec::new();
        let mut first: HashMap<(u32, u32), Merge> = HashMap::new();
        for rank in 0..5000 {
            let l = if rank % 3 == 0 { 7 } else { next(n_parts / 2) };
            let (r, result) = (next(n_parts), next(n_parts + 1));
            let m = merge(rank, (result < n_parts).then_some(result));
            first.entry((l, r)).or_insert(m);
            pairs.push((l, r, m));
        }
        // Shuffled: ranks, not order, decide which of two equal pairs wins.
        pairs.reverse();
        let table = MergeTable::new(n_parts as usize, pairs);
        for l in 0..n_parts + 2 {
            for r in 0..n_parts + 2 {
                assert_eq!(table.get(l, r), first.get(&(l, r)).copied(), "({l}, {r})");
            }
        }
        assert_eq!(table.get(u32::MAX, 0), None);
        assert!(table.bytes() <= 4 * (n_parts as usize + 1) + 12 * first.len());
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let table = MergeTable::new(0, Vec::new());
        assert_eq!(table.get(0, 0), None);
        assert_eq!(MergeTable::default().get(0, 0), None);
    }
}
