//! Every kernel against a naive softmax over the values as the cache stores them.

use super::*;
use crate::model::kv_cache::{group_start, kv_heads, KvShape};

const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const HK: usize = 64;
const HV: usize = 32;

fn r(i: usize) -> f32 {
    ((i * 7919 % 1000) as f32 / 500.0) - 1.0
}

/// A one-layer cache of `n_pos` positions of sequence 0 (and `extra` empty sequences' rows).
fn cache(n_ctx: usize, n_pos: usize, type_k: KvType, type_v: KvType) -> KvCache {
    let mut kv = KvCache::new(&KvShape {
        layers: vec![kv_heads(N_HEAD_KV, HK, HV)],
        n_ctx,
        n_seq: 2,
        type_k,
        type_v,
    })
    .unwrap();
    for seq in 0..2 {
        for p in 0..n_pos {
            store_row(&mut kv, seq, p);
        }
    }
    kv
}

fn store_row(kv: &mut KvCache, seq: usize, p: usize) {
    let row = kv.row(seq, p);
    let k: Vec<f32> = (0..N_HEAD_KV * HK).map(|d| r(row * 977 + d)).collect();
    let v: Vec<f32> = (0..N_HEAD_KV * HV).map(|d| r(row * 661 + d + 3)).collect();
    kv.store(0, row, &k, &v);
}

/// Row `p` of a head's values as the cache holds it, in f32.
fn stored(h: &crate::model::kv_cache::HeadRows, p: usize, dim: usize) -> Vec<f32> {
    let mut out = vec![0.0; dim];
    h.widen(p..p + 1, &mut out);
    out
}

/// Row `p` of a head's keys as a query reads them, in f32.
fn key(h: &crate::model::kv_cache::KeyRows, p: usize, dim: usize) -> Vec<f32> {
    let mut out = vec![0.0; dim];
    h.widen(p..p + 1, &mut out);
    out
}

/// Per head, a full softmax over the visible rows in f64.
fn naive(s: &AttentionShape, q: &[f32], kv: &KvCache, places: &[QueryPlace]) -> Vec<f32> {
    let mut out = vec![0.0; places.len() * s.n_head * s.head_dim_v];
    for (t, &place) in places.iter().enumerate() {
        for h in 0..s.n_head {
            let kvh = h / s.group();
            let (keys, values) = (kv.keys_for(0, kvh, place), kv.values(0, kvh));
            let qh = &q[(t * s.n_head + h) * s.head_dim_k..][..s.head_dim_k];
            let rows = visible(s, place);
            let sc: Vec<f64> = rows
                .clone()
                .map(|p| {
                    let dot: f64 = key(&keys, p, s.head_dim_k)
                        .iter()
                        .zip(qh)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum();
                    s.score.of(dot as f32) as f64
                })
                .collect();
            // The sink: one more logit in the softmax, with no value.
            let sink = s.sinks.map_or(f64::NEG_INFINITY, |k| k[h] as f64);
            let m = sc.iter().copied().fold(sink, f64::max);
            let z: f64 = sc.iter().map(|x| (x - m).exp()).sum::<f64>() + (sink - m).exp();
            for (j, p) in rows.enumerate() {
                let w = (sc[j] - m).exp() / z;
                for (d, v) in stored(&values, p, s.head_dim_v).iter().enumerate() {
                    out[(t * s.n_head + h) * s.head_dim_v + d] += (w * *v as f64) as f32;
                }
            }
        }
    }
    out
}

fn shape(window: usize, softcap: f32) -> AttentionShape<'static> {
    AttentionShape {
        n_head: N_HEAD,
        n_head_kv: N_HEAD_KV,
        head_dim_k: HK,
        head_dim_v: HV,
        score: AttnScore::scaled(0.2).with_softcap(softcap),
        window,
        sinks: None,
    }
}

/// Sink logits per head: below the scores (they still take some weight), and above them (a
/// head that mostly attends to nothing; one so far above that its output is almost 0).
const MILD_SINKS: [f32; N_HEAD] = [-0.5, 0.3, 1.0, -2.0];
const DOMINANT_SINKS: [f32; N_HEAD] = [8.0, 12.0, 9.0, 50.0];

/// How close each kernel comes to the f64 softmax: the tiled one exactly (f32); the
/// per-query one accumulates values in f16; the streaming one is f32 but for queries
/// quantized to Q8_0 against quantized keys.
fn tolerance(kv: &KvCache, s: &AttentionShape, places: &[QueryPlace]) -> f32 {
    let deepest = places.iter().map(|&p| visible(s, p).len()).max().unwrap();
    let f16 = kv.type_k() == KvType::F16 && kv.type_v() == KvType::F16;
    match () {
        _ if places.len() >= TILED_FROM => 1e-5,
        _ if f16 && deepest <= SPLIT_ROWS => 4e-3,
        _ if kv.type_k() != KvType::F16 => 2e-2,
        _ => 1e-4,
    }
}

