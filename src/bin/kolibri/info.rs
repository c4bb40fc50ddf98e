//! `kolibri info [MODEL] [--plans]`: with a model, what a user wants to know first (its
//! architecture and layers, parameters, file size and quantization mix, trained context, chat
//! template, capabilities), read from its header; without one, or with `--plans`, the CPU's
//! features, the kernel each weight type gets and, for the model, the matmul plan of each
//! matrix (which loads it).

use std::collections::BTreeMap;

use kolibri::gguf::GgufFile;
use kolibri::kernels::{self, types::REGISTRY, CpuPath};
use kolibri::model::{recurrent, Architecture, HParams, KvType, MixerKind, Model};
use kolibri::store::{capabilities, parameter_size, ModelFacts};
use kolibri::tokenizer::Tokenizer;

use crate::args::Args;

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("info", raw, &["-m", "--model"], &["--plans"])?;
    println!("kolibri {}", env!("CARGO_PKG_VERSION"));
    let model = a.model().map(crate::store::resolve).transpose()?;
    if let Some(path) = &model {
        print_facts(path)?;
    }
    if model.is_none() || a.has("--plans") {
        print_kernels();
    }
    match (&model, a.has("--plans")) {
        (Some(path), true) => print_plans(path),
        (Some(_), false) => {
            println!("\n(--plans: the CPU's kernels and the plan of each matrix)");
            Ok(())
        }
        (None, _) => Ok(()),
    }
}

/// The model's facts, from its header alone.
fn print_facts(path: &str) -> Result<(), String> {
    let gguf = GgufFile::open(path).map_err(|e| e.to_string())?;
    let facts = ModelFacts::of(&gguf);
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    println!("\n{path}");
    let row = |name: &str, value: String| println!("  {name:<14} {value}");
    row("architecture", format!("{}{}", facts.arch, layers(&gguf)));
    row("parameters", parameter_size(facts.n_params));
    let quant = facts.quant.unwrap_or("mixed types");
    row("file", format!("{:.1} MiB, {quant}", mib(facts.size)));
    let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in gguf.tensors() {
        let e = by_type.entry(t.ggml_type.to_string()).or_default();
        e.0 += 1;
        e.1 += t.size;
    }
    let mut by_size: Vec<_> = by_type.into_iter().collect();
    by_size.sort_by_key(|(_, (_, bytes))| std::cmp::Reverse(*bytes));
    for (ty, (n, bytes)) in by_size {
        row(
            "",
            format!("{ty:<6} {n:>4} tensors {:>9.1} MiB", mib(bytes)),
        );
    }
    if let [_, _, ..] = gguf.parts() {
        row("parts", gguf.parts().len().to_string());
        for p in gguf.parts() {
            let part = p.path.as_deref().map(|p| p.display().to_string());
            row(
                "",
                format!(
                    "{} ({:.1} MiB)",
                    part.unwrap_or_default(),
                    mib(p.len as u64)
                ),
            );
        }
    }
    let context = facts
        .context
        .map_or("unknown".into(), |n| format!("{n} tokens"));
    row("context", format!("{context} (trained)"));
    let template = gguf.get_str(kolibri::chat::TEMPLATE_KEY).is_some();
    row("chat template", if template { "yes" } else { "no" }.into());
    row("capabilities", capabilities(&gguf).join(", "));
    Ok(())
}

