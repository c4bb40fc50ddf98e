//! Every command the README and `docs/` show runs, so the documentation cannot rot: each
//! ```` ```sh ```` block of `README.md` and `docs/*.md` is run by bash, line by line, in a fresh
//! home (the reference models found through `KOLIBRI_MODEL_DIR`), with a test Hub answering
//! for every Hugging Face name the blocks use. A server command is started, asked for
//! `/health` and stopped; a chat is sent one message on stdin. `scripts/test.sh` is the one
//! command not run here: it is what runs this test. A block marked ```` ```sh ci=SCRIPT ````
//! (building and installing the C libraries, which CI's SCRIPT does anyway) is checked
//! instead: SCRIPT runs each of its commands, up to the first value a user would choose (a
//! path, a variable). Blocks of placeholders (`app.c`, `<llama.cpp>`) are ```` ```text ````.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::fake_hub::{FakeHub, HubFile};

/// Defines `serve_briefly COMMAND...`: runs a server, checks that it answers `/health`, stops
/// it (Ctrl-C, as a user would).
const PRELUDE: &str = r#"set -euo pipefail
serve_briefly() {
  local log pid url
  log=$(mktemp)
  "$@" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "listening on" "$log" && break
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; return 1; fi
    sleep 0.1
  done
  url=$(grep -o "http://[0-9.:]*" "$log" | head -n 1)
  python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=30)" "$url"
  kill -INT "$pid"
  wait "$pid" || true
  rm -f "$log"
}
"#;

/// An `sh` block: its lines, and the CI script that runs them instead (`ci=SCRIPT`).
#[derive(Clone, Debug, PartialEq)]
struct Block {
    lines: Vec<String>,
    ci: Option<String>,
}

/// The `sh` blocks of a Markdown text.
fn sh_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    let mut in_other = false;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(_)) if in_other => in_other = false,
            (None, Some(info)) => {
                let mut words = info.split_whitespace();
                if words.next() == Some("sh") {
                    let ci = words.find_map(|w| w.strip_prefix("ci=")).map(str::to_owned);
                    current = Some(Block {
                        lines: Vec::new(),
                        ci,
                    });
                } else {
                    in_other = true;
                }
            }
            (Some(_), Some(_)) => blocks.push(current.take().expect("in a block")),
            (Some(block), None) => block.lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    blocks
}

/// A command up to the first value a user would choose: `scripts/install.sh --prefix` of
/// `scripts/install.sh --prefix ~/.local/kolibri`.
fn fixed_part(command: &str) -> String {
    let words: Vec<&str> = command
        .split_whitespace()
        .take_while(|w| !w.starts_with(['~', '/', '$', '"', '\'', '<']) && !w.contains('='))
        .collect();
    words.join(" ")
}

/// A line without its trailing comment (a `#` after a space, outside quotes).
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return line[..i].trim_end(),
            _ => {}
        }
        prev = c;
    }
    line.trim_end()
}

/// What bash runs for one documented line.
fn runnable(line: &str) -> String {
    let command = without_comment(line);
    if command.starts_with("scripts/test.sh") {
        // What runs this test.
        return ": scripts/test.sh".into();
    }
    if command.contains("kolibri serve") {
        return format!("serve_briefly env {command}");
    }
    if command.contains("kolibri chat") {
        return format!("printf 'Say hello.\\n' | {command}");
    }
    command.to_owned()
}

