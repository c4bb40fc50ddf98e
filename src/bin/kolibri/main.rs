//! The `kolibri` command-line tool: run, perplexity, tokenize, bench, info, quantize and serve
//! (the OpenAI-compatible HTTP server) on GGUF models.

mod args;
mod bench;
mod bench_spec;
mod cache;
mod chat;
mod constrain;
mod flags;
mod hub;
mod info;
mod perplexity;
mod quantize;
mod reply;
mod run;
#[cfg(feature = "server")]
mod serve;
mod speculate;
mod store;
mod tokenize;

use std::process::ExitCode;

const USAGE: &str = "\
kolibri — CPU-first LLM inference

USAGE:
  kolibri run [-m] MODEL (-p PROMPT | -f FILE | PROMPT) [-sys SYSTEM] [--raw] [-n N]
              [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S]
              [-t THREADS] [-c CTX] [-ctk TYPE] [-ctv TYPE]
              [--no-mmap] [--mlock] [--context-shift [--keep N]] [--mem-budget SIZE | --fit]
              [--prompt-cache FILE [--prompt-cache-ro]] [--stop TEXT]...
              [--draft MODEL] [--lookup] [--draft-max N] [--draft-p-min P] [--lookup-ngram N]
              [--spec mtp | --draft-assistant FILE]
              [--grammar GBNF | --grammar-file FILE | -j SCHEMA | --json-schema-file FILE | --json]
              (a model with a chat template answers the prompt as a user's message, unless
              --raw / -no-cnv or the prompt holds special tokens; -n -1: no limit.
              --context-shift: when the context fills, forget the older half of what is not
              kept and go on; --keep N keeps the first N prompt tokens besides BOS, -1 all.
              --mem-budget 4G / --fit (the memory available): the largest context, then the
              most precise KV type, that fit with the weights. --prompt-cache: reuse the saved
              state of a prompt that begins this one, and save this one's. --spec mtp: the
              model's own multi-token-prediction block drafts, as llama.cpp's --spec-type
              draft-mtp; --draft-assistant: a Gemma 4 model's assistant file drafts from the
              model's own cache, also given as --draft, as llama.cpp's -md takes it)
  kolibri chat [-m] MODEL [-s SYSTEM] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
              [--seed S] [-t THREADS] [-c CTX] [-ctk TYPE] [-ctv TYPE] [--no-mmap] [--mlock]
              [--chat-template-file FILE] [--reasoning-budget N] [--hide-thinking]
              (an interactive chat through the model's template, with line editing and
              history; /help lists the commands (/set, /save, /load, /clear, /exit); Ctrl-C
              stops a reply; a trailing \\ or a \"\"\" block for several lines; a thinking
              model's thinking is printed dimmed, apart from its answer)
  kolibri perplexity -m MODEL -f FILE [-c 256] [-t THREADS] [--chunks N] [-ctk TYPE] [-ctv TYPE]
              [--no-mmap] [--mlock]
  kolibri tokenize -m MODEL [--no-bos] [--no-parse-special] [--ids] TEXT
  kolibri bench -m MODEL[,MODEL...] [-p 512[,N...]] [-n 128[,N...]] [-d 0[,DEPTH...]] [-t 1,2]
              [-ctk f16[,TYPE...]] [-ctv f16[,TYPE...]] [-r 5] [-o md|json] [--no-mmap] [--mlock]
  (KV cache TYPE: f16, q8_0 or q4_0; keys -ctk and values -ctv separately. --no-mmap reads
  the model into private memory instead of mapping it; --mlock keeps it in RAM.
  -m MODEL: a GGUF file, or any part of a split one; -hf OWNER/REPO[:QUANT] instead names a
  model in the Hugging Face cache, the file llama.cpp's -hf picks. llama.cpp's spellings of
  these options work too, and its GPU options (-ngl, -fa, ...) are accepted with a note)
  kolibri bench -m MODEL (--draft MODEL | --lookup) -f PROMPT_FILE [-n 128] [-t 1,2] [-r 5]
              [--draft-max N] [--draft-p-min P] [--lookup-ngram N]
  (speculative decoding against plain greedy decoding of the same prompt, both timed)
  kolibri info [-m] MODEL [--plans]
              (the model's architecture, parameters, file and quantization mix, context,
              template and capabilities; --plans, or no model: the CPU's kernels and each
              matrix's plan)
";

#[cfg(feature = "server")]
const SERVE_USAGE: &str = serve::USAGE;
#[cfg(not(feature = "server"))]
const SERVE_USAGE: &str = "";

/// Every command's usage.
fn usage() -> String {
    [
        USAGE,
        quantize::USAGE,
        hub::USAGE,
        store::USAGE,
        cache::USAGE,
        SERVE_USAGE,
    ]
    .concat()
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = argv.split_first() else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    let result = match cmd.as_str() {
        "run" => run::main(rest),
        "chat" => chat::main(rest),
        "perplexity" => perplexity::main(rest),
        "tokenize" => tokenize::main(rest),
        "bench" => bench::main(rest),
        "info" => info::main(rest),
        "quantize" => quantize::main(rest),
        "pull" => hub::pull(rest),
        "list" | "ls" => store::list(rest),
        "show" => store::show(rest),
        "rm" => store::rm(rest),
        "cache" => cache::main(rest),
        #[cfg(feature = "server")]
        "serve" => serve::main(rest),
        #[cfg(not(feature = "server"))]
        "serve" => Err("this kolibri was built without the \"server\" feature".into()),
        "-V" | "--version" | "version" => {
            println!("kolibri {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        "-h" | "--help" | "help" => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        other => Err(format!("unknown command {other:?}\n\n{}", usage())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `-n`: the most tokens to generate (`default` when absent); -1 (and llama.cpp's -2) run to
/// the end of generation or of the context.
pub fn n_predict(a: &args::Args, default: usize) -> Result<usize, String> {
    match a.get(&["--n-predict"]) {
        None => Ok(default),
        Some("-1" | "-2") => Ok(usize::MAX),
        Some(n) => n
            .parse()
            .map_err(|_| format!("-n {n}: a token count, or -1 for no limit")),
    }
}

/// The sampling options of `run` and `chat` (llama.cpp's names).
pub const SAMPLING_FLAGS: [&str; 6] = [
    "--temp",
    "--top-k",
    "--top-p",
    "--min-p",
    "--repeat-penalty",
    "--seed",
];

/// The sampler the [`SAMPLING_FLAGS`] in `a` describe, the library's defaults elsewhere.
pub fn sampler_params(a: &args::Args) -> Result<kolibri::sampling::SamplerParams, String> {
    let d = kolibri::sampling::SamplerParams::default();
    Ok(kolibri::sampling::SamplerParams {
        temperature: a.parse_or(&["--temp"], d.temperature)?,
        top_k: a.parse_or(&["--top-k"], d.top_k)?,
        top_p: a.parse_or(&["--top-p"], d.top_p)?,
        min_p: a.parse_or(&["--min-p"], d.min_p)?,
        repeat_penalty: a.parse_or(&["--repeat-penalty"], d.repeat_penalty)?,
        seed: a.parse_or(&["--seed"], d.seed)?,
        ..d
    })
}

/// The switches of the commands that load a model (llama.cpp's names): read the file into
/// private memory instead of mapping it, lock the weights in RAM.
pub const LOAD_SWITCHES: [&str; 2] = ["--no-mmap", "--mlock"];

/// The options naming the model, for every command that loads one: a file, or a Hugging
/// Face name.
pub const MODEL_FLAGS: [&str; 4] = ["-m", "--model", "-hf", "--hf-repo"];

/// The model file: `-m PATH`, or `-hf OWNER/REPO[:QUANT]` from the Hugging Face cache,
/// downloaded first if it is not there (the file llama.cpp's -hf picks; a split model's first
/// part, all parts fetched).
pub fn model_path(a: &args::Args) -> Result<String, String> {
    match (a.model(), a.get(&MODEL_FLAGS[2..])) {
        (Some(_), Some(_)) => Err("give the model once: -m PATH or -hf OWNER/REPO[:QUANT]".into()),
        (Some(path), None) => store::resolve(path),
        (None, Some(name)) => {
            let name = kolibri::hub::HubName::parse(name)?;
            let files = hub::fetch(&name)?;
            Ok(files[0].display().to_string())
        }
        (None, None) => Err("missing required option -m/--model (or -hf/--hf-repo)".into()),
    }
}

/// Loads a model for a command, with the repack cache of [`repack_cache_dir`] and the
/// [`LOAD_SWITCHES`] given in `a`.
/// With a memory budget too small for the whole model, its weights are paged (streamed per
/// layer from the mapped file).
/// The template `--chat-template-file` names, compiled with the model's tokens (`None`: no
/// file given). A template given explicitly must compile: a mistake there is the user's.
pub fn template_file(
    a: &args::Args,
    model: &kolibri::model::Model,
) -> Result<Option<kolibri::chat::ChatTemplate>, String> {
    let Some(file) = a.get(&["--chat-template-file"]) else {
        return Ok(None);
    };
    std::fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|source| {
            kolibri::chat::ChatTemplate::with_model_tokens(&source, model)
                .map_err(|e| e.to_string())
        })
        .map(Some)
        .map_err(|e| format!("--chat-template-file {file}: {e}"))
}

pub fn load_model(path: &str, a: &args::Args) -> Result<kolibri::model::Model, String> {
    let paged = match budget_bytes(a)? {
        Some(budget) => {
            // Every part of a split model (the header says which there are).
            let file = kolibri::gguf::GgufFile::open(path).map_err(|e| e.to_string())?;
            kolibri::model::budget::needs_paging(file.size_on_disk(), budget)
        }
        None => false,
    };
    let mut bar = progress_bar(path);
    let mut report = |done: f32| {
        if let Some(bar) = &bar {
            bar.set_position((done.clamp(0.0, 1.0) * 1000.0) as u64);
        }
        true
    };
    let mut opts = kolibri::model::LoadOptions {
        use_mmap: !a.has("--no-mmap"),
        use_mlock: a.has("--mlock"),
        repack_cache: repack_cache_dir(),
        paged,
        progress: Some(&mut report),
        mtp: crate::speculate::wants_mtp(a)?,
    };
    let model = kolibri::model::Model::load_with(path, &mut opts).map_err(|e| e.to_string());
    if let Some(bar) = bar.take() {
        bar.finish_and_clear();
    }
    model
}

/// A progress bar on stderr while a model loads (and repacks), only when stderr is a terminal.
#[cfg(feature = "cli")]
fn progress_bar(path: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let name = std::path::Path::new(path)
        .file_name()
        .map_or(path.into(), |n| n.to_string_lossy().into_owned());
    let style = indicatif::ProgressStyle::with_template("loading {msg} [{bar:30}] {percent}%")
        .ok()?
        .progress_chars("=> ");
    let bar = indicatif::ProgressBar::new(1000)
        .with_style(style)
        .with_message(name);
    Some(bar)
}

/// Without the "cli" feature there is no progress bar.
#[cfg(not(feature = "cli"))]
fn progress_bar(_path: &str) -> Option<NoBar> {
    None
}

#[cfg(not(feature = "cli"))]
struct NoBar;

#[cfg(not(feature = "cli"))]
impl NoBar {
    fn set_position(&self, _: u64) {}
    fn finish_and_clear(&self) {}
}

/// Where the commands keep repacked weights: `KOLIBRI_REPACK_CACHE` (a directory, or `0` to
/// keep none), else `$XDG_CACHE_HOME/kolibri/repacked`, else `~/.cache/kolibri/repacked`.
pub fn repack_cache_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    match std::env::var_os("KOLIBRI_REPACK_CACHE") {
        Some(v) if v == "0" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|c| c.join("kolibri").join("repacked")),
    }
}

/// The KV cache type flags of the commands that make a context (llama.cpp's names).
pub const KV_TYPE_FLAGS: [&str; 4] = ["-ctk", "--cache-type-k", "-ctv", "--cache-type-v"];

/// The key and value cache types `-ctk` and `-ctv` name (f16 when absent).
pub fn kv_types(
    a: &args::Args,
) -> Result<(kolibri::model::KvType, kolibri::model::KvType), String> {
    let one = |names: &[&str]| a.get(names).map_or(Ok(Default::default()), parse_kv_type);
    Ok((one(&KV_TYPE_FLAGS[..2])?, one(&KV_TYPE_FLAGS[2..])?))
}

/// A KV cache type by its llama.cpp name.
pub fn parse_kv_type(name: &str) -> Result<kolibri::model::KvType, String> {
    kolibri::model::KvType::parse(name.trim())
        .ok_or_else(|| format!("unknown KV cache type {name:?} (f16, q8_0 or q4_0)"))
}

/// Options that size a context to a memory budget.
pub const BUDGET_FLAGS: [&str; 1] = ["--mem-budget"];
pub const BUDGET_SWITCHES: [&str; 1] = ["--fit"];

/// `--mem-budget SIZE` or `--fit` (the memory available now): the largest context (or the
/// `-c` given) and KV type (or the `-ctk`/`-ctv` given) that fit beside the model (and the
/// `--draft` model, with its own cache), said on stderr; `None` without either option.
pub fn budget_fit(
    a: &args::Args,
    model: &kolibri::model::Model,
    draft: Option<&kolibri::model::Model>,
    n_seq: usize,
    n_batch: usize,
) -> Result<Option<kolibri::model::budget::Fit>, String> {
    use kolibri::model::budget;
    let Some(budget) = budget_bytes(a)? else {
        return Ok(None);
    };
    let given = |flags: &[&str]| flags.iter().any(|f| a.get(&[f]).is_some());
    let request = budget::BudgetRequest {
        budget,
        n_seq,
        n_batch,
        n_ctx: a
            .get(&["-c", "--ctx-size"])
            .map(str::parse)
            .transpose()
            .map_err(|_| "bad value for -c/--ctx-size".to_string())?,
        types: given(&KV_TYPE_FLAGS).then(|| kv_types(a)).transpose()?,
    };
    let fit = budget::fit_with_draft(model, draft, &request).map_err(|e| e.to_string())?;
    eprintln!("memory budget {} MiB: {fit}", budget >> 20);
    Ok(Some(fit))
}

/// The budget `--mem-budget SIZE` or `--fit` gives, if either does.
fn budget_bytes(a: &args::Args) -> Result<Option<u64>, String> {
    use kolibri::model::budget;
    Ok(Some(match (a.get(&BUDGET_FLAGS), a.has("--fit")) {
        (Some(_), true) => return Err("give --mem-budget or --fit, not both".into()),
        (Some(s), false) => budget::parse_bytes(s)
            .ok_or_else(|| format!("--mem-budget {s:?}: a size such as 512M or 4G"))?,
        (None, true) => budget::available_memory()
            .ok_or("--fit: cannot read the available memory (/proc/meminfo)")?,
        (None, false) => return Ok(None),
    }))
}

/// Default worker threads: the machine's available parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
