//! Command-line parsing with clap. Each command lists the options it takes (both spellings,
//! e.g. "-m", "--model") and its switches; this module builds the clap command from those
//! lists, with the help text of [`HELP`], so every command has `--help`, clap's errors and
//! its suggestions for misspelt options. llama.cpp's multi-letter short options (`-ctk`,
//! `-np`, `-md`) are accepted as they are spelt there. As in llama.cpp, an option's value is
//! the next argument whatever it looks like, so prompts and stop strings may begin with `-`
//! (`-p "-- a SQL comment"`, `--stop "- "`). Options in [`REPEATABLE`] may be given several
//! times and keep every value.

use std::collections::HashMap;

use clap::{Arg, ArgAction, Command};

pub struct Args {
    values: HashMap<String, String>,
    /// Every value of a [`REPEATABLE`] option, in order, under each spelling.
    lists: HashMap<String, Vec<String>>,
    switches: Vec<String>,
    pub positional: Vec<String>,
}

/// Spellings of one option: a short (or llama.cpp-style multi-letter short) and a long one.
/// Where a command lists both, they are one option.
const ALIASES: &[(&str, &str)] = &[
    ("-m", "--model"),
    ("-hf", "--hf-repo"),
    ("-p", "--prompt"),
    ("-p", "--n-prompt"),
    ("-n", "--n-predict"),
    ("-n", "--n-gen"),
    ("-t", "--threads"),
    ("-c", "--ctx-size"),
    ("-f", "--file"),
    ("-r", "--repetitions"),
    ("-o", "--output"),
    ("-d", "--n-depth"),
    ("-b", "--batch-size"),
    ("-s", "--system"),
    ("-j", "--json-schema"),
    ("-md", "--draft"),
    ("-np", "--parallel"),
    ("-ctk", "--cache-type-k"),
    ("-ctv", "--cache-type-v"),
];

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
    ("--no-bos", "do not add the BOS token"),
    (
        "--no-parse-special",
        "treat special-token text as plain text",
    ),
    ("--ids", "print token ids only"),
    ("--allow-requantize", "allow a quantized input"),
    ("--pure", "one type for every weight (no mix)"),
    ("--types", "list the quantization types and exit"),
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
        let names: Vec<&str> = with_value.iter().chain(switches).copied().collect();
        let options = group_spellings(&names);
        let mut command = Command::new(format!("kolibri {cmd}"))
            .no_binary_name(true)
            .allow_negative_numbers(true)
            // A repeated option takes its last value, as llama.cpp's tools and scripts expect.
            .args_override_self(true);
        if let Some(what) = positionals_of(cmd) {
            let arg = Arg::new("positional").value_name(what).num_args(0..);
            command = command.arg(arg.action(ArgAction::Append));
        }
        for spellings in &options {
            command = command.arg(clap_arg(spellings, with_value.contains(&spellings[0])));
        }
        let argv = long_forms(raw, &names, with_value);
        let matches = match command.try_get_matches_from(argv) {
            Ok(m) => m,
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
                print!("{}", e.render());
                std::process::exit(0);
            }
            Err(e) => {
                let text = e.render().to_string();
                return Err(text.trim_start_matches("error: ").trim_end().to_string());
            }
        };
        let mut args = Args {
            values: HashMap::new(),
            lists: HashMap::new(),
            switches: Vec::new(),
            positional: matches
                .get_many::<String>("positional")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
        };
        for spellings in &options {
            let id = spellings[0];
            if REPEATABLE.iter().any(|r| spellings.contains(r)) {
                if let Some(v) = matches.get_many::<String>(id) {
                    let all: Vec<String> = v.cloned().collect();
                    for s in spellings {
                        args.lists.insert(s.to_string(), all.clone());
                    }
                }
            } else if with_value.contains(&id) {
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
}

/// What the commands that take positional arguments call them.
fn positionals_of(cmd: &str) -> Option<&'static str> {
    match cmd {
        "tokenize" => Some("TEXT"),
        "quantize" => Some("ARGS"),
        "pull" => Some("OWNER/REPO[:QUANT]"),
        "rm" | "show" => Some("NAME"),
        _ => None,
    }
}

/// The command's options, each as its spellings (short first where it has one).
fn group_spellings<'a>(names: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut options: Vec<Vec<&str>> = Vec::new();
    for &name in names {
        if options.iter().any(|o| o.contains(&name)) {
            continue;
        }
        let partner = ALIASES.iter().find_map(|&(short, long)| match name {
            n if n == short && names.contains(&long) => Some(long),
            n if n == long && names.contains(&short) => Some(short),
            _ => None,
        });
        let partner = partner.and_then(|p| names.iter().copied().find(|&n| n == p));
        let mut spellings = vec![name];
        spellings.extend(partner);
        spellings.sort_by_key(|s| s.starts_with("--"));
        options.push(spellings);
    }
    options
}

/// One clap argument for an option's spellings; its id is its first spelling.
fn clap_arg(spellings: &[&str], takes_value: bool) -> Arg {
    let id = spellings[0].to_string();
    let mut arg = Arg::new(id);
    let mut long_name = None;
    let mut llama_short = None;
    for s in spellings {
        match s.strip_prefix("--") {
            Some(long) => long_name = Some(long.to_string()),
            None => {
                let short = &s[1..];
                if short.chars().count() == 1 {
                    arg = arg.short(short.chars().next().expect("one char"));
                } else {
                    // `-ctk` reaches clap as `--ctk` (see `long_form`); help names it as typed.
                    arg = arg.alias(short.to_string());
                    llama_short = Some(*s);
                }
            }
        }
    }
    let primary = long_name.or_else(|| {
        spellings
            .iter()
            .find(|s| s.len() > 2 && !s.starts_with("--"))
            .map(|s| s[1..].to_string())
    });
    if let Some(long) = &primary {
        arg = arg.long(long.clone());
    }
    let help = spellings
        .iter()
        .find_map(|s| HELP.iter().find(|(n, _)| n == s).map(|(_, h)| *h));
    match (help, llama_short) {
        (Some(h), Some(short)) => arg = arg.help(format!("{h} (also {short})")),
        (Some(h), None) => arg = arg.help(h),
        (None, Some(short)) => arg = arg.help(format!("also {short}")),
        (None, None) => {}
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
/// clap reads; an option's value is left as it is (`-p -np` is the prompt "-np").
fn long_forms(raw: &[String], names: &[&str], with_value: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut is_value = false;
    for arg in raw {
        let multi_letter = arg.len() > 2 && !arg.starts_with("--") && names.contains(&&**arg);
        out.push(if multi_letter && !is_value {
            format!("-{arg}")
        } else {
            arg.clone()
        });
        is_value = !is_value && with_value.contains(&&**arg);
    }
    out
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
            Args::parse("run", &raw, &[], &["--ids"]).is_err(),
            "run takes none"
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
