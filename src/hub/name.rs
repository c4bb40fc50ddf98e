//! `OWNER/REPO[:QUANT]`, as `llama-cli -hf` and `ollama run hf.co/...` take it.

use std::fmt;

/// A model named by its Hugging Face repository and, optionally, its quantization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubName {
    pub owner: String,
    pub repo: String,
    /// The quantization asked for (`Q4_K_M`, `iq2_xxs`, `UD-Q4_K_XL`), as given.
    pub quant: Option<String>,
}

impl HubName {
    /// Parses `OWNER/REPO[:QUANT]`, also with Ollama's `hf.co/` (or `huggingface.co/`) in
    /// front; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<HubName, String> {
        let bad = |why: &str| {
            format!("{text:?} is not a Hugging Face model name (OWNER/REPO[:QUANT]): {why}")
        };
        let bare = ["https://", "http://"]
            .iter()
            .fold(text.trim(), |t, p| t.strip_prefix(p).unwrap_or(t));
        let bare = ["hf.co/", "huggingface.co/"]
            .iter()
            .fold(bare, |t, p| t.strip_prefix(p).unwrap_or(t));
        let (path, quant) = match bare.split_once(':') {
            Some((path, quant)) => (path, Some(quant)),
            None => (bare, None),
        };
        let Some((owner, repo)) = path.split_once('/') else {
            return Err(bad("no '/' between owner and repository"));
        };
        for (what, part) in [("owner", owner), ("repository", repo)] {
            if !is_name_part(part) {
                return Err(bad(&format!(
                    "the {what} {part:?} is not a name of letters, digits, '-', '_' and '.'"
                )));
            }
        }
        let quant = match quant {
            None => None,
            Some(q) if is_name_part(q) => Some(q.to_owned()),
            Some(q) => return Err(bad(&format!("the quantization {q:?} is not a tag"))),
        };
        Ok(HubName {
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            quant,
        })
    }

    /// `OWNER/REPO`.
    pub fn repo_id(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

impl fmt::Display for HubName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.repo)?;
        match &self.quant {
            Some(q) => write!(f, ":{q}"),
            None => Ok(()),
        }
    }
}

/// A repository, owner or tag: what the Hub allows in them (and never `.` or `..`, so it is
/// safe as a path component).
fn is_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 96
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_llama_cpp_and_ollama_write_them() {
        let n = HubName::parse("unsloth/Qwen3.6-35B-A3B-GGUF:UD-Q4_K_XL").unwrap();
        assert_eq!(n.repo_id(), "unsloth/Qwen3.6-35B-A3B-GGUF");
        assert_eq!(n.quant.as_deref(), Some("UD-Q4_K_XL"));
        assert_eq!(n.to_string(), "unsloth/Qwen3.6-35B-A3B-GGUF:UD-Q4_K_XL");
        let n = HubName::parse("hf.co/bartowski/gemma-4-E4B-it-GGUF").unwrap();
        assert_eq!((n.owner.as_str(), n.quant), ("bartowski", None));
        assert_eq!(
            HubName::parse("https://huggingface.co/a/b:q8_0").unwrap(),
            HubName {
                owner: "a".into(),
                repo: "b".into(),
                quant: Some("q8_0".into())
            }
        );
    }

    #[test]
    fn malformed_names_say_why() {
        for (text, why) in [
            ("qwen3", "no '/'"),
            ("a/b/c", "the repository \"b/c\""),
            ("../b", "the owner \"..\""),
            ("a/", "the repository \"\""),
            ("a/b:", "the quantization \"\""),
            ("a/b:Q4 K", "the quantization"),
            ("a b/c", "the owner"),
        ] {
            let e = HubName::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
