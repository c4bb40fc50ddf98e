//! The speculative-decoding options of `kolibri run`: `--draft MODEL`, `--lookup`, or both
//! (lookup first, the draft model when lookup finds nothing); or `--spec mtp`, the model's
//! own multi-token-prediction block (llama.cpp's `--spec-type draft-mtp`); or
//! `--draft-assistant FILE`, Gemma 4's assistant drafter (also given as a `--draft` file, as
//! llama.cpp's `-md` takes it).

use std::sync::Arc;

use kolibri::model::{Assistant, Context, ContextParams, LoadOptions, Model};
use kolibri::speculative::{
    Drafter, LookupDrafter, LookupThenModel, ModelDrafter, MtpDrafter, SpecStats, Speculator,
};

use crate::args::Args;

pub const FLAGS: [&str; 8] = [
    "-md",
    "--draft",
    "--draft-assistant",
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
    match a.get(&["-md", "--draft"]) {
        // llama.cpp's spelling of the assistant: `-md FILE --spec-type draft-mtp`.
        Some(file) if is_assistant(file) => return Ok(false),
        Some(_) => {
            return Err("--spec mtp drafts instead of a --draft model, not beside one".into())
        }
        None => {}
    }
    if a.get(&["--draft-assistant"]).is_some() {
        return Err("--spec mtp drafts instead of an assistant, not beside one".into());
    }
    if a.get(&["--prompt-cache"]).is_some() {
        return Err("--spec mtp needs the whole prompt evaluated: not with --prompt-cache".into());
    }
    Ok(true)
}

/// What drafts for the target besides prompt lookup, loaded once.
pub enum DraftModel {
    /// A small model of the target's vocabulary (`--draft`), in a context of its own.
    Model(Arc<Model>),
    /// Gemma 4's assistant, reading the target's cache.
    Assistant(Arc<Assistant>),
}

impl DraftModel {
    /// The draft model, if that is what drafts.
    pub fn model(&self) -> Option<&Arc<Model>> {
        match self {
            DraftModel::Model(m) => Some(m),
            DraftModel::Assistant(_) => None,
        }
    }

    /// Its weights, for the memory budget (an assistant keeps no KV cache of its own).
    pub fn weights(&self) -> &Model {
        match self {
            DraftModel::Model(m) => m,
            DraftModel::Assistant(a) => &a.model,
        }
    }
}

/// Whether the file `given` names (a path, or a stored model's name) is an assistant drafter.
fn is_assistant(given: &str) -> bool {
    let Ok(path) = crate::store::resolve(given) else {
        return false;
    };
    let arch = kolibri::gguf::GgufFile::open(&path)
        .ok()
        .and_then(|f| f.get_str("general.architecture").map(str::to_owned));
    arch.as_deref() == Some("gemma4-assistant")
}

/// The `--draft` model or the assistant (`--draft-assistant FILE`, or a `--draft` file that is
/// one) drafting for `target`, if one is given.
pub fn load_draft(a: &Args, target: &Model) -> Result<Option<DraftModel>, String> {
    let draft = a.get(&["-md", "--draft"]);
    let assistant = match (a.get(&["--draft-assistant"]), draft) {
        (Some(_), Some(_)) => {
            return Err(
                "--draft-assistant drafts instead of a --draft model, not beside one".into(),
            )
        }
        (Some(file), None) => Some(("--draft-assistant", file)),
        (None, Some(file)) if is_assistant(file) => Some(("--draft", file)),
        (None, _) => None,
    };
    if let Some((flag, given)) = assistant {
        let path = crate::store::resolve(given).map_err(|e| format!("{flag}: {e}"))?;
        let opts = &mut LoadOptions {
            use_mmap: !a.has("--no-mmap"),
            ..LoadOptions::default()
        };
        let assistant = Assistant::load(path, target, opts).map_err(|e| format!("{flag}: {e}"))?;
        return Ok(Some(DraftModel::Assistant(Arc::new(assistant))));
    }
    draft
        .map(|given| {
            // A path, or a stored model's name as for -m.
            let path = crate::store::resolve(given).map_err(|e| format!("--draft: {e}"))?;
            let mut model = crate::load_model(&path, a).map_err(|e| format!("--draft: {e}"))?;
            model.requantize_head_for_drafting();
            Ok(DraftModel::Model(Arc::new(model)))
        })
        .transpose()
}

/// A drafter over `target` (the `draft` model's or assistant's, the model's own block,
/// prompt lookup's, or lookup then a model's, as the options say; None without any) and its
/// speculator; a draft model's context runs `n_threads` threads with the target's positions
/// and KV cache types.
pub fn build(
    a: &Args,
    target: &mut Context,
    draft: Option<&DraftModel>,
    n_threads: usize,
) -> Result<Option<Speculation>, String> {
    let ngram = a.parse_or(&["--lookup-ngram"], 4usize)?;
    let own = match draft {
        Some(DraftModel::Assistant(assistant)) => {
            Some(MtpDrafter::with_assistant(target, Arc::clone(assistant)))
        }
        _ if wants_mtp(a)? => Some(MtpDrafter::new(target)),
        _ => None,
    };
    let drafter: Box<dyn Drafter + Send> = if let Some(own) = own {
        let own = own.map_err(|e| format!("--spec mtp: {e}"))?;
        match a.has("--lookup") {
            // As beside a draft model, only lookup matches of 3+ tokens beat the model's own.
            true => Box::new(own.with_lookup(LookupDrafter::new(3, ngram))),
            false => Box::new(own),
        }
    } else if let Some(draft_model) = draft.and_then(DraftModel::model) {
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
