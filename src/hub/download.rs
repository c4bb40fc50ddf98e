//! Downloading a model by name into the Hugging Face cache (feature `hub`): the repository's
//! files and their LFS sha256 from the Hub's API, the file [`pick`] chooses (every part of a
//! split model), each fetched into `blobs/<sha256>.incomplete`, resumed with `Range` after an
//! interruption, checked against its sha256 and size, then renamed into place and linked from
//! the snapshot, as huggingface_hub does, so either finds what the other downloaded.
//!
//! Settings as huggingface_hub reads them: `HF_ENDPOINT` (a mirror), `HF_TOKEN` or the token
//! file (`HF_TOKEN_PATH`, `HF_HOME/token`), `HF_HUB_OFFLINE` (the cache only).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::cache::HfCache;
use super::listing::{ListedFile, Listing};
use super::name::HubName;
use super::pick::pick;

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Bytes read and written at a time (and between progress reports).
const CHUNK: usize = 1 << 20;
/// Attempts per file: an interrupted transfer resumes, a corrupted one starts over.
const ATTEMPTS: usize = 4;

/// Told how a download goes (the command line draws a bar; tests count).
pub trait Progress {
    /// `file` starts (or resumes) with `done` of `total` bytes on disk.
    fn start(&mut self, file: &str, done: u64, total: u64);
    /// `bytes` more arrived.
    fn advance(&mut self, bytes: u64);
    fn finish(&mut self);
}

/// No report.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&mut self, _: &str, _: u64, _: u64) {}
    fn advance(&mut self, _: u64) {}
    fn finish(&mut self) {}
}

/// A Hub (huggingface.co or a mirror) and the cache its files go to.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    offline: bool,
    /// Check the sha256 of files already in the cache too (`kolibri pull`), fetching a
    /// corrupted one again.
    verify_cached: bool,
    cache: HfCache,
    agent: ureq::Agent,
}

