//! `kolibri cache list|clear`: the repack cache ([`crate::repack_cache_dir`]), where models'
//! repacked weights are kept between loads, one file per model content.

use std::path::{Path, PathBuf};

use crate::args::Args;

pub const USAGE: &str = "  kolibri cache list | clear
              (the repack cache: each model's weights as the kernels read them, kept so the
              next load maps them instead of repacking; one file per model, whatever its
              path; KOLIBRI_REPACK_CACHE=DIR moves it, =0 turns it off)
";

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("cache", raw, &[], &[])?;
    let list_it = match a.positional.as_slice() {
        [what] if what == "list" => true,
        [what] if what == "clear" => false,
        _ => return Err("kolibri cache list | clear".into()),
    };
    match crate::repack_cache_dir() {
        // Nothing kept, nothing to show or remove.
        None => {
            println!("the repack cache is off (KOLIBRI_REPACK_CACHE=0)");
            Ok(())
        }
        Some(dir) if list_it => list(&dir),
        Some(dir) => clear(&dir),
    }
}

/// The cache's files: repacked models and the temporary files of writes under way.
fn cache_files(dir: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".kpack") || name.contains(".kpack.tmp")
        })
        .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

fn list(dir: &Path) -> Result<(), String> {
    let files = cache_files(dir);
    println!("{} ({} files)", dir.display(), files.len());
    let mut total = 0;
    for (path, meta) in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        // `<content key>-<model stem>.kpack`: the stem is the model's name.
        let model = name
            .split_once('-')
            .map_or(&*name, |(_, rest)| rest)
            .trim_end_matches(".kpack");
        let age = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .map_or("?".into(), |d| human_age(d.as_secs()));
        let size = crate::store::human_size(meta.len());
        println!("  {model:<48} {size:>10}  written {age} ago");
        total += meta.len();
    }
    println!("total {}", crate::store::human_size(total));
    Ok(())
}

fn clear(dir: &Path) -> Result<(), String> {
    let files = cache_files(dir);
    let mut freed = 0;
    for (path, meta) in &files {
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
        freed += meta.len();
    }
    let size = crate::store::human_size(freed);
    println!(
        "removed {} files ({size}) from {}",
        files.len(),
        dir.display()
    );
    Ok(())
}

/// `42 s`, `5 min`, `3 h`, `2 days`.
fn human_age(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86400 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86400),
    }
}
