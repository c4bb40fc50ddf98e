//! Reused buffers for the forward pass.

/// f32 buffers handed back after use, so that the next layer (and the next pass) writes into
/// memory that is already mapped. A fresh buffer per matmul output (10 MB for a 512-token
/// feed-forward on the 0.5B model) page-faulted on every page: 80% of a prompt pass's page
/// faults and about 5% of its time.
#[derive(Default)]
pub(super) struct Scratch {
    free: Vec<Vec<f32>>,
}

impl Scratch {
    /// A zeroed buffer of `len` floats.
    pub fn take(&mut self, len: usize) -> Vec<f32> {
        // The same sizes come back in the same order layer after layer: the first free buffer
        // that is big enough is usually an exact fit.
        let mut buf = match self.free.iter().position(|b| b.capacity() >= len) {
            Some(i) => self.free.swap_remove(i),
            None => self.free.pop().unwrap_or_default(),
        };
        buf.clear();
        buf.resize(len, 0.0);
        buf
    }

    /// Returns buffers for later [`Scratch::take`]s.
    pub fn give<const N: usize>(&mut self, bufs: [Vec<f32>; N]) {
        self.free.extend(bufs);
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
    }
}
