//! A `kolibri serve` process for a test: started on a free port, asked with plain HTTP/1.1,
//! stopped with SIGTERM; its stderr kept in a file (a pipe nobody reads would fill).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server.
pub struct Server {
    child: Child,
    pub port: u16,
    log: std::path::PathBuf,
}

impl Server {
    /// `kolibri serve` on the 0.5B (2 threads, 1024 tokens a slot unless `extra` says), its
    /// stderr (the request log) to a file.
    pub fn start(name: &str, extra: &[&str]) -> Server {
        let model = super::model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        Self::start_model(name, &model, extra)
    }

    /// `kolibri serve` on `model`, as [`Server::start`].
    pub fn start_model(name: &str, model: &std::path::Path, extra: &[&str]) -> Server {
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
            .args(["-c", "1024"])
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

    /// Sends one request with `key`; returns the status and up to `read` bytes of the response
    /// (all: None), headers included.
    pub fn request(
        &self,
        key: &str,
        method: &str,
        path: &str,
        body: &str,
        read: Option<usize>,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
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

    /// Stops the server (SIGTERM, as a service manager does); what it wrote on stderr.
    pub fn stop(mut self) -> String {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&self.log).unwrap();
        std::fs::remove_file(&self.log).unwrap();
        text
    }
}
