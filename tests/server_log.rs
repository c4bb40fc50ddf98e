//! `kolibri serve`'s request log: one line per request once its response has ended (a stream
//! at its end or when the client leaves), with the generation's figures; never the key, the
//! query string or a body, unless `-v` asks for the body; `--log-format json` lines parse.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::server::Server;

const KEY: &str = "log-test-secret-key";
const MESSAGE: &str = "Please say hello to Zanzibar.";

/// The same seven requests for each server: health, a chat, a stream read to the end, a
/// stream left after its first bytes, bad JSON, a key in the query without the header, an
/// unknown path.
fn seven_requests(server: &Server) {
    // Greedy: the reply outlasts its 8 tokens every time.
    let chat = format!(
        r#"{{"messages": [{{"role": "user", "content": "{MESSAGE}"}}], "temperature": 0, "max_tokens": 8}}"#
    );
    let stream = chat.replace("\"max_tokens\": 8", "\"max_tokens\": 200, \"stream\": true");
    assert_eq!(server.request(KEY, "GET", "/health", "", None).0, 200);
    assert_eq!(
        server
            .request(KEY, "POST", "/v1/chat/completions", &chat, None)
            .0,
        200
    );
    let (status, text) = server.request(KEY, "POST", "/v1/chat/completions", &stream, None);
    assert!(status == 200 && text.contains("[DONE]"), "{text}");
    assert_eq!(
        server
            .request(KEY, "POST", "/v1/chat/completions", &stream, Some(64))
            .0,
        200
    );
    assert_eq!(
        server
            .request(KEY, "POST", "/v1/chat/completions", "{oops", None)
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
    assert_eq!(server.request(KEY, "GET", "/nope", "", None).0, 404);
    // The stream left early is noticed at its next token.
    std::thread::sleep(Duration::from_millis(500));
}

/// The log's request lines (the notes at start-up left out).
fn request_lines(log: String) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(" /") || l.starts_with('{'))
        .map(str::to_string)
        .collect()
}

#[test]
fn one_line_per_request_without_keys_or_bodies() {
    let server = Server::start("log-text", &["--api-key", KEY]);
    seven_requests(&server);
    let lines = request_lines(server.stop());
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
    let server = Server::start(
        "log-json",
        &["--api-key", KEY, "-v", "--log-format", "json"],
    );
    seven_requests(&server);
    let lines = request_lines(server.stop());
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
