//! llama.cpp's spellings of the options (llama-cli, llama-server, llama-bench at 0c1e57098),
//! so that commands typed from its documentation or from habit work here: every spelling of
//! an option Kolibri has, and the options it has no use for (GPU offload, knobs of llama.cpp's
//! own scheduling), which are accepted with a one-line note instead of failing.

/// The spellings of one option. A command lists one spelling (or more) of each option it
/// takes; the others of its group are accepted too, except a spelling that is in several
/// groups (`-p`: the prompt, or bench's prompt lengths), which only its command's list
/// decides.
pub const SPELLINGS: &[&[&str]] = &[
    &["-m", "--model"],
    &["-hf", "-hfr", "--hf-repo"],
    &["-p", "--prompt"],
    &["-p", "--n-prompt"],
    &["-n", "--n-predict", "--predict"],
    &["-n", "--n-gen"],
    &["-t", "--threads"],
    &["-c", "--ctx-size"],
    &["-f", "--file"],
    &["-r", "--repetitions"],
    &["-o", "--output"],
    &["-d", "--n-depth"],
    &["-b", "--batch-size"],
    // `-s` is chat's system prompt (as before llama.cpp's habits were taken in), and the
    // seed in llama.cpp: only a command that lists it gets it.
    &["-sys", "--system-prompt", "--system", "-s"],
    &["-s", "--seed"],
    &["-j", "--json-schema"],
    &["-jf", "--json-schema-file"],
    &["-md", "--model-draft", "--draft"],
    &["--draft-max", "--draft-n"],
    &["-np", "--parallel"],
    &["-ctk", "--cache-type-k"],
    &["-ctv", "--cache-type-v"],
    &["-a", "--alias"],
    &["-to", "--timeout"],
    &["-no-cnv", "--no-conversation", "--raw"],
    &["-cnv", "--conversation"],
    &["-st", "--single-turn"],
    &["-v", "--verbose", "--log-verbose"],
];

/// A llama.cpp option with no meaning here: accepted, and the note said once on stderr.
pub struct Ignored {
    pub spellings: &'static [&'static str],
    pub takes_value: bool,
    pub note: &'static str,
}

const CPU: &str = "Kolibri runs on the CPU; GPU options are ignored";

/// llama.cpp's options that Kolibri accepts without acting on them, for the commands that
/// load a model.
pub const IGNORED: &[Ignored] = &[
    ignored(&["-ngl", "--gpu-layers", "--n-gpu-layers"], true, CPU),
    ignored(
        &["-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"],
        true,
        CPU,
    ),
    ignored(&["-sm", "--split-mode"], true, CPU),
    ignored(&["-mg", "--main-gpu"], true, CPU),
    ignored(&["-ts", "--tensor-split"], true, CPU),
    ignored(&["-dev", "--device"], true, CPU),
    ignored(&["-devd", "--device-draft"], true, CPU),
    ignored(&["-nkvo", "--no-kv-offload"], false, CPU),
    ignored(
        &["-ot", "--override-tensor"],
        true,
        "every tensor is already on the CPU; -ot is ignored",
    ),
    ignored(
        &["-cmoe", "--cpu-moe"],
        false,
        "every expert is already on the CPU",
    ),
    ignored(
        &["-ncmoe", "--n-cpu-moe"],
        true,
        "every expert is already on the CPU",
    ),
    ignored(
        &["-fa", "--flash-attn"],
        true,
        "Kolibri's attention is always fused (flash attention); -fa is ignored",
    ),
    ignored(
        &["--jinja"],
        false,
        "chat templates always run as Jinja here; --jinja is the default",
    ),
    ignored(
        &["-cb", "--cont-batching"],
        false,
        "continuous batching is always on",
    ),
    ignored(
        &["-ub", "--ubatch-size"],
        true,
        "Kolibri sizes its own micro-batches; -ub is ignored",
    ),
    ignored(
        &["-tb", "--threads-batch"],
        true,
        "prompts and generation share -t threads; -tb is ignored",
    ),
    ignored(
        &["--no-warmup"],
        false,
        "Kolibri needs no warm-up run; --no-warmup is the default",
    ),
    ignored(
        &["--no-context-shift"],
        false,
        "the context does not shift unless --context-shift is given",
    ),
    ignored(
        &["--numa"],
        true,
        "NUMA placement is left to the OS; --numa is ignored",
    ),
    ignored(&["--metrics"], false, "serve always offers /metrics"),
    ignored(
        &["--embedding", "--embeddings"],
        false,
        "serve always offers /v1/embeddings",
    ),
    ignored(
        &["--reranking", "--rerank"],
        false,
        "serve offers /v1/rerank when the model is a reranker (rank pooling in its file)",
    ),
];

