//! Which files of a repository are the model: llama.cpp's choice (`common/download.cpp`), so
//! `-hf OWNER/REPO:QUANT` means the same file in both.

use std::fmt;

use crate::gguf::SplitName;

/// Quantizations tried, in order, when the name gives none (llama.cpp's defaults).
const DEFAULT_QUANTS: [&str; 2] = ["Q4_K_M", "Q8_0"];

/// GGUF files in a model repository that are not the model: projectors, importance matrices,
/// separate drafters.
const NOT_THE_MODEL: [&str; 6] = ["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickError {
    /// The repository holds no model GGUF file.
    NoGguf,
    /// No file has the quantization asked for; the model files there are.
    NoMatch { quant: String, files: Vec<String> },
    /// A split model's part is not in the repository.
    MissingPart { part: String },
}

impl fmt::Display for PickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PickError::NoGguf => write!(f, "the repository holds no GGUF model file"),
            PickError::NoMatch { quant, files } => write!(
                f,
                "no GGUF file of quantization {quant} in the repository; it has: {}",
                files.join(", ")
            ),
            PickError::MissingPart { part } => {
                write!(f, "the split model's part {part} is not in the repository")
            }
        }
    }
}

impl std::error::Error for PickError {}

/// The model's files among `files` (paths in the repository, in its listing order) for
/// `quant`: the first model GGUF whose name has the quantization as a word followed by `.` or
/// `-` (case-insensitive), or without `quant` the Q4_K_M file, else the Q8_0 one, else the
/// first model GGUF; a split model's every part, in order.
pub fn pick(files: &[String], quant: Option<&str>) -> Result<Vec<String>, PickError> {
    let models: Vec<&String> = files.iter().filter(|f| is_model_file(f)).collect();
    if models.is_empty() {
        return Err(PickError::NoGguf);
    }
    let tags: Vec<&str> = match quant {
        Some(q) => vec![q],
        None => DEFAULT_QUANTS.to_vec(),
    };
    let found = tags
        .iter()
        .find_map(|tag| models.iter().find(|f| has_quant(f, tag)));
    let chosen = match (found, quant) {
        (Some(f), _) => *f,
        (None, None) => models[0],
        (None, Some(q)) => {
            return Err(PickError::NoMatch {
                quant: q.to_owned(),
                files: models.iter().map(|f| f.to_string()).collect(),
            })
        }
    };
    let Some(split) = SplitName::parse(chosen) else {
        return Ok(vec![chosen.clone()]);
    };
    (0..split.count)
        .map(|no| {
            let part = split.part(no);
            match files.iter().find(|f| f.eq_ignore_ascii_case(&part)) {
                Some(f) => Ok(f.clone()),
                None => Err(PickError::MissingPart { part }),
            }
        })
        .collect()
}

/// Every model among `files`, each as its files (a split model's every part, in order); a
/// split model with a part missing is left out.
pub fn models_in(files: &[String]) -> Vec<Vec<String>> {
    files
        .iter()
        .filter(|f| is_model_file(f))
        .filter_map(|first| match SplitName::parse(first) {
            None => Some(vec![first.clone()]),
            Some(split) => (0..split.count)
                .map(|no| {
                    let part = split.part(no);
                    files
                        .iter()
                        .find(|f| f.eq_ignore_ascii_case(&part))
                        .cloned()
                })
                .collect(),
        })
        .collect()
}

/// The quantization a model file's name states (`Qwen3-8B-Q4_K_M.gguf`: `Q4_K_M`; split parts
/// and `UD-` prefixes too), upper-cased: the last `-` or `.` separated word that names one.
pub fn quant_tag(path: &str) -> Option<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = match SplitName::parse(name) {
        Some(split) => split.prefix,
        None => name.get(..name.len().checked_sub(5)?)?,
    };
    stem.rsplit(['-', '.'])
        .find(|word| is_quant_word(word))
        .map(str::to_ascii_uppercase)
}

