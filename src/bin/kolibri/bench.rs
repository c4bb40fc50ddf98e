//! `kolibri bench`: llama-bench's method on Kolibri. For each model, thread count and test:
//! one warm-up run, then `-r` timed runs on a cleared context; prompt processing (`pp N`) is
//! one batch of N tokens, generation (`tg N`) is N tokens one at a time. Tokens are random
//! ids (the speed does not depend on them). Reports mean and standard deviation of tokens/s.

use std::sync::Arc;
use std::time::Instant;

use kolibri::model::{Context, ContextParams, Logits};

use crate::args::Args;

struct Row {
    model: String,
    size_bytes: u64,
    n_params: u64,
    threads: usize,
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
        raw,
        &[
            "-m",
            "--model",
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
        ],
        &[],
    )?;
    let models: Vec<&str> = a.require(&["-m", "--model"])?.split(',').collect();
    let prompts = list(&a, &["-p", "--n-prompt"], "512")?;
    let gens = list(&a, &["-n", "--n-gen"], "128")?;
    let threads = list(
        &a,
        &["-t", "--threads"],
        &crate::default_threads().to_string(),
    )?;
    let reps: usize = a.parse_or(&["-r", "--repetitions"], 5)?;
    let output = a.get(&["-o", "--output"]).unwrap_or("md");
    if reps == 0 || threads.contains(&0) {
        return Err("-r and -t must be at least 1".into());
    }
    if !matches!(output, "md" | "json") {
        return Err(format!("-o must be md or json, not {output:?}"));
    }

    let mut rows = Vec::new();
    for path in models {
        let model = Arc::new(crate::load_model(path)?);
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.to_string(), |f| f.to_string_lossy().into_owned());
        let size_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        let n_ctx_needed = prompts.iter().chain(&gens).copied().max().unwrap_or(1);
        for &t in &threads {
            let params = ContextParams {
                n_ctx: n_ctx_needed.min(model.hparams.n_ctx_train),
                n_threads: t,
                n_batch: prompts.iter().copied().max().unwrap_or(512).max(1),
                n_seq: 1,
            };
            let mut ctx = Context::new(Arc::clone(&model), &params).map_err(|e| e.to_string())?;
            let mut tokens = RandomTokens(0x9E37_79B9_7F4A_7C15, model.hparams.n_vocab);
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
                let mut samples = Vec::with_capacity(reps);
                for rep in 0..=reps {
                    ctx.truncate(0);
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
                let row = Row {
                    model: name.clone(),
                    size_bytes,
                    n_params: model.n_params(),
                    threads: t,
                    test,
                    n_tokens: n,
                    samples,
                };
                if output == "md" {
                    if rows.is_empty() {
                        println!("| model | size | params | threads | test | t/s | ms/run |");
                        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
                    }
                    println!(
                        "| {} | {:.1} MiB | {:.0} M | {} | {} | {:.2} ± {:.2} | {:.1} |",
                        row.model,
                        row.size_bytes as f64 / 1048576.0,
                        row.n_params as f64 / 1e6,
                        row.threads,
                        row.test,
                        row.mean(),
                        row.stddev(),
                        1000.0 * row.n_tokens as f64 / row.mean()
                    );
                }
                rows.push(row);
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
                     \"test\": {:?}, \"n_tokens\": {}, \"avg_ts\": {:.4}, \"stddev_ts\": {:.4}, \
                     \"samples_ts\": [{}]}}",
                    r.model,
                    r.size_bytes,
                    r.n_params,
                    r.threads,
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