/// `n` queries at positions `pos0..` of sequence `seq`. Their keys are stored again first,
/// as they were when those queries were the newest (so a ring holds their groups in f16).
fn check(kv: &mut KvCache, s: &AttentionShape, seq: usize, pos0: usize, n: usize) {
    for p in group_start(pos0)..pos0 + n {
        store_row(kv, seq, p);
    }
    let kv = &*kv;
    let places: Vec<QueryPlace> = (0..n)
        .map(|t| QueryPlace {
            seq_row0: kv.row(seq, 0),
            pos: pos0 + t,
        })
        .collect();
    let tol = tolerance(kv, s, &places);
    let q: Vec<f32> = (0..n * N_HEAD * HK).map(|i| 2.0 * r(i + 11)).collect();
    let mut out = vec![f32::NAN; n * N_HEAD * HV];
    attention(s, &q, kv, 0, &places, &mut out);
    let want = naive(s, &q, kv, &places);
    for (i, (a, b)) in out.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() < tol,
            "{}/{} n {n} at {pos0} window {} cap {} sinks {:?}: [{i}] {a} vs {b}",
            kv.type_k(),
            kv.type_v(),
            s.window,
            s.score.softcap,
            s.sinks
        );
    }
}

#[test]
fn every_kernel_matches_naive_softmax() {
    let cases = [
        (0, 0.0, None),
        (5, 0.0, None),
        (0, 1.5, None),
        (700, 0.0, None),
        (0, 0.0, Some(&MILD_SINKS)),
        (5, 0.0, Some(&DOMINANT_SINKS)),
        (700, 0.0, Some(&DOMINANT_SINKS)),
    ];
    for (window, softcap, sinks) in cases {
        let s = AttentionShape {
            sinks: sinks.map(|k| &k[..]),
            ..shape(window, softcap)
        };
        // f16: per-query, tiled, and streaming past SPLIT_ROWS rows (chunks merged).
        let mut kv = cache(2600, 2600, KvType::F16, KvType::F16);
        check(&mut kv, &s, 0, 40, 3);
        check(&mut kv, &s, 1, 0, 70);
        check(&mut kv, &s, 0, 2500, 2);
        check(&mut kv, &s, 1, SPLIT_ROWS - 1, 1);
        check(&mut kv, &s, 1, SPLIT_ROWS, 1);
        // Quantized: streaming and tiled.
        for (tk, tv) in [
            (KvType::Q8_0, KvType::Q8_0),
            (KvType::Q4_0, KvType::Q4_0),
            (KvType::F16, KvType::Q8_0),
            (KvType::Q8_0, KvType::F16),
        ] {
            let mut kv = cache(1500, 1500, tk, tv);
            check(&mut kv, &s, 0, 30, 3);
            check(&mut kv, &s, 1, 1400, 1);
            check(&mut kv, &s, 0, 100, 80);
        }
    }
}

/// The split into chunks and head parts does not depend on the thread count.
#[test]
fn streaming_results_do_not_depend_on_threads() {
    let s = shape(0, 0.0);
    let kv = cache(3000, 3000, KvType::Q8_0, KvType::F16);
    let places = [QueryPlace {
        seq_row0: 0,
        pos: 2999,
    }];
    let q: Vec<f32> = (0..N_HEAD * HK).map(|i| r(i + 5)).collect();
    let run = |threads| {
        let mut out = vec![0.0; N_HEAD * HV];
        let pool = crate::parallel::Pool::new(threads).unwrap();
        pool.install(|| attention(&s, &q, &kv, 0, &places, &mut out));
        out
    };
    assert_eq!(run(1), run(4));
}

/// A sequence's few queries give the same bits whether or not another sequence's prompt
/// chunk (tiled) shares their batch, and that chunk the bits it gets alone.
#[test]
fn a_query_does_not_depend_on_other_sequences_in_its_batch() {
    let s = shape(0, 0.0);
    let kv = cache(200, 200, KvType::F16, KvType::F16);
    let places_of = |seq: usize, pos0: usize, n: usize| -> Vec<QueryPlace> {
        let seq_row0 = kv.row(seq, 0);
        (0..n)
            .map(|t| QueryPlace {
                seq_row0,
                pos: pos0 + t,
            })
            .collect()
    };
    let width = N_HEAD * HK;
    let run = |places: &[QueryPlace], q_offset: usize| {
        let q: Vec<f32> = (0..places.len() * width).map(|i| r(i + q_offset)).collect();
        let mut out = vec![f32::NAN; places.len() * N_HEAD * HV];
        attention(&s, &q, &kv, 0, places, &mut out);
        out
    };
    let (few, prompt) = (places_of(1, 150, 3), places_of(0, 10, TILED_FROM));
    let mixed: Vec<QueryPlace> = few.iter().chain(&prompt).copied().collect();
    // The queries of the mixed batch are those of the two alone, in the same order.
    let alone_few = run(&few, 0);
    let alone_prompt = run(&prompt, few.len() * width);
    let together = run(&mixed, 0);
    let split = few.len() * N_HEAD * HV;
    assert_eq!(together[..split], alone_few[..]);
    assert_eq!(together[split..], alone_prompt[..]);
}
