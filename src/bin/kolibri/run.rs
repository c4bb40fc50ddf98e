//! `kolibri run`: generate text from a prompt, streaming it, then print timings. As with
//! llama-cli, a model with a chat template answers the prompt as a user's message (one turn)
//! unless `--raw` / `-no-cnv` asks for a plain completion or the prompt is already formatted
//! (it holds the template's special tokens).

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use kolibri::batching::StopMatcher;
use kolibri::chat::reasoning::ReasoningSplitter;
use kolibri::chat::{ChatMessage, ChatTemplate};
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::Sampler;
use kolibri::tokenizer::{StreamDecoder, TokenId};

use crate::args::Args;
use crate::reply::{ReplyPrinter, Thinking};

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "run",
        raw,
        &[
            "-m",
            "--model",
            "-hf",
            "--hf-repo",
            "-p",
            "--prompt",
            "-f",
            "--file",
            "--system",
            "--chat-template-file",
            "-n",
            "--n-predict",
            "-t",
            "--threads",
            "-c",
            "--ctx-size",
            "--keep",
            "--prompt-cache",
            "--stop",
        ]
        .into_iter()
        .chain(crate::SAMPLING_FLAGS)
        .chain(crate::KV_TYPE_FLAGS)
        .chain(crate::BUDGET_FLAGS)
        .chain(crate::speculate::FLAGS)
        .chain(crate::constrain::FLAGS)
        .collect::<Vec<_>>(),
        &[
            &crate::LOAD_SWITCHES[..],
            &crate::BUDGET_SWITCHES,
            &crate::speculate::SWITCHES,
            &crate::constrain::SWITCHES,
            &["--context-shift", "--prompt-cache-ro", "--hide-thinking"],
            &["--raw", "--conversation", "--single-turn"],
        ]
        .concat(),
    )?;
    let path = &crate::model_path(&a)?;
    let prompt = &prompt_text(&a)?;
    let n_predict = crate::n_predict(&a, 128)?;
    let n_threads: usize = a.parse_or(&["-t", "--threads"], crate::default_threads())?;
    let sampler_params = crate::sampler_params(&a)?;

    let t_load = Instant::now();
    let model = Arc::new(crate::load_model(path, &a)?);
    let (tokens, template, opened) = match chat_template(&a, &model, prompt)? {
        Some(template) => {
            let (tokens, opened) = chat_prompt(&a, &model, &template, prompt)?;
            (tokens, Some(template), opened)
        }
        None => (model.tokenizer.encode(prompt, true, true), None, false),
    };
    let n_ctx_default = (tokens.len() + n_predict.min(4096))
        .max(512)
        .min(model.hparams.n_ctx_train);
    let draft = crate::speculate::load_draft(&a, &model)?;
    let draft_weights = draft.as_ref().map(crate::speculate::DraftModel::weights);
    let (n_ctx, (type_k, type_v)) = match crate::budget_fit(&a, &model, draft_weights, 1, 512)? {
        Some(fit) => (fit.n_ctx, (fit.type_k, fit.type_v)),
        None => (
            a.parse_or(&["-c", "--ctx-size"], n_ctx_default)?,
            crate::kv_types(&a)?,
        ),
    };
    let params = ContextParams {
        n_ctx,
        n_threads,
        type_k,
        type_v,
        ..ContextParams::default()
    };
    let mut ctx = Context::new(Arc::clone(&model), &params).map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(sampler_params).map_err(|e| e.to_string())?;
    sampler.suppress(model.tokenizer.suppressed());
    crate::constrain::apply(&a, &model, &mut sampler)?;
    let mut speculator = crate::speculate::build(&a, &mut ctx, draft.as_ref(), n_threads)?;
    let load_s = t_load.elapsed().as_secs_f64();
    if tokens.is_empty() {
        return Err("the prompt tokenized to nothing".into());
    }

    let mut out = std::io::stdout().lock();
    // A plain completion continues the prompt; a chat turn shows only the reply.
    if template.is_none() {
        let _ = write!(out, "{prompt}");
        let _ = out.flush();
    }

    let t_prompt = Instant::now();
    let cache = a.get(&["--prompt-cache"]).map(std::path::Path::new);
    let (logits, n_evaluated) = match cache {
        Some(file) => evaluate_with_cache(&mut ctx, &tokens, file, a.has("--prompt-cache-ro"))?,
        None => (
            ctx.eval(&tokens, Logits::Last).map_err(|e| e.to_string())?,
            tokens.len(),
        ),
    };
    let prompt_s = t_prompt.elapsed().as_secs_f64();
    // A draft model reads the prompt now, so that drafting starts with the first step.
    let t_draft_prompt = Instant::now();
    let draft_prompt = match &mut speculator {
        Some((drafter, _)) if drafter.on_target() => {
            drafter
                .prepare_on_target(&mut ctx, 0)
                .map_err(|e| format!("drafting: {e}"))?;
            Some(t_draft_prompt.elapsed().as_secs_f64())
        }
        Some((drafter, _)) if drafter.runs_model() => {
            drafter
                .prepare(&tokens)
                .map_err(|e| format!("--draft: {e}"))?;
            Some(t_draft_prompt.elapsed().as_secs_f64())
        }
        _ => None,
    };
    for &t in &tokens {
        sampler.accept(t);
    }

    let shift = a.has("--context-shift").then(|| {
        // llama.cpp's rule: -1 or more than the prompt keeps the whole prompt; otherwise the
        // BOS token is kept on top of the count.
        let bos = usize::from(model.tokenizer.add_bos());
        match a.parse_or::<i64>(&["--keep"], 0) {
            Ok(k) if k < 0 || k as usize > tokens.len() => Ok(tokens.len()),
            Ok(k) => Ok((k as usize + bos).min(tokens.len())),
            Err(e) => Err(e),
        }
    });
    let n_keep = shift.transpose()?;
    let syntax = template.as_ref().and_then(ChatTemplate::reasoning_syntax);
    let markers = syntax.map_or_else(Vec::new, |s| s.marker_tokens(&model.tokenizer));
    let mut decoder = StreamDecoder::after_prompt(&model.tokenizer).showing(&markers);
    let splitter = syntax.map(|s| ReasoningSplitter::new(s, opened, None));
    let mut printer = ReplyPrinter::new(splitter, Thinking::for_stdout(a.has("--hide-thinking")));
    // Text is printed once it cannot be the start of a stop string.
    let mut stop = StopMatcher::new(a.all("--stop"));
    let mut stopped_at_text = false;
    let t_gen = Instant::now();
    let (mut n_gen, mut n_shifts) = (0, 0);
    // Sampled tokens not yet printed; the last one printed is not yet in the cache.
    let mut fresh = std::collections::VecDeque::from([sampler.sample(&logits)]);
    sampler.accept(fresh[0]);
    'generate: loop {
        let mut last = 0;
        while let Some(tok) = fresh.pop_front() {
            n_gen += 1;
            if model.tokenizer.is_eog(tok) {
                break 'generate;
            }
            let (text, stopped) = stop.push(&decoder.push(tok));
            printer.print(&mut out, &text, false);
            if stopped {
                stopped_at_text = true;
                break 'generate;
            }
            if n_gen == n_predict {
                break 'generate;
            }
            last = tok;
        }
        if ctx.n_past() == ctx.n_ctx() {
            let Some(n_keep) = n_keep else {
                eprintln!(
                    "\nstopped: the context is full ({n_ctx} tokens; --context-shift continues)"
                );
                break;
            };
            // Forget the older half of what is not kept, as llama.cpp does.
            let n_discard = (ctx.n_past() - n_keep.min(ctx.n_past())) / 2;
            if n_discard == 0 {
                eprintln!("\nstopped: the context is full and --keep holds all of it");
                break;
            }
            ctx.shift_seq(0, n_keep, n_discard)
                .map_err(|e| e.to_string())?;
            n_shifts += 1;
        }
        let next = match &mut speculator {
            Some((drafter, s)) => s.step(drafter.as_mut(), &mut ctx, 0, last, &mut sampler),
            None => ctx.eval(&[last], Logits::Last).map(|l| {
                let tok = sampler.sample(&l);
                sampler.accept(tok);
                vec![tok]
            }),
        };
        match next {
            Ok(tokens) => fresh.extend(tokens),
            Err(e) => {
                eprintln!("\nstopped: {e}");
                break;
            }
        }
    }
    let gen_s = t_gen.elapsed().as_secs_f64();
    if !stopped_at_text {
        // Held-back bytes and text, unless they complete a stop string.
        let (text, stopped) = stop.push(&decoder.finish());
        let held = if stopped {
            String::new()
        } else {
            stop.finish()
        };
        printer.print(&mut out, &format!("{text}{held}"), true);
    } else {
        printer.print(&mut out, "", true);
    }
    let _ = writeln!(out);
    drop(out);

    eprintln!();
    eprintln!("load:       {:8.2} ms", load_s * 1e3);
    eprintln!(
        "prompt:     {:8.2} ms / {} tokens ({:.2} tokens/s)",
        prompt_s * 1e3,
        n_evaluated,
        n_evaluated as f64 / prompt_s
    );
    if let Some(secs) = draft_prompt {
        eprintln!("draft prompt: {:6.2} ms", secs * 1e3);
    }
    eprintln!(
        "generation: {:8.2} ms / {} tokens ({:.2} tokens/s)",
        gen_s * 1e3,
        n_gen,
        n_gen as f64 / gen_s
    );
    if n_shifts > 0 {
        eprintln!("context shifts: {n_shifts}");
    }
    if let Some((_, s)) = &speculator {
        crate::speculate::report(&s.stats());
    }
    Ok(())
}

