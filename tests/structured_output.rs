//! Constrained sampling (`kolibri::grammar`) on the real Qwen vocabulary: whatever the logits,
//! the output stays in the language; on the real model, greedy constrained output is valid
//! and speculation does not change it.

mod common;

use std::sync::{Arc, OnceLock};

use kolibri::grammar::{ConstraintSpec, GrammarCompiler, GrammarError};
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::{Sampler, SamplerParams, TokenId};
use kolibri::speculative::{LookupDrafter, Speculator};
use kolibri::tokenizer::Tokenizer;
use serde_json::Value;

const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn model() -> Arc<Model> {
    static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| Arc::new(Model::load(common::model_path(QWEN)).unwrap()))
        .clone()
}

fn compiler() -> &'static GrammarCompiler {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    COMPILER.get_or_init(|| GrammarCompiler::new(&model().tokenizer).unwrap())
}

/// Deterministic pseudo-random logits, spread wide enough that unconstrained sampling would
/// wander anywhere in the vocabulary.
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 12.0 - 6.0
        })
        .collect()
}

/// Samples from random logits under `spec` until an end token; the text and whether it ended.
fn sample_noise(spec: &ConstraintSpec, seed: u64, max_steps: usize) -> (String, bool) {
    let tokenizer: &Tokenizer = &model().tokenizer;
    let params = SamplerParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        ..SamplerParams::default()
    };
    let mut sampler = Sampler::new(params).unwrap();
    sampler.set_constraint(Some(compiler().compile(spec).unwrap()));
    let mut out: Vec<TokenId> = Vec::new();
    for step in 0..max_steps {
        let t = sampler.sample(&noise(tokenizer.n_vocab(), seed * 1000 + step as u64));
        if tokenizer.is_eog(t) {
            let failure = sampler.constraint().unwrap().failure();
            assert!(
                failure.is_none(),
                "{failure:?} after {:?}",
                tokenizer.decode(&out)
            );
            return (tokenizer.decode(&out), true);
        }
        out.push(t);
    }
    (tokenizer.decode(&out), false)
}

#[test]
fn gbnf_output_stays_in_its_language_whatever_the_logits() {
    let spec = ConstraintSpec::Gbnf(
        "root ::= answer \", \" num \"!\"\nanswer ::= \"yes\" | \"no\"\nnum ::= [1-9] [0-9]{0,2}"
            .into(),
    );
    let re = fancy_regex::Regex::new(r"^(yes|no), [1-9][0-9]{0,2}!$").unwrap();
    for seed in 0..40 {
        let (text, ended) = sample_noise(&spec, seed, 40);
        assert!(ended, "seed {seed}: no end after {text:?}");
        assert!(re.is_match(&text).unwrap(), "seed {seed}: {text:?}");
    }
}

#[test]
fn regex_output_matches_whatever_the_logits() {
    let spec = ConstraintSpec::Regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}( [a-z]{1,8})?".into());
    let re = fancy_regex::Regex::new(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}( [a-z]{1,8})?$").unwrap();
    for seed in 0..40 {
        let (text, ended) = sample_noise(&spec, seed, 60);
        assert!(ended, "seed {seed}: no end after {text:?}");
        assert!(re.is_match(&text).unwrap(), "seed {seed}: {text:?}");
    }
}

#[test]
fn json_schema_output_validates_whatever_the_logits() {
    let schema = r##"{
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"enum": ["red", "green"]}, "maxItems": 3},
            "address": {"$ref": "#/$defs/address"}
        },
        "required": ["name", "age", "tags", "address"],
        "additionalProperties": false,
        "$defs": {"address": {"type": "object", "properties": {"zip": {"type": "string",
                  "pattern": "^[0-9]{5}$"}}, "required": ["zip"], "additionalProperties": false}}
    }"##;
    let spec = ConstraintSpec::JsonSchema(schema.into());
    for seed in 0..20 {
        let (text, ended) = sample_noise(&spec, seed, 400);
        assert!(ended, "seed {seed}: no end after {text:?}");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), 4, "{text}");
        assert!(obj["name"].as_str().unwrap().chars().count() <= 8, "{text}");
        assert!((0..=150).contains(&obj["age"].as_i64().unwrap()), "{text}");
        let tags = obj["tags"].as_array().unwrap();
        assert!(tags.len() <= 3, "{text}");
        assert!(tags.iter().all(|t| t == "red" || t == "green"), "{text}");
        let zip = obj["address"]["zip"].as_str().unwrap();
        assert!(
            zip.len() == 5 && zip.bytes().all(|b| b.is_ascii_digit()),
            "{text}"
        );
    }
}

