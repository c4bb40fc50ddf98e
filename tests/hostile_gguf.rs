//! A corpus of hostile GGUF files the test writes itself: each is a valid synthetic model with
//! one defect, from the classes of published GGUF parser bugs (llama.cpp, ollama, candle,
//! mistral.rs): header counts and lengths past the file, nested arrays, bad alignment, tensor
//! tables that overflow or overlap, token tables with scores and types out of step, special-token
//! ids outside the vocabulary, merges that name nothing, empty, duplicate, huge and non-UTF-8
//! tokens, an empty control token, a vocabulary larger than the embedding matrix.
//!
//! Each file is tokenized and run by `kolibri` in a child process with 1 GiB of data
//! (RLIMIT_DATA) and 5 seconds: it must give a clean error (exit 1 with a message) or a correct
//! run (exit 0, every token id inside the vocabulary). A signal, a panic (exit 101) or the
//! deadline fails the test.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::synthetic::synthetic;
use kolibri::gguf::{GgufFile, GgufWriter, Value, ValueType};
use kolibri::quant::GgmlType;

const DEADLINE: Duration = Duration::from_secs(5);
const DATA_LIMIT: u64 = 1 << 30;
const TEXT: &str = "Hello world, <s></s><|im_end|> café 😀 \u{1} ab  \n\t 12345";

/// How a child process ended.
#[derive(Debug)]
enum Outcome {
    Ran { stdout: String },
    Refused { message: String },
    Failed(String),
}

