//! `kolibri serve`'s request log: one line per request once its response has ended (a stream
//! at its end or when the client leaves), with the generation's figures; never the key, the
//! query string or a body, unless `-v` asks for the body; `--log-format json` lines parse.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEY: &str = "log-test-secret-key";
const MESSAGE: &str = "Please say hello to Zanzibar.";

struct Server {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Server {
    fn start(name: &str, extra: &[&str]) -> Server {
        let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        let log = std::env::temp_dir().join(format!("kolibri-{name}-{}.log", std::process::id()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
            .args([
                "serve",
                "-m",
                model.to_str().unwrap(),
                "--port",
                "0",
                "-t",
                "2",
            ])
            .args(["-c", "1024", "--api-key", KEY])
            .args(extra)
            .env("KOLIBRI_REPACK_CACHE", "0")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8];
        while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        let line = String::from_utf8(line).unwrap();
        let port = line
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no listening line: {line:?}"));
        Server { child, port, log }
    }

    /// Sends one request; returns the status and up to `read` bytes of the body (all: None).
    fn request(&self, method: &str, path: &str, body: &str, read: Option<usize>) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
             User-Agent: log-test/1.0\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut text = Vec::new();
        match read {
            None => {
                s.read_to_end(&mut text).unwrap();
            }
            Some(n) => {
                let mut buf = vec![0u8; n];
                let got = s.read(&mut buf).unwrap();
                text.extend_from_slice(&buf[..got]);
            }
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, text)
    }

    /// Stops the server (SIGTERM, as a service manager does); its request lines.
    fn stop(mut self) -> Vec<String> {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&self.log).unwrap();
        std::fs::remove_file(&self.log).unwrap();
        text.lines()
            .filter(|l| l.contains(" /") || l.starts_with('{'))
            .map(str::to_string)
            .collect()
    }
}

/// The same seven requests for each server: health, a chat, a stream read to the end, a
/// stream left after its first bytes, bad JSON, a key in the query without the header, an
/// unknown path.
fn seven_requests(server: &Server) {
    let chat =
        format!(r#"{{"messages": [{{"role": "user", "content": "{MESSAGE}"}}], "max_tokens": 8}}"#);
    let stream = chat.replace("\"max_tokens\": 8", "\"max_tokens\": 200, \"stream\": true");
    assert_eq!(server.request("GET", "/health", "", None).0, 200);
    assert_eq!(
        server
            .request("POST", "/v1/chat/completions", &chat, None)
            .0,
        200
    );
    let (status, text) = server.request("POST", "/v1/chat/completions", &stream, None);
    assert!(status == 200 && text.contains("[DONE]"), "{text}");
    assert_eq!(
        server
            .request("POST", "/v1/chat/completions", &stream, Some(64))
            .0,
        200
    );
    assert_eq!(
        server
            .request("POST", "/v1/chat/completions", "{oops", None)
            .0,
        400
    );
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let query =
        format!("GET /v1/models?api_key={KEY} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(query.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert_eq!(server.request("GET", "/nope", "", None).0, 404);
    // The stream left early is noticed at its next token.
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn one_line_per_request_without_keys_or_bodies() {
    let server = Server::start("log-text", &[]);
    seven_requests(&server);
    let lines = server.stop();
    assert_eq!(lines.len(), 7, "{lines:#?}");
    // Lines are written as responses end: the first three requests in turn, then the stream
    // left early whenever its disconnection is seen.
    let mut expected = vec![
        ("GET /health 200", false),
        ("POST /v1/chat/completions 200", true),
        ("POST /v1/chat/completions 200", true),
        ("POST /v1/chat/completions 200 ", false),
        ("POST /v1/chat/completions 400", false),
        ("GET /v1/models 401", false),
        ("GET /nope 404", false),
    ];
    for (i, line) in lines.iter().enumerate() {
        // The stream left early: cancelled, so with no figures (unless it finished first).
        let left = line.contains("(the client left before the end)");
        let at = match left {
            true => expected.iter().position(|(_, generated)| !generated),
            false => expected.iter().position(|(start, _)| line.contains(start)),
        };
        let at = at.unwrap_or_else(|| panic!("an unexpected line: {line}"));
        assert!(i > 2 || at == 0, "the first three in turn: {lines:#?}");
        let (_, generated) = expected.remove(at);
        assert!(line.contains(" 127.0.0.1:"), "the client: {line}");
        assert!(left || line.contains(" generated=") == generated, "{line}");
        for secret in [KEY, MESSAGE, "api_key", "log-test/1.0"] {
            assert!(!line.contains(secret), "{secret} logged: {line}");
        }
    }
    assert!(lines[1].contains(" prompt=") && lines[1].contains(" ttft="));
    assert!(lines[1].contains(" generated=8 "), "{}", lines[1]);
    assert!(lines[1].contains(" cached=0 "), "{}", lines[1]);
    // The second chat shares the first one's prompt: read from the cache.
    assert!(!lines[2].contains(" cached=0 "), "{}", lines[2]);
}

#[test]
fn verbose_json_lines_carry_the_agent_and_body() {
    let server = Server::start("log-json", &["-v", "--log-format", "json"]);
    seven_requests(&server);
    let lines = server.stop();
    assert_eq!(lines.len(), 7, "{lines:#?}");
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        for field in ["time", "client", "method", "path", "status", "duration_ms"] {
            assert!(v.get(field).is_some(), "{field}: {line}");
        }
        assert!(!line.contains(KEY), "the key is never logged: {line}");
    }
    let chat: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(chat["user_agent"], "log-test/1.0");
    assert!(chat["body"].as_str().unwrap().contains(MESSAGE), "{chat}");
    assert_eq!(chat["generated_tokens"], 8);
    assert!(chat["ttft_ms"].as_u64().is_some() && chat["tokens_per_s"].as_f64().is_some());
    assert_eq!(
        Path::new(chat["path"].as_str().unwrap()),
        Path::new("/v1/chat/completions")
    );
}
