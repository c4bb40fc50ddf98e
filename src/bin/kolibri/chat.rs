//! `kolibri chat`: an interactive conversation through the model's chat template, what
//! `ollama run` gives. Replies stream as they are generated; each turn re-reads only the
//! tokens the cache does not hold yet. Commands: `/reset` forgets the conversation, `/exit`
//! (or end of input) leaves, `/help`; a line ending in `\` continues on the next line, and a
//! `"""` line opens and closes a block of many lines.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use kolibri::batching::{BudgetState, ThinkingBudget};
use kolibri::chat::reasoning::{Part, ReasoningSplitter};
use kolibri::chat::{ChatMessage, ChatTemplate};
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::Sampler;
use kolibri::tokenizer::{StreamDecoder, TokenId};

use crate::args::Args;

const HELP: &str = "/reset  forget the conversation\n/exit   leave (also Ctrl-D)\n\
                    end a line with \\ to go on, or put \"\"\" on a line to open and close a block\n";

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "chat",
        raw,
        &[
            &[
                "-m",
                "--model",
                "-hf",
                "--hf-repo",
                "-s",
                "--system",
                "-n",
                "--n-predict",
                "-t",
                "--threads",
            ][..],
            &[
                "-c",
                "--ctx-size",
                "--chat-template-file",
                "--reasoning-budget",
            ],
            &crate::SAMPLING_FLAGS,
            &crate::KV_TYPE_FLAGS,
        ]
        .concat(),
        &[&crate::LOAD_SWITCHES[..], &["--hide-thinking"]].concat(),
    )?;
    let path = &crate::model_path(&a)?;
    let n_predict: usize = a.parse_or(&["-n", "--n-predict"], 1024)?;
    let sampler_params = crate::sampler_params(&a)?;
    let model = Arc::new(crate::load_model(path, &a)?);
    let template = match crate::template_file(&a, &model)? {
        Some(template) => template,
        None => ChatTemplate::from_model(&model).map_err(|e| e.to_string())?,
    };
    let budget: i64 = a.parse_or(&["--reasoning-budget"], -1)?;
    if budget < -1 {
        return Err(format!(
            "--reasoning-budget is -1 (no limit) or a token count, not {budget}"
        ));
    }
    let (type_k, type_v) = crate::kv_types(&a)?;
    let params = ContextParams {
        n_ctx: a.parse_or(
            &["-c", "--ctx-size"],
            4096usize.min(model.hparams.n_ctx_train),
        )?,
        n_threads: a.parse_or(&["-t", "--threads"], crate::default_threads())?,
        type_k,
        type_v,
        ..ContextParams::default()
    };
    let ctx = Context::new(Arc::clone(&model), &params).map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(sampler_params).map_err(|e| e.to_string())?;
    sampler.suppress(model.tokenizer.suppressed());
    let mut chat = Chat {
        model,
        template,
        ctx,
        sampler,
        system: a.get(&["-s", "--system"]).map(str::to_owned),
        turns: Vec::new(),
        n_predict,
        budget: usize::try_from(budget).ok(),
        thinking: if a.has("--hide-thinking") {
            Thinking::Hidden
        } else if std::io::stdout().is_terminal() {
            Thinking::Dimmed
        } else {
            Thinking::Plain
        },
    };
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    if interactive {
        eprintln!("kolibri chat: /help for commands");
    }
    let mut lines = stdin.lock().lines();
    while let Some(input) = read_message(&mut lines, interactive) {
        match input.trim() {
            "" => continue,
            "/exit" | "/bye" => break,
            "/reset" => {
                chat.turns.clear();
                println!("(conversation forgotten)");
                continue;
            }
            "/help" | "/?" => {
                print!("{HELP}");
                continue;
            }
            cmd if cmd.starts_with('/') && !cmd.contains(' ') => {
                println!("unknown command {cmd}; /help lists them");
                continue;
            }
            _ => {}
        }
        if let Err(e) = chat.reply(input) {
            eprintln!("error: {e}");
        }
    }
    Ok(())
}

struct Chat {
    model: Arc<Model>,
    template: ChatTemplate,
    ctx: Context,
    sampler: Sampler,
    system: Option<String>,
    /// (role, text) of every turn so far; a reply's thinking is not kept.
    turns: Vec<(&'static str, String)>,
    n_predict: usize,
    /// Most tokens a reply thinks before its thinking is closed for it.
    budget: Option<usize>,
    thinking: Thinking,
}

/// How a reply's thinking is printed.
#[derive(Clone, Copy, PartialEq)]
enum Thinking {
    /// Faint, as terminals show ANSI dim text.
    Dimmed,
    /// As it is (output to a pipe or file).
    Plain,
    Hidden,
}

impl Chat {
    /// Answers `input`, streaming the reply to stdout; the turn is kept only when it worked.
    fn reply(&mut self, input: String) -> Result<(), String> {
        self.turns.push(("user", input));
        let prompt = match self.prompt() {
            Ok(p) => p,
            Err(e) => {
                self.turns.pop();
                return Err(e);
            }
        };
        let (prompt, opened) = prompt;
        match self.generate(&prompt, opened) {
            Ok(text) => {
                self.turns.push(("assistant", text));
                Ok(())
            }
            Err(e) => {
                self.turns.pop();
                Err(e)
            }
        }
    }