/// The prompt: `-p TEXT`, `-f FILE`, or the words after the model (`kolibri run MODEL TEXT`).
fn prompt_text(a: &Args) -> Result<String, String> {
    let words = a.after_model();
    match (a.get(&["--prompt"]), a.get(&["--file"]), words) {
        (Some(p), None, []) => Ok(p.to_string()),
        (None, Some(f), []) => std::fs::read_to_string(f).map_err(|e| format!("-f {f}: {e}")),
        (None, None, [_, ..]) => Ok(words.join(" ")),
        (None, None, []) => {
            Err("missing the prompt: -p TEXT, -f FILE, or text after the model".into())
        }
        _ => Err("give the prompt once: -p TEXT, -f FILE or text after the model".into()),
    }
}

/// The template to answer the prompt through, or `None` for a plain completion: llama-cli's
/// rule, a model with a chat template chats unless `--raw` says otherwise or the prompt
/// already holds special tokens (it was formatted by hand).
fn chat_template(a: &Args, model: &Model, prompt: &str) -> Result<Option<ChatTemplate>, String> {
    let (raw, chat) = (a.has("--raw"), a.has("--conversation"));
    if raw && chat {
        return Err("give --raw (-no-cnv) or --conversation (-cnv), not both".into());
    }
    let formatted =
        model.tokenizer.encode(prompt, false, true) != model.tokenizer.encode(prompt, false, false);
    if raw || (formatted && !chat) {
        if a.get(&["--system"]).is_some() {
            return Err(
                "-sys needs a chat turn: it is not used with --raw or a formatted prompt".into(),
            );
        }
        return Ok(None);
    }
    if let Some(template) = crate::template_file(a, model)? {
        return Ok(Some(template));
    }
    match ChatTemplate::from_model(model) {
        Ok(template) => Ok(Some(template)),
        Err(e) if chat || a.get(&["--system"]).is_some() => Err(format!(
            "-cnv/-sys: the model has no usable chat template ({e})"
        )),
        Err(_) => Ok(None),
    }
}

