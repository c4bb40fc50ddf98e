//! llama-cli's and llama-server's common invocations, as their documentation writes them,
//! against `kolibri`: accepted, with a one-line note for each GPU or llama.cpp-only option;
//! a mistyped option refused with the nearest spelling; `run` chatting by default with a
//! chat-template model, `--raw` / `-no-cnv` for a plain completion, `-f`, `-sys`, `-n -1`, a
//! model without `-m`, and `--version`.

mod common;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kolibri(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .env("KOLIBRI_REPACK_CACHE", "0")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn coder() -> String {
    let path = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    path.to_str().unwrap().to_string()
}

const QUESTION: &str = "What is the capital of France? Answer in one word.";

#[test]
fn llama_cli_invocations_run_with_notes_for_gpu_options() {
    let m = coder();
    // llama-cli -m M -p P -n 32: a model with a chat template answers the prompt.
    let plain = kolibri(&["run", "-m", &m, "-p", QUESTION, "-n", "32", "--temp", "0"]);
    let reply = common::succeeded(&plain);
    assert!(
        reply.contains("Paris") && !reply.contains(QUESTION),
        "{reply:?}"
    );
    assert!(!stderr(&plain).contains("note:"), "{}", stderr(&plain));
    // The GPU and flash-attention options: the same reply, a note for each ignored option.
    let gpu = [
        "-ngl", "99", "-c", "4096", "-fa", "on", "-ctk", "q8_0", "--jinja", "-sm", "none",
    ];
    let with_gpu = kolibri(
        &[
            &["run", "-m", &m, "-p", QUESTION, "-n", "32", "--temp", "0"][..],
            &gpu,
        ]
        .concat(),
    );
    assert!(common::succeeded(&with_gpu).contains("Paris"));
    let notes = stderr(&with_gpu);
    for option in ["-ngl", "-fa", "--jinja", "-sm"] {
        let line = notes
            .lines()
            .find(|l| l.starts_with(&format!("note: {option}")));
        assert!(line.is_some(), "a note for {option}: {notes}");
    }
    assert!(notes.contains("runs on the CPU"), "{notes}");
    assert!(
        !notes.contains("note: -c") && !notes.contains("note: -ctk"),
        "{notes}"
    );
    // Without -m, -sys and -f, and -n -1 (to the end of the reply).
    let dir = std::env::temp_dir().join(format!("kolibri-habits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prompt_file = dir.join("prompt.txt");
    std::fs::write(&prompt_file, "What is your name?").unwrap();
    let from_file = kolibri(&[
        "run",
        &m,
        "-f",
        prompt_file.to_str().unwrap(),
        "-sys",
        "Your name is Zorbo.",
        "-n",
        "-1",
        "-c",
        "512",
        "--temp",
        "0",
    ]);
    let named = common::succeeded(&from_file);
    assert!(named.contains("Zorbo"), "{named:?}");
    let words = kolibri(&["run", &m, QUESTION, "-n", "32", "--temp", "0"]);
    assert_eq!(
        common::succeeded(&words),
        reply,
        "the prompt as words after the model"
    );
    // --raw / -no-cnv: the plain completion, prompt first, as before.
    for raw in ["--raw", "-no-cnv"] {
        let p = "The capital of France is";
        let out = kolibri(&["run", "-m", &m, "-p", p, "-n", "6", "--temp", "0", raw]);
        let text = common::succeeded(&out);
        assert!(
            text.starts_with(p) && text.contains("Paris"),
            "{raw}: {text:?}"
        );
    }
    // A prompt that is already formatted is completed as it is.
    let formatted = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    let out = kolibri(&["run", "-m", &m, "-p", formatted, "-n", "4", "--temp", "0"]);
    assert!(common::succeeded(&out).starts_with(formatted));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mistyped_options_are_refused_with_the_nearest_spelling() {
    let m = coder();
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "-m", &m, "-p", "x", "-ngll", "99"],
            "did you mean -ngl?",
        ),
        (
            &["run", "-m", &m, "-p", "x", "--temperature", "1"],
            "'--temp'",
        ),
        (&["serve", "-m", &m, "--prot", "8081"], "'--port'"),
        (
            &["run", "-m", &m, "-p", "x", "-n", "-3"],
            "-n -3: a token count",
        ),
    ];
    for (args, hint) in cases {
        let out = kolibri(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(hint), "{args:?}: {}", stderr(&out));
    }
    // `-p` then a value that looks like an option is still the prompt.
    let out = kolibri(&["run", "-m", &m, "-p", "-ngl", "-n", "1", "--raw"]);
    assert!(common::succeeded(&out).starts_with("-ngl"));
}

#[test]
fn version_is_answered_everywhere() {
    for args in [
        &["--version"][..],
        &["run", "--version"],
        &["serve", "--version"],
    ] {
        let out = kolibri(args);
        let text = common::succeeded(&out);
        assert!(text.contains(env!("CARGO_PKG_VERSION")), "{args:?}: {text}");
    }
}

/// llama-server --host 0.0.0.0 --port 8081 -np 4 (with llama-server's usual -c, -fa, -ngl,
/// --jinja, --metrics): it serves, with the notes, and warns that it listens beyond this
/// machine without a key.
#[test]
fn llama_server_invocation_serves_with_notes() {
    let m = coder();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let args = [
        "serve",
        "-m",
        &m,
        "--host",
        "0.0.0.0",
        "--port",
        &port,
        "-np",
        "4",
        "-c",
        "4096",
        "-fa",
        "on",
        "-ngl",
        "99",
        "--jinja",
        "--metrics",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args(args)
        .env("KOLIBRI_REPACK_CACHE", "0")
        .env_remove("KOLIBRI_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let health = loop {
        let got = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap()))
            .ok()
            .and_then(|mut s| {
                use std::io::Write;
                s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .ok()?;
                let mut text = String::new();
                s.read_to_string(&mut text).ok()?;
                Some(text)
            });
        match got {
            Some(text) if text.starts_with("HTTP/1.1 200") => break text,
            _ => {}
        }
        assert!(Instant::now() < deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(health.contains("ok"), "{health}");
    child.kill().unwrap();
    let mut notes = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut notes)
        .unwrap();
    let _ = child.wait();
    for option in ["-fa", "-ngl", "--jinja", "--metrics"] {
        assert!(
            notes.contains(&format!("note: {option}")),
            "{option}: {notes}"
        );
    }
    assert!(
        notes.to_lowercase().contains("without"),
        "the no-key warning: {notes}"
    );
}
