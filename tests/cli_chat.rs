//! `kolibri chat` driven through a pseudo-terminal, as a person types: two turns (the second
//! refers to the first), then `/exit`; line editing, history across sessions, Ctrl-C, `/set`,
//! `/save` and `/load`; and from a pipe.

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
    while !seen[from..].contains(until) {
        assert!(
            Instant::now() < deadline,
            "no {until:?} in {:?}",
            &seen[from..]
        );
        read_some(master, seen);
    }
}

/// Whatever the terminal has within a second, added to `seen`.
fn read_some(master: &mut File, seen: &mut String) {
    let mut fds = [libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(master),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(fds.as_mut_ptr(), 1, 1000) } <= 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    let n = master.read(&mut buf).expect("the terminal reads");
    assert!(n > 0, "the terminal closed early: {seen:?}");
    seen.push_str(&String::from_utf8_lossy(&buf[..n]));
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

/// A child process on a pseudo-terminal, and what it has written so far.
struct Terminal {
    master: File,
    child: std::process::Child,
    seen: String,
    /// Where the next [`Terminal::expect`] starts looking.
    mark: usize,
}

impl Terminal {
    fn spawn(args: &[&str], env: &[(&str, &std::path::Path)]) -> Terminal {
        let (master, slave) = open_pty();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kolibri"));
        command
            .args(args)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        for (k, v) in env {
            command.env(k, v);
        }
        // SAFETY: setsid and ioctl are async-signal-safe; the child gets its own session
        // whose controlling terminal is the pty (stdin), so Ctrl-C there is its SIGINT.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        Terminal {
            master,
            child,
            seen: String::new(),
            mark: 0,
        }
    }

    /// Types `keys`.
    fn send(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits for `text` after the mark; returns what came before it, and moves the mark past.
    fn expect(&mut self, text: &str) -> String {
        let from = self.mark;
        read_until(&mut self.master, &mut self.seen, from, text);
        // The line editor asks where the cursor is; a terminal answers.
        if self.seen[from..].contains("\x1b[6n") {
            self.send("\x1b[1;1R");
        }
        let at = from + self.seen[from..].find(text).unwrap();
        self.mark = at + text.len();
        self.seen[from..at].to_string()
    }

    /// Waits for `n` more bytes of output.
    fn expect_bytes(&mut self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.seen.len() < self.mark + n {
            assert!(
                Instant::now() < deadline,
                "no output: {:?}",
                &self.seen[self.mark..]
            );
            read_some(&mut self.master, &mut self.seen);
        }
        self.mark = self.seen.len();
    }

    /// Waits for the program to end; its status.
    fn exit_status(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit: {:?}",
                &self.seen[self.mark..]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The line editor with its history in a file, `/set system`, a reply stopped by Ctrl-C with
/// the conversation kept, `/save` and `/load`, `/exit`; then a second session that finds the
/// first one's lines with Up and leaves on two Ctrl-C.
#[test]
fn chat_in_a_terminal_edits_lines_stops_replies_and_saves_conversations() {
    let model = common::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let dir = std::env::temp_dir().join(format!("kolibri-chat-tty-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let history = dir.join("history");
    let saved = dir.join("chat.json");
    let args = [
        "chat",
        model.to_str().unwrap(),
        "--temp",
        "0",
        "-n",
        "400",
        "-t",
        "2",
    ];
    let env = [("KOLIBRI_HISTORY", history.as_path())];
    let mut t = Terminal::spawn(&args, &env);
    t.expect(">>> ");
    t.send("/set system You are a pirate.\r");
    t.expect("(system prompt set)");
    t.expect(">>> ");
    let story = "Tell me a very long story about a dragon.";
    t.send(&format!("{story}\r"));
    t.expect(story);
    t.expect_bytes(40);
    t.send("\x03");
    t.expect("(stopped)");
    t.expect(">>> ");
    // Up recalls the last message; Ctrl-U clears the line again.
    t.send("\x1b[A");
    t.expect(story);
    t.send("\x15");
    t.send(&format!("/save {}\r", saved.display()));
    t.expect("(conversation saved");
    let file = std::fs::read_to_string(&saved).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&file).unwrap();
    let messages = doc["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"], "{file}");
    assert_eq!(messages[0]["content"], "You are a pirate.");
    assert_eq!(messages[1]["content"], story);
    let partial = messages[2]["content"].as_str().unwrap();
    assert!(
        !partial.trim().is_empty(),
        "the stopped reply is kept: {file}"
    );
    t.send("/clear\r");
    t.expect("(conversation forgotten)");
    t.send("/show\r");
    t.expect("0 turns");
    t.send(&format!("/load {}\r", saved.display()));
    t.expect("(loaded 2 turns");
    t.send("/show\r");
    t.expect("2 turns");
    t.send("/exit\r");
    assert!(t.exit_status().success());
    let lines = std::fs::read_to_string(&history).unwrap();
    assert!(lines.contains(story) && lines.contains("/exit"), "{lines}");

    let mut t = Terminal::spawn(&args, &env);
    t.expect(">>> ");
    t.send("\x1b[A");
    t.expect("/exit");
    t.send("\x15\x03");
    t.expect("Ctrl-C again");
    t.expect(">>> ");
    t.send("\x03");
    assert!(t.exit_status().success());
    std::fs::remove_dir_all(&dir).unwrap();
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
