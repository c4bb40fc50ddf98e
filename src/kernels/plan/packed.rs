//! The driver for repacked weights: parallel chunks of row groups; within a chunk, row blocks
//! that stay in L2 while every token chunk passes over them; AMX tiles first for whole pairs
//! × whole 16-token tiles where the path has them, then the vector kernels (two groups per
//! call from `pair_min` tokens on, else one) for the rest.

use super::tasks::{task_rows, ROW_BLOCK_BYTES};
use crate::kernels::activations::QuantizedActivations;
use crate::kernels::packed::{
    token_data, Layout, PackedKernels, Side, TokenRows, GROUP, MAX_WIDTH, PAIR, TILE_TOKENS,
};
use crate::kernels::KernelError;
use crate::parallel::Disjoint;

/// `out[t * rows + r] = W[r] · x[t]` for repacked `w` with kernels `k`.
pub(crate) fn run<L: Layout>(
    w: &L,
    k: &PackedKernels<L>,
    act: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let (rows, wk, nb) = w.shape();
    let n = act.n_tokens();
    let wrong_format = || KernelError::ActivationFormat {
        weight: L::TYPE,
        got: act.format(),
    };
    let (a, sides) = token_data::<L>(act).ok_or_else(wrong_format)?;
    if act.k() != wk || out.len() != rows * n {
        return Err(KernelError::Shape(format!(
            "{rows} x {wk} weights, {n} x {} activations, output {}",
            act.k(),
            out.len()
        )));
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let groups = rows.div_ceil(GROUP);
    // Tasks and row blocks hold whole pairs where pairs run.
    let pairs = |groups: usize| match k.pair {
        Some(_) => groups.next_multiple_of(2),
        None => groups,
    };
    let threads = crate::parallel::threads();
    let chunk = pairs(task_rows(groups, GROUP * wk * n, threads, 1));
    // Groups whose weights stay in L2 while each token chunk passes over them.
    let block = pairs((ROW_BLOCK_BYTES / w.group_bytes().max(1)).max(1));
    let sides = &sides[..];
    let ptr = Disjoint::new(out);
    let task = move |c: usize| {
        let (g0, g1) = (c * chunk, ((c + 1) * chunk).min(groups));
        let rows_of = |t: usize| TokenRow::<L> {
            a: a.get(t * nb..(t + 1) * nb).unwrap_or(&[]),
            sides: sides.get(t * nb..(t + 1) * nb).unwrap_or(&[]),
        };
        let store = Store { out: ptr, rows };
        // Whole pairs × whole 16-token tiles on AMX tiles where the path has them.
        if let Some(tiles) = k.tiles.filter(|_| n >= TILE_TOKENS && g1 - g0 >= 2) {
            let (gp, nt) = (g0 + (g1 - g0) / 2 * 2, n / TILE_TOKENS * TILE_TOKENS);
            let mut put_pair = |g: usize, t0: usize, o: &[[f32; PAIR]]| {
                for (t, o) in (t0..).zip(o) {
                    store.put(g, t, o);
                }
            };
            // SAFETY: the tiles come from the table of a backend's path (AMX, granted);
            // g0..gp are whole pairs of existing groups; `a` and `sides` hold n token rows of
            // nb blocks.
            unsafe { tiles(w, g0, gp, (a, sides), nt, &mut put_pair) };
            vector(w, k, (gp, g1, 0), (n, block), &rows_of, &store);
            vector(w, k, (g0, gp, nt), (n, block), &rows_of, &store);
            return;
        }
        vector(w, k, (g0, g1, 0), (n, block), &rows_of, &store);
    };
    let n_chunks = groups.div_ceil(chunk.max(1));
    // Serial for one chunk or one thread.
    crate::parallel::for_each(n_chunks, task);
    Ok(())
}

/// One token's activation blocks and their side data.
struct TokenRow<'a, L: Layout> {
    a: &'a [L::Act],
    sides: &'a [Side<L>],
}

/// Where a task writes its groups' rows.
#[derive(Clone, Copy)]
struct Store {
    out: Disjoint<f32>,
    rows: usize,
}

