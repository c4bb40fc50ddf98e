//! How a matmul is cut into parallel tasks and cache-sized row blocks.

/// Bytes of weight rows in one row block: they stay in L2 while every token group passes
/// over them, and a token group's activations stay in L1 while the block's rows stream by.
pub(crate) const ROW_BLOCK_BYTES: usize = 96 * 1024;
/// Minimum multiply-adds per parallel task (about 5-10 us), so scheduling overhead stays
/// small.
const MIN_TASK_MACS: usize = 1 << 16;

/// Rows per parallel task: about 4 tasks per thread for balance, at least `MIN_TASK_MACS` of
/// work each unless that would leave a thread idle while there is work enough for all, and
/// equal tasks in a multiple of the thread count so no thread waits on a lone straggler.
/// Tasks hold whole tiles of `tile_rows` rows.
pub(crate) fn task_rows(rows: usize, row_macs: usize, threads: usize, tile_rows: usize) -> usize {
    let rows = rows.max(1);
    let min_rows = (MIN_TASK_MACS / row_macs.max(1)).max(1);
    let mut n = rows.div_ceil(rows.div_ceil(4 * threads).max(min_rows));
    if threads > 1 && rows * row_macs >= threads * MIN_TASK_MACS {
        n = n.max(threads);
    }
    if n > 1 {
        n = n.next_multiple_of(threads);
    }
    rows.div_ceil(n.min(rows)).next_multiple_of(tile_rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (tasks, largest task) for a matrix of `rows` rows, `k * n` MACs per row.
    fn split(rows: usize, k: usize, n: usize, threads: usize) -> (usize, usize) {
        let c = task_rows(rows, k * n, threads, 1);
        (rows.div_ceil(c), c)
    }

    #[test]
    fn task_split_keeps_threads_busy() {
        // Small K/V projection: every thread gets work at prompt and at generation size.
        assert!(split(128, 896, 256, 2).0 >= 4);
        assert!(split(128, 896, 1, 2).0 >= 2);
        // Equal tasks, a multiple of the threads.
        let (n, c) = split(896, 896, 1, 2);
        assert_eq!(n % 2, 0);
        assert!(c * n - 896 < n);
        // Big matrices: about 4 tasks per thread.
        assert_eq!(split(8960, 1536, 256, 2).0, 8);
        // Tiny work: one task, no scheduling.
        assert_eq!(split(16, 64, 1, 2).0, 1);
        // One thread: few big tasks; every row covered.
        let (n, c) = split(4864, 896, 1, 1);
        assert!(n * c >= 4864 && n <= 4);
        assert_eq!(split(1, 32, 1, 4), (1, 1));
    }
}