#[test]
fn the_end_is_allowed_only_where_the_grammar_can_end() {
    let tokenizer = &model().tokenizer;
    let im_end = tokenizer.encode("<|im_end|>", false, true)[0];
    let endoftext = tokenizer.encode("<|endoftext|>", false, true)[0];
    let mut c = compiler()
        .compile(&ConstraintSpec::Gbnf("root ::= \"ab\"+".into()))
        .unwrap();
    assert!(!c.allows(im_end) && !c.allows(endoftext));
    let a = tokenizer.encode("ab", false, false);
    for &t in &a {
        c.commit(t);
    }
    assert!(
        c.allows(im_end) && c.allows(endoftext),
        "every end token ends"
    );
    let mut fork = c.clone();
    fork.commit(endoftext);
    assert!(fork.is_finished() && fork.failure().is_none());
    assert!(!c.is_finished(), "a clone advances alone");
    let x = tokenizer.encode("x", false, false)[0];
    assert!(!c.allows(x));
    c.commit(x);
    assert!(c.failure().is_some(), "a forbidden token is a failure");
    let mut logits = noise(tokenizer.n_vocab(), 7);
    c.mask_logits(&mut logits);
    let allowed: Vec<usize> = (0..logits.len())
        .filter(|&i| logits[i].is_finite())
        .collect();
    assert!(
        allowed.iter().all(|&i| tokenizer.is_eog(i as TokenId)),
        "after a failure only ends"
    );
    assert!(!allowed.is_empty());
}

#[test]
fn bad_schemas_and_grammars_are_refused_with_the_reason() {
    let c = compiler();
    let why = |spec: ConstraintSpec| match c.compile(&spec) {
        Err(GrammarError::Invalid(why)) => why,
        Ok(_) => panic!("{spec:?} was accepted"),
    };
    assert!(why(ConstraintSpec::JsonSchema("{\"type\": ".into())).contains("not JSON"));
    assert!(why(ConstraintSpec::JsonSchema("[1]".into())).contains("object or a boolean"));
    assert!(!why(ConstraintSpec::JsonSchema("{\"type\": \"strin\"}".into())).is_empty());
    assert!(why(ConstraintSpec::Gbnf("root ::= nothing".into())).contains("undefined"));
    assert!(!why(ConstraintSpec::Lark("start: undefined_rule".into())).is_empty());
    assert!(!why(ConstraintSpec::Regex("(unclosed".into())).is_empty());
}

fn context() -> Context {
    let params = ContextParams {
        n_ctx: 512,
        n_threads: common::threads(),
        ..Default::default()
    };
    Context::new(model(), &params).unwrap()
}

/// Greedy constrained generation of up to `n` tokens, plainly or with prompt lookup.
fn greedy_constrained(prompt: &str, spec: &ConstraintSpec, n: usize, lookup: bool) -> String {
    let model = model();
    let mut ctx = context();
    let mut sampler = Sampler::new(SamplerParams::greedy()).unwrap();
    sampler.set_constraint(Some(compiler().compile(spec).unwrap()));
    let prompt = model.tokenizer.encode(prompt, true, true);
    let logits = ctx.eval(&prompt, Logits::Last).unwrap();
    let mut out = vec![sampler.sample(&logits)];
    let mut drafter = LookupDrafter::new(2, 4);
    let mut speculator = Speculator::new(&drafter, 8);
    while out.len() < n && !model.tokenizer.is_eog(*out.last().unwrap()) {
        let last = *out.last().unwrap();
        if lookup {
            out.extend(
                speculator
                    .step(&mut drafter, &mut ctx, 0, last, &mut sampler)
                    .unwrap(),
            );
        } else {
            let l = ctx.eval(&[last], Logits::Last).unwrap();
            out.push(sampler.sample(&l));
        }
    }
    out.truncate(n);
    assert!(model.tokenizer.is_eog(*out.last().unwrap()), "unfinished");
    out.pop();
    model.tokenizer.decode(&out)
}

#[test]
fn the_real_model_writes_schema_valid_json_and_lookup_keeps_it_identical() {
    let schema = r#"{"type": "object", "properties": {"language": {"type": "string"},
        "year": {"type": "integer"}, "typed": {"type": "boolean"}},
        "required": ["language", "year", "typed"], "additionalProperties": false}"#;
    let spec = ConstraintSpec::JsonSchema(schema.into());
    let prompt = "<|im_start|>user\nDescribe the Rust programming language as JSON with \
                  its name, first release year and whether it is statically typed.<|im_end|>\n\
                  <|im_start|>assistant\n";
    let plain = greedy_constrained(prompt, &spec, 120, false);
    let v: Value = serde_json::from_str(&plain).unwrap_or_else(|e| panic!("{plain:?}: {e}"));
    assert!(v["language"].is_string() && v["year"].is_i64() && v["typed"].is_boolean());
    assert_eq!(greedy_constrained(prompt, &spec, 120, true), plain);

    let object = greedy_constrained(prompt, &ConstraintSpec::JsonObject, 120, false);
    assert!(
        serde_json::from_str::<Value>(&object).unwrap().is_object(),
        "{object}"
    );
}

fn kolibri_run(extra: &[&str]) -> std::process::Output {
    let model = common::model_path(QWEN);
    std::process::Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "run",
            "-m",
            model.to_str().unwrap(),
            "-p",
            "Is water wet? Answer:",
        ])
        .args(["-n", "16", "-t", "2", "--raw"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn kolibri_run_takes_a_grammar_and_refuses_two() {
    let out = kolibri_run(&[
        "--temp",
        "1",
        "--seed",
        "5",
        "--grammar",
        "root ::= (\"yes\" | \"no\") \".\"",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let answer = text
        .trim_end()
        .strip_prefix("Is water wet? Answer:")
        .unwrap();
    assert!(answer == "yes." || answer == "no.", "{text:?}");

    let out = kolibri_run(&["--json", "-j", "{}"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("give one constraint"));
    let out = kolibri_run(&["--grammar", "root ::= x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--grammar: invalid constraint"));
}