impl Hub {
    /// The Hub and cache huggingface_hub would use in this environment.
    pub fn from_env() -> Hub {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let cache = HfCache::from_env();
        let token = var("HF_TOKEN")
            .or_else(|| var("HUGGING_FACE_HUB_TOKEN"))
            .or_else(|| {
                let file = var("HF_TOKEN_PATH")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| cache.root().parent().unwrap_or(cache.root()).join("token"));
                fs::read_to_string(file).ok()
            })
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        let offline = ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"].iter().any(|k| {
            var(k).is_some_and(|v| {
                matches!(v.to_ascii_uppercase().as_str(), "1" | "ON" | "YES" | "TRUE")
            })
        });
        let endpoint = var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.into());
        Hub::new(&endpoint, token, offline, cache)
    }

    pub fn new(endpoint: &str, token: Option<String>, offline: bool, cache: HfCache) -> Hub {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(10)
            // The Hub redirects downloads to its CDN: the token goes to the Hub's host only.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_recv_body(Some(Duration::from_secs(60)))
            .user_agent(concat!("kolibri/", env!("CARGO_PKG_VERSION")))
            .build();
        Hub {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            token,
            offline,
            verify_cached: false,
            cache,
            agent: config.into(),
        }
    }

    /// Also checks the sha256 of the files already cached, and fetches a corrupted one again.
    pub fn verifying_cached(mut self) -> Hub {
        self.verify_cached = true;
        self
    }

    pub fn cache(&self) -> &HfCache {
        &self.cache
    }

    /// The model's files (its first the one to load), from the cache, downloading what is
    /// not there yet; offline, or with the Hub out of reach, what the cache holds.
    pub fn fetch(
        &self,
        name: &HubName,
        progress: &mut dyn Progress,
    ) -> Result<Vec<PathBuf>, String> {
        if self.offline {
            return self
                .cache
                .resolve(name)
                .map_err(|e| format!("{e} (HF_HUB_OFFLINE is set)"));
        }
        let Listing { commit, files } = match self.listing(name) {
            Ok(listing) => listing,
            Err(Unreachable(why)) => {
                return self.cache.resolve(name).map_err(|e| format!("{why}; {e}"));
            }
            Err(Refused(why)) => return Err(why),
        };
        let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
        let picked =
            pick(&paths, name.quant.as_deref()).map_err(|e| format!("{}: {e}", name.repo_id()))?;
        let mut local = Vec::new();
        for path in &picked {
            // pick() returns names from the listing.
            let file = files
                .iter()
                .find(|f| &f.path == path)
                .ok_or_else(|| format!("{path}: not in the listing"))?;
            local.push(self.fetch_file(name, &commit, file, progress)?);
        }
        write_atomic(
            &self.cache.repo_dir(name).join("refs/main"),
            commit.as_bytes(),
        )
        .map_err(|e| format!("cannot write the cache's refs/main: {e}"))?;
        Ok(local)
    }

    /// `GET /api/models/OWNER/REPO/revision/main?blobs=true`: the commit, and every file with
    /// its LFS sha256 and size.
    fn listing(&self, name: &HubName) -> Result<Listing, ListingError> {
        let url = format!(
            "{}/api/models/{}/revision/main?blobs=true",
            self.endpoint,
            name.repo_id()
        );
        let mut resp = self
            .request(&url, None)
            .map_err(|e| Unreachable(format!("cannot reach {}: {e}", self.endpoint)))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(Refused(self.status_error(name, status)));
        }
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| Unreachable(format!("{url}: {e}")))?;
        let listing = Listing::parse(&text)
            .map_err(|why| Refused(format!("{url}: not the Hub's answer ({why})")))?;
        Ok(listing)
    }

    fn status_error(&self, name: &HubName, status: u16) -> String {
        let repo = name.repo_id();
        match status {
            401 | 403 if self.token.is_none() => {
                format!("{repo} needs a token (a gated or private repository): set HF_TOKEN")
            }
            401 | 403 => format!("{repo}: the token is refused (HTTP {status})"),
            404 => format!("{repo} is not a model repository on {}", self.endpoint),
            s => format!("{repo}: the Hub answered HTTP {s}"),
        }
    }

    fn request(
        &self,
        url: &str,
        range_from: Option<u64>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut req = self.agent.get(url);
        if let Some(token) = &self.token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(from) = range_from {
            req = req.header("Range", format!("bytes={from}-"));
        }
        req.call()
    }

    /// The snapshot's link to `file`, its blob downloaded and checked first if missing.
    fn fetch_file(
        &self,
        name: &HubName,
        commit: &str,
        file: &ListedFile,
        progress: &mut dyn Progress,
    ) -> Result<PathBuf, String> {
        let repo = self.cache.repo_dir(name);
        let blob = repo.join("blobs").join(&file.sha256);
        let link = repo.join("snapshots").join(commit).join(&file.path);
        let io = |what: &str, e: std::io::Error| format!("{}: cannot {what}: {e}", file.path);
        fs::create_dir_all(repo.join("blobs")).map_err(|e| io("create the cache", e))?;
        let _lock = lock(
            &self
                .cache
                .root()
                .join(".locks")
                .join(repo.file_name().unwrap())
                .join(format!("{}.lock", file.sha256)),
        )
        .map_err(|e| io("lock the download", e))?;
        if fs::metadata(&blob).is_ok_and(|m| m.len() == file.size) {
            let intact = !self.verify_cached
                || sha256_of(&blob).map_err(|e| io("read the cached file", e))? == file.sha256;
            if intact {
                link_blob(&link, &file.sha256).map_err(|e| io("link the snapshot", e))?;
                return Ok(link);
            }
            eprintln!(
                "{}: the cached copy is corrupted; fetching it again",
                file.path
            );
            fs::remove_file(&blob).map_err(|e| io("remove the corrupted file", e))?;
        }
        let url = format!(
            "{}/{}/resolve/{commit}/{}",
            self.endpoint,
            name.repo_id(),
            file.path
        );
        let partial = repo
            .join("blobs")
            .join(format!("{}.incomplete", file.sha256));
        let mut last = String::new();
        for _ in 0..ATTEMPTS {
            match self.transfer(&url, &partial, file, progress) {
                Ok(()) => {
                    fs::rename(&partial, &blob)
                        .map_err(|e| io("move the download into place", e))?;
                    link_blob(&link, &file.sha256).map_err(|e| io("link the snapshot", e))?;
                    return Ok(link);
                }
                Err(Transfer::Fatal(e)) => return Err(e),
                Err(Transfer::Retry(e)) => last = e,
            }
        }
        Err(format!("{}: {last} (after {ATTEMPTS} attempts)", file.path))
    }

    /// Brings `partial` to the whole file: resumes from what it holds, checks the size and
    /// sha256 at the end (a mismatch empties it for the next attempt).
    fn transfer(
        &self,
        url: &str,
        partial: &Path,
        file: &ListedFile,
        progress: &mut dyn Progress,
    ) -> Result<(), Transfer> {
        let io = |e: std::io::Error| Transfer::Fatal(format!("{}: {e}", partial.display()));
        let mut out = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(partial)
            .map_err(io)?;
        let mut have = out.metadata().map_err(io)?.len();
        if have > file.size {
            out.set_len(0).map_err(io)?;
            have = 0;
        }
        // The bytes already there go into the hash; only the rest crosses the network.
        let mut hash = Sha256::new();
        hash_prefix(&mut out, have, &mut hash).map_err(io)?;
        let mut resp = self
            .request(url, (have > 0).then_some(have))
            .map_err(|e| Transfer::Retry(e.to_string()))?;
        match resp.status().as_u16() {
            206 => {}
            200 if have > 0 => {
                // The server sends the whole file: start over.
                out.set_len(0).map_err(io)?;
                have = 0;
                hash = Sha256::new();
            }
            200 => {}
            416 => {
                out.set_len(0).map_err(io)?;
                return Err(Transfer::Retry("the server refused the range".into()));
            }
            401 | 403 => {
                return Err(Transfer::Fatal(format!(
                    "{url}: HTTP {} (set HF_TOKEN?)",
                    resp.status().as_u16()
                )))
            }
            s => return Err(Transfer::Fatal(format!("{url}: HTTP {s}"))),
        }
        progress.start(&file.path, have, file.size);
        let mut body = resp.body_mut().as_reader();
        let mut buf = vec![0u8; CHUNK];
        let result = loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(Transfer::Retry(format!("the transfer broke off: {e}"))),
            };
            if have + n as u64 > file.size {
                out.set_len(0).map_err(io)?;
                break Err(Transfer::Retry(
                    "the server sent more than the file's size".into(),
                ));
            }
            out.write_all(&buf[..n]).map_err(io)?;
            hash.update(&buf[..n]);
            have += n as u64;
            progress.advance(n as u64);
        };
        progress.finish();
        out.sync_all().map_err(io)?;
        result?;
        if have != file.size {
            return Err(Transfer::Retry(format!(
                "{have} of {} bytes arrived",
                file.size
            )));
        }
        let got = format!("{:x}", hash.finalize());
        if got != file.sha256 {
            out.set_len(0).map_err(io)?;
            return Err(Transfer::Retry(format!(
                "the download's sha256 {got} is not the Hub's {} (corrupted; fetched again)",
                file.sha256
            )));
        }
        Ok(())
    }
}

