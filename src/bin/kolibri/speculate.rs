//! The speculative-decoding options of `kolibri run`: `--draft MODEL`, `--lookup`, or both
//! (lookup first, the draft model when lookup finds nothing); or `--spec mtp`, the model's
//! own multi-token-prediction block (llama.cpp's `--spec-type draft-mtp`).

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, Model};
use kolibri::speculative::{
    Drafter, LookupDrafter, LookupThenModel, ModelDrafter, MtpDrafter, SpecStats, Speculator,
};

use crate::args::Args;

pub const FLAGS: [&str; 7] = [
    "-md",
    "--draft",
    "--draft-max",
    "--draft-p-min",
    "--lookup-ngram",
    "--spec",
    "--spec-type",
];
pub const SWITCHES: [&str; 1] = ["--lookup"];

/// A drafter, and the speculator over it.
pub type Speculation = (Box<dyn Drafter + Send>, Speculator);

/// Whether `--spec mtp` (or llama.cpp's `--spec-type draft-mtp`) asks for the model's own
/// multi-token-prediction block (with `--lookup`, where lookup finds nothing).
pub fn wants_mtp(a: &Args) -> Result<bool, String> {
    let Some(spec) = a.get(&["--spec", "--spec-type"]) else {
        return Ok(false);
    };
    if !matches!(spec, "mtp" | "draft-mtp") {
        return Err(format!(
            "--spec {spec:?}: the speculation this option names is mtp (the model's own \
             multi-token-prediction block; --draft MODEL and --lookup name the others)"
        ));
    }
    if a.get(&["-md", "--draft"]).is_some() {
        return Err("--spec mtp drafts instead of a --draft model, not beside one".into());
    }
    if a.get(&["--prompt-cache"]).is_some() {
        return Err("--spec mtp needs the whole prompt evaluated: not with --prompt-cache".into());
    }
    Ok(true)
}

/// The `--draft` model, if one is given.
pub fn load_draft(a: &Args) -> Result<Option<Arc<Model>>, String> {
    a.get(&["-md", "--draft"])
        .map(|given| {
            // A path, or a stored model's name as for -m.
            let path = crate::store::resolve(given).map_err(|e| format!("--draft: {e}"))?;
            let mut model = crate::load_model(&path, a).map_err(|e| format!("--draft: {e}"))?;
            model.requantize_head_for_drafting();
            Ok(Arc::new(model))
        })
        .transpose()
}

/// A drafter over `target` (the `draft` model's, prompt lookup's, or lookup then the model's,
/// as the options say; None without `--draft`/`--lookup`) and its speculator; the draft
/// context runs `n_threads` threads with the target's positions and KV cache types.
pub fn build(
    a: &Args,
    target: &mut Context,
    draft: Option<&Arc<Model>>,
    n_threads: usize,
) -> Result<Option<Speculation>, String> {
    let ngram = a.parse_or(&["--lookup-ngram"], 4usize)?;
    let drafter: Box<dyn Drafter + Send> = if wants_mtp(a)? {
        let block = MtpDrafter::new(target).map_err(|e| format!("--spec mtp: {e}"))?;
        match a.has("--lookup") {
            // As beside a draft model, only lookup matches of 3+ tokens beat the block.
            true => Box::new(block.with_lookup(LookupDrafter::new(3, ngram))),
            false => Box::new(block),
        }
    } else if let Some(draft_model) = draft {
        let params = ContextParams {
            n_ctx: target.n_ctx(),
            n_threads,
            type_k: target.type_k(),
            type_v: target.type_v(),
            ..ContextParams::default()
        };
        if params.n_ctx > draft_model.hparams.n_ctx_train {
            return Err(format!(
                "--draft: the draft model was trained for {} positions, the request needs {}",
                draft_model.hparams.n_ctx_train, params.n_ctx
            ));
        }
        let ctx =
            Context::new(Arc::clone(draft_model), &params).map_err(|e| format!("--draft: {e}"))?;
        let p_min = a.parse_or(&["--draft-p-min"], 0.5f32)?;
        let model = ModelDrafter::new(target, ctx, 0, p_min).map_err(|e| e.to_string())?;
        if a.has("--lookup") {
            // Only lookup matches of 3+ tokens beat a draft model; shorter ones guess worse.
            let strong = LookupDrafter::new(3, ngram);
            Box::new(LookupThenModel::new(strong, model))
        } else {
            Box::new(model)
        }
    } else if a.has("--lookup") {
        Box::new(LookupDrafter::new(1, ngram))
    } else {
        return Ok(None);
    };
    let max = a.parse_or(&["--draft-max"], 16usize)?;
    if max == 0 || max > 32 {
        return Err("--draft-max must be in 1..=32".into());
    }
    let speculator = Speculator::new(drafter.as_ref(), max);
    Ok(Some((drafter, speculator)))
}

/// `kolibri run`'s summary line.
pub fn report(s: &SpecStats) {
    eprintln!(
        "speculation: {} drafted, {} accepted ({:.1}%), {:.2} accepted and {:.2} tokens per \
         target pass ({} passes: {:.0} ms; drafting {:.0} ms{})",
        s.drafted,
        s.accepted,
        100.0 * s.acceptance(),
        s.accepted_per_pass(),
        s.tokens_per_pass(),
        s.target_passes,
        s.target_secs * 1e3,
        s.draft_secs * 1e3,
        match s.draft_passes {
            0 => String::new(),
            n => format!(" in {n} draft passes"),
        }
    );
}
