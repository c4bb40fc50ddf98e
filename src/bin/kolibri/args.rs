//! Command-line parsing with clap. Each command lists the options it takes (both spellings,
//! e.g. "-m", "--model") and its switches; this module builds the clap command from those
//! lists, with the help text of [`HELP`], so every command has `--help`, clap's errors and
//! its suggestions for misspelt options. Every spelling llama.cpp has for an option is
//! accepted ([`crate::flags`]), its multi-letter short options (`-ctk`, `-np`, `-ngl`) as
//! they are spelt there, and its options that mean nothing here with a note. As in llama.cpp, an option's value is
//! the next argument whatever it looks like, so prompts and stop strings may begin with `-`
//! (`-p "-- a SQL comment"`, `--stop "- "`). Options in [`REPEATABLE`] may be given several
//! times and keep every value.

use std::collections::HashMap;

use clap::{Arg, ArgAction, Command};

use crate::flags::{self, Ignored};

pub struct Args {
    values: HashMap<String, String>,
    /// Every value of a [`REPEATABLE`] option, in order, under each spelling.
    lists: HashMap<String, Vec<String>>,
    switches: Vec<String>,
    pub positional: Vec<String>,
    /// The command's first positional argument may name the model (`kolibri run MODEL`).
    model_first: bool,
}

/// Options that may be given several times, each value kept (`--stop A --stop B`).
const REPEATABLE: &[&str] = &["--stop"];