    /// The conversation rendered and tokenized; the oldest turns give way when it and a
    /// reply would not fit the context.
    /// Also says whether the prompt leaves the model inside its thinking.
    fn prompt(&mut self) -> Result<(Vec<TokenId>, bool), String> {
        let room = self
            .ctx
            .n_ctx()
            .saturating_sub(self.n_predict.min(self.ctx.n_ctx() / 2));
        loop {
            let mut messages = Vec::new();
            if let Some(system) = &self.system {
                messages.push(ChatMessage {
                    role: "system",
                    content: system,
                });
            }
            for (role, text) in &self.turns {
                messages.push(ChatMessage {
                    role,
                    content: text,
                });
            }
            let text = self
                .template
                .render(&messages, true)
                .map_err(|e| e.to_string())?;
            let tokens = self.model.tokenizer.encode(&text, true, true);
            if tokens.len() <= room {
                let syntax = self.template.reasoning_syntax();
                let opened = syntax.is_some_and(|s| s.prompt_opens_reasoning(&text));
                return Ok((tokens, opened));
            }
            if self.turns.len() <= 1 {
                return Err(format!(
                    "the message needs {} tokens; the context holds {room} besides the reply",
                    tokens.len()
                ));
            }
            self.turns.drain(..2.min(self.turns.len() - 1));
        }
    }

    /// Evaluates what the cache lacks of `prompt`, then samples and prints the reply; returns
    /// its answer (the thinking printed apart, dimmed or not at all).
    fn generate(&mut self, prompt: &[TokenId], opened: bool) -> Result<String, String> {
        let held = self.ctx.seq_tokens(0);
        let shared = held.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // At least the last prompt token is evaluated again: its logits start the reply.
        let keep = self.ctx.truncate(shared.min(prompt.len() - 1));
        let mut logits = self
            .ctx
            .eval(&prompt[keep..], Logits::Last)
            .map_err(|e| e.to_string())?;
        let tokenizer = &self.model.tokenizer;
        let syntax = self.template.reasoning_syntax();
        let mut decoder = StreamDecoder::after_prompt(tokenizer)
            .showing(&syntax.map_or_else(Vec::new, |s| s.marker_tokens(tokenizer)));
        let mut printer = ReplyPrinter {
            splitter: syntax.map(|s| ReasoningSplitter::new(s, opened, None)),
            thinking: self.thinking,
            thought: false,
            answer: String::new(),
        };
        let mut budget = syntax.zip(self.budget).map(|(syntax, max_tokens)| {
            BudgetState::new(&ThinkingBudget {
                syntax: syntax.clone(),
                opened,
                max_tokens,
                close: tokenizer.encode(syntax.closing_markup(), false, true),
            })
        });
        let mut out = std::io::stdout().lock();
        for _ in 0..self.n_predict {
            let token = match budget.as_mut().and_then(BudgetState::forced) {
                Some(forced) => forced,
                None => self.sampler.sample(&logits),
            };
            self.sampler.accept(token);
            if self.model.tokenizer.is_eog(token) {
                break;
            }
            let piece = decoder.push(token);
            if let Some(b) = &mut budget {
                b.advance(&piece);
            }
            printer.print(&mut out, &piece, false);
            if self.ctx.n_past() >= self.ctx.n_ctx() {
                break;
            }
            logits = self
                .ctx
                .eval(&[token], Logits::Last)
                .map_err(|e| e.to_string())?;
        }
        let rest = decoder.finish();
        printer.print(&mut out, &rest, true);
        let _ = writeln!(out);
        Ok(printer.answer)
    }
}

/// Prints a reply as it streams: the answer as it is, the thinking as `thinking` says.
struct ReplyPrinter {
    /// With a thinking model: its reply split into thinking and answer.
    splitter: Option<ReasoningSplitter>,
    thinking: Thinking,
    /// Thinking was printed (a blank line then parts it from the answer).
    thought: bool,
    /// The answer as printed (each token after the prompt keeps its leading space).
    answer: String,
}

impl ReplyPrinter {
    fn print(&mut self, out: &mut impl Write, text: &str, last: bool) {
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

/// The next message: one line, lines joined by a trailing `\`, or a `"""` block. `None` at
/// the end of input.
fn read_message(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    interactive: bool,
) -> Option<String> {
    let prompt = |more: bool| {
        if interactive {
            print!("{}", if more { "... " } else { ">>> " });
            let _ = std::io::stdout().flush();
        }
    };
    prompt(false);
    let first = lines.next()?.ok()?;
    if first.trim() == "\"\"\"" {
        let mut block = Vec::new();
        loop {
            prompt(true);
            let line = lines.next()?.ok()?;
            if line.trim() == "\"\"\"" {
                return Some(block.join("\n"));
            }
            block.push(line);
        }
    }
    let mut message = first;
    while let Some(stripped) = message.strip_suffix('\\') {
        message = stripped.to_string();
        prompt(true);
        match lines.next() {
            Some(Ok(line)) => {
                message.push('\n');
                message.push_str(&line);
            }
            _ => break,
        }
    }
    Some(message)
}
