//! A request's reply markup as the scheduler sees it: the control tokens its text must show
//! (so the server can split thinking from the answer) and a thinking budget, which ends the
//! thinking by forcing its closing markup once the reply has thought for that many tokens.

use std::collections::VecDeque;

use crate::chat::reasoning::{ReasoningSplitter, ReasoningSyntax};
use crate::tokenizer::TokenId;

/// How a reply marks its thinking.
#[derive(Clone, Debug, Default)]
pub struct ReplyMarkup {
    /// Control tokens written as text: the markup the reply is split by.
    pub shown_tokens: Vec<TokenId>,
    pub budget: Option<ThinkingBudget>,
}

/// At most `max_tokens` tokens of thinking; then `close` is forced.
#[derive(Clone, Debug)]
pub struct ThinkingBudget {
    pub syntax: ReasoningSyntax,
    /// The prompt left the model inside its thinking.
    pub opened: bool,
    pub max_tokens: usize,
    /// The tokens that end the thinking (`</think>`; Harmony: through the final channel's
    /// header).
    pub close: Vec<TokenId>,
}

/// A generating reply's budget: where the reply is, and what is being forced.
pub struct BudgetState {
    splitter: ReasoningSplitter,
    max_tokens: usize,
    close: Vec<TokenId>,
    /// Tokens of thinking so far.
    spent: usize,
    forcing: VecDeque<TokenId>,
}

impl BudgetState {
    pub fn new(b: &ThinkingBudget) -> BudgetState {
        BudgetState {
            splitter: ReasoningSplitter::new(&b.syntax, b.opened, None),
            max_tokens: b.max_tokens,
            close: b.close.clone(),
            spent: 0,
            forcing: VecDeque::new(),
        }
    }

    /// The token to take instead of sampling, while the close is forced.
    pub fn forced(&mut self) -> Option<TokenId> {
        if self.forcing.is_empty() && self.splitter.in_reasoning() && self.spent >= self.max_tokens
        {
            self.forcing.extend(&self.close);
        }
        self.forcing.pop_front()
    }

    /// Follows the reply past one token and the text it made.
    pub fn advance(&mut self, text: &str) {
        if self.splitter.in_reasoning() {
            self.spent += 1;
        }
        self.splitter.push(text);
    }
}