/// Runs `kolibri ARGS` under the data limit and the deadline.
fn kolibri(args: &[&str], scratch: &Path) -> Outcome {
    let out = scratch.with_extension("out");
    let err = scratch.with_extension("err");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kolibri"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DATA_LIMIT,
                rlim_max: DATA_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("kolibri starts");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::Failed(format!("still running after {DEADLINE:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    let (stdout, stderr) = (read(&out), read(&err));
    let _ = (std::fs::remove_file(&out), std::fs::remove_file(&err));
    match status.code() {
        Some(0) => Outcome::Ran { stdout },
        Some(1) if stderr.contains("error") => Outcome::Refused { message: stderr },
        _ => Outcome::Failed(format!(
            "{status}: {}",
            stderr.chars().take(2000).collect::<String>()
        )),
    }
}

/// One defect applied to a model's metadata and tensor table.
struct Edit {
    metadata: Vec<(String, Value)>,
    /// (name, dims, type, data) per tensor.
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
    alignment: Option<u32>,
}

impl Edit {
    fn of(src: &GgufFile, with_tensors: bool) -> Edit {
        Edit {
            metadata: src.metadata().to_vec(),
            tensors: if with_tensors {
                src.tensors()
                    .iter()
                    .map(|t| {
                        (
                            t.name.clone(),
                            t.dims.clone(),
                            t.ggml_type,
                            src.tensor_data(t).to_vec(),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
            alignment: None,
        }
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn set(&mut self, key: &str, value: Value) -> &mut Self {
        self.remove(key);
        self.metadata.push((key.into(), value));
        self
    }

    fn remove(&mut self, key: &str) -> &mut Self {
        self.metadata.retain(|(k, _)| k != key);
        self
    }

    /// The elements of array `key`.
    fn items(&self, key: &str) -> (ValueType, Vec<Value>) {
        let a = self
            .get(key)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{key}"));
        (
            a.elem_type(),
            (0..a.len())
                .map(|i| a.get(i).unwrap().into_owned())
                .collect(),
        )
    }

    /// Array `key` passed through `f`.
    fn map_array(&mut self, key: &str, f: impl FnOnce(&mut Vec<Value>)) -> &mut Self {
        let (elem, mut items) = self.items(key);
        f(&mut items);
        self.set(key, Value::array(elem, items))
    }

    fn bytes(&self) -> Vec<u8> {
        let mut w = GgufWriter::new();
        if let Some(a) = self.alignment {
            w.metadata("general.alignment", Value::U32(a));
        }
        for (k, v) in &self.metadata {
            w.metadata(k, v.clone());
        }
        for (name, dims, ty, data) in &self.tensors {
            w.tensor(name, dims, *ty, data.clone());
        }
        w.to_bytes()
    }
}

fn n_tokens(e: &Edit) -> usize {
    e.get("tokenizer.ggml.tokens")
        .and_then(Value::as_array)
        .map_or(0, |a| a.len())
}

/// The ids `kolibri tokenize --ids` printed, checked against the vocabulary.
fn check_ids(case: &str, stdout: &str, n_vocab: usize) {
    let ids: Vec<usize> = stdout
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{case}: {stdout}"))
        })
        .collect();
    assert!(
        ids.iter().all(|&id| id < n_vocab.max(1)),
        "{case}: ids past {n_vocab}: {ids:?}"
    );
}

struct Corpus {
    dir: PathBuf,
    failures: Vec<String>,
    ran: usize,
    refused: usize,
}

impl Corpus {
    fn new() -> Corpus {
        let dir = std::env::temp_dir().join(format!("kolibri-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Corpus {
            dir,
            failures: Vec::new(),
            ran: 0,
            refused: 0,
        }
    }

    /// Tokenizes with the file (and, when `run`, loads its weights and generates two tokens).
    fn case(&mut self, name: &str, bytes: &[u8], n_vocab: usize, run: bool) {
        let path = self.dir.join(format!("{name}.gguf"));
        std::fs::write(&path, bytes).unwrap();
        let model = path.to_str().unwrap();
        let mut outcomes = vec![(
            "tokenize",
            kolibri(&["tokenize", "-m", model, "-p", TEXT, "--ids"], &path),
        )];
        if run {
            let args = [
                "run", "-m", model, "-p", TEXT, "-n", "2", "--temp", "0", "-t", "1", "--raw",
            ];
            outcomes.push(("run", kolibri(&args, &path)));
        }
        for (what, outcome) in outcomes {
            match outcome {
                Outcome::Ran { stdout } => {
                    if what == "tokenize" {
                        check_ids(name, &stdout, n_vocab);
                    }
                    self.ran += 1;
                }
                Outcome::Refused { message } => {
                    println!("{name} ({what}): {}", message.trim());
                    self.refused += 1;
                }
                Outcome::Failed(why) => self.failures.push(format!("{name} ({what}): {why}")),
            }
        }
        let _ = std::fs::remove_file(&path);
    }

    fn edit(&mut self, name: &str, base: &Edit, run: bool, f: impl FnOnce(&mut Edit)) {
        let mut e = Edit {
            metadata: base.metadata.clone(),
            tensors: base.tensors.clone(),
            alignment: None,
        };
        f(&mut e);
        let n_vocab = n_tokens(&e);
        self.case(name, &e.bytes(), n_vocab, run);
    }

    fn finish(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        println!(
            "hostile GGUF corpus: {} runs, {} clean refusals",
            self.ran, self.refused
        );
        assert!(self.failures.is_empty(), "{:#?}", self.failures);
    }
}

/// Header and tensor-table defects, patched into the bytes of a valid file.
fn header_cases(c: &mut Corpus, base: &Edit) {
    let good = base.bytes();
    let n_vocab = n_tokens(base);
    let patch = |at: usize, value: &[u8]| {
        let mut b = good.clone();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    // Counts: tensors and keys claimed past anything the file holds.
    c.case(
        "n-tensors-max",
        &patch(8, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "n-tensors-huge",
        &patch(8, &(1u64 << 40).to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "n-kv-max",
        &patch(16, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    // The first key's length: past the end, and a length whose +1 overflows.
    c.case(
        "key-length-max",
        &patch(24, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "key-length-huge",
        &patch(24, &(1u64 << 33).to_le_bytes()),
        n_vocab,
        true,
    );
    // The token array's count: times the element size overflows, or runs past the end.
    let key = b"tokenizer.ggml.tokens";
    let at = find(&good, key) + key.len() + 8;
    c.case(
        "token-count-max",
        &patch(at, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "token-count-huge",
        &patch(at, &(1u64 << 31).to_le_bytes()),
        n_vocab,
        true,
    );
    // The first token's length (inside the array).
    c.case(
        "token-length-max",
        &patch(at + 8, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    // The token array's element type: an unknown type id, and an array of arrays.
    c.case(
        "token-elem-unknown",
        &patch(at - 4, &99u32.to_le_bytes()),
        n_vocab,
        true,
    );
    // Tensor table: dims, type, offsets.
    let name = b"token_embd.weight";
    let t = find(&good, name) + name.len();
    c.case(
        "tensor-n-dims-9",
        &patch(t, &9u32.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "tensor-dim-zero",
        &patch(t + 4, &0u64.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "tensor-dim-max",
        &patch(t + 4, &u64::MAX.to_le_bytes()),
        n_vocab,
        true,
    );
    let n_dims = u32::from_le_bytes(good[t..t + 4].try_into().unwrap()) as usize;
    let ty_at = t + 4 + 8 * n_dims;
    c.case(
        "tensor-type-unknown",
        &patch(ty_at, &77u32.to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "tensor-offset-max",
        &patch(ty_at + 4, &(u64::MAX - 7).to_le_bytes()),
        n_vocab,
        true,
    );
    c.case(
        "tensor-offset-misaligned",
        &patch(ty_at + 4, &3u64.to_le_bytes()),
        n_vocab,
        true,
    );
    // Version and magic.
    c.case("version-0", &patch(4, &0u32.to_le_bytes()), n_vocab, true);
    c.case("version-99", &patch(4, &99u32.to_le_bytes()), n_vocab, true);

    c.edit("alignment-zero", base, true, |e| e.alignment = Some(0));
    c.edit("alignment-not-power-of-two", base, true, |e| {
        e.alignment = Some(48)
    });
    c.edit("duplicate-key", base, true, |e| {
        let v = e.get("general.architecture").unwrap().clone();
        e.metadata.push(("general.architecture".into(), v));
    });
    c.edit("duplicate-tensor", base, true, |e| {
        let first = e.tensors[0].clone();
        e.tensors.push(first);
    });
    c.edit("nested-arrays-deep", base, true, |e| {
        let mut v = Value::array(ValueType::U8, vec![Value::U8(1)]);
        for _ in 0..200 {
            v = Value::array(ValueType::Array, vec![v]);
        }
        e.set("general.nested", v);
    });
    c.edit("architecture-missing", base, true, |e| {
        e.remove("general.architecture");
    });
}

/// Token-table, score, type, special-id and merge defects.
fn tokenizer_cases(c: &mut Corpus, base: &Edit, tag: &str, run: bool) {
    let n = n_tokens(base);
    let case = |c: &mut Corpus, what: &str, f: &dyn Fn(&mut Edit)| {
        c.edit(&format!("{tag}-{what}"), base, run, |e| f(e));
    };
    case(c, "tokens-missing", &|e| {
        e.remove("tokenizer.ggml.tokens");
    });
    case(c, "tokens-empty", &|e| {
        e.set(
            "tokenizer.ggml.tokens",
            Value::array(ValueType::String, vec![]),
        );
    });
    case(c, "tokenizer-model-unknown", &|e| {
        e.set("tokenizer.ggml.model", Value::String("nonsense".into()));
    });
    case(c, "tokenizer-model-empty", &|e| {
        e.set("tokenizer.ggml.model", Value::String(String::new()));
    });
    case(c, "pre-tokenizer-unknown", &|e| {
        e.set("tokenizer.ggml.pre", Value::String("nonsense".into()));
    });
    // Byte-level BPE vocabularies carry no scores.
    if base.get("tokenizer.ggml.scores").is_some() {
        case(c, "scores-short", &|e| {
            e.map_array("tokenizer.ggml.scores", |v| v.truncate(v.len() / 2));
        });
        case(c, "scores-nan", &|e| {
            e.map_array("tokenizer.ggml.scores", |v| {
                v.iter_mut().for_each(|s| *s = Value::F32(f32::NAN))
            });
        });
    }
    case(c, "types-short", &|e| {
        e.map_array("tokenizer.ggml.token_type", |v| v.truncate(1));
    });
    case(c, "types-out-of-range", &|e| {
        e.map_array("tokenizer.ggml.token_type", |v| {
            v.iter_mut()
                .enumerate()
                .for_each(|(i, t)| *t = Value::I32([99, -5, 0, 7][i % 4]))
        });
    });
    case(c, "types-all-control", &|e| {
        e.map_array("tokenizer.ggml.token_type", |v| {
            v.iter_mut().for_each(|t| *t = Value::I32(3))
        });
    });
    case(c, "token-empty-control", &|e| {
        e.map_array("tokenizer.ggml.tokens", |v| {
            *v.last_mut().unwrap() = Value::String(String::new())
        });
        e.map_array("tokenizer.ggml.token_type", |v| {
            let last = v.len() - 1;
            v[last] = Value::I32(3)
        });
    });
    case(c, "token-empty-every-fifth", &|e| {
        e.map_array("tokenizer.ggml.tokens", |v| {
            v.iter_mut()
                .step_by(5)
                .for_each(|t| *t = Value::String(String::new()))
        });
    });
    case(c, "tokens-duplicated", &|e| {
        e.map_array("tokenizer.ggml.tokens", |v| {
            let first = v[v.len() / 2].clone();
            let half = v.len() / 2;
            v.iter_mut()
                .skip(half)
                .step_by(3)
                .for_each(|t| *t = first.clone())
        });
    });
    case(c, "token-huge", &|e| {
        e.map_array("tokenizer.ggml.tokens", |v| {
            *v.last_mut().unwrap() = Value::String("a".repeat(1 << 20))
        });
    });
    case(c, "user-defined-prefixes", &|e| {
        // Special tokens that are prefixes of one another and of ordinary text.
        e.map_array("tokenizer.ggml.tokens", |v| {
            let len = v.len();
            for (i, s) in ["<", "<s", "<s>", "H", "He"].iter().enumerate() {
                v[len - 1 - i] = Value::String(s.to_string());
            }
        });
        e.map_array("tokenizer.ggml.token_type", |v| {
            let len = v.len();
            (0..5).for_each(|i| v[len - 1 - i] = Value::I32(4));
        });
    });
    for key in [
        "bos",
        "eos",
        "unknown",
        "padding",
        "eot",
        "eom",
        "seperator",
    ] {
        let key = format!("tokenizer.ggml.{key}_token_id");
        for (what, id) in [("n-vocab", n as u32), ("u32-max", u32::MAX)] {
            let short = key
                .trim_start_matches("tokenizer.ggml.")
                .trim_end_matches("_token_id");
            case(c, &format!("{short}-id-{what}"), &|e| {
                e.set(&key, Value::U32(id));
            });
        }
    }
    case(c, "add-bos-without-bos", &|e| {
        e.remove("tokenizer.ggml.bos_token_id");
        e.set("tokenizer.ggml.add_bos_token", Value::Bool(true));
    });
    case(c, "chat-template-huge", &|e| {
        e.set(
            "tokenizer.chat_template",
            Value::String("{{ 'x' }}".repeat(100_000)),
        );
    });
    if base.get("tokenizer.ggml.merges").is_some() {
        case(c, "merges-missing", &|e| {
            e.remove("tokenizer.ggml.merges");
        });
        case(c, "merges-empty", &|e| {
            e.set(
                "tokenizer.ggml.merges",
                Value::array(ValueType::String, vec![]),
            );
        });
        let bad_merges: [(&str, &[&str]); 5] = [
            ("merge-no-space", &["ab", "Hello"]),
            ("merge-empty-sides", &[" ", "", "  "]),
            ("merge-unknown-tokens", &["zzq xqv", "\u{1}\u{2} \u{3}"]),
            ("merge-three-parts", &["a b c"]),
            ("merge-duplicates", &["H e", "H e", "l l", "l l"]),
        ];
        for (what, merges) in bad_merges {
            case(c, what, &|e| {
                e.map_array("tokenizer.ggml.merges", |v| {
                    v.splice(0..0, merges.iter().map(|m| Value::String(m.to_string())));
                });
            });
        }
        case(c, "byte-tokens-missing", &|e| {
            // A byte-level vocabulary without its single-byte tokens: some bytes have no token.
            e.map_array("tokenizer.ggml.tokens", |v| {
                v.iter_mut()
                    .filter(|t| t.as_str().is_some_and(|s| s.chars().count() == 1))
                    .for_each(|t| *t = Value::String(format!("{}{}", t.as_str().unwrap(), "§")))
            });
        });
    } else {
        case(c, "byte-fallback-missing", &|e| {
            // A SentencePiece vocabulary without its <0xNN> tokens.
            e.map_array("tokenizer.ggml.tokens", |v| {
                v.iter_mut()
                    .filter(|t| t.as_str().is_some_and(|s| s.starts_with("<0x")))
                    .for_each(|t| *t = Value::String(format!("{}~", t.as_str().unwrap())))
            });
        });
    }
    // A token that is not UTF-8 (the writer only writes strings, so patch the bytes).
    let mut e = Edit {
        metadata: base.metadata.clone(),
        tensors: base.tensors.clone(),
        alignment: None,
    };
    e.map_array("tokenizer.ggml.tokens", |v| {
        *v.last_mut().unwrap() = Value::String("QQQQ".into())
    });
    let mut bytes = e.bytes();
    let at = find(&bytes, b"QQQQ");
    bytes[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
    c.case(&format!("{tag}-token-not-utf8"), &bytes, n, run);
}

/// Weights and vocabulary out of step: more tokens than embedding rows, fewer, and an output
/// matrix of another height.
fn vocab_size_cases(c: &mut Corpus, base: &Edit) {
    c.edit("vocab-larger-than-embedding", base, true, |e| {
        e.map_array("tokenizer.ggml.tokens", |v| {
            let extra: Vec<Value> = (0..64)
                .map(|i| Value::String(format!("extra{i}")))
                .collect();
            v.extend(extra);
        });
        e.map_array("tokenizer.ggml.scores", |v| {
            v.extend((0..64).map(|_| Value::F32(0.0)))
        });
        e.map_array("tokenizer.ggml.token_type", |v| {
            v.extend((0..64).map(|_| Value::I32(1)))
        });
    });
    c.edit("vocab-smaller-than-embedding", base, true, |e| {
        let keep = n_tokens(e) - 64;
        for key in [
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.scores",
            "tokenizer.ggml.token_type",
        ] {
            e.map_array(key, |v| v.truncate(keep));
        }
    });
    c.edit("embedding-rows-halved", base, true, |e| {
        for t in e.tensors.iter_mut().filter(|t| t.0 == "token_embd.weight") {
            t.1[1] /= 2;
            let len = t.3.len() / 2;
            t.3.truncate(len);
        }
    });
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} in the file", String::from_utf8_lossy(needle)))
}

#[test]
fn hostile_files_are_refused_cleanly_or_run_correctly() {
    let mut c = Corpus::new();
    // SentencePiece vocabulary, with weights (each case also runs).
    let spm = Edit::of(&synthetic("gemma2-tiny"), true);
    header_cases(&mut c, &spm);
    tokenizer_cases(&mut c, &spm, "spm", true);
    vocab_size_cases(&mut c, &spm);
    // Byte-level BPE with merges (Qwen's 151k vocabulary): the tokenizer only.
    let bpe = Edit::of(&synthetic("qwen3-tiny"), false);
    tokenizer_cases(&mut c, &bpe, "bpe", false);
    c.finish();
}