/// What each option does, by its long name (or its only name), for `--help`.
const HELP: &[(&str, &str)] = &[
    (
        "--model",
        "GGUF model file (any part of a split model), or a name `kolibri list` shows",
    ),
    (
        "--hf-repo",
        "OWNER/REPO[:QUANT]: the model by Hugging Face name, from the Hugging Face cache",
    ),
    ("--prompt", "the prompt text"),
    ("--n-prompt", "prompt lengths to test, comma-separated"),
    ("--n-predict", "most tokens to generate"),
    ("--n-gen", "generated lengths to test, comma-separated"),
    ("--threads", "worker threads (bench: comma-separated list)"),
    ("--ctx-size", "context length in tokens"),
    ("--file", "text file to score"),
    ("--chunks", "score at most this many chunks"),
    ("--repetitions", "runs per test"),
    ("--output", "md or json"),
    (
        "--n-depth",
        "tokens already in the cache before each test, comma-separated",
    ),
    ("--batch-size", "tokens per forward pass"),
    ("--system", "system prompt"),
    ("--temp", "sampling temperature; 0 is greedy"),
    ("--top-k", "keep the k most likely tokens (0: off)"),
    ("--top-p", "keep the smallest set reaching this probability"),
    ("--min-p", "drop tokens below this fraction of the best"),
    (
        "--repeat-penalty",
        "penalty on recently seen tokens (1: off)",
    ),
    ("--seed", "random seed"),
    (
        "--keep",
        "tokens kept when the context shifts (-1: the whole prompt)",
    ),
    (
        "--context-shift",
        "when the context fills, forget the older half and go on",
    ),
    (
        "--prompt-cache",
        "file saving and restoring the prompt's cache",
    ),
    ("--prompt-cache-ro", "use --prompt-cache without writing it"),
    ("--cache-type-k", "KV cache type of keys: f16, q8_0 or q4_0"),
    (
        "--cache-type-v",
        "KV cache type of values: f16, q8_0 or q4_0",
    ),
    (
        "--mem-budget",
        "memory to fit in, e.g. 4G: the largest context, paged weights",
    ),
    ("--fit", "a memory budget from the memory available"),
    (
        "--no-mmap",
        "read the model into memory instead of mapping it",
    ),
    ("--mlock", "lock the model in RAM"),
    ("--draft", "draft model for speculative decoding"),
    ("--draft-max", "most tokens drafted per step (1-32)"),
    (
        "--draft-p-min",
        "stop drafting below this draft probability",
    ),
    (
        "--lookup",
        "speculate by prompt lookup (n-grams of the text so far)",
    ),
    ("--lookup-ngram", "longest n-gram prompt lookup matches"),
    (
        "--spec",
        "mtp: draft with the model's own multi-token-prediction block",
    ),
    ("--spec-type", "llama.cpp's name for --spec (draft-mtp)"),
    (
        "--draft-assistant",
        "draft with this Gemma 4 assistant file (gemma4-assistant)",
    ),
    ("--grammar", "constrain the output to this GBNF grammar"),
    (
        "--grammar-file",
        "constrain the output to the GBNF grammar in this file",
    ),
    (
        "--json-schema",
        "constrain the output to JSON following this schema",
    ),
    (
        "--json-schema-file",
        "constrain the output to the JSON schema in this file",
    ),
    ("--json", "constrain the output to a JSON object"),
    (
        "--stop",
        "end the generation at this text (not printed); repeatable",
    ),
    ("--host", "address to listen on"),
    ("--port", "port to listen on (0: any free port)"),
    (
        "--api-key",
        "bearer key clients must send (or KOLIBRI_API_KEY)",
    ),
    ("--parallel", "requests served at once (slots)"),
    ("--alias", "model name the API reports"),
    ("--queue", "most requests waiting for a slot"),
    ("--timeout", "seconds a request may take"),
    ("--max-body", "largest request body in bytes"),
    (
        "--chat-template-file",
        "a Jinja chat template to use instead of the model's",
    ),
    (
        "--chat-template-kwargs",
        "JSON object of variables for the chat template, e.g. {\"enable_thinking\": false}",
    ),
    (
        "--reasoning-format",
        "none: leave a reply's thinking in its text; auto: apart (reasoning_content)",
    ),
    (
        "--reasoning-budget",
        "most tokens a reply thinks (-1: no limit; 0: thinking off where the template allows)",
    ),
    ("--hide-thinking", "do not print the model's thinking"),
    (
        "--max-connections",
        "connections open at once; more are closed on arrival",
    ),
    (
        "--conn-timeout",
        "seconds a client has to send a request's headers, then its body",
    ),
    (
        "--slot-save-path",
        "directory for POST /slots/ID?action=save|restore",
    ),
    ("--verbose", "log each request's user agent and body too"),
    (
        "--log-format",
        "text or json: one line per request on stderr",
    ),
    ("--log-disable", "no request log"),
    ("--no-bos", "do not add the BOS token"),
    (
        "--no-parse-special",
        "treat special-token text as plain text",
    ),
    ("--ids", "print token ids only"),
    ("--allow-requantize", "allow a quantized input"),
    ("--pure", "one type for every weight (no mix)"),
    ("--types", "list the quantization types and exit"),
    (
        "--plans",
        "the CPU's kernels and the matmul plan of each matrix (loads the model)",
    ),
];

