//! `kolibri chat`: an interactive conversation through the model's chat template, what
//! `ollama run` gives. Replies stream as they are generated; each turn re-reads only the
//! tokens the cache does not hold yet. Commands: `/reset` forgets the conversation, `/exit`
//! (or end of input) leaves, `/help`; a line ending in `\` continues on the next line, and a
//! `"""` line opens and closes a block of many lines.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

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
                "-s",
                "--system",
                "-n",
                "--n-predict",
                "-t",
                "--threads",
            ][..],
            &["-c", "--ctx-size"],
            &crate::SAMPLING_FLAGS,
            &crate::KV_TYPE_FLAGS,
        ]
        .concat(),
        &crate::LOAD_SWITCHES,
    )?;
    let path = a.require(&["-m", "--model"])?;
    let n_predict: usize = a.parse_or(&["-n", "--n-predict"], 1024)?;
    let sampler_params = crate::sampler_params(&a)?;
    let model = Arc::new(crate::load_model(path, &a)?);
    let template = ChatTemplate::from_model(&model).map_err(|e| e.to_string())?;
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
    let mut chat = Chat {
        model,
        template,
        ctx,
        sampler: Sampler::new(sampler_params).map_err(|e| e.to_string())?,
        system: a.get(&["-s", "--system"]).map(str::to_owned),
        turns: Vec::new(),
        n_predict,
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
    /// (role, text) of every turn so far.
    turns: Vec<(&'static str, String)>,
    n_predict: usize,
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
        match self.generate(&prompt) {
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
    fn prompt(&mut self) -> Result<Vec<TokenId>, String> {
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
                return Ok(tokens);
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

    /// Evaluates what the cache lacks of `prompt`, then samples and prints the reply.
    fn generate(&mut self, prompt: &[TokenId]) -> Result<String, String> {
        let held = self.ctx.seq_tokens(0);
        let shared = held.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // At least the last prompt token is evaluated again: its logits start the reply.
        let keep = self.ctx.truncate(shared.min(prompt.len() - 1));
        let mut logits = self
            .ctx
            .eval(&prompt[keep..], Logits::Last)
            .map_err(|e| e.to_string())?;
        let mut decoder = StreamDecoder::after_prompt(&self.model.tokenizer);
        let mut out = std::io::stdout().lock();
        // The reply as printed (each token after the prompt keeps its leading space).
        let mut reply = String::new();
        for _ in 0..self.n_predict {
            let token = self.sampler.sample(&logits);
            self.sampler.accept(token);
            if self.model.tokenizer.is_eog(token) {
                break;
            }
            let piece = decoder.push(token);
            let _ = out.write_all(piece.as_bytes());
            reply.push_str(&piece);
            let _ = out.flush();
            if self.ctx.n_past() >= self.ctx.n_ctx() {
                break;
            }
            logits = self
                .ctx
                .eval(&[token], Logits::Last)
                .map_err(|e| e.to_string())?;
        }
        let rest = decoder.finish();
        let _ = writeln!(out, "{rest}");
        reply.push_str(&rest);
        Ok(reply)
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