const fn ignored(
    spellings: &'static [&'static str],
    takes_value: bool,
    note: &'static str,
) -> Ignored {
    Ignored {
        spellings,
        takes_value,
        note,
    }
}

/// The commands that take llama.cpp's [`IGNORED`] options: those that load a model.
pub fn takes_ignored(cmd: &str) -> bool {
    matches!(cmd, "run" | "chat" | "serve" | "bench" | "perplexity")
}

/// The spellings of the option a command lists as `name`, given all it lists (`listed`):
/// its group, less the spellings the group shares with another group, unless the command
/// listed that spelling for this very group. The listed spellings come first.
pub fn spellings_of<'a>(name: &'a str, listed: &[&'a str]) -> Vec<&'a str> {
    let Some(group) = group_of(name, listed) else {
        return vec![name];
    };
    let shared = |s: &str| SPELLINGS.iter().filter(|g| g.contains(&s)).count() > 1;
    let ours = |s: &str| {
        listed.contains(&s) && group_of(s, listed).is_some_and(|g| std::ptr::eq(g, group))
    };
    let mut spellings: Vec<&str> = group
        .iter()
        .copied()
        .filter(|s| *s == name || !shared(s) || ours(s))
        .collect();
    spellings.sort_by_key(|s| (s.starts_with("--"), !listed.contains(s)));
    spellings
}

/// The group of `name` for a command listing `listed`: the first group holding `name` and
/// another listed spelling, else the first holding `name`.
fn group_of(name: &str, listed: &[&str]) -> Option<&'static [&'static str]> {
    let mut groups = SPELLINGS.iter().copied().filter(|g| g.contains(&name));
    let first = groups.clone().next();
    groups
        .find(|g| g.iter().any(|s| *s != name && listed.contains(s)))
        .or(first)
}

/// The spelling closest to `typed` among `known`, if one is close enough to be a likely typo.
pub fn nearest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let bare = typed.trim_start_matches('-');
    known
        .into_iter()
        .map(|k| (strsim::jaro(bare, k.trim_start_matches('-')), k))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_gets_the_spellings_of_its_group() {
        assert_eq!(spellings_of("--model", &["--model"]), ["-m", "--model"]);
        // `-p` is two options; the command's own list says which.
        assert_eq!(
            spellings_of("-p", &["-p", "--n-prompt"]),
            ["-p", "--n-prompt"]
        );
        assert_eq!(spellings_of("-p", &["-p", "--prompt"]), ["-p", "--prompt"]);
        // run's system prompt: llama.cpp's spellings, without the `-s` of its seed.
        assert_eq!(
            spellings_of("--system", &["--system", "--seed"]),
            ["-sys", "--system", "--system-prompt"]
        );
        assert_eq!(
            spellings_of("-s", &["-s", "--system", "--seed"]),
            ["-s", "-sys", "--system", "--system-prompt"]
        );
        assert_eq!(
            spellings_of("--seed", &["-s", "--system", "--seed"]),
            ["--seed"]
        );
        assert_eq!(spellings_of("--lookup", &["--lookup"]), ["--lookup"]);
    }

    #[test]
    fn typos_find_the_nearest_spelling() {
        assert_eq!(nearest("-ngll", ["-ngl", "--model"]), Some("-ngl"));
        assert_eq!(nearest("--modle", ["-ngl", "--model"]), Some("--model"));
        assert_eq!(nearest("-xyzzy", ["-ngl", "--model"]), None);
    }
}