impl Args {
    /// Parses `raw` (the arguments after the command name) for command `cmd`. `with_value`
    /// lists the options that take a value, `switches` those that do not. `--help` prints the
    /// command's help and exits.
    pub fn parse(
        cmd: &'static str,
        raw: &[String],
        with_value: &[&str],
        switches: &[&str],
    ) -> Result<Args, String> {
        let listed: Vec<&str> = with_value.iter().chain(switches).copied().collect();
        let options = group_spellings(&listed);
        let ignored: Vec<&Ignored> = flags::IGNORED
            .iter()
            .filter(|_| flags::takes_ignored(cmd))
            .filter(|i| !i.spellings.iter().any(|s| listed.contains(s)))
            .collect();
        let takes_value = |spellings: &[&str]| spellings.iter().any(|s| with_value.contains(s));
        let names: Vec<&str> = options
            .iter()
            .flatten()
            .chain(ignored.iter().flat_map(|i| i.spellings))
            .copied()
            .collect();
        let valued: Vec<&str> = options
            .iter()
            .filter(|o| takes_value(o))
            .flatten()
            .chain(
                ignored
                    .iter()
                    .filter(|i| i.takes_value)
                    .flat_map(|i| i.spellings),
            )
            .copied()
            .collect();
        let mut command = Command::new(format!("kolibri {cmd}"))
            .no_binary_name(true)
            .version(env!("CARGO_PKG_VERSION"))
            .allow_negative_numbers(true)
            // A repeated option takes its last value, as llama.cpp's tools and scripts expect.
            .args_override_self(true);
        if let Some(what) = positionals_of(cmd) {
            let arg = Arg::new("positional").value_name(what).num_args(0..);
            command = command.arg(arg.action(ArgAction::Append));
        }
        for spellings in &options {
            command = command.arg(clap_arg(spellings, takes_value(spellings)));
        }
        for i in &ignored {
            let help = format!("llama.cpp's; {}", i.note);
            command = command.arg(clap_arg(i.spellings, i.takes_value).help(help).hide(true));
        }
        let argv = long_forms(raw, &names, &valued)?;
        let matches = match command.try_get_matches_from(argv) {
            Ok(m) => m,
            Err(e)
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
            {
                print!("{}", e.render());
                std::process::exit(0);
            }
            Err(e) => {
                let text = e.render().to_string();
                return Err(text.trim_start_matches("error: ").trim_end().to_string());
            }
        };
        for i in &ignored {
            let id = i.spellings[0];
            let given = match i.takes_value {
                true => matches.get_one::<String>(id).is_some(),
                false => matches.get_flag(id),
            };
            if given {
                eprintln!("note: {}: {}", i.spellings.join("/"), i.note);
            }
        }
        let mut args = Args {
            values: HashMap::new(),
            lists: HashMap::new(),
            switches: Vec::new(),
            positional: matches
                .get_many::<String>("positional")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
            model_first: positionals_of(cmd).is_some_and(|p| p.starts_with("MODEL")),
        };
        if positionals_of(cmd) == Some("MODEL") {
            if let Some(extra) = args.after_model().first() {
                return Err(format!(
                    "unexpected argument {extra:?} (the model is given once)"
                ));
            }
        }
        for spellings in &options {
            let id = spellings[0];
            if REPEATABLE.iter().any(|r| spellings.contains(r)) {
                if let Some(v) = matches.get_many::<String>(id) {
                    let all: Vec<String> = v.cloned().collect();
                    for s in spellings {
                        args.lists.insert(s.to_string(), all.clone());
                    }
                }
            } else if takes_value(spellings) {
                if let Some(v) = matches.get_one::<String>(id) {
                    for s in spellings {
                        args.values.insert(s.to_string(), v.clone());
                    }
                }
            } else if matches.get_flag(id) {
                args.switches
                    .extend(spellings.iter().map(|s| s.to_string()));
            }
        }
        Ok(args)
    }

    /// The value of the first of `names` given.
    pub fn get(&self, names: &[&str]) -> Option<&str> {
        names
            .iter()
            .find_map(|n| self.values.get(*n))
            .map(String::as_str)
    }

    /// Every value of a [`REPEATABLE`] option, in the order given (empty when absent).
    pub fn all(&self, name: &str) -> &[String] {
        self.lists.get(name).map(Vec::as_slice).unwrap_or_default()
    }

    pub fn require(&self, names: &[&str]) -> Result<&str, String> {
        self.get(names)
            .ok_or_else(|| format!("missing required option {}", names.join("/")))
    }

    pub fn parse_or<T: std::str::FromStr>(&self, names: &[&str], default: T) -> Result<T, String> {
        match self.get(names) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("bad value {v:?} for {}", names.join("/"))),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// The model: `-m`'s value, else the first positional argument of a command that takes
    /// the model there (`kolibri run MODEL PROMPT`, as `ollama run`), unless `-hf` names it.
    pub fn model(&self) -> Option<&str> {
        self.get(&["--model"]).or_else(|| {
            let by_name = self.get(&["--hf-repo"]).is_some();
            (self.model_first && !by_name)
                .then(|| self.positional.first().map(String::as_str))
                .flatten()
        })
    }

