//! The local model store: `kolibri list`, `kolibri show NAME`, `kolibri rm NAME`, and model
//! names for `-m` ([`kolibri::store`]).

use kolibri::store::{ModelFacts, Store, StoredModel};

use crate::args::Args;

pub const USAGE: &str = "  kolibri list
  kolibri show NAME [--json]
  kolibri rm NAME
              (the models on this machine: the Hugging Face cache, an Ollama store and an
              LM Studio models folder, read in place; -m NAME loads one of them, NAME as
              list shows it: OWNER/REPO:QUANT, or Ollama's qwen3:8b; --json: what Ollama's
              /api/show reports)
";

pub fn list(raw: &[String]) -> Result<(), String> {
    Args::parse("list", raw, &[], &[])?;
    let models = Store::from_env().list();
    let mut rows =
        vec![["NAME", "QUANT", "SIZE", "ARCH", "CONTEXT", "SOURCE", "PATH"].map(String::from)];
    for m in &models {
        let facts = ModelFacts::read(m.path()).ok();
        let fact = |f: &dyn Fn(&ModelFacts) -> Option<String>| {
            facts.as_ref().and_then(f).unwrap_or_else(|| "?".into())
        };
        rows.push([
            m.name.clone(),
            fact(&|f| f.quant.map(str::to_owned)),
            human_size(m.size),
            fact(&|f| Some(f.arch.clone())),
            fact(&|f| f.context.map(|c| c.to_string())),
            m.source.label().to_owned(),
            m.path().display().to_string(),
        ]);
    }
    print_table(&rows);
    if models.is_empty() {
        eprintln!("no models yet: `kolibri pull OWNER/REPO[:QUANT]` downloads one");
    }
    Ok(())
}

pub fn show(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("show", raw, &[], &["--json"])?;
    let model = Store::from_env().find(one_name(&a, "show")?)?;
    let gguf = kolibri::gguf::GgufFile::open(model.path()).map_err(|e| e.to_string())?;
    let described = kolibri::store::describe(&gguf, &model.name, false);
    if a.has("--json") {
        println!("{described:#}");
        return Ok(());
    }
    let facts = ModelFacts::of(&gguf);
    let mut rows = vec![
        ["name".into(), model.name.clone()],
        ["source".into(), model.source.label().into()],
        ["architecture".into(), facts.arch.clone()],
        [
            "parameters".into(),
            kolibri::store::parameter_size(facts.n_params),
        ],
        [
            "quantization".into(),
            facts.quant.unwrap_or("unknown").into(),
        ],
        [
            "context".into(),
            facts.context.map_or("?".into(), |c| c.to_string()),
        ],
        ["size".into(), human_size(model.size)],
        [
            "capabilities".into(),
            described["capabilities"]
                .as_array()
                .map(|c| {
                    let names: Vec<&str> = c.iter().filter_map(|v| v.as_str()).collect();
                    names.join(", ")
                })
                .unwrap_or_default(),
        ],
    ];
    for f in &model.files {
        rows.push(["file".into(), f.display().to_string()]);
    }
    print_table(&rows);
    Ok(())
}

pub fn rm(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("rm", raw, &[], &[])?;
    let gone: StoredModel = Store::from_env().remove(one_name(&a, "rm")?)?;
    println!(
        "deleted {} ({}, {})",
        gone.name,
        gone.source.label(),
        human_size(gone.size)
    );
    Ok(())
}

/// The model file `-m NAME` means when no file has that name: the stored model so named.
pub fn resolve(name: &str) -> Result<String, String> {
    if std::path::Path::new(name).exists() {
        return Ok(name.to_owned());
    }
    Store::from_env()
        .find(name)
        .map(|m| m.path().display().to_string())
        .map_err(|e| format!("{name}: no such file, and {e}"))
}

/// A model given as a path or a stored model's name, and what to call it in output: the
/// file's name, or the stored model's.
pub fn resolve_named(model: &str) -> Result<(String, String), String> {
    let path = resolve(model)?;
    let label = if path == model {
        file_name(&path)
    } else {
        model.to_owned()
    };
    Ok((path, label))
}

/// The last component of a path (the path itself if it has none).
pub fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
}

fn one_name<'a>(a: &'a Args, cmd: &str) -> Result<&'a str, String> {
    match a.positional.as_slice() {
        [name] => Ok(name),
        _ => Err(format!("{cmd} takes one model name\n{USAGE}")),
    }
}

/// 469 MB, 1.1 GB: decimal units, as Ollama and LM Studio show sizes.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{} MB", b / 1_000_000),
        b => format!("{} KB", b.div_ceil(1000)),
    }
}

fn print_table<const N: usize>(rows: &[[String; N]]) {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}
