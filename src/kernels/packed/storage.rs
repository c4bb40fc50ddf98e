//! Where a repacked matrix's arrays live: a fresh anonymous mapping that the repack fills, or
//! a region of a repack cache file mapped read-only (`model::repack_cache`).

use std::sync::Arc;

/// Types for which every bit pattern, all-zero included, is a valid value: what a fresh
/// mapping or a cache file's bytes may be read as.
///
/// # Safety
/// Implement only for plain data (integers, f16 bits, arrays and `repr(C)` structs of them).
pub unsafe trait Zeroable: Copy {}

/// `len` values of `T`, page-aligned: zeros in a fresh anonymous mapping (its pages stay
/// untouched, not resident, until the repack writes them, so the resident total grows only as
/// fast as the source is released; the heap's zeroed allocations write every byte for
/// alignments over 16), or a read-only region of a mapped cache file.
pub struct Zeroed<T> {
    store: Store,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

enum Store {
    Empty,
    Anon(memmap2::MmapMut),
    File {
        map: Arc<memmap2::Mmap>,
        offset: usize,
    },
}

impl<T: Zeroable> Zeroed<T> {
    pub(crate) fn new(len: usize) -> Zeroed<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("repacked matrix too large");
        let store = if bytes == 0 {
            Store::Empty
        } else {
            let map = memmap2::MmapMut::map_anon(bytes).unwrap_or_else(|e| {
                panic!("cannot allocate {bytes} bytes for repacked weights: {e}")
            });
            // Transparent huge pages where the system allows them: 512 times fewer page faults
            // while the repack fills the mapping (its page zeroing dominated load time), and
            // fewer TLB misses for the kernels streaming the weights. Only advice.
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            Store::Anon(map)
        };
        Zeroed {
            store,
            len,
            _t: std::marker::PhantomData,
        }
    }

    /// `len` values at byte `offset` of `map`; `None` unless they lie inside it, aligned for
    /// `T`.
    pub(crate) fn mapped(map: &Arc<memmap2::Mmap>, offset: usize, len: usize) -> Option<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(bytes)?;
        let aligned = (map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<T>());
        if end > map.len() || !aligned {
            return None;
        }
        Some(Zeroed {
            store: if len == 0 {
                Store::Empty
            } else {
                Store::File {
                    map: Arc::clone(map),
                    offset,
                }
            },
            len,
            _t: std::marker::PhantomData,
        })
    }

    /// The values' bytes (what a repack cache stores).
    pub(crate) fn bytes(&self) -> &[u8] {
        let n = self.len * std::mem::size_of::<T>();
        match &self.store {
            Store::Empty => &[],
            Store::Anon(m) => &m[..n],
            Store::File { map, offset } => &map[*offset..*offset + n],
        }
    }
}

impl<T: Zeroable> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let bytes = self.bytes();
        // SAFETY: the region holds len Ts (checked in `mapped`; sized in `new`), aligned for
        // T (a page-aligned mapping, or checked in `mapped`); Zeroable says any bits are a
        // valid T.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, self.len) }
    }
}

impl<T: Zeroable> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.store {
            Store::Empty => &mut [],
            // SAFETY: as in deref; the mapping is uniquely borrowed.
            Store::Anon(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, self.len)
            },
            // Only the repack writes, and only into the fresh mappings it allocates.
            Store::File { .. } => unreachable!("a cached repacked matrix is read-only"),
        }
    }
}
