//! `kolibri quantize`: a GGUF model converted to another weight type or K-quant mix.

use std::path::Path;

use kolibri::quantize::{quantize_file, FileType, Options, SplitOutput};

use crate::args::Args;

pub const USAGE: &str =
    "  kolibri quantize IN.gguf OUT.gguf TYPE [--allow-requantize] [--pure] [-t THREADS]
                   [--split-max-size N[K|M|G]] [--split-max-tensors N]
              TYPE: Q4_K_M Q5_K_M Q3_K_M Q2_K Q8_0 Q4_0 IQ4_XS ... (kolibri quantize --types),
              or COPY (tensors as they are: to split or join a file). IN may be any part of
              a split model; with a split limit OUT is written as OUT-00001-of-0000N.gguf...
              (sizes in decimal units, as llama-gguf-split)
";

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "quantize",
        raw,
        &["-t", "--threads", "--split-max-size", "--split-max-tensors"],
        &["--allow-requantize", "--pure", "--types"],
    )?;
    if a.has("--types") {
        println!("{}", FileType::names().collect::<Vec<_>>().join(" "));
        return Ok(());
    }
    let [input, output, ty] = a.positional.as_slice() else {
        return Err(format!("quantize takes IN OUT TYPE\n{USAGE}"));
    };
    let file_type = match ty.to_ascii_uppercase().as_str() {
        "COPY" => None,
        _ => Some(FileType::parse(ty).ok_or_else(|| {
            let names: Vec<_> = FileType::names().collect();
            format!("unknown type {ty:?}; one of {} COPY", names.join(" "))
        })?),
    };
    let split = SplitOutput {
        max_bytes: a.get(&["--split-max-size"]).map(parse_size).transpose()?,
        max_tensors: a
            .get(&["--split-max-tensors"])
            .map(|n| match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "--split-max-tensors takes a positive count, not {n:?}"
                )),
            })
            .transpose()?,
    };
    let opts = Options {
        file_type,
        allow_requantize: a.has("--allow-requantize"),
        pure: a.has("--pure"),
        split,
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
        file_type.map_or("COPY", |t| t.name()),
        summary.seconds
    );
    if summary.parts.len() > 1 {
        for p in &summary.parts {
            eprintln!("  {}", p.display());
        }
    }
    Ok(())
}

/// `N`, `NK`, `NM` or `NG` bytes, decimal units as llama-gguf-split (`500M`: 500,000,000).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, 'B'),
    };
    let scale: u64 = match unit {
        'B' => 1,
        'K' => 1_000,
        'M' => 1_000_000,
        'G' => 1_000_000_000,
        _ => 0,
    };
    match digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
    {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "--split-max-size takes a positive size such as 500M or 2G, not {text:?}"
        )),
    }
}
