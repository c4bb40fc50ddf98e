//! Where `kolibri chat` reads messages: a line editor with history on a terminal (rustyline:
//! arrows, Ctrl-R, history kept across sessions in [`history_file`]), plain lines from a pipe.
//! Either way a line ending in `\` goes on, and a `"""` line opens and closes a block.

use std::io::{BufRead, Write};

/// What the user gave.
pub enum Input {
    Message(String),
    /// Ctrl-C at the prompt: the line typed so far is dropped.
    Interrupted,
    /// Ctrl-D, or the end of piped input.
    End,
}

pub enum Reader {
    #[cfg(feature = "cli")]
    Editor {
        editor: Box<rustyline::DefaultEditor>,
        history: Option<std::path::PathBuf>,
    },
    Lines(std::io::Lines<std::io::StdinLock<'static>>),
}

impl Reader {
    /// A line editor when stdin and stdout are a terminal, else lines from stdin.
    pub fn new() -> Reader {
        #[cfg(feature = "cli")]
        if std::io::IsTerminal::is_terminal(&std::io::stdin())
            && std::io::IsTerminal::is_terminal(&std::io::stdout())
        {
            if let Ok(mut editor) = rustyline::DefaultEditor::new() {
                let history = history_file();
                if let Some(file) = &history {
                    // No history yet is the usual first run.
                    let _ = editor.load_history(file);
                }
                let editor = Box::new(editor);
                return Reader::Editor { editor, history };
            }
        }
        Reader::Lines(std::io::stdin().lock().lines())
    }

    pub fn interactive(&self) -> bool {
        match self {
            #[cfg(feature = "cli")]
            Reader::Editor { .. } => true,
            Reader::Lines(_) => false,
        }
    }

    /// The next message, its lines joined.
    pub fn message(&mut self) -> Input {
        let first = match self.line(">>> ") {
            Some(Ok(line)) => line,
            Some(Err(())) => return Input::Interrupted,
            None => return Input::End,
        };
        let mut message = if first.trim() == "\"\"\"" {
            let mut block = Vec::new();
            loop {
                match self.line("... ") {
                    Some(Ok(line)) if line.trim() == "\"\"\"" => break block.join("\n"),
                    Some(Ok(line)) => block.push(line),
                    Some(Err(())) => return Input::Interrupted,
                    None => return Input::End,
                }
            }
        } else {
            let mut message = first;
            while let Some(stripped) = message.strip_suffix('\\') {
                message = stripped.to_string();
                match self.line("... ") {
                    Some(Ok(line)) => {
                        message.push('\n');
                        message.push_str(&line);
                    }
                    Some(Err(())) => return Input::Interrupted,
                    None => break,
                }
            }
            message
        };
        if message.ends_with('\r') {
            message.pop();
        }
        self.remember(&message);
        Input::Message(message)
    }

    /// One line: `None` at the end, `Err` on Ctrl-C.
    fn line(&mut self, prompt: &str) -> Option<Result<String, ()>> {
        match self {
            #[cfg(feature = "cli")]
            Reader::Editor { editor, .. } => match editor.readline(prompt) {
                Ok(line) => Some(Ok(line)),
                Err(rustyline::error::ReadlineError::Interrupted) => Some(Err(())),
                Err(_) => None,
            },
            Reader::Lines(lines) => {
                let _ = prompt;
                let _ = std::io::stdout().flush();
                lines.next()?.ok().map(Ok)
            }
        }
    }

    /// Adds a message to the history, and the history file, at once: two chats at a time
    /// both keep theirs.
    fn remember(&mut self, message: &str) {
        #[cfg(feature = "cli")]
        if let Reader::Editor { editor, history } = self {
            if message.trim().is_empty() || editor.add_history_entry(message).is_err() {
                return;
            }
            if let Some(file) = history {
                if let Some(dir) = file.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                if let Err(e) = editor.append_history(file) {
                    eprintln!("note: history not saved to {}: {e}", file.display());
                }
            }
        }
        let _ = message;
    }
}

/// The history file: `KOLIBRI_HISTORY` (empty: none), else `$XDG_DATA_HOME/kolibri/history`,
/// else `~/.local/share/kolibri/history`.
#[cfg(feature = "cli")]
fn history_file() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(file) = std::env::var_os("KOLIBRI_HISTORY") {
        return (!file.is_empty()).then(|| PathBuf::from(file));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("kolibri").join("history"))
}
