//! The structured-output options of `kolibri run`, named as llama.cpp's tools name them:
//! `--grammar GBNF`, `--grammar-file FILE`, `-j/--json-schema SCHEMA`, `--json-schema-file
//! FILE` and `--json` (any JSON object).

#[cfg(feature = "grammar")]
use kolibri::grammar::{Constraint, ConstraintSpec, GrammarCompiler};
use kolibri::model::Model;
use kolibri::sampling::Sampler;

use crate::args::Args;

pub const FLAGS: [&str; 5] = [
    "--grammar",
    "--grammar-file",
    "-j",
    "--json-schema",
    "--json-schema-file",
];
pub const SWITCHES: [&str; 1] = ["--json"];

/// Puts the constraint the options ask for, if any, on `sampler`.
pub fn apply(a: &Args, model: &Model, sampler: &mut Sampler) -> Result<(), String> {
    #[cfg(feature = "grammar")]
    sampler.set_constraint(from_args(a, model)?);
    #[cfg(not(feature = "grammar"))]
    if FLAGS
        .iter()
        .chain(&SWITCHES)
        .any(|f| a.has(f) || a.get(&[f]).is_some())
    {
        let _ = (model, sampler);
        return Err("this build has no constrained sampling (feature \"grammar\")".into());
    }
    Ok(())
}

/// The constraint the options ask for (None without any of them); at most one may be given.
#[cfg(feature = "grammar")]
fn from_args(a: &Args, model: &Model) -> Result<Option<Constraint>, String> {
    let read =
        |path: &str| std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"));
    let mut asked = Vec::new();
    if let Some(g) = a.get(&["--grammar"]) {
        asked.push(("--grammar", ConstraintSpec::Gbnf(g.to_owned())));
    }
    if let Some(path) = a.get(&["--grammar-file"]) {
        asked.push(("--grammar-file", ConstraintSpec::Gbnf(read(path)?)));
    }
    if let Some(s) = a.get(&["-j", "--json-schema"]) {
        asked.push(("--json-schema", ConstraintSpec::JsonSchema(s.to_owned())));
    }
    if let Some(path) = a.get(&["--json-schema-file"]) {
        asked.push((
            "--json-schema-file",
            ConstraintSpec::JsonSchema(read(path)?),
        ));
    }
    if a.has("--json") {
        asked.push(("--json", ConstraintSpec::JsonObject));
    }
    let (flag, spec) = match asked.len() {
        0 => return Ok(None),
        1 => asked.remove(0),
        _ => {
            let flags: Vec<&str> = asked.iter().map(|(f, _)| *f).collect();
            return Err(format!("give one constraint, not {}", flags.join(" and ")));
        }
    };
    let compiler = GrammarCompiler::new(&model.tokenizer).map_err(|e| e.to_string())?;
    compiler
        .compile(&spec)
        .map(Some)
        .map_err(|e| format!("{flag}: {e}"))
}
