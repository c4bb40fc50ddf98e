//! Fill-in-the-middle prompts: the code before and after the cursor, and other files of the
//! project, around the model's FIM tokens, laid out as llama-server's `/infill` lays them out
//! (the repository-level pattern of Qwen2.5-Coder's report, arXiv 2409.12186):
//!
//! ```text
//! [FIM_REP]myproject\n [FIM_SEP]file0\n text0 ... [FIM_SEP]filename\n
//! [BOS] [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
//! ```
//!
//! Without the repository tokens a file is introduced by a `--- snippet ---` line. The
//! prefix keeps its last tokens and the suffix its first, three to one, within a budget of
//! [`FIM_BATCH`] tokens; the project files fill what remains of the context, the most recent
//! kept.

use super::{TokenId, Tokenizer};

/// The batch llama-server sizes the prefix and suffix by (its default `-b`).
const FIM_BATCH: usize = 2048;

/// A file of the project given as context (`input_extra`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtraFile {
    pub filename: String,
    pub text: String,
}

/// What a fill-in-the-middle request gives.
#[derive(Clone, Debug, Default)]
pub struct Infill<'a> {
    /// The code before the cursor.
    pub prefix: &'a str,
    /// The code after the cursor.
    pub suffix: &'a str,
    /// Text already typed at the cursor, continued by the middle (special tokens read).
    pub prompt: &'a str,
    pub extra: &'a [ExtraFile],
}

/// The FIM tokens a model lacks, named as llama-server names them; empty when it has all.
pub fn missing_fim_tokens(tokenizer: &Tokenizer) -> Vec<&'static str> {
    let s = tokenizer.specials();
    [
        (s.fim_pre, "prefix"),
        (s.fim_suf, "suffix"),
        (s.fim_mid, "middle"),
    ]
    .into_iter()
    .filter(|(id, _)| id.is_none())
    .map(|(_, name)| name)
    .collect()
}

/// The prompt for `infill` in a context of `n_ctx` tokens, generating at most `n_predict`
/// (`None`: no limit). `Err` names the FIM tokens the model lacks.
pub fn infill_prompt(
    tokenizer: &Tokenizer,
    infill: &Infill,
    n_ctx: usize,
    n_predict: Option<usize>,
) -> Result<Vec<TokenId>, String> {
    let s = tokenizer.specials();
    let (Some(pre), Some(suf), Some(mid)) = (s.fim_pre, s.fim_suf, s.fim_mid) else {
        let missing = missing_fim_tokens(tokenizer).join(", ");
        return Err(format!(
            "the model has no fill-in-the-middle tokens ({missing})"
        ));
    };
    let plain = |text: &str| tokenizer.encode(text, false, false);
    let prefix = plain(infill.prefix);
    let suffix = plain(infill.suffix);
    let typed = tokenizer.encode(infill.prompt, false, true);
    let extra = project_context(tokenizer, infill.extra);

    let n_prefix = prefix.len().min(3 * (FIM_BATCH / 4));
    let n_suffix = suffix
        .len()
        .min((FIM_BATCH / 4).saturating_sub(2 + typed.len()));
    // llama-server's -1 for "no limit" counts as -2 tokens here: its arithmetic, kept.
    let reserved = n_predict.map_or(-2, |n| {
        i64::try_from(n).unwrap_or(i64::MAX).saturating_mul(2)
    });
    let n_ctx = i64::try_from(n_ctx).unwrap_or(i64::MAX);
    let room = n_ctx
        .saturating_sub(FIM_BATCH as i64)
        .saturating_sub(reserved)
        .max(0);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    let n_extra = room.min(extra.len());

    let mut out = Vec::with_capacity(n_extra + n_prefix + n_suffix + typed.len() + 4);
    out.extend_from_slice(&extra[extra.len() - n_extra..]);
    if tokenizer.add_bos() {
        out.extend(tokenizer.bos());
    }
    out.push(pre);
    out.extend_from_slice(&prefix[prefix.len() - n_prefix..]);
    out.extend_from_slice(&typed);
    out.push(suf);
    out.extend_from_slice(&suffix[..n_suffix]);
    out.push(mid);
    Ok(out)
}

/// The project's files as context: each under its name after the file separator, or after a
/// snippet line when the model has none; then the current file's header.
fn project_context(tokenizer: &Tokenizer, files: &[ExtraFile]) -> Vec<TokenId> {
    let s = tokenizer.specials();
    let plain = |text: &str| tokenizer.encode(text, false, false);
    let mut out = Vec::new();
    if let Some(rep) = s.fim_rep {
        out.push(rep);
        out.extend(plain("myproject\n"));
    }
    for file in files {
        match s.fim_sep {
            Some(sep) => {
                out.push(sep);
                out.extend(plain(&format!("{}\n", file.filename)));
            }
            None => out.extend(plain("\n\n--- snippet ---\n\n")),
        }
        out.extend(plain(&file.text));
    }
    if let Some(sep) = s.fim_sep {
        out.push(sep);
        out.extend(plain("filename\n"));
    }
    out
}
