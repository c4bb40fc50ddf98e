//! `kolibri bench --draft MODEL` / `--lookup`: speculative decoding measured against plain
//! greedy decoding of the same prompt, side by side in one run. Random tokens never speculate,
//! so the prompt is real text (`-f FILE`). For each thread count: one
//! warm-up and `-r` timed runs of each mode, `-n` tokens each after the prompt (the prompt's
//! evaluation untimed). Reports generation tokens/s of both, the speed-up, the acceptance rate,
//! tokens accepted and generated per target pass, and whether both modes produced the same
//! tokens (greedy speculation must).

use std::sync::Arc;
use std::time::Instant;

use kolibri::model::{Context, ContextParams, Logits};
use kolibri::sampling::{Sampler, SamplerParams};
use kolibri::speculative::SpecStats;
use kolibri::tokenizer::TokenId;

use crate::args::Args;

/// One timed generation: its tokens, tokens/s and (speculative) statistics.
struct Generation {
    tokens: Vec<TokenId>,
    tokens_per_s: f64,
    stats: Option<SpecStats>,
}

pub fn main(a: &Args, threads: &[usize], reps: usize, n_gen: usize) -> Result<(), String> {
    let path = &crate::model_path(a)?;
    if path.contains(',') {
        return Err("speculative bench takes one target model (-m)".into());
    }
    let file = a
        .get(&["-f", "--file"])
        .ok_or("speculative bench needs a real prompt: -f FILE (random tokens never speculate)")?;
    let prompt = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    if n_gen == 0 {
        return Err("speculative bench needs -n above 0".into());
    }
    let model = Arc::new(crate::load_model(path, a)?);
    let draft = crate::speculate::load_draft(a, &model)?;
    let tokens = model.tokenizer.encode(&prompt, true, false);
    let n_ctx = tokens.len() + n_gen + 64;
    let assistant = matches!(draft, Some(crate::speculate::DraftModel::Assistant(_)));
    let mtp = crate::speculate::wants_mtp(a)?;
    let mode = match (&draft, a.has("--lookup")) {
        _ if assistant && a.has("--lookup") => "assistant+lookup",
        _ if assistant => "assistant",
        _ if mtp && a.has("--lookup") => "mtp+lookup",
        _ if mtp => "mtp",
        (Some(_), true) => "draft+lookup",
        (Some(_), false) => "draft",
        _ => "lookup",
    };
    println!(
        "| model | mode | threads | prompt | tg | plain t/s | speculative t/s | speed-up | \
         accepted | acc./pass | tok./pass | same tokens |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for &t in threads {
        let params = ContextParams {
            n_ctx,
            n_threads: t,
            ..ContextParams::default()
        };
        let mut ctx = Context::new(Arc::clone(&model), &params).map_err(|e| e.to_string())?;
        let (mut plain, mut spec) = (Vec::new(), Vec::new());
        for rep in 0..=reps {
            // Alternated, so drift in the machine's speed falls on both alike.
            let p = generate(&mut ctx, &tokens, n_gen, None)?;
            let drafter = crate::speculate::build(a, &mut ctx, draft.as_ref(), t)?
                .ok_or("speculative bench needs --draft MODEL, --draft-assistant FILE, --lookup or --spec mtp")?;
            let s = generate(&mut ctx, &tokens, n_gen, Some(drafter))?;
            if rep > 0 {
                plain.push(p);
                spec.push(s);
            }
        }
        let mean =
            |g: &[Generation]| g.iter().map(|x| x.tokens_per_s).sum::<f64>() / g.len() as f64;
        let (plain_ts, spec_ts) = (mean(&plain), mean(&spec));
        let stats = spec.last().and_then(|g| g.stats).unwrap_or_default();
        let same = plain.iter().zip(&spec).all(|(p, s)| p.tokens == s.tokens);
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.to_string(), |f| f.to_string_lossy().into_owned());
        println!(
            "| {name} | {mode} | {t} | {} | {n_gen} | {plain_ts:.2} | {spec_ts:.2} | {:.2}x | \
             {:.1}% | {:.2} | {:.2} | {} |",
            tokens.len(),
            spec_ts / plain_ts,
            100.0 * stats.acceptance(),
            stats.accepted_per_pass(),
            stats.tokens_per_pass(),
            if same { "yes" } else { "NO" }
        );
        if !same {
            return Err("speculative greedy output differs from plain greedy output".into());
        }
    }
    Ok(())
}

/// Greedy generation of `n` tokens after `prompt` from an empty context, plainly or through
/// `speculation`; only the generation is timed (a draft model evaluates the prompt before).
fn generate(
    ctx: &mut Context,
    prompt: &[TokenId],
    n: usize,
    speculation: Option<crate::speculate::Speculation>,
) -> Result<Generation, String> {
    ctx.truncate(0);
    let mut sampler = Sampler::new(SamplerParams::greedy()).map_err(|e| e.to_string())?;
    sampler.suppress(ctx.model().tokenizer.suppressed());
    let logits = ctx.eval(prompt, Logits::Last).map_err(|e| e.to_string())?;
    let mut out = vec![sampler.sample(&logits)];
    sampler.accept(out[0]);
    let mut speculation = speculation;
    if let Some((drafter, _)) = &mut speculation {
        match drafter.on_target() {
            true => drafter.prepare_on_target(ctx, 0),
            false => drafter.prepare(prompt),
        }
        .map_err(|e| e.to_string())?;
    }
    let start = Instant::now();
    while out.len() < n {
        let last = *out.last().unwrap();
        let next = match &mut speculation {
            Some((drafter, s)) => s
                .step(drafter.as_mut(), ctx, 0, last, &mut sampler)
                .map_err(|e| e.to_string())?,
            None => {
                let l = ctx.eval(&[last], Logits::Last).map_err(|e| e.to_string())?;
                let tok = sampler.sample(&l);
                sampler.accept(tok);
                vec![tok]
            }
        };
        out.extend(next);
    }
    let secs = start.elapsed().as_secs_f64();
    out.truncate(n);
    Ok(Generation {
        tokens_per_s: (n - 1) as f64 / secs,
        tokens: out,
        stats: speculation.map(|(_, s)| s.stats()),
    })
}