/// The Hugging Face names (`OWNER/REPO[:QUANT]`) the blocks download by.
fn hub_names(blocks: &[&[String]]) -> Vec<String> {
    let mut names = Vec::new();
    for line in blocks.iter().copied().flatten() {
        let words: Vec<&str> = without_comment(line).split_whitespace().collect();
        for pair in words.windows(2) {
            if matches!(pair[0], "-hf" | "--hf-repo" | "pull") && pair[1].contains('/') {
                names.push(pair[1].to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// A test Hub holding, for each name, an instruct model (the 0.5B) under a file name that
/// the name's quantization picks (Q4_K_M without one).
fn hub_for(names: &[String]) -> FakeHub {
    let hub = FakeHub::start();
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let mut repos: Vec<(&str, Vec<HubFile>)> = Vec::new();
    for name in names {
        let (repo, quant) = name.split_once(':').unwrap_or((name, "Q4_K_M"));
        let stem = repo.rsplit('/').next().unwrap().trim_end_matches("-GGUF");
        let file = HubFile::new(&format!("{stem}-{quant}.gguf"), &model);
        match repos.iter_mut().find(|(r, _)| *r == repo) {
            Some((_, files)) if !files.iter().any(|f| f.path == file.path) => files.push(file),
            Some(_) => {}
            None => repos.push((repo, vec![file])),
        }
    }
    for (repo, files) in repos {
        hub.repo(repo, "d0c5d0c5d0c5d0c5d0c5d0c5d0c5d0c5d0c5d0c5", files);
    }
    hub
}

/// Removes what a block's commands wrote under /tmp: each `/tmp/...` path they name, and a
/// split output's parts (`/tmp/m.gguf` written as `/tmp/m-00001-of-00003.gguf`, ...).
fn remove_outputs(block: &[String]) {
    for line in block {
        for word in without_comment(line).split_whitespace() {
            let Some(name) = word.strip_prefix("/tmp/") else {
                continue;
            };
            let _ = std::fs::remove_file(word);
            let stem = name.trim_end_matches(".gguf");
            for entry in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                if file.starts_with(&format!("{stem}-0000")) && file.ends_with(".gguf") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
}

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

#[test]
fn every_documented_command_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let blocks: Vec<(PathBuf, Block)> = documents(root)
        .into_iter()
        .flat_map(|doc| {
            let text = std::fs::read_to_string(&doc).unwrap();
            sh_blocks(&text).into_iter().map(move |b| (doc.clone(), b))
        })
        .collect();
    assert!(
        blocks.iter().any(|(doc, _)| doc.ends_with("README.md")),
        "the README's first screen is an sh block"
    );
    let all: Vec<&[String]> = blocks.iter().map(|(_, b)| &b.lines[..]).collect();
    let names = hub_names(&all);
    assert!(!names.is_empty(), "the docs download by name somewhere");
    let hub = hub_for(&names);
    // The user's own tool homes stay where they are: cargo and rustup are found as before.
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let cargo_home =
        std::env::var_os("CARGO_HOME").map_or_else(|| real_home.join(".cargo"), PathBuf::from);
    let rustup_home =
        std::env::var_os("RUSTUP_HOME").map_or_else(|| real_home.join(".rustup"), PathBuf::from);
    let home = std::env::temp_dir().join(format!("kolibri-docs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();

    let mut failures = Vec::new();
    for (doc, block) in &blocks {
        if let Some(ci) = &block.ci {
            let script = std::fs::read_to_string(root.join(ci)).unwrap_or_default();
            for line in &block.lines {
                let fixed = fixed_part(without_comment(line));
                if fixed.is_empty() || !script.contains(&fixed) {
                    failures.push(format!("{}: {ci} does not run {line:?}", doc.display()));
                }
            }
            continue;
        }
        let block = &block.lines;
        let script: Vec<String> = block.iter().map(|l| runnable(l)).collect();
        let started = std::time::Instant::now();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("{PRELUDE}{}", script.join("\n")))
            .current_dir(root)
            .env("HOME", &home)
            .env("CARGO_HOME", &cargo_home)
            .env("RUSTUP_HOME", &rustup_home)
            .env("KOLIBRI_MODEL_DIR", common::model_dir())
            .env("KOLIBRI_REPACK_CACHE", "0")
            .env("HF_ENDPOINT", &hub.url)
            .env_remove("HF_HOME")
            .env_remove("HF_HUB_CACHE")
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("OLLAMA_MODELS")
            .env_remove("XDG_CACHE_HOME")
            .output()
            .unwrap();
        remove_outputs(block);
        let first = block.first().map_or("", |l| without_comment(l));
        eprintln!(
            "{}: {first} ... ({} lines) {:.1} s",
            doc.display(),
            block.len(),
            started.elapsed().as_secs_f64()
        );
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
            failures.push(format!(
                "{}:\n{}\n--- stderr (end) ---\n{}",
                doc.display(),
                block.join("\n"),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    std::fs::remove_dir_all(&home).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn lines_become_what_bash_runs() {
    assert_eq!(
        without_comment(r#"kolibri chat -m $M -s "a # b"   # interactive: """ blocks"#),
        r#"kolibri chat -m $M -s "a # b""#
    );
    assert_eq!(
        runnable("scripts/test.sh   # every test"),
        ": scripts/test.sh"
    );
    assert_eq!(
        runnable("KOLIBRI_API_KEY=k target/release/kolibri serve -m $M  # there"),
        "serve_briefly env KOLIBRI_API_KEY=k target/release/kolibri serve -m $M"
    );
    let md = "x\n```sh\na\nb\n```\n```text\nc\n```\n```sh ci=s.sh\nd\n```\n";
    let block = |lines: &[&str], ci: Option<&str>| Block {
        lines: lines.iter().map(|l| l.to_string()).collect(),
        ci: ci.map(str::to_owned),
    };
    assert_eq!(
        sh_blocks(md),
        [block(&["a", "b"], None), block(&["d"], Some("s.sh"))]
    );
    assert_eq!(
        fixed_part("scripts/install.sh --prefix ~/.local/k"),
        "scripts/install.sh --prefix"
    );
    assert_eq!(fixed_part("X=1 cargo build"), "");
    let lines: Vec<String> = vec!["kolibri pull o/r:Q8_0 # x".into(), "k -hf o/r".into()];
    assert_eq!(hub_names(&[&lines[..]]), ["o/r", "o/r:Q8_0"]);
}
