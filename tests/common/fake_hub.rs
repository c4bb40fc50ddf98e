//! A Hugging Face Hub in the test process: the API's repository listing
//! (`/api/models/OWNER/REPO/revision/main?blobs=true`, with each file's LFS sha256 and size),
//! `resolve/REV/FILE` redirecting to a CDN on a second port (so clients treat it as another
//! origin, as huggingface.co's CDN is), and the CDN serving blobs with `Range`. It logs every
//! CDN transfer, and can cut transfers short, corrupt one, or require a token.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// A file of a repository: its name there and the local file that is its content.
#[derive(Clone, Debug)]
pub struct HubFile {
    pub path: String,
    pub source: PathBuf,
    pub sha256: String,
    pub size: u64,
}

impl HubFile {
    pub fn new(path: &str, source: &Path) -> HubFile {
        let mut hash = Sha256::new();
        let mut f = std::fs::File::open(source).unwrap();
        std::io::copy(&mut f, &mut hash).unwrap();
        HubFile {
            path: path.to_owned(),
            source: source.to_path_buf(),
            sha256: format!("{:x}", hash.finalize()),
            size: std::fs::metadata(source).unwrap().len(),
        }
    }
}

/// One CDN transfer: the blob, where it started, and the bytes sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub sha256: String,
    pub from: u64,
    pub sent: u64,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, (String, Vec<HubFile>)>,
    /// Repositories that answer 401 without this token.
    gated: HashMap<String, String>,
    /// For the next transfers: the bytes each sends before the connection is closed.
    cuts: VecDeque<u64>,
    /// Transfers to corrupt (one byte flipped in the middle of what they send).
    corrupt: usize,
    log: Vec<Transfer>,
}

pub struct FakeHub {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeHub {
    pub fn start() -> FakeHub {
        let state = Arc::new(Mutex::new(State::default()));
        let cdn = serve(Arc::clone(&state), None);
        let url = serve(Arc::clone(&state), Some(cdn));
        FakeHub { url, state }
    }

    /// Adds repository `id` at `commit` (40 hex digits).
    pub fn repo(&self, id: &str, commit: &str, files: Vec<HubFile>) {
        let mut s = self.state.lock().unwrap();
        s.repos.insert(id.into(), (commit.into(), files));
    }

    pub fn gate(&self, id: &str, token: &str) {
        self.state
            .lock()
            .unwrap()
            .gated
            .insert(id.into(), token.into());
    }

    /// The next transfers send these many bytes each, then close the connection.
    pub fn cut(&self, bytes: &[u64]) {
        self.state.lock().unwrap().cuts.extend(bytes);
    }

    pub fn corrupt_next(&self) {
        self.state.lock().unwrap().corrupt += 1;
    }

    /// The transfers so far, and forgets them.
    pub fn take_log(&self) -> Vec<Transfer> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }
}

/// Serves on a free loopback port until the process ends: the Hub (its API and resolve
/// redirects to `cdn`), or with `cdn` None the CDN. Returns the base URL.
fn serve(state: Arc<Mutex<State>>, cdn: Option<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (state, cdn) = (Arc::clone(&state), cdn.clone());
            std::thread::spawn(move || {
                let _ = answer(stream, &state, cdn.as_deref());
            });
        }
    });
    url
}

struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Ok(Request {
        method,
        path,
        headers,
    })
}

fn respond(
    mut stream: &TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)
}

fn answer(stream: TcpStream, state: &Mutex<State>, cdn: Option<&str>) -> std::io::Result<()> {
    let req = read_request(&stream)?;
    match cdn {
        Some(cdn) => answer_hub(&stream, state, cdn, &req),
        None => answer_cdn(&stream, state, &req),
    }
}

