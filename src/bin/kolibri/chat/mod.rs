//! `kolibri chat`: an interactive conversation through the model's chat template, what
//! `ollama run` and `llama-cli` give. Replies stream as they are generated; each turn re-reads
//! only the tokens the cache does not hold yet. Line editing and history on a terminal
//! ([`input`]), slash commands ([`commands`]), conversations saved and loaded as JSON
//! ([`kolibri::chat::conversation`]); Ctrl-C stops a reply and keeps the conversation.

mod commands;
mod input;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kolibri::batching::{BudgetState, ThinkingBudget};
use kolibri::chat::reasoning::ReasoningSplitter;
use kolibri::chat::{ChatMessage, ChatTemplate};
use kolibri::model::{Context, ContextParams, Logits, Model};
use kolibri::sampling::{Sampler, SamplerParams};
use kolibri::tokenizer::{StreamDecoder, TokenId};

use crate::args::Args;
use crate::reply::{ReplyPrinter, Thinking};
use commands::{Command, Setting};
use input::{Input, Reader};
use kolibri::chat::conversation::Conversation;

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
                "--seed",
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
    let n_predict = crate::n_predict(&a, 1024)?;
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
    let mut chat = Chat {
        sampler: new_sampler(&model, sampler_params.clone())?,
        sampler_params,
        model,
        template,
        ctx,
        conversation: Conversation {
            system: a.get(&["--system"]).map(str::to_owned),
            turns: Vec::new(),
        },
        n_predict,
        budget: usize::try_from(budget).ok(),
        thinking: Thinking::for_stdout(a.has("--hide-thinking")),
        verbose: false,
    };
    let mut reader = Reader::new();
    if reader.interactive() {
        eprintln!("kolibri chat: /help for commands");
    }
    stop_replies_on_ctrl_c();
    let mut interrupted = false;
    loop {
        let input = match reader.message() {
            Input::End => break,
            Input::Interrupted if interrupted => break,
            Input::Interrupted => {
                eprintln!("(Ctrl-C again, Ctrl-D or /exit to leave)");
                interrupted = true;
                continue;
            }
            Input::Message(m) => m,
        };
        interrupted = false;
        if input.trim().is_empty() {
            continue;
        }
        match commands::parse(&input) {
            None => {
                if let Err(e) = chat.reply(input) {
                    eprintln!("error: {e}");
                }
            }
            Some(Command::Exit) => break,
            Some(command) => chat.obey(command),
        }
    }
    Ok(())
}

/// Set while a reply is generated; Ctrl-C then sets [`STOP`] instead of ending the program.
static GENERATING: AtomicBool = AtomicBool::new(false);
/// Ctrl-C asked the reply being generated to stop.
static STOP: AtomicBool = AtomicBool::new(false);

/// Ctrl-C (SIGINT) stops the reply being generated; at other times it ends the program as
/// usual (the line editor reads Ctrl-C at the prompt itself, as a key).
fn stop_replies_on_ctrl_c() {
    #[cfg(feature = "cli")]
    if let Err(e) = ctrlc::set_handler(|| {
        if GENERATING.load(Ordering::SeqCst) {
            STOP.store(true, Ordering::SeqCst);
        } else {
            std::process::exit(130);
        }
    }) {
        eprintln!("note: Ctrl-C will end the program, not a reply: {e}");
    }
}

/// A sampler with `params` that never picks the model's suppressed tokens.
fn new_sampler(model: &Model, params: SamplerParams) -> Result<Sampler, String> {
    let mut sampler = Sampler::new(params).map_err(|e| e.to_string())?;
    sampler.suppress(model.tokenizer.suppressed());
    Ok(sampler)
}

struct Chat {
    model: Arc<Model>,
    template: ChatTemplate,
    ctx: Context,
    sampler: Sampler,
    sampler_params: SamplerParams,
    /// The system prompt and every turn so far; a reply's thinking is not kept.
    conversation: Conversation,
    n_predict: usize,
    /// Most tokens a reply thinks before its thinking is closed for it.
    budget: Option<usize>,
    thinking: Thinking,
    /// Statistics after each reply.
    verbose: bool,
}

