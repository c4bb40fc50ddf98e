//! `kolibri info [-m MODEL]`: CPU features, the kernel path, and the kernel each weight type
//! gets; with a model, its tensor types and sizes too.

use std::collections::BTreeMap;

use kolibri::gguf::GgufFile;
use kolibri::kernels::{self, CpuPath};
use kolibri::quant::GgmlType;

use crate::args::Args;

const TYPES: [GgmlType; 11] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::F32,
];

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(raw, &["-m", "--model"], &[])?;
    println!("kolibri {}", env!("CARGO_PKG_VERSION"));
    println!("{}", kernels::system_info());
    let path = kernels::cpu_path();
    println!("\nkernels per weight type on the {path} path:");
    for ty in TYPES {
        if let Some(d) = kernels::describe_kernel(path, ty) {
            println!("  {:<6} {d}", ty.to_string());
        }
    }
    let available: Vec<&str> = CpuPath::available().iter().map(|p| p.name()).collect();
    println!("(KOLIBRI_CPU={} selects a lower path)", available.join("|"));

    if let Some(model) = a.get(&["-m", "--model"]) {
        let gguf = GgufFile::open(model).map_err(|e| e.to_string())?;
        let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        for t in gguf.tensors() {
            let e = by_type.entry(t.ggml_type.to_string()).or_default();
            e.0 += 1;
            e.1 += t.size;
        }
        println!("\n{model}:");
        for (ty, (n, bytes)) in by_type {
            println!(
                "  {ty:<6} {n:>4} tensors, {:>8.1} MiB",
                bytes as f64 / 1048576.0
            );
        }
    }
    Ok(())
}