/// `Q4_K_M`, `IQ2_XXS`, `Q8_0`, `F16`, `BF16`, `F32`, `TQ1_0`, `MXFP4`, `Q4_K_XL`, ...
fn is_quant_word(word: &str) -> bool {
    let w = word.to_ascii_uppercase();
    if matches!(w.as_str(), "F16" | "BF16" | "F32" | "MXFP4") {
        return true;
    }
    let rest = w
        .strip_prefix("IQ")
        .or_else(|| w.strip_prefix("TQ"))
        .or_else(|| w.strip_prefix('Q'));
    rest.is_some_and(|r| {
        let mut chars = r.chars();
        chars.next().is_some_and(|c| c.is_ascii_digit())
            && chars.next().is_none_or(|c| c == '_')
            && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A GGUF file that is a model, and a split model's first part if it is a part.
fn is_model_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    name.ends_with(".gguf")
        && !NOT_THE_MODEL.iter().any(|n| name.contains(n))
        && SplitName::parse(path).is_none_or(|s| s.no == 0)
}

/// Whether `path` has `tag` as a quantization: after a non-alphanumeric character (or at the
/// start) and before `.` or `-`, case-insensitively. (llama.cpp's pattern is not anchored on
/// the left, so its `Q4_XS` also takes an `IQ4_XS` file; this one does not.)
fn has_quant(path: &str, tag: &str) -> bool {
    let (path, tag) = (path.to_ascii_lowercase(), tag.to_ascii_lowercase());
    path.match_indices(&tag).any(|(at, _)| {
        let before = path[..at].chars().next_back();
        let after = path[at + tag.len()..].chars().next();
        before.is_none_or(|c| !c.is_ascii_alphanumeric()) && matches!(after, Some('.' | '-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantization_a_file_name_states() {
        for (file, tag) in [
            ("Qwen3-8B-Q4_K_M.gguf", Some("Q4_K_M")),
            (
                "sub/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                Some("Q4_K_M"),
            ),
            ("Qwen3-8B-UD-Q4_K_XL-00001-of-00003.gguf", Some("Q4_K_XL")),
            ("model.IQ2_XXS.gguf", Some("IQ2_XXS")),
            ("gpt-oss-20b-MXFP4.gguf", Some("MXFP4")),
            ("gemma-3-270m-it-bf16.gguf", Some("BF16")),
            ("Qwen3-4B.gguf", None),
            ("Q4.gguf", Some("Q4")),
            ("Qwen3-Qx.gguf", None),
            (".gguf", None),
            ("x", None),
        ] {
            assert_eq!(quant_tag(file).as_deref(), tag, "{file}");
        }
    }

    #[test]
    fn every_complete_model_among_files() {
        let files = listing(&[
            "a-Q8_0.gguf",
            "mmproj-F16.gguf",
            "b-00001-of-00002.gguf",
            "b-00002-of-00002.gguf",
            "c-00001-of-00002.gguf",
            "README.md",
        ]);
        assert_eq!(
            models_in(&files),
            [
                listing(&["a-Q8_0.gguf"]),
                listing(&["b-00001-of-00002.gguf", "b-00002-of-00002.gguf"])
            ]
        );
    }

    fn listing(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_quant_asked_for_or_llama_cpps_default() {
        let files = listing(&[
            ".gitattributes",
            "README.md",
            "Qwen3-8B-IQ4_XS.gguf",
            "Qwen3-8B-Q4_K_M.gguf",
            "Qwen3-8B-Q8_0.gguf",
            "mmproj-Qwen3-8B-F16.gguf",
            "Qwen3-8B.imatrix.gguf",
        ]);
        let one = |q: Option<&str>| pick(&files, q).map(|v| v.join(","));
        assert_eq!(one(None).unwrap(), "Qwen3-8B-Q4_K_M.gguf");
        assert_eq!(one(Some("q8_0")).unwrap(), "Qwen3-8B-Q8_0.gguf");
        assert_eq!(one(Some("IQ4_XS")).unwrap(), "Qwen3-8B-IQ4_XS.gguf");
        let e = one(Some("Q4_XS")).unwrap_err();
        assert!(
            matches!(&e, PickError::NoMatch { files, .. } if files.len() == 3),
            "{e:?}: a word, not the end of IQ4_XS; projector and imatrix are not models"
        );
        assert!(e.to_string().contains("Qwen3-8B-Q8_0.gguf"));
        let f16 = listing(&["m-F16.gguf", "m-BF16.gguf"]);
        assert_eq!(pick(&f16, None).unwrap(), ["m-F16.gguf"], "the first model");
        assert_eq!(pick(&f16, Some("bf16")).unwrap(), ["m-BF16.gguf"]);
        assert_eq!(pick(&listing(&["README.md"]), None), Err(PickError::NoGguf));
    }

    #[test]
    fn every_part_of_a_split_model_in_folders_too() {
        let files = listing(&[
            "Q4_K_M/big-Q4_K_M-00001-of-00003.gguf",
            "Q4_K_M/big-Q4_K_M-00002-of-00003.gguf",
            "Q4_K_M/big-Q4_K_M-00003-of-00003.gguf",
            "UD-IQ1_M/big-UD-IQ1_M-00002-of-00002.gguf",
            "UD-IQ1_M/big-UD-IQ1_M-00001-of-00002.gguf",
        ]);
        assert_eq!(
            pick(&files, None).unwrap(),
            &files[..3],
            "the Q4_K_M parts, in order"
        );
        assert_eq!(
            pick(&files, Some("ud-iq1_m")).unwrap(),
            [files[4].clone(), files[3].clone()]
        );
        let gap = listing(&["m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf"]);
        assert_eq!(
            pick(&gap, None),
            Err(PickError::MissingPart {
                part: "m-Q8_0-00002-of-00003.gguf".into()
            })
        );
    }
}
