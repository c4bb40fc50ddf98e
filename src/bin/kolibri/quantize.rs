//! `kolibri quantize`: a GGUF model converted to another weight type or K-quant mix.

use std::path::Path;

use kolibri::quantize::{quantize_file, FileType, Options};

use crate::args::Args;

pub const USAGE: &str =
    "  kolibri quantize IN.gguf OUT.gguf TYPE [--allow-requantize] [--pure] [-t THREADS]
              TYPE: Q4_K_M Q5_K_M Q3_K_M Q2_K Q8_0 Q4_0 IQ4_XS ... (kolibri quantize --types)
";

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "quantize",
        raw,
        &["-t", "--threads"],
        &["--allow-requantize", "--pure", "--types"],
    )?;
    if a.has("--types") {
        println!("{}", FileType::names().collect::<Vec<_>>().join(" "));
        return Ok(());
    }
    let [input, output, ty] = a.positional.as_slice() else {
        return Err(format!("quantize takes IN OUT TYPE\n{USAGE}"));
    };
    let file_type = FileType::parse(ty).ok_or_else(|| {
        let names: Vec<_> = FileType::names().collect();
        format!("unknown type {ty:?}; one of {}", names.join(" "))
    })?;
    let opts = Options {
        file_type,
        allow_requantize: a.has("--allow-requantize"),
        pure: a.has("--pure"),
    };
    let threads: usize = a.parse_or(&["-t", "--threads"], 0)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| e.to_string())?;
    let mut count = 0;
    let summary = pool
        .install(|| {
            quantize_file(Path::new(input), Path::new(output), &opts, |i, p| {
                count = count.max(i + 1);
                let dims: Vec<String> = p.dims.iter().map(u64::to_string).collect();
                let what = if p.from == p.to { "copied" } else { "" };
                eprintln!(
                    "[{:4}] {:<40} {:>14} {:>6} -> {:<6} {what}",
                    i + 1,
                    p.name,
                    dims.join(" x "),
                    p.from.name(),
                    p.to.name()
                );
            })
        })
        .map_err(|e| e.to_string())?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "{} tensors ({} converted): {:.1} MiB -> {:.1} MiB as {} in {:.1} s",
        summary.tensors,
        summary.converted,
        mib(summary.in_bytes),
        mib(summary.out_bytes),
        file_type.name(),
        summary.seconds
    );
    Ok(())
}
