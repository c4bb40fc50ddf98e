//! Reused buffers for the forward pass.

/// f32 buffers handed back after use, so that the next layer (and the next pass) writes into
/// memory that is already mapped. A fresh buffer per matmul output (10 MB for a 512-token
/// feed-forward on the 0.5B model) page-faulted on every page: 80% of a prompt pass's page
/// faults and about 5% of its time.
#[derive(Default)]
pub(super) struct Scratch {
    free: Vec<Vec<f32>>,
}

/// Free buffers kept at most; past it the smallest go. The fit rule below already bounds
/// them (a new buffer only where none is within 2x), this guards odd request patterns.
const MAX_FREE: usize = 48;

impl Scratch {
    /// A zeroed buffer of `len` floats.
    pub fn take(&mut self, len: usize) -> Vec<f32> {
        let mut buf = match self.best_fit(len, Vec::capacity) {
            Some(i) => self.free.swap_remove(i),
            None => Vec::new(),
        };
        buf.clear();
        buf.resize(len, 0.0);
        buf
    }

    /// A buffer of `len` floats whose old contents are left where they fit: for outputs that
    /// are written whole (a matmul's), so the zeroing of [`Scratch::take`] (2% of a prompt
    /// pass) is skipped. Only floats past the buffer's last length are zeroed.
    pub fn take_for_overwrite(&mut self, len: usize) -> Vec<f32> {
        let mut buf = match self.best_fit(len, Vec::len) {
            Some(i) => self.free.swap_remove(i),
            None => return self.take(len),
        };
        buf.resize(len, 0.0);
        buf
    }

    /// The free buffer with the smallest `size(buffer) >= len`, among those whose capacity is
    /// at most twice `len`. A bigger one stays for a bigger request: handed to a small one it
    /// came back truncated, and growing it again for the next big request zeroed the
    /// difference (2% of a 512-token pass: the feed-forward outputs each layer).
    fn best_fit(&self, len: usize, size: fn(&Vec<f32>) -> usize) -> Option<usize> {
        let most = len.saturating_mul(2).max(64);
        (0..self.free.len())
            .filter(|&i| size(&self.free[i]) >= len && self.free[i].capacity() <= most)
            .min_by_key(|&i| size(&self.free[i]))
    }

    /// Returns buffers for later [`Scratch::take`]s.
    pub fn give<const N: usize>(&mut self, bufs: [Vec<f32>; N]) {
        self.free.extend(bufs);
        while self.free.len() > MAX_FREE {
            if let Some(smallest) = (0..self.free.len()).min_by_key(|&i| self.free[i].capacity()) {
                self.free.swap_remove(smallest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_zeroed_and_reused() {
        let mut s = Scratch::default();
        let mut a = s.take(1000);
        a.iter_mut().for_each(|v| *v = 1.0);
        let ptr = a.as_ptr();
        s.give([a, vec![2.0; 10]]);
        let b = s.take(800);
        assert_eq!(b.as_ptr(), ptr, "the big enough buffer is reused");
        assert!(b.len() == 800 && b.iter().all(|&v| v == 0.0));
        let c = s.take(4000);
        assert!(c.len() == 4000 && c.iter().all(|&v| v == 0.0));
        s.give([b, c]);
        let d = s.take_for_overwrite(3000);
        assert_eq!(d.len(), 3000);
        let e = s.take_for_overwrite(5000);
        assert!(e.len() == 5000 && e.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn big_buffers_wait_for_big_requests() {
        let mut s = Scratch::default();
        let mut big = s.take(10_000);
        big.iter_mut().for_each(|v| *v = 7.0);
        let ptr = big.as_ptr();
        s.give([big]);
        // A request under half its size gets a buffer of its own...
        let small = s.take_for_overwrite(1000);
        assert_ne!(small.as_ptr(), ptr);
        let zeroed = s.take(3000);
        assert_ne!(zeroed.as_ptr(), ptr);
        // ...so the big one comes back whole, its contents kept rather than zeroed again.
        let again = s.take_for_overwrite(9000);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.len() == 9000 && again.iter().all(|&v| v == 7.0));
        s.give([small, zeroed, again]);
        for _ in 0..2 * MAX_FREE {
            s.give([vec![0.0; 8]]);
        }
        assert_eq!(s.free.len(), MAX_FREE);
        assert!(
            s.free.iter().any(|b| b.as_ptr() == ptr),
            "the smallest go first"
        );
    }
}
