//! A `llama_token_data_array` as a Rust view: the candidate list each sampler narrows,
//! rescales or picks from.

use crate::types::{llama_token_data, llama_token_data_array};

pub struct Candidates<'a> {
    arr: &'a mut llama_token_data_array,
}

impl<'a> Candidates<'a> {
    /// # Safety
    /// `arr.data` is NULL or holds `arr.size` candidates, used by no one else meanwhile.
    pub unsafe fn new(arr: &'a mut llama_token_data_array) -> Candidates<'a> {
        if arr.data.is_null() {
            arr.size = 0;
        }
        Candidates { arr }
    }

    /// The array itself, for handing to another sampler's `apply`.
    pub fn raw(&mut self) -> *mut llama_token_data_array {
        self.arr
    }

    pub fn data(&mut self) -> &mut [llama_token_data] {
        if self.arr.size == 0 {
            return &mut [];
        }
        // SAFETY: `new`'s contract: `data` holds `size` candidates.
        unsafe { std::slice::from_raw_parts_mut(self.arr.data, self.arr.size) }
    }

    pub fn len(&self) -> usize {
        self.arr.size
    }

    /// Keeps the first `n` candidates.
    pub fn truncate(&mut self, n: usize) {
        self.arr.size = self.arr.size.min(n);
    }

    /// Drops the first `n` candidates (the array's start moves, as llama.cpp's XTC does).
    pub fn skip(&mut self, n: usize) {
        let n = n.min(self.arr.size);
        // SAFETY: `n` <= size, so the new start is inside the array or one past its end.
        self.arr.data = unsafe { self.arr.data.add(n) };
        self.arr.size -= n;
    }

    pub fn select(&mut self, index: usize) {
        self.arr.selected = index as i64;
    }

    pub fn mark_unsorted(&mut self) {
        self.arr.sorted = false;
    }

    /// Sorts by descending logit (stable: equal logits keep their order).
    pub fn sort(&mut self) {
        if !self.arr.sorted {
            self.data().sort_by(|a, b| b.logit.total_cmp(&a.logit));
            self.arr.sorted = true;
        }
    }

    pub fn max_logit(&mut self) -> f32 {
        self.data()
            .iter()
            .map(|c| c.logit)
            .fold(f32::NEG_INFINITY, f32::max)
    }

    /// Sets every `p` to the softmax of the logits; `sort` first when asked.
    pub fn softmax(&mut self, sort: bool) {
        if sort {
            self.sort();
        }
        let max = self.max_logit();
        let data = self.data();
        let mut sum = 0.0f64;
        for c in data.iter_mut() {
            c.p = if max == f32::NEG_INFINITY {
                1.0
            } else {
                (c.logit - max).exp()
            };
            sum += c.p as f64;
        }
        for c in data.iter_mut() {
            c.p = (c.p as f64 / sum) as f32;
        }
    }

    /// Index of the largest logit (the first of equals).
    pub fn argmax(&mut self) -> Option<usize> {
        let mut best: Option<(usize, f32)> = None;
        for (i, c) in self.data().iter().enumerate() {
            if best.is_none_or(|(_, l)| c.logit > l) {
                best = Some((i, c.logit));
            }
        }
        best.map(|(i, _)| i)
    }
}
