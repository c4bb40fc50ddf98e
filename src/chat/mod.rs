//! Chat templates: the Jinja program a GGUF carries in `tokenizer.chat_template`, rendered the
//! way Hugging Face's `apply_chat_template` does (trim_blocks, lstrip_blocks, `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token`, `raise_exception`, `strftime_now`,
//! Python string methods such as `.strip()`), so a model is prompted as it was trained.

mod clock;
pub use clock::format_utc;
pub mod conversation;
mod markup;
mod namespaces;
mod python_compat;
pub mod reasoning;
mod rewrite;

use std::fmt;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{context, Environment, Error, ErrorKind, Value};

use crate::model::Model;
use rewrite::Rewritten;

/// Metadata key holding a model's default template.
pub const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// One message of a conversation.
#[derive(Clone, Copy, Debug)]
pub struct ChatMessage<'a> {
    /// `system`, `user`, `assistant`, `tool`, ... (passed to the template as is).
    pub role: &'a str,
    pub content: &'a str,
}

#[derive(Debug)]
pub enum ChatTemplateError {
    /// The model's GGUF has no `tokenizer.chat_template`.
    NoTemplate,
    /// The template is not valid Jinja.
    Syntax(String),
    /// The template failed while rendering (it may reject a conversation on purpose through
    /// `raise_exception`, e.g. roles that do not alternate).
    Render(String),
}

impl fmt::Display for ChatTemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatTemplateError::NoTemplate => write!(
                f,
                "the model has no chat template ({TEMPLATE_KEY} is absent); pass one explicitly"
            ),
            ChatTemplateError::Syntax(e) => write!(f, "chat template does not parse: {e}"),
            ChatTemplateError::Render(e) => write!(f, "chat template failed: {e}"),
        }
    }
}

impl std::error::Error for ChatTemplateError {}

/// A compiled chat template plus the special-token strings it may reference.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// How the replies it prompts mark their thinking, as its source shows.
    reasoning: Option<reasoning::ReasoningSyntax>,
}

const NAME: &str = "chat";

/// minijinja's fuel per render: about one unit per instruction or 64 bytes made, so this
/// bounds a render to roughly a tenth of a second and 128 MiB. Real templates over long
/// conversations with tools use a few tens of thousands.
const RENDER_FUEL: u64 = 2_000_000;

/// Nested macro calls and includes a render may make (minijinja allows at most 500).
const RECURSION_LIMIT: usize = 100;

impl ChatTemplate {
    /// Compiles `source` (Jinja). `bos_token`/`eos_token` are the strings the template sees.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, ChatTemplateError> {
        Self::compile(source, bos_token, eos_token, false)
    }

    /// For tests: compiles with every `+` and `~` rewritten the way templates that make
    /// markup are, which must change nothing in templates that do not.
    #[doc(hidden)]
    pub fn with_operators_rewritten(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<Self, ChatTemplateError> {
        Self::compile(source, bos_token, eos_token, true)
    }

    fn compile(
        source: &str,
        bos_token: &str,
        eos_token: &str,
        always_rewrite: bool,
    ) -> Result<Self, ChatTemplateError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        env.set_syntax(syntax.clone());
        // Templates are code from the model file: bound what one render may do.
        env.set_fuel(Some(RENDER_FUEL));
        env.set_recursion_limit(RECURSION_LIMIT);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", clock::strftime_now);
        env.add_filter("tojson", python_compat::tojson);
        env.add_test("iterable", python_compat::is_iterable);
        markup::register(&mut env);
        namespaces::register(&mut env);
        let reasoning = reasoning::ReasoningSyntax::detect(source);
        let source = python_compat::without_generation_blocks(source);
        let source = match rewrite::rewrite(&source, &syntax, always_rewrite) {
            Rewritten::Unchanged => source,
            Rewritten::Source(rewritten) => rewritten,
            Rewritten::Unsupported(why) => return Err(ChatTemplateError::Syntax(why)),
        };
        env.add_template_owned(NAME, source)
            .map_err(|e| ChatTemplateError::Syntax(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
            reasoning,
        })
    }

    /// The template stored in the model's GGUF, with the model's BOS/EOS token texts.
    pub fn from_model(model: &Model) -> Result<Self, ChatTemplateError> {
        let source = model
            .gguf
            .get_str(TEMPLATE_KEY)
            .ok_or(ChatTemplateError::NoTemplate)?;
        Self::with_model_tokens(source, model)
    }

    /// Compiles `source` with the model's BOS/EOS token texts.
    pub fn with_model_tokens(source: &str, model: &Model) -> Result<Self, ChatTemplateError> {
        let tok = &model.tokenizer;
        let text = |id: Option<u32>| id.and_then(|id| tok.token_text(id)).unwrap_or("");
        Self::new(source, text(tok.bos()), text(tok.eos()))
    }

    /// Renders a conversation; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| context! { role => m.role, content => m.content })
            .collect();
        self.render_values(
            Value::from(messages),
            Value::from(()),
            add_generation_prompt,
            Value::from(()),
        )
    }

    /// Renders a conversation given as JSON, the shape Hugging Face templates read: each
    /// message with `role`, `content` and, as the conversation has them, `tool_calls` (each
    /// `{"type": "function", "function": {"name", "arguments": {...}}}`), `tool_call_id` and
    /// `name`; `tools` is the list of tool definitions (`{"type": "function", "function":
    /// {"name", "description", "parameters"}}`), `None` when there are none (the template
    /// then sees `tools` as none, as transformers passes it).
    pub fn render_json(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        self.render_json_with(messages, tools, add_generation_prompt, None)
    }

    /// [`ChatTemplate::render_json`] with further variables for the template (a request's
    /// `chat_template_kwargs`, such as `enable_thinking`); they cannot replace the standard
    /// ones.
    pub fn render_json_with(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        kwargs: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<String, ChatTemplateError> {
        let tools = tools.map_or(Value::from(()), |t| Value::from(Serde(t)));
        let extra = kwargs.map_or(Value::from(()), |k| Value::from(Serde(k)));
        self.render_values(
            Value::from(Serde(messages)),
            tools,
            add_generation_prompt,
            extra,
        )
    }

    /// How the replies this template prompts mark their thinking (`None`: they do not).
    pub fn reasoning_syntax(&self) -> Option<&reasoning::ReasoningSyntax> {
        self.reasoning.as_ref()
    }

    fn render_values(
        &self,
        messages: Value,
        tools: Value,
        add_generation_prompt: bool,
        extra: Value,
    ) -> Result<String, ChatTemplateError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatTemplateError::Render(describe(&e)))?;
        template
            .render(context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token.as_str(),
                eos_token => self.eos_token.as_str(),
                ..extra
            })
            .map_err(|e| ChatTemplateError::Render(describe(&e)))
    }
}

/// `raise_exception(message)`: templates use it to reject conversations they cannot format.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// The error and its source chain on one line (minijinja puts the template line in `detail`).
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests;
