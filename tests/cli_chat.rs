//! `kolibri chat` driven through a pseudo-terminal, as a person types: two turns (the second
//! refers to the first), then `/exit`.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pseudo-terminal: the master side for the test, the slave side for the child.
fn open_pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the locals; the name and settings
    // pointers may be NULL.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both descriptors were just opened and are owned here alone.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Reads from the terminal until `until` appears after `from` bytes of `seen`.
fn read_until(master: &mut File, seen: &mut String, from: usize, until: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut buf = [0u8; 4096];
    while !seen[from..].contains(until) {
        assert!(
            Instant::now() < deadline,
            "no {until:?} in {:?}",
            &seen[from..]
        );
        let mut fds = [libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(master),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(fds.as_mut_ptr(), 1, 1000) } <= 0 {
            continue;
        }
        let n = master.read(&mut buf).expect("the terminal reads");
        assert!(n > 0, "the terminal closed early: {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[test]
fn chat_holds_two_turns_in_a_terminal_then_exits() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let (mut master, slave) = open_pty();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "chat",
            "-m",
            model.to_str().unwrap(),
            "--temp",
            "0",
            "-n",
            "48",
            "-t",
            "2",
        ])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut seen = String::new();
    read_until(&mut master, &mut seen, 0, ">>> ");
    master
        .write_all(b"My name is Ada. Please remember it.\n")
        .unwrap();
    let first = seen.len();
    read_until(&mut master, &mut seen, first, "remember it.");
    let reply_from = seen.len();
    read_until(&mut master, &mut seen, reply_from, ">>> ");
    let first_reply = seen[reply_from..].to_string();
    master.write_all(b"What is my name?\n").unwrap();
    let second = seen.len();
    read_until(&mut master, &mut seen, second, "my name?");
    let reply_from = seen.len();
    read_until(&mut master, &mut seen, reply_from, ">>> ");
    let second_reply = seen[reply_from..].to_string();
    assert!(
        second_reply.contains("Ada"),
        "{first_reply:?} then {second_reply:?}"
    );
    master.write_all(b"/exit\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "chat did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn chat_reads_blocks_and_commands_from_a_pipe_and_ends_at_eof() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
        .args([
            "chat",
            "-m",
            model.to_str().unwrap(),
            "--temp",
            "0",
            "-n",
            "8",
            "-t",
            "2",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = "\"\"\"\nSay hi\nin two words\n\"\"\"\n/reset\n/frobnicate\nHi \\\nthere\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(conversation forgotten)"), "{text}");
    assert!(text.contains("unknown command /frobnicate"), "{text}");
    assert!(
        !text.contains(">>>"),
        "no prompts when not a terminal: {text}"
    );
    // Two replies: the block and the continued line; each ends its line.
    assert!(text.lines().count() >= 4, "{text:?}");
}

/// With a thinking model's template (one that opens the thinking in its prompt), a reply's
/// thinking is closed after `--reasoning-budget` tokens and printed apart from the answer:
/// thinking, a blank line, the answer; `--hide-thinking` prints the answer alone.
#[test]
fn chat_prints_thinking_apart_and_hides_it_on_request() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/templates/thinking-qwen.jinja"
    );
    let chat = |extra: &[&str]| -> String {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kolibri"))
            .args([
                "chat",
                "-m",
                model.to_str().unwrap(),
                "--chat-template-file",
                template,
            ])
            .args([
                "-s",
                "You are a terse assistant.",
                "--temp",
                "0",
                "-n",
                "30",
            ])
            .args(["--reasoning-budget", "6", "-t", "2"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kolibri runs");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"Name three primary colors.\n").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = chat(&[]);
    let hidden = chat(&["--hide-thinking"]);
    let answer = hidden.trim();
    assert!(!answer.is_empty(), "{hidden:?}");
    let (thinking, rest) = shown.split_once("\n\n").expect("thinking, then the answer");
    assert!(
        !thinking.trim().is_empty() && !thinking.contains("</think>"),
        "{shown:?}"
    );
    assert_eq!(rest.trim(), answer, "{shown:?}");
}