impl Chat {
    /// Carries out a slash command (other than `/exit`), saying what it did.
    fn obey(&mut self, command: Command) {
        match command {
            Command::Exit => {}
            Command::Help => print!("{}", commands::HELP),
            Command::Clear => {
                self.conversation.turns.clear();
                println!("(conversation forgotten)");
            }
            Command::Show => {
                let p = &self.sampler_params;
                let system = self.conversation.system.as_deref().unwrap_or("(none)");
                println!("system: {system}");
                println!(
                    "temperature {} top_k {} top_p {} min_p {} seed {} num_predict {}",
                    p.temperature, p.top_k, p.top_p, p.min_p, p.seed, self.n_predict
                );
                let held = self.ctx.seq_tokens(0).len();
                let turns = self.conversation.turns.len();
                println!(
                    "{turns} turns, {held} of {} context tokens",
                    self.ctx.n_ctx()
                );
            }
            Command::Set(setting) => match self.set(setting) {
                Ok(said) => println!("({said})"),
                Err(e) => eprintln!("error: {e}"),
            },
            Command::Save(file) => match std::fs::write(&file, self.conversation.to_json()) {
                Ok(()) => println!("(conversation saved to {file})"),
                Err(e) => eprintln!("error: /save {file}: {e}"),
            },
            Command::Load(file) => {
                let loaded = std::fs::read_to_string(&file)
                    .map_err(|e| e.to_string())
                    .and_then(|text| Conversation::from_json(&text));
                match loaded {
                    Ok(conversation) => {
                        println!("(loaded {} turns from {file})", conversation.turns.len());
                        self.conversation = conversation;
                    }
                    Err(e) => eprintln!("error: /load {file}: {e}"),
                }
            }
            Command::Invalid(message) => println!("{message}"),
        }
    }

    /// Applies a `/set`; returns what changed.
    fn set(&mut self, setting: Setting) -> Result<String, String> {
        let mut params = self.sampler_params.clone();
        let said = match setting {
            Setting::System(text) => {
                let said = match &text {
                    Some(_) => "system prompt set",
                    None => "system prompt removed",
                };
                self.conversation.system = text;
                return Ok(said.into());
            }
            Setting::Verbose(on) => {
                self.verbose = on;
                return Ok(format!("statistics {}", if on { "on" } else { "off" }));
            }
            Setting::NPredict(n) => {
                self.n_predict = n;
                return Ok(format!("num_predict {n}"));
            }
            Setting::Temperature(t) => {
                params.temperature = t;
                format!("temperature {t}")
            }
            Setting::TopK(k) => {
                params.top_k = k;
                format!("top_k {k}")
            }
            Setting::TopP(p) => {
                params.top_p = p;
                format!("top_p {p}")
            }
            Setting::MinP(p) => {
                params.min_p = p;
                format!("min_p {p}")
            }
            Setting::Seed(seed) => {
                params.seed = seed;
                format!("seed {seed}")
            }
        };
        self.sampler = new_sampler(&self.model, params.clone())?;
        self.sampler_params = params;
        Ok(said)
    }

