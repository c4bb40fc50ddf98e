//! `kolibri tokenize`: print the token ids of a text (llama-tokenize's output form).

use kolibri::gguf::GgufFile;
use kolibri::tokenizer::Tokenizer;

use crate::args::Args;

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "tokenize",
        raw,
        &["-m", "--model", "-hf", "--hf-repo", "-p", "--prompt"],
        &["--no-bos", "--no-parse-special", "--ids"],
    )?;
    let path = &crate::model_path(&a)?;
    let text = match a.get(&["-p", "--prompt"]) {
        Some(t) => t.to_owned(),
        None => a.positional.join(" "),
    };
    // Only the tokenizer is needed: skip the weights.
    let gguf = GgufFile::open(path).map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_gguf(&gguf).map_err(|e| e.to_string())?;
    let ids = tok.encode(&text, !a.has("--no-bos"), !a.has("--no-parse-special"));
    if a.has("--ids") {
        println!("{ids:?}");
    } else {
        for id in ids {
            let piece = String::from_utf8_lossy(&tok.token_bytes(id, true)).into_owned();
            println!("{id:6} -> {piece:?}");
        }
    }
    Ok(())
}