enum ListingError {
    /// No answer: the cache may still serve.
    Unreachable(String),
    /// An answer that says no.
    Refused(String),
}
use ListingError::{Refused, Unreachable};

enum Transfer {
    Retry(String),
    Fatal(String),
}

/// The sha256 of the file at `path`, in hex.
fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut hash = Sha256::new();
    hash_prefix(&mut file, len, &mut hash)?;
    Ok(format!("{:x}", hash.finalize()))
}

/// The first `len` bytes of `file` into `hash`.
fn hash_prefix(file: &mut File, len: u64, hash: &mut Sha256) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    let mut left = len;
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let n = file.read(&mut buf[..CHUNK.min(left as usize)])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "shorter than it was",
            ));
        }
        hash.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(())
}

/// `snapshots/<commit>/<path>` as a relative link to `blobs/<sha256>`, as huggingface_hub
/// makes it.
fn link_blob(link: &Path, sha256: &str) -> std::io::Result<()> {
    let dir = link.parent().expect("a file in the snapshot");
    fs::create_dir_all(dir)?;
    // From snapshots/<commit>/<path>: up past the path's folders, the commit and snapshots.
    let depth = link
        .components()
        .rev()
        .position(|c| c.as_os_str() == "snapshots")
        .unwrap_or(2);
    let target = Path::new(&"../".repeat(depth)).join("blobs").join(sha256);
    let _ = fs::remove_file(link);
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, link);
    #[cfg(not(unix))]
    return fs::copy(dir.join(target), link).map(|_| ());
}

/// `bytes` at `path` through a temporary file renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(path.parent().expect("a file"))?;
    let tmp = path.with_extension("kolibri-tmp");
    fs::write(&tmp, bytes)?;
    fs::rename(tmp, path)
}

/// An exclusive lock on `path` (created if missing) for as long as the file stays open, as
/// huggingface_hub's `filelock` takes it: two downloads of one blob never write at once.
fn lock(path: &Path) -> std::io::Result<File> {
    fs::create_dir_all(path.parent().expect("a file"))?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; released when it is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn snapshot_links_are_relative_as_huggingface_hub_makes_them() {
        let root = std::env::temp_dir().join(format!("kolibri-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let sha = "ab".repeat(32);
        fs::create_dir_all(root.join("blobs")).unwrap();
        fs::write(root.join("blobs").join(&sha), b"x").unwrap();
        for path in ["m.gguf", "Q4_K_M/m.gguf"] {
            let link = root.join("snapshots/c0ffee").join(path);
            link_blob(&link, &sha).unwrap();
            assert_eq!(fs::read(&link).unwrap(), b"x", "{path}");
            assert!(fs::read_link(&link).unwrap().is_relative());
        }
        fs::remove_dir_all(&root).unwrap();
    }
}