    /// The positional arguments after the one [`Args::model`] took.
    pub fn after_model(&self) -> &[String] {
        let took = self.get(&["--model"]).is_none() && self.model().is_some();
        &self.positional[usize::from(took)..]
    }
}

/// What the commands that take positional arguments call them.
fn positionals_of(cmd: &str) -> Option<&'static str> {
    match cmd {
        "tokenize" => Some("TEXT"),
        "quantize" => Some("ARGS"),
        "pull" => Some("OWNER/REPO[:QUANT]"),
        "rm" | "show" => Some("NAME"),
        "cache" => Some("list|clear"),
        "run" => Some("MODEL PROMPT"),
        "chat" | "serve" | "perplexity" | "info" => Some("MODEL"),
        _ => None,
    }
}

/// The command's options, each as its spellings (shorts first, the listed ones first).
fn group_spellings<'a>(listed: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut options: Vec<Vec<&str>> = Vec::new();
    for &name in listed {
        if !options.iter().any(|o| o.contains(&name)) {
            options.push(flags::spellings_of(name, listed));
        }
    }
    options
}

/// One clap argument for an option's spellings; its id is its first spelling. Its first long
/// spelling is the one help shows; the others, and llama.cpp's multi-letter shorts (which
/// reach clap as longs, see [`long_forms`]), are aliases that help mentions.
fn clap_arg(spellings: &[&str], takes_value: bool) -> Arg {
    let mut arg = Arg::new(spellings[0].to_string());
    let mut primary = None;
    let mut also = Vec::new();
    for s in spellings {
        let bare = s.trim_start_matches('-');
        if !s.starts_with("--") && bare.chars().count() == 1 {
            arg = arg.short(bare.chars().next().expect("one char"));
        } else if primary.is_none() && s.starts_with("--") {
            primary = Some(bare);
        } else {
            arg = arg.alias(bare.to_string());
            also.push(*s);
        }
    }
    // An option spelt only llama.cpp's way (`-ngl`) is shown as `--ngl`.
    let primary = primary.or_else(|| also.first().map(|s| s.trim_start_matches('-')));
    if let Some(long) = primary {
        arg = arg.long(long.to_string());
    }
    let help = spellings
        .iter()
        .find_map(|s| HELP.iter().find(|(n, _)| n == s).map(|(_, h)| *h));
    let also = also.join(", ");
    match (help, also.is_empty()) {
        (Some(h), false) => arg = arg.help(format!("{h} (also {also})")),
        (Some(h), true) => arg = arg.help(h),
        (None, false) => arg = arg.help(format!("also {also}")),
        (None, true) => {}
    }
    if takes_value {
        // The next argument is the value even when it begins with '-', as in llama.cpp.
        let arg = arg
            .num_args(1)
            .value_name("VALUE")
            .allow_hyphen_values(true);
        if REPEATABLE.iter().any(|r| spellings.contains(r)) {
            arg.action(ArgAction::Append)
        } else {
            arg
        }
    } else {
        arg.action(ArgAction::SetTrue)
    }
}