/// The prompt as a user's message (after `-sys`'s system message), rendered for a reply; also
/// whether the rendered prompt leaves the model inside its thinking.
fn chat_prompt(
    a: &Args,
    model: &Model,
    template: &ChatTemplate,
    prompt: &str,
) -> Result<(Vec<TokenId>, bool), String> {
    let system = a.get(&["--system"]).map(|content| ChatMessage {
        role: "system",
        content,
    });
    let user = ChatMessage {
        role: "user",
        content: prompt,
    };
    let messages: Vec<ChatMessage> = system.into_iter().chain([user]).collect();
    let text = template
        .render(&messages, true)
        .map_err(|e| e.to_string())?;
    let opened = template
        .reasoning_syntax()
        .is_some_and(|s| s.prompt_opens_reasoning(&text));
    Ok((model.tokenizer.encode(&text, true, true), opened))
}

/// Evaluates the prompt reusing the state saved in `file` (llama.cpp's `--prompt-cache`): the
/// saved tokens that begin the prompt are kept, the rest evaluated, and the prompt's state
/// saved back (unless `read_only`). Returns the last token's logits and the tokens evaluated.
/// A file that exists but cannot be used (another model, corrupted) is an error, never
/// overwritten.
fn evaluate_with_cache(
    ctx: &mut Context,
    tokens: &[u32],
    file: &std::path::Path,
    read_only: bool,
) -> Result<(Vec<f32>, usize), String> {
    let mut saved_logits = Vec::new();
    if file.exists() {
        saved_logits = ctx.load_seq_file(0, file).map_err(|e| {
            format!("--prompt-cache: {e} (remove the file or choose another to start afresh)")
        })?;
    }
    let saved = ctx.seq_tokens(0);
    let common = saved.iter().zip(tokens).take_while(|(a, b)| a == b).count();
    if common == tokens.len() && saved.len() == tokens.len() && !saved_logits.is_empty() {
        eprintln!(
            "prompt cache: all {common} prompt tokens reused from {}",
            file.display()
        );
        return Ok((saved_logits, 0));
    }
    // At least the last prompt token is evaluated, for its logits.
    let keep = ctx.truncate(common.min(tokens.len() - 1));
    if keep > 0 {
        eprintln!(
            "prompt cache: {keep} of {} prompt tokens reused from {}",
            tokens.len(),
            file.display()
        );
    }
    let logits = ctx
        .eval(&tokens[keep..], Logits::Last)
        .map_err(|e| e.to_string())?;
    if !read_only {
        ctx.save_seq_file(0, &logits, file)
            .map_err(|e| format!("--prompt-cache: {e}"))?;
    }
    Ok((logits, tokens.len() - keep))
}