impl Store {
    /// Rows from group `g`'s first on, for token `t` (one or two groups), as one store of a
    /// fixed size where the groups are whole (a checked store per element was 6% of a prompt
    /// pass). The partial copy stays out of line: inlined, LLVM merged both into one
    /// `memcpy` of a computed size.
    #[inline]
    fn put<const N: usize>(&self, g: usize, t: usize, o: &[f32; N]) {
        let row0 = g * GROUP;
        let len = N.min(self.rows.saturating_sub(row0));
        // SAFETY: t < n and rows row0..row0 + len < rows index `out`; the groups are this
        // task's.
        let dst = unsafe { self.out.slice(t * self.rows + row0, len) };
        match <&mut [f32; N]>::try_from(&mut *dst) {
            Ok(whole) => *whole = *o,
            Err(_) => put_partial(dst, o),
        }
    }
}

#[cold]
#[inline(never)]
fn put_partial(dst: &mut [f32], o: &[f32]) {
    dst.copy_from_slice(&o[..dst.len()]);
}

/// Groups `ga..gb` × tokens `ta..n` on the vector kernels (the scalar twin where the path
/// has none), row block by row block, token chunk by token chunk.
fn vector<'a, L: Layout>(
    w: &L,
    k: &PackedKernels<L>,
    (ga, gb, ta): (usize, usize, usize),
    (n, block): (usize, usize),
    rows_of: &impl Fn(usize) -> TokenRow<'a, L>,
    store: &Store,
) {
    let mut o = [[0f32; GROUP]; MAX_WIDTH];
    let mut o2 = [[0f32; PAIR]; MAX_WIDTH];
    for b0 in (ga..gb).step_by(block) {
        let b1 = (b0 + block).min(gb);
        let mut t = ta;
        while t < n {
            let step = (n - t).min(k.width);
            let row: [TokenRow<L>; MAX_WIDTH] =
                std::array::from_fn(|j| rows_of((t + j).min(n - 1)));
            let rows = TokenRows {
                a: std::array::from_fn(|j| row[j].a),
                sides: std::array::from_fn(|j| row[j].sides),
            };
            let mut g = b0;
            while g < b1 {
                let pair = k.pair.as_ref().filter(|_| step >= k.pair_min && g + 1 < b1);
                if let Some(pair) = pair {
                    let o = &mut o2[..step];
                    // SAFETY: the kernels come from the table of a backend's path, which the
                    // CPU runs; groups g and g + 1 exist; every token row has `nb` blocks and
                    // sides.
                    unsafe { pair[step - 1](w, g, &rows, o) };
                    for (j, o) in o.iter().enumerate() {
                        store.put(g, t + j, o);
                    }
                    g += 2;
                    continue;
                }
                let o = &mut o[..step];
                match &k.group {
                    // SAFETY: as above; group g exists.
                    Some(group) => unsafe { group[step - 1](w, g, &rows, o) },
                    None => w.scalar_group(g, &rows.a[..step], &rows.sides[..step], o),
                }
                for (j, o) in o.iter().enumerate() {
                    store.put(g, t + j, o);
                }
                g += 1;
            }
            t += step;
        }
    }
}

/// What the kernels `k` run, in words (for `kolibri info`).
pub(crate) fn describe<L: Layout>(k: &PackedKernels<L>) -> String {
    let vector = match (k.group, k.pair) {
        (_, Some(_)) if k.pair_min <= 1 => {
            format!("{} kernels on two groups (16 rows) per call", k.pair_isa)
        }
        (_, Some(_)) => format!(
            "{} kernels on two groups (16 rows) per call of {}+ tokens, {} x8 kernels below",
            k.pair_isa, k.pair_min, k.group_isa
        ),
        _ => format!("{} x8 kernels", k.group_isa),
    };
    let tiles = match k.tiles {
        Some(_) => "; amx-int8 tiles for 16-token tiles of batches (KOLIBRI_AMX=0: off)",
        None => "",
    };
    format!(
        "activations {}; repacked into 8-row groups at load; {vector}, calls of up to {} \
         tokens{tiles} (KOLIBRI_REPACK=0: in place)",
        <L::Act as crate::kernels::activations::ActElem>::FORMAT.name(),
        k.width
    )
}