/// The arguments with llama.cpp's multi-letter short options (`-ctk q8_0`) in the long form
/// clap reads; an option's value is left as it is (`-p -np` is the prompt "-np"). A
/// multi-letter short that no option has (`-ngll`) is an error naming the nearest one:
/// clap would read it as a short option with its value attached (`-n gll`).
fn long_forms(raw: &[String], names: &[&str], with_value: &[&str]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut is_value = false;
    for arg in raw {
        let word = arg.split('=').next().unwrap_or(arg);
        let multi_letter =
            !is_value && word.len() > 2 && word.starts_with('-') && !word.starts_with("--");
        // Past the '-', so slicing at byte 1 is on a character boundary.
        let letters = multi_letter
            && word[1..]
                .chars()
                .all(|c| c.is_ascii_alphabetic() || c == '-');
        if letters && !names.contains(&word) {
            let hint = flags::nearest(word, names.iter().copied())
                .map(|n| format!("; did you mean {n}?"))
                .unwrap_or_default();
            return Err(format!(
                "unknown option {word}{hint} (`--help` lists the options)"
            ));
        }
        out.push(if multi_letter && names.contains(&word) {
            format!("-{arg}")
        } else {
            arg.clone()
        });
        is_value = !is_value && with_value.contains(&word) && word == arg;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[&str]) -> Result<Args, String> {
        let raw: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
        Args::parse(
            "test",
            &raw,
            &["-m", "--model", "-ctk", "--cache-type-k", "-np", "--temp"],
            &["--mlock"],
        )
    }

    #[test]
    fn both_spellings_and_llama_style_shorts_are_one_option() {
        let a = parse(&["-m", "x.gguf", "-ctk", "q8_0", "--temp=0.5", "-np", "4"]).unwrap();
        assert_eq!(a.get(&["--model"]), Some("x.gguf"));
        assert_eq!(a.get(&["-ctk"]), Some("q8_0"));
        assert_eq!(a.get(&["--cache-type-k"]), Some("q8_0"));
        assert_eq!(a.get(&["-np"]), Some("4"));
        assert_eq!(a.parse_or(&["--temp"], 1.0f32).unwrap(), 0.5);
        assert!(a.positional.is_empty());
        let raw: Vec<String> = ["-3", "x", "--ids"].iter().map(|s| s.to_string()).collect();
        let t = Args::parse("tokenize", &raw, &[], &["--ids"]).unwrap();
        assert_eq!(t.positional, ["-3", "x"]);
        assert!(t.has("--ids"));
        assert!(
            Args::parse("bench", &raw, &[], &["--ids"]).is_err(),
            "bench takes none"
        );
        assert!(!a.has("--mlock"));
        let b = parse(&["--cache-type-k", "f16", "--mlock"]).unwrap();
        assert_eq!(b.get(&["-ctk", "--cache-type-k"]), Some("f16"));
        assert!(b.has("--mlock"));
    }

    #[test]
    fn a_repeated_option_takes_its_last_value() {
        let a = parse(&["-m", "a.gguf", "--model", "b.gguf", "--mlock", "--mlock"]).unwrap();
        assert_eq!(a.get(&["-m"]), Some("b.gguf"));
        assert!(a.has("--mlock"));
    }

    #[test]
    fn values_may_begin_with_a_hyphen() {
        let raw: Vec<String> = [
            "-p",
            "-- a comment",
            "-s",
            "-5 degrees",
            "--stop",
            "- ",
            "--stop",
            "-np",
            "-ctk",
            "-q",
            "--grammar=-x",
            "--mlock",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let with_value = [
            "-p",
            "--prompt",
            "-s",
            "--system",
            "--stop",
            "-ctk",
            "--grammar",
            "-np",
        ];
        let a = Args::parse("test", &raw, &with_value, &["--mlock"]).unwrap();
        assert_eq!(a.get(&["--prompt"]), Some("-- a comment"));
        assert_eq!(a.get(&["-s"]), Some("-5 degrees"));
        assert_eq!(a.all("--stop"), ["- ", "-np"]);
        assert_eq!(a.get(&["-ctk"]), Some("-q"));
        assert_eq!(a.get(&["--grammar"]), Some("-x"));
        assert!(a.has("--mlock"));
        assert!(a.get(&["-np"]).is_none(), "a value is not an option");
        assert!(a.all("--absent").is_empty());
    }

    #[test]
    fn mistakes_are_clap_errors_with_suggestions() {
        let e = parse(&["--modle", "x"]).err().unwrap();
        assert!(e.contains("--modle") && e.contains("--model"), "{e}");
        let e = parse(&["-m"]).err().unwrap();
        assert!(e.contains("value is required"), "{e}");
        assert!(parse(&["--temp", "hot"])
            .unwrap()
            .parse_or(&["--temp"], 1.0f32)
            .is_err());
    }
}
