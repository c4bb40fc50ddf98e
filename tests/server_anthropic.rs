//! Anthropic's Messages API, driven by the `anthropic` client from PyPI (unmodified): plain,
//! streamed, a tool_use round trip (plain and streamed), count_tokens, errors in its shape
//! (tests/server/anthropic_client_check.py).

mod common;

use common::server::Server;

const KEY: &str = "anthropic-test-key";

#[test]
fn the_anthropic_client_talks_to_kolibri() {
    let deps = common::python_package("anthropic", "anthropic==2.17.0");
    let server = Server::start("anthropic", &["--api-key", KEY, "-c", "2048"]);
    let url = format!("http://127.0.0.1:{}", server.port);
    let out = std::process::Command::new("python3")
        .arg(common::data_path("../server/anthropic_client_check.py"))
        .args([&url, KEY])
        .env("PYTHONPATH", deps)
        .output()
        .unwrap();
    let log = server.stop();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}\n--- server ---\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