fn answer_hub(
    stream: &TcpStream,
    state: &Mutex<State>,
    cdn: &str,
    req: &Request,
) -> std::io::Result<()> {
    let s = state.lock().unwrap();
    let not_found = |code: &str| {
        respond(
            stream,
            "404 Not Found",
            &[("X-Error-Code", code.into())],
            b"{}",
        )
    };
    let path = req.path.split('?').next().unwrap_or_default();
    let (id, rest) = if let Some(api) = path.strip_prefix("/api/models/") {
        let Some((id, _)) = api.split_once("/revision/") else {
            return not_found("RepoNotFound");
        };
        (id.to_owned(), None)
    } else {
        let trimmed = path.trim_start_matches('/');
        let mut it = trimmed.splitn(3, '/');
        let (owner, repo, rest) = (
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
        );
        (format!("{owner}/{repo}"), Some(rest.to_owned()))
    };
    if let Some(token) = s.gated.get(&id) {
        if req.headers.get("authorization") != Some(&format!("Bearer {token}")) {
            return respond(
                stream,
                "401 Unauthorized",
                &[("X-Error-Code", "GatedRepo".into())],
                b"{}",
            );
        }
    }
    let Some((commit, files)) = s.repos.get(&id) else {
        return not_found("RepoNotFound");
    };
    match rest {
        None => {
            let siblings: Vec<serde_json::Value> = files
                .iter()
                .map(|f| {
                    serde_json::json!({"rfilename": f.path, "size": f.size,
                        "lfs": {"sha256": f.sha256, "size": f.size, "pointerSize": 134}})
                })
                .collect();
            let body = serde_json::json!({"id": id, "sha": commit, "siblings": siblings});
            respond(
                stream,
                "200 OK",
                &[("Content-Type", "application/json".into())],
                body.to_string().as_bytes(),
            )
        }
        Some(rest) => {
            // resolve/REV/FILE
            let Some(file) = rest
                .strip_prefix("resolve/")
                .and_then(|r| r.split_once('/'))
                .map(|(_, f)| f)
            else {
                return not_found("EntryNotFound");
            };
            let Some(f) = files.iter().find(|f| f.path == file) else {
                return not_found("EntryNotFound");
            };
            respond(
                stream,
                "302 Found",
                &[
                    ("Location", format!("{cdn}/blobs/{}", f.sha256)),
                    ("X-Repo-Commit", commit.clone()),
                    ("X-Linked-Etag", format!("\"{}\"", f.sha256)),
                    ("X-Linked-Size", f.size.to_string()),
                    ("ETag", format!("\"{}\"", &f.sha256[..40])),
                ],
                b"",
            )
        }
    }
}

fn answer_cdn(stream: &TcpStream, state: &Mutex<State>, req: &Request) -> std::io::Result<()> {
    let sha = req
        .path
        .strip_prefix("/blobs/")
        .unwrap_or_default()
        .to_owned();
    let (file, cut, corrupt) = {
        let mut s = state.lock().unwrap();
        let file = s
            .repos
            .values()
            .flat_map(|(_, f)| f)
            .find(|f| f.sha256 == sha)
            .cloned();
        let getting = req.method == "GET" && file.is_some();
        let cut = if getting { s.cuts.pop_front() } else { None };
        let corrupt = getting && s.corrupt > 0;
        if corrupt {
            s.corrupt -= 1;
        }
        (file, cut, corrupt)
    };
    let Some(file) = file else {
        return respond(stream, "404 Not Found", &[], b"");
    };
    let from = req
        .headers
        .get("range")
        .and_then(|r| {
            r.strip_prefix("bytes=")?
                .strip_suffix('-')?
                .parse::<u64>()
                .ok()
        })
        .filter(|&f| f < file.size);
    let start = from.unwrap_or(0);
    let len = file.size - start;
    let mut headers = vec![
        ("Content-Length", len.to_string()),
        ("Accept-Ranges", "bytes".into()),
        ("ETag", format!("\"{}\"", file.sha256)),
    ];
    let status = match from {
        Some(f) => {
            headers.push((
                "Content-Range",
                format!("bytes {f}-{}/{}", file.size - 1, file.size),
            ));
            "206 Partial Content"
        }
        None => "200 OK",
    };
    respond(stream, status, &headers, b"")?;
    if req.method != "GET" {
        return Ok(());
    }
    let mut src = std::fs::File::open(&file.source)?;
    src.seek(SeekFrom::Start(start))?;
    let limit = cut.unwrap_or(len).min(len);
    let mut sent = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut out = stream;
    while sent < limit {
        let n = src.read(&mut buf[..((limit - sent) as usize).min(1 << 20)])?;
        if n == 0 {
            break;
        }
        if corrupt && sent <= len / 2 && len / 2 < sent + n as u64 {
            buf[(len / 2 - sent) as usize] ^= 0x40;
        }
        if out.write_all(&buf[..n]).is_err() {
            break;
        }
        sent += n as u64;
    }
    state.lock().unwrap().log.push(Transfer {
        sha256: sha,
        from: start,
        sent,
    });
    // A cut transfer ends with the connection closed before Content-Length is reached.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}