    /// Answers `input`, streaming the reply to stdout; the turn is kept only when it worked.
    fn reply(&mut self, input: String) -> Result<(), String> {
        self.conversation.turns.push(("user", input));
        let prompt = match self.prompt() {
            Ok(p) => p,
            Err(e) => {
                self.conversation.turns.pop();
                return Err(e);
            }
        };
        let (prompt, opened) = prompt;
        match self.generate(&prompt, opened) {
            Ok(text) => {
                self.conversation.turns.push(("assistant", text));
                Ok(())
            }
            Err(e) => {
                self.conversation.turns.pop();
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
            if let Some(system) = &self.conversation.system {
                messages.push(ChatMessage {
                    role: "system",
                    content: system,
                });
            }
            for (role, text) in &self.conversation.turns {
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
            if self.conversation.turns.len() <= 1 {
                return Err(format!(
                    "the message needs {} tokens; the context holds {room} besides the reply",
                    tokens.len()
                ));
            }
            self.conversation
                .turns
                .drain(..2.min(self.conversation.turns.len() - 1));
        }
    }

    /// Evaluates what the cache lacks of `prompt`, then samples and prints the reply; returns
    /// its answer (the thinking printed apart, dimmed or not at all). Ctrl-C ends the reply
    /// where it is, and what was written is kept.
    fn generate(&mut self, prompt: &[TokenId], opened: bool) -> Result<String, String> {
        let t_start = Instant::now();
        let held = self.ctx.seq_tokens(0);
        let shared = held.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // At least the last prompt token is evaluated again: its logits start the reply.
        let keep = self.ctx.truncate(shared.min(prompt.len() - 1));
        let _generating = Generating::start();
        let mut logits = self
            .ctx
            .eval(&prompt[keep..], Logits::Last)
            .map_err(|e| e.to_string())?;
        let tokenizer = &self.model.tokenizer;
        let syntax = self.template.reasoning_syntax();
        let mut decoder = StreamDecoder::after_prompt(tokenizer)
            .showing(&syntax.map_or_else(Vec::new, |s| s.marker_tokens(tokenizer)));
        let splitter = syntax.map(|s| ReasoningSplitter::new(s, opened, None));
        let mut printer = ReplyPrinter::new(splitter, self.thinking);
        let mut budget = syntax.zip(self.budget).map(|(syntax, max_tokens)| {
            BudgetState::new(&ThinkingBudget {
                syntax: syntax.clone(),
                opened,
                max_tokens,
                close: tokenizer.encode(syntax.closing_markup(), false, true),
            })
        });
        let mut out = std::io::stdout().lock();
        let mut first_token = None;
        let mut n_generated = 0;
        let mut stopped = false;
        while n_generated < self.n_predict {
            if STOP.swap(false, Ordering::SeqCst) {
                stopped = true;
                break;
            }
            let token = match budget.as_mut().and_then(BudgetState::forced) {
                Some(forced) => forced,
                None => self.sampler.sample(&logits),
            };
            first_token.get_or_insert_with(|| t_start.elapsed());
            n_generated += 1;
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
        if stopped {
            let _ = writeln!(out, "(stopped)");
        }
        if self.verbose {
            let stats = ReplyStats {
                prompt_tokens: prompt.len() - keep,
                cached_tokens: keep,
                generated: n_generated,
                first_token: first_token.unwrap_or_default().as_secs_f64(),
                total: t_start.elapsed().as_secs_f64(),
            };
            let _ = match self.thinking {
                Thinking::Dimmed => writeln!(out, "\x1b[2m{stats}\x1b[0m"),
                _ => writeln!(out, "{stats}"),
            };
        }
        Ok(printer.into_answer())
    }
}

/// Marks a reply as being generated (Ctrl-C stops it) for as long as it lives.
struct Generating;

impl Generating {
    fn start() -> Generating {
        STOP.store(false, Ordering::SeqCst);
        GENERATING.store(true, Ordering::SeqCst);
        Generating
    }
}

impl Drop for Generating {
    fn drop(&mut self) {
        GENERATING.store(false, Ordering::SeqCst);
    }
}

/// What `/set verbose` prints after a reply.
struct ReplyStats {
    prompt_tokens: usize,
    cached_tokens: usize,
    generated: usize,
    /// Seconds from the message to its reply's first token, and to its end.
    first_token: f64,
    total: f64,
}

impl std::fmt::Display for ReplyStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let generating = (self.total - self.first_token).max(1e-9);
        let rate = self.generated.saturating_sub(1) as f64 / generating;
        write!(
            f,
            "prompt {} tokens ({} cached), first token after {:.0} ms; {} tokens at {rate:.1} tokens/s",
            self.prompt_tokens,
            self.cached_tokens,
            self.first_token * 1e3,
            self.generated
        )
    }
}
