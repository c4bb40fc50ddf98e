//! How `run` and `chat` print a reply as it streams: the answer as it is, a thinking model's
//! thinking dimmed (on a terminal), plain (to a pipe) or not at all.

use std::io::{IsTerminal, Write};

use kolibri::chat::reasoning::{Part, ReasoningSplitter};

/// How a reply's thinking is printed.
#[derive(Clone, Copy, PartialEq)]
pub enum Thinking {
    /// Faint, as terminals show ANSI dim text.
    Dimmed,
    /// As it is (output to a pipe or file).
    Plain,
    Hidden,
}

impl Thinking {
    /// Hidden when asked, else dimmed on a terminal and plain elsewhere.
    pub fn for_stdout(hide: bool) -> Thinking {
        if hide {
            Thinking::Hidden
        } else if std::io::stdout().is_terminal() {
            Thinking::Dimmed
        } else {
            Thinking::Plain
        }
    }
}

/// Prints a reply as it streams: the answer as it is, the thinking as `thinking` says.
pub struct ReplyPrinter {
    /// With a thinking model: its reply split into thinking and answer.
    splitter: Option<ReasoningSplitter>,
    thinking: Thinking,
    /// Thinking was printed (a blank line then parts it from the answer).
    thought: bool,
    /// The answer as printed (each token after the prompt keeps its leading space).
    answer: String,
}

impl ReplyPrinter {
    /// A printer of a reply, split into thinking and answer by `splitter` when the model
    /// thinks.
    pub fn new(splitter: Option<ReasoningSplitter>, thinking: Thinking) -> ReplyPrinter {
        ReplyPrinter {
            splitter,
            thinking,
            thought: false,
            answer: String::new(),
        }
    }

    /// The answer printed so far, without the thinking.
    pub fn into_answer(self) -> String {
        self.answer
    }

    pub fn print(&mut self, out: &mut impl Write, text: &str, last: bool) {
        let Some(s) = &mut self.splitter else {
            self.answer.push_str(text);
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            return;
        };
        let mut parts = s.push(text);
        if last {
            parts.extend(s.finish());
        }
        for part in parts {
            let answer = match part {
                Part::Reasoning(r) => {
                    self.thought |= self.thinking != Thinking::Hidden;
                    let _ = match self.thinking {
                        Thinking::Dimmed => write!(out, "\x1b[2m{r}\x1b[0m"),
                        Thinking::Plain => write!(out, "{r}"),
                        Thinking::Hidden => Ok(()),
                    };
                    continue;
                }
                Part::Content(c) => c,
                Part::Call { name, arguments } => format!("[call {name} {arguments}]"),
                // Thinking that never closed is the reply's text: printed already, unless
                // hidden.
                Part::Unfinished { raw, .. } if self.thinking != Thinking::Hidden => {
                    self.answer.push_str(&raw);
                    continue;
                }
                Part::Unfinished { raw, .. } => raw,
            };
            if std::mem::take(&mut self.thought) {
                let _ = write!(out, "\n\n");
            }
            let _ = out.write_all(answer.as_bytes());
            self.answer.push_str(&answer);
        }
        let _ = out.flush();
    }
}
