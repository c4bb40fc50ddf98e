//! `kolibri bench`: llama-bench's method on Kolibri. For each model, thread count, KV cache
//! types (`-ctk`, `-ctv`), depth (`-d`) and test: one warm-up run, then `-r` timed runs, each
//! after `depth` tokens already in the cache (filled once, untimed, and rewound to between
//! runs); prompt processing (`pp N`) is one batch of N tokens, generation (`tg N`) is N tokens
//! one at a time. Tokens are random ids (the speed does not depend on them). Reports mean and
//! standard deviation of tokens/s. With `--draft MODEL` or `--lookup`, speculative decoding
//! instead ([`crate::bench_spec`]).

use std::sync::Arc;
use std::time::Instant;

use kolibri::model::{Context, ContextParams, KvType, Logits};
use kolibri::tokenizer::TokenId;

use crate::args::Args;

struct Row {
    model: String,
    size_bytes: u64,
    n_params: u64,
    threads: usize,
    type_k: KvType,
    type_v: KvType,
    depth: usize,
    test: String,
    n_tokens: usize,
    /// tokens/s of each timed run
    samples: Vec<f64>,
}

impl Row {
    fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }
    fn stddev(&self) -> f64 {
        let n = self.samples.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.samples.iter().map(|s| (s - m) * (s - m)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
}

fn list(a: &Args, names: &[&str], default: &str) -> Result<Vec<usize>, String> {
    a.get(names)
        .unwrap_or(default)
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("bad value {s:?} for {}", names.join("/")))
        })
        .collect()
}

/// A deterministic stream of token ids below `n_vocab` (xorshift).
struct RandomTokens(u64, usize);

impl RandomTokens {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % self.1 as u64) as u32
    }
    fn take(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.next()).collect()
    }
}

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "bench",
        raw,
        &[
            "-m",
            "--model",
            "-hf",
            "--hf-repo",
            "-p",
            "--n-prompt",
            "-n",
            "--n-gen",
            "-t",
            "--threads",
            "-r",
            "--repetitions",
            "-o",
            "--output",
            "-d",
            "--n-depth",
            "-f",
            "--file",
        ]
        .into_iter()
        .chain(crate::KV_TYPE_FLAGS)
        .chain(crate::speculate::FLAGS)
        .collect::<Vec<_>>(),
        &[&crate::LOAD_SWITCHES[..], &crate::speculate::SWITCHES].concat(),
    )?;
    // `-m A,B`: each a path or a stored model's name.
    let models: Vec<(String, String)> = match a.get(&crate::MODEL_FLAGS[..2]) {
        Some(list) if a.get(&crate::MODEL_FLAGS[2..]).is_none() => list
            .split(',')
            .map(crate::store::resolve_named)
            .collect::<Result<_, _>>()?,
        _ => {
            let path = crate::model_path(&a)?;
            let name = crate::store::file_name(&path);
            vec![(path, name)]
        }
    };
    let prompts = list(&a, &["-p", "--n-prompt"], "512")?;
    let gens = list(&a, &["-n", "--n-gen"], "128")?;
    let threads = list(
        &a,
        &["-t", "--threads"],
        &crate::default_threads().to_string(),
    )?;
    let depths = list(&a, &["-d", "--n-depth"], "0")?;
    let kv_list = |names: &[&str]| -> Result<Vec<KvType>, String> {
        let names = a.get(names).unwrap_or("f16");
        names.split(',').map(crate::parse_kv_type).collect()
    };
    let types_k = kv_list(&crate::KV_TYPE_FLAGS[..2])?;
    let types_v = kv_list(&crate::KV_TYPE_FLAGS[2..])?;
    let reps: usize = a.parse_or(&["-r", "--repetitions"], 5)?;
    let output = a.get(&["-o", "--output"]).unwrap_or("md");
    if reps == 0 || threads.contains(&0) {
        return Err("-r and -t must be at least 1".into());
    }
    if !matches!(output, "md" | "json") {
        return Err(format!("-o must be md or json, not {output:?}"));
    }
    let drafts = ["-md", "--draft", "--draft-assistant"];
    if a.get(&drafts).is_some() || a.has("--lookup") || crate::speculate::wants_mtp(&a)? {
        let n_gen = a.parse_or(&["-n", "--n-gen"], 128)?;
        return crate::bench_spec::main(&a, &threads, reps, n_gen);
    }

    let mut rows = Vec::new();
    for (path, name) in &models {
        let model = Arc::new(crate::load_model(path, &a)?);
        let size_bytes = model.gguf.size_on_disk();
        let longest = prompts.iter().chain(&gens).copied().max().unwrap_or(1);
        let n_ctx = (longest + depths.iter().copied().max().unwrap_or(0)).max(1);
        if n_ctx > model.hparams.n_ctx_train {
            return Err(format!(
                "{name}: depth + test of {n_ctx} tokens is past the model's {} trained positions",
                model.hparams.n_ctx_train
            ));
        }
        for &t in &threads {
            for (&type_k, &type_v) in types_k
                .iter()
                .flat_map(|k| types_v.iter().map(move |v| (k, v)))
            {
                let params = ContextParams {
                    n_ctx,
                    n_threads: t,
                    n_batch: prompts.iter().copied().max().unwrap_or(512).max(512),
                    n_seq: 1,
                    type_k,
                    type_v,
                };
                let mut ctx =
                    Context::new(Arc::clone(&model), &params).map_err(|e| e.to_string())?;
                let mut tokens = RandomTokens(0x9E37_79B9_7F4A_7C15, model.hparams.n_vocab);
                for &depth in &depths {
                    // The depth's tokens once; every run rewinds to them.
                    ctx.truncate(0);
                    if depth > 0 {
                        ctx.eval(&tokens.take(depth), Logits::Last)
                            .map_err(|e| e.to_string())?;
                    }
                    let depth_tokens = ctx.seq_tokens(0).to_vec();
                    let tests = prompts
                        .iter()
                        .filter(|&&p| p > 0)
                        .map(|&p| (format!("pp{p}"), p, true))
                        .chain(
                            gens.iter()
                                .filter(|&&n| n > 0)
                                .map(|&n| (format!("tg{n}"), n, false)),
                        );
                    for (test, n, is_prompt) in tests {
                        let run = (n, is_prompt, reps);
                        let samples = time_runs(&mut ctx, &depth_tokens, &mut tokens, run)?;
                        let row = Row {
                            model: name.clone(),
                            size_bytes,
                            n_params: model.n_params(),
                            threads: t,
                            type_k,
                            type_v,
                            depth,
                            test,
                            n_tokens: n,
                            samples,
                        };
                        if output == "md" {
                            print_md(&row, rows.is_empty());
                        }
                        rows.push(row);
                    }
                }
            }
        }
    }
    if output == "json" {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                let samples: Vec<String> = r.samples.iter().map(|s| format!("{s:.4}")).collect();
                format!(
                    "  {{\"model\": {:?}, \"size_bytes\": {}, \"n_params\": {}, \"threads\": {}, \
                     \"type_k\": \"{}\", \"type_v\": \"{}\", \"n_depth\": {}, \
                     \"test\": {:?}, \"n_tokens\": {}, \"avg_ts\": {:.4}, \"stddev_ts\": {:.4}, \
                     \"samples_ts\": [{}]}}",
                    r.model,
                    r.size_bytes,
                    r.n_params,
                    r.threads,
                    r.type_k,
                    r.type_v,
                    r.depth,
                    r.test,
                    r.n_tokens,
                    r.mean(),
                    r.stddev(),
                    samples.join(", ")
                )
            })
            .collect();
        println!("[\n{}\n]", items.join(",\n"));
    }
    Ok(())
}

