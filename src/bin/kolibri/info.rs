//! `kolibri info [-m MODEL]`: CPU features, the kernel path, and the kernel each weight type
//! gets; with a model, its tensor types and sizes, and the matmul plan each matrix runs.

use std::collections::BTreeMap;

use kolibri::gguf::GgufFile;
use kolibri::kernels::{self, types::REGISTRY, CpuPath};
use kolibri::model::{recurrent, MixerKind, Model};

use crate::args::Args;

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("info", raw, &["-m", "--model"], &[])?;
    println!("kolibri {}", env!("CARGO_PKG_VERSION"));
    println!("{}", kernels::system_info());
    let path = kernels::backend().path();
    println!("\nkernels per weight type on the {path} path:");
    for ty in REGISTRY.iter().map(|k| k.ty()) {
        if let Some(d) = kernels::describe_kernel(path, ty) {
            println!("  {:<6} {d}", ty.to_string());
        }
    }
    let available: Vec<&str> = CpuPath::available().iter().map(|p| p.name()).collect();
    println!("(KOLIBRI_CPU={} selects a lower path)", available.join("|"));

    if let Some(model) = a.model() {
        let gguf = GgufFile::open(model).map_err(|e| e.to_string())?;
        let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        for t in gguf.tensors() {
            let e = by_type.entry(t.ggml_type.to_string()).or_default();
            e.0 += 1;
            e.1 += t.size;
        }
        println!("\n{model}:");
        if let [_, _, ..] = gguf.parts() {
            println!("  in {} parts:", gguf.parts().len());
            for p in gguf.parts() {
                let path = p.path.as_deref().map(|p| p.display().to_string());
                let mib = p.len as f64 / 1048576.0;
                println!("    {} ({mib:.1} MiB)", path.unwrap_or_default());
            }
        }
        for (ty, (n, bytes)) in by_type {
            println!(
                "  {ty:<6} {n:>4} tensors, {:>8.1} MiB",
                bytes as f64 / 1048576.0
            );
        }
        print_plans(model)?;
    }
    Ok(())
}

/// The layers' token mixers, and the memory a sequence's recurrent state takes.
fn print_layers(m: &Model) {
    let hp = &m.hparams;
    let count = |kind| hp.mixers.iter().filter(|&&m| m == kind).count();
    print!(
        "\nlayers: {} ({} attention",
        hp.n_layer,
        count(MixerKind::Attention)
    );
    for (kind, name) in [
        (MixerKind::ShortConv, "short convolution"),
        (MixerKind::DeltaNet, "gated delta net"),
    ] {
        if count(kind) > 0 {
            print!(", {} {name}", count(kind));
        }
    }
    println!(")");
    let state: usize = (0..hp.n_layer)
        .map(|il| recurrent::layer_state_len(hp, il) * 4)
        .sum();
    if state > 0 {
        println!(
            "recurrent state per sequence: {:.1} KiB ({:.1} MiB with rewind snapshots and checkpoints)",
            state as f64 / 1024.0,
            recurrent::seq_bytes(hp) as f64 / 1048576.0
        );
    }
}

/// Each matrix's plan as the loaded model runs it: the distinct plans once, numbered, then
/// every matrix with its number.
fn print_plans(model: &str) -> Result<(), String> {
    let m = Model::load(model).map_err(|e| e.to_string())?;
    print_layers(&m);
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
