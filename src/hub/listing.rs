//! The Hub's description of a repository (`GET /api/models/OWNER/REPO/revision/main?blobs=true`,
//! what huggingface_hub's `model_info(files_metadata=True)` reads): the commit `main` is at, and
//! each file with its size and LFS sha256. Untrusted input: a file whose path would leave the
//! snapshot folder, or whose sha256 is not one, is left out.

/// A repository at one commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// 40 lowercase hex digits.
    pub commit: String,
    pub files: Vec<ListedFile>,
}

/// One file of a [`Listing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedFile {
    /// Its path in the repository (`/`-separated, never `..`, never absolute).
    pub path: String,
    pub size: u64,
    /// The LFS object's sha256, lowercase hex (every GGUF on the Hub is an LFS file).
    pub sha256: String,
}

impl Listing {
    /// Parses the API's JSON; the error says what is missing.
    pub fn parse(text: &str) -> Result<Listing, String> {
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|_| "not JSON".to_owned())?;
        let commit = json["sha"].as_str().ok_or("no sha")?;
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("its sha is not a commit id".into());
        }
        let siblings = json["siblings"].as_array().ok_or("no siblings")?;
        let files = siblings
            .iter()
            .filter_map(|s| {
                let path = s["rfilename"].as_str()?;
                let lfs = &s["lfs"];
                let sha256 = lfs["sha256"].as_str().or_else(|| lfs["oid"].as_str())?;
                let sound = is_safe_repo_path(path)
                    && sha256.len() == 64
                    && sha256.bytes().all(|b| b.is_ascii_hexdigit());
                sound.then(|| ListedFile {
                    path: path.to_owned(),
                    size: lfs["size"]
                        .as_u64()
                        .or_else(|| s["size"].as_u64())
                        .unwrap_or(0),
                    sha256: sha256.to_ascii_lowercase(),
                })
            })
            .collect();
        Ok(Listing {
            commit: commit.to_ascii_lowercase(),
            files,
        })
    }
}

/// A path inside the repository that stays inside the snapshot folder.
pub fn is_safe_repo_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apis_answer_with_unsafe_entries_left_out() {
        let sha = "ab".repeat(32);
        let text = serde_json::json!({
            "id": "o/r",
            "sha": "C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00",
            "siblings": [
                {"rfilename": "README.md", "size": 10},
                {"rfilename": "m-Q4_K_M.gguf", "size": 7, "lfs": {"sha256": sha, "size": 7}},
                {"rfilename": "sub/m.gguf", "lfs": {"oid": sha.to_uppercase(), "size": 9}},
                {"rfilename": "../escape.gguf", "lfs": {"sha256": sha, "size": 1}},
                {"rfilename": "short.gguf", "lfs": {"sha256": "abc", "size": 1}},
            ]
        })
        .to_string();
        let l = Listing::parse(&text).unwrap();
        assert_eq!(l.commit, "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00");
        let got: Vec<(&str, u64)> = l.files.iter().map(|f| (f.path.as_str(), f.size)).collect();
        assert_eq!(got, [("m-Q4_K_M.gguf", 7), ("sub/m.gguf", 9)]);
        assert!(l.files.iter().all(|f| f.sha256 == sha));
        for (bad, why) in [
            ("[]", "no sha"),
            ("{\"sha\": \"x\"}", "not a commit id"),
            ("{", "not JSON"),
        ] {
            let e = Listing::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn repository_paths_stay_inside_the_snapshot() {
        for ok in ["m.gguf", "Q4_K_M/m-00001-of-00002.gguf"] {
            assert!(is_safe_repo_path(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../m.gguf",
            "a/../../m.gguf",
            "a//b",
            "./m",
            "a\\b",
            "a\0b",
        ] {
            assert!(!is_safe_repo_path(bad), "{bad}");
        }
    }
}