/// `, 24 layers (18 gated delta net, 6 attention)`, when the architecture is one Kolibri
/// runs; the memory a sequence's recurrent state takes too.
fn layers(gguf: &GgufFile) -> String {
    let arch = gguf.get_str("general.architecture").unwrap_or("");
    if arch == "gemma4-assistant" {
        // What --draft-assistant adds beside its target: its weights, no KV cache.
        let n_layer = gguf.get_u64("gemma4-assistant.block_count").unwrap_or(0);
        return format!(
            ", {n_layer} layers: Gemma 4's assistant drafter (drafts with --draft-assistant \
             beside its target, to which it adds {:.1} MiB of weights and no KV cache)",
            gguf.tensors().iter().map(|t| t.size).sum::<u64>() as f64 / 1048576.0
        );
    }
    let Ok(arch) = Architecture::from_name(arch) else {
        return " (an architecture Kolibri does not run)".into();
    };
    let Ok(hp) = HParams::from_gguf(gguf, arch, Tokenizer::vocab_len(gguf)) else {
        return String::new();
    };
    let count = |kind| hp.mixers.iter().filter(|&&m| m == kind).count();
    let kinds: Vec<String> = [
        (MixerKind::Attention, "attention"),
        (MixerKind::ShortConv, "short convolution"),
        (MixerKind::DeltaNet, "gated delta net"),
    ]
    .iter()
    .filter(|(kind, _)| count(*kind) > 0)
    .map(|(kind, name)| format!("{} {name}", count(*kind)))
    .collect();
    let mut text = format!(", {} layers ({})", hp.n_layer, kinds.join(", "));
    if hp.n_mtp_layers > 0 {
        // What --spec mtp adds: the block's weights and its KV rows (f16), nothing otherwise.
        let mut with_block = hp.clone();
        with_block.add_mtp_block();
        let f16 = (KvType::F16, KvType::F16);
        let per_position = |hp| kolibri::model::budget::kv_bytes_per_position(hp, f16);
        let kv_per_token = per_position(&with_block) - per_position(&hp);
        text += &format!(
            " + {} multi-token-prediction block (drafts with --spec mtp, which adds {:.1} MiB \
             of weights and {:.1} KiB of KV cache per token)",
            hp.n_mtp_layers,
            kolibri::model::mtp_block_bytes(gguf) as f64 / 1048576.0,
            kv_per_token as f64 / 1024.0
        );
    }
    let state: usize = (0..hp.n_layer)
        .map(|il| recurrent::layer_state_len(&hp, il) * 4)
        .sum();
    if state > 0 {
        text += &format!(
            "; recurrent state {:.1} KiB per sequence ({:.1} MiB with rewind snapshots)",
            state as f64 / 1024.0,
            recurrent::seq_bytes(&hp) as f64 / 1048576.0
        );
    }
    text
}

/// The CPU's features, its kernel path and each weight type's kernel.
fn print_kernels() {
    println!("\n{}", kernels::system_info());
    let path = kernels::backend().path();
    println!("\nkernels per weight type on the {path} path:");
    for ty in REGISTRY.iter().map(|k| k.ty()) {
        if let Some(d) = kernels::describe_kernel(path, ty) {
            println!("  {:<6} {d}", ty.to_string());
        }
    }
    let available: Vec<&str> = CpuPath::available().iter().map(|p| p.name()).collect();
    println!("(KOLIBRI_CPU={} selects a lower path)", available.join("|"));
}

/// Each matrix's plan as the loaded model runs it: the distinct plans once, numbered, then
/// every matrix with its number.
fn print_plans(model: &str) -> Result<(), String> {
    let m = Model::load(model).map_err(|e| e.to_string())?;
    let mut plans: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for lin in m.weights.matrices() {
        let d = format!("{}: {}", lin.ty, lin.plan.describe());
        let i = match plans.iter().position(|p| *p == d) {
            Some(i) => i,
            None => {
                plans.push(d);
                plans.len() - 1
            }
        };
        rows.push(format!(
            "  {:<28} {:<5} {:>6} x {:<6} [{}]",
            lin.name,
            lin.ty.to_string(),
            lin.rows,
            lin.k,
            i + 1
        ));
    }
    println!("\nmatmul plans:");
    for (i, p) in plans.iter().enumerate() {
        println!("  [{}] {p}", i + 1);
    }
    println!("matrices (rows x k):");
    rows.iter().for_each(|r| println!("{r}"));
    Ok(())
}