/// One warm-up and `reps` timed runs of a test of `n` tokens (a prompt, or generated one by
/// one), each from `depth_tokens` in the cache; tokens/s of the timed ones.
fn time_runs(
    ctx: &mut Context,
    depth_tokens: &[TokenId],
    tokens: &mut RandomTokens,
    (n, is_prompt, reps): (usize, bool, usize),
) -> Result<Vec<f64>, String> {
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..=reps {
        // A recurrent state may not rewind that far: what it cannot keep is evaluated again,
        // untimed.
        let kept = ctx.truncate(depth_tokens.len());
        if kept < depth_tokens.len() {
            ctx.eval(&depth_tokens[kept..], Logits::Last)
                .map_err(|e| e.to_string())?;
        }
        let seconds = if is_prompt {
            let batch = tokens.take(n);
            let start = Instant::now();
            ctx.eval(&batch, Logits::Last).map_err(|e| e.to_string())?;
            start.elapsed().as_secs_f64()
        } else {
            let start = Instant::now();
            for _ in 0..n {
                let tok = tokens.next();
                ctx.eval(&[tok], Logits::Last).map_err(|e| e.to_string())?;
            }
            start.elapsed().as_secs_f64()
        };
        if rep > 0 {
            // Run 0 is the warm-up.
            samples.push(n as f64 / seconds);
        }
    }
    Ok(samples)
}

/// One row of the Markdown table (after its header when `first`).
fn print_md(row: &Row, first: bool) {
    if first {
        println!("| model | size | params | threads | type_k | type_v | test | t/s | ms/run |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    }
    let depth = match row.depth {
        0 => String::new(),
        d => format!(" @ d{d}"),
    };
    println!(
        "| {} | {:.1} MiB | {:.0} M | {} | {} | {} | {}{depth} | {:.2} ± {:.2} | {:.1} |",
        row.model,
        row.size_bytes as f64 / 1048576.0,
        row.n_params as f64 / 1e6,
        row.threads,
        row.type_k,
        row.type_v,
        row.test,
        row.mean(),
        row.stddev(),
        1000.0 * row.n_tokens as f64 / row.mean()
    );
}
