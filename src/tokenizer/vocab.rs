//! Vocabulary loaded from GGUF metadata: token texts, scores, types, special ids and flags.
//!
//! Defaults and overrides follow llama.cpp's `llama_vocab::load`, so that a file tokenizes the
//! same way in both engines.

use super::error::TokenizerError;
use super::fast_hash::IdTable;
use super::TokenId;
use crate::gguf::{Array, GgufFile};

/// Which tokenization algorithm the vocabulary uses (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModelKind {
    /// SentencePiece-style, `llama`.
    Spm,
    /// GPT-2 byte-level BPE, `gpt2`.
    Bpe,
    /// BERT's WordPiece, `bert`.
    WordPiece,
}

/// GGUF token types (`tokenizer.ggml.token_type`), numbered as there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

impl TokenKind {
    const ALL: [TokenKind; 7] = [
        TokenKind::Undefined,
        TokenKind::Normal,
        TokenKind::Unknown,
        TokenKind::Control,
        TokenKind::UserDefined,
        TokenKind::Unused,
        TokenKind::Byte,
    ];

    fn from_gguf(v: i64) -> TokenKind {
        usize::try_from(v)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
            .unwrap_or(TokenKind::Undefined)
    }
}

/// A token's kind and strip flags in one byte (a vocabulary has up to 262k of them); the text
/// and score are [`Vocab::text`] and [`Vocab::score`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokenData(u8);

impl TokenData {
    const KIND: u8 = 0b111;
    const LSTRIP: u8 = 1 << 3;
    const RSTRIP: u8 = 1 << 4;

    fn new(kind: TokenKind) -> TokenData {
        TokenData(kind as u8)
    }

    pub fn kind(self) -> TokenKind {
        TokenKind::ALL[(self.0 & Self::KIND) as usize]
    }

    fn set_kind(&mut self, kind: TokenKind) {
        self.0 = (self.0 & !Self::KIND) | kind as u8;
    }

    /// Strip whitespace to the left of this token when it is matched in text.
    pub fn lstrip(self) -> bool {
        self.0 & Self::LSTRIP != 0
    }

    /// Strip whitespace to the right of this token when it is matched in text.
    pub fn rstrip(self) -> bool {
        self.0 & Self::RSTRIP != 0
    }

    fn set_rstrip(&mut self, on: bool) {
        self.0 = (self.0 & !Self::RSTRIP) | if on { Self::RSTRIP } else { 0 };
    }
}

#[derive(Debug)]
pub(crate) struct Vocab {
    pub kind: ModelKind,
    /// `tokenizer.ggml.pre`, empty when absent.
    pub pre: String,
    pub tokens: Vec<TokenData>,
    /// The token texts: the GGUF's own packed array, shared rather than copied (a
    /// 262k-token vocabulary held as a `String` each costs about 17 MB).
    texts: Array,
    /// Scores as packed f32 (shared with the GGUF where stored so); `None`: all 0.
    scores: Option<Array>,
    /// Text to id; on duplicate texts the last id wins, as in llama.cpp.
    pub token_to_id: IdTable,
    pub bos: Option<TokenId>,
    pub eos: Option<TokenId>,
    pub unk: Option<TokenId>,
    /// Separator, closing a WordPiece encoding (BERT's `[SEP]`).
    pub sep: Option<TokenId>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    pub add_space_prefix: bool,
    /// End-of-generation ids, sorted.
    pub eog: Vec<TokenId>,
    /// Role tokens beyond BOS/EOS/UNK/SEP (end of turn, fill-in-the-middle, padding), from
    /// metadata or found by text as llama.cpp finds them.
    pub specials: SpecialIds,
    /// Tokens recognised verbatim in text (control, user-defined, unknown), longest text first.
    pub special_by_len: Vec<TokenId>,
    /// BPE only: a word that is itself a token skips merging (llama3-style vocabularies).
    pub ignore_merges: bool,
    /// BPE only, SentencePiece-style (Gemma 4, Sarvam): spaces are written `▁`, words merge
    /// as raw UTF-8 instead of GPT-2's byte map, and bytes without a token fall back to
    /// `<0xXX>` tokens.
    pub escaped_spaces: bool,
    /// BPE only: a word of line feeds that is itself a token stays whole (Gemma 4).
    pub whole_newline_runs: bool,
    /// Tokens the model must never be sampled to produce (`tokenizer.ggml.suppress_tokens`,
    /// Gemma 4's generation config), sorted.
    pub suppressed: Vec<TokenId>,
}

/// Special token ids a vocabulary may name besides BOS, EOS, UNK and SEP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub eot: Option<TokenId>,
    pub eom: Option<TokenId>,
    pub fim_pre: Option<TokenId>,
    pub fim_suf: Option<TokenId>,
    pub fim_mid: Option<TokenId>,
    pub fim_pad: Option<TokenId>,
    pub fim_rep: Option<TokenId>,
    pub fim_sep: Option<TokenId>,
    pub pad: Option<TokenId>,
}

pub(crate) const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_SCORES: &str = "tokenizer.ggml.scores";
const KEY_TYPES: &str = "tokenizer.ggml.token_type";

/// Texts llama.cpp treats as end-of-generation wherever they appear in a vocabulary.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// Texts llama.cpp uses to find special ids that metadata does not name. Found tokens become
/// CONTROL, which hides them in output and makes them parse as special.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\u{ff5c}fim\u{2581}begin\u{ff5c}>",
    "<PRE>",
    "\u{2581}<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\u{ff5c}fim\u{2581}hole\u{ff5c}>",
    "<SUF>",
    "\u{2581}<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\u{ff5c}fim\u{2581}end\u{ff5c}>",
    "<MID>",
    "\u{2581}<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// gpt-oss markers llama.cpp always renders (forced USER_DEFINED).
const ALWAYS_RENDERED_TEXTS: &[&str] =
    &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

impl Vocab {
    pub fn from_gguf(gguf: &GgufFile) -> Result<Vocab, TokenizerError> {
        let model = gguf
            .get(KEY_MODEL)
            .ok_or(TokenizerError::MissingKey(KEY_MODEL))?
            .as_str()
            .ok_or_else(|| bad(KEY_MODEL, "not a string"))?;
        let kind = match model {
            "llama" => ModelKind::Spm,
            "gpt2" | "gemma4" => ModelKind::Bpe,
            "bert" => ModelKind::WordPiece,
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let pre = match gguf.get(KEY_PRE) {
            // Gemma 4's tokenizer model implies its pre-tokenizer, whatever the key says.
            _ if model == "gemma4" => "gemma4",
            Some(v) => v.as_str().ok_or_else(|| bad(KEY_PRE, "not a string"))?,
            None => "",
        };
        let (texts, scores, tokens) = load_tokens(gguf)?;
        let n = tokens.len();

        let mut token_to_id = IdTable::with_capacity(n);
        let text_of = |id: TokenId| texts.str(id as usize).unwrap_or_default();
        for id in 0..n as TokenId {
            // llama.cpp renames empty pieces; they can never match text, so leave them out.
            let text = text_of(id);
            if !text.is_empty() {
                token_to_id.insert(text, id, text_of);
            }
        }

        let mut vocab = Vocab {
            kind,
            pre: pre.to_string(),
            tokens,
            texts,
            scores,
            token_to_id,
            bos: None,
            eos: None,
            unk: None,
            sep: None,
            add_bos: false,
            add_eos: false,
            add_sep: false,
            add_space_prefix: false,
            eog: Vec::new(),
            specials: SpecialIds::default(),
            special_by_len: Vec::new(),
            ignore_merges: false,
            escaped_spaces: false,
            whole_newline_runs: false,
            suppressed: suppressed_tokens(gguf, n)?,
        };
        vocab.apply_model_defaults(model);
        vocab.apply_flags(gguf)?;
        vocab.bos = special_id(gguf, "tokenizer.ggml.bos_token_id", vocab.bos, n)?;
        vocab.eos = special_id(gguf, "tokenizer.ggml.eos_token_id", vocab.eos, n)?;
        vocab.unk = special_id(gguf, "tokenizer.ggml.unknown_token_id", vocab.unk, n)?;
        // The key's misspelling is llama.cpp's.
        vocab.sep = special_id(gguf, "tokenizer.ggml.seperator_token_id", vocab.sep, n)?;
        vocab.collect_eog(gguf)?;
        vocab.apply_name_rules(gguf);
        vocab.collect_special();
        Ok(vocab)
    }

    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// Length of the token list in `gguf` (0 where it is missing or not an array).
    pub fn declared_len(gguf: &GgufFile) -> usize {
        gguf.get(KEY_TOKENS)
            .and_then(|v| v.as_array())
            .map_or(0, |a| a.len())
    }

    pub fn token(&self, id: TokenId) -> Option<TokenData> {
        self.tokens.get(id as usize).copied()
    }

    /// Token `id`'s text ("" past the end).
    pub fn text(&self, id: TokenId) -> &str {
        // Every element was checked to be a string when the vocabulary was loaded.
        self.texts.str(id as usize).unwrap_or_default()
    }

    /// Token `id`'s score (0 past the end or without scores).
    pub fn score(&self, id: TokenId) -> f32 {
        self.scores
            .as_ref()
            .and_then(|a| a.f32(id as usize))
            .unwrap_or(0.0)
    }

    pub fn text_to_token(&self, text: &str) -> Option<TokenId> {
        self.token_to_id.get(text, |id| self.text(id))
    }

    /// Per-model defaults that llama.cpp applies before reading the flag keys.
    fn apply_model_defaults(&mut self, model: &str) {
        let n = self.tokens.len() as TokenId;
        let valid = |id: TokenId| (id < n).then_some(id);
        match self.kind {
            ModelKind::Spm => {
                self.bos = valid(1);
                self.eos = valid(2);
                self.unk = valid(0);
                self.add_bos = true;
                self.add_space_prefix = true;
            }
            // Gemma 4's special ids come from the metadata alone.
            ModelKind::Bpe if model == "gemma4" => self.apply_sentencepiece_style_bpe(),
            ModelKind::Bpe => {
                // GPT-2's <|endoftext|> id, llama.cpp's fallback for both.
                self.bos = valid(11);
                self.eos = valid(11);
                let llama3_family = matches!(
                    self.pre.as_str(),
                    "llama3"
                        | "llama-v3"
                        | "llama-bpe"
                        | "falcon3"
                        | "falcon-h1"
                        | "pixtral"
                        | "midm-2.0"
                        | "lfm2"
                        | "jina-v5-nano"
                );
                // Tekken (Mistral Nemo, Mistral 3) also takes whole words from the vocabulary
                // and opens with BOS.
                let tekken = self.pre == "tekken";
                self.ignore_merges = llama3_family || tekken;
                self.add_bos = llama3_family || tekken;
                self.apply_sentencepiece_style_bpe();
            }
            ModelKind::WordPiece => {
                // BERT's [CLS] opens, [SEP] closes; no EOS.
                self.bos = valid(101);
                self.unk = valid(100);
                self.sep = valid(102);
                self.add_bos = true;
                self.add_sep = true;
            }
        }
    }

    /// The BPE pre-tokenizers that escape spaces instead of byte-mapping them; Gemma 4's also
    /// keeps line-feed runs whole and always opens with BOS.
    fn apply_sentencepiece_style_bpe(&mut self) {
        let gemma4 = matches!(self.pre.as_str(), "gemma4" | "granite-embed-multi-311m");
        self.escaped_spaces = gemma4 || self.pre == "sarvam-moe";
        self.whole_newline_runs = gemma4;
    }

    fn apply_flags(&mut self, gguf: &GgufFile) -> Result<(), TokenizerError> {
        // llama.cpp's WordPiece encoder adds [CLS] and [SEP] whatever the flags say.
        if self.kind == ModelKind::WordPiece {
            return Ok(());
        }
        if let Some(v) = get_bool(gguf, "tokenizer.ggml.add_bos_token")? {
            self.add_bos = v;
        }
        if let Some(v) = get_bool(gguf, "tokenizer.ggml.add_eos_token")? {
            self.add_eos = v;
        }
        // Gemma 4 files that say otherwise still need BOS (llama.cpp overrides them too); its
        // pre-tokenizer is the one that keeps line-feed runs whole.
        if self.whole_newline_runs {
            self.add_bos = true;
        }
        // BPE never prefixes a space; the key only matters for SentencePiece vocabularies.
        if self.kind == ModelKind::Spm {
            if let Some(v) = get_bool(gguf, "tokenizer.ggml.add_space_prefix")? {
                self.add_space_prefix = v;
            }
        }
        Ok(())
    }

    /// End-of-generation set: metadata ids plus tokens recognised by text, with llama.cpp's
    /// model-specific exceptions.
    fn collect_eog(&mut self, gguf: &GgufFile) -> Result<(), TokenizerError> {
        let n = self.tokens.len();
        let id = |key| special_id(gguf, key, None, n);
        let eot = id("tokenizer.ggml.eot_token_id")?;
        let eom = id("tokenizer.ggml.eom_token_id")?;
        let fim_pre =
            id("tokenizer.ggml.fim_pre_token_id")?.or(id("tokenizer.ggml.prefix_token_id")?);
        let fim_suf =
            id("tokenizer.ggml.fim_suf_token_id")?.or(id("tokenizer.ggml.suffix_token_id")?);
        let fim_mid =
            id("tokenizer.ggml.fim_mid_token_id")?.or(id("tokenizer.ggml.middle_token_id")?);
        let fim_pad = id("tokenizer.ggml.fim_pad_token_id")?;
        let fim_rep = id("tokenizer.ggml.fim_rep_token_id")?;
        let fim_sep = id("tokenizer.ggml.fim_sep_token_id")?;

        let eot = eot.or_else(|| self.find_and_mark_control(EOT_TEXTS));
        let eom = eom.or_else(|| self.find_and_mark_control(EOM_TEXTS));
        // Only the CONTROL marking matters for prefix/suffix/middle.
        if fim_pre.is_none() {
            self.find_and_mark_control(FIM_PRE_TEXTS);
        }
        if fim_suf.is_none() {
            self.find_and_mark_control(FIM_SUF_TEXTS);
        }
        if fim_mid.is_none() {
            self.find_and_mark_control(FIM_MID_TEXTS);
        }
        let fim_pad = fim_pad.or_else(|| self.find_and_mark_control(FIM_PAD_TEXTS));
        let fim_rep = fim_rep.or_else(|| self.find_and_mark_control(FIM_REP_TEXTS));
        let fim_sep = fim_sep.or_else(|| self.find_and_mark_control(FIM_SEP_TEXTS));
        self.specials = SpecialIds {
            eot,
            eom,
            fim_pre: fim_pre.or_else(|| self.find(FIM_PRE_TEXTS)),
            fim_suf: fim_suf.or_else(|| self.find(FIM_SUF_TEXTS)),
            fim_mid: fim_mid.or_else(|| self.find(FIM_MID_TEXTS)),
            fim_pad,
            fim_rep,
            fim_sep,
            pad: id("tokenizer.ggml.padding_token_id")?,
        };

        let mut eog: Vec<TokenId> = [fim_pad, fim_rep, fim_sep].into_iter().flatten().collect();
        for text in EOG_TEXTS {
            if let Some(id) = self.text_to_token(text) {
                self.tokens[id as usize].set_kind(TokenKind::Control);
                eog.push(id);
            }
        }
        for text in ALWAYS_RENDERED_TEXTS {
            if let Some(id) = self.text_to_token(text) {
                self.tokens[id as usize].set_kind(TokenKind::UserDefined);
            }
        }
        eog.extend([self.eos, eot, eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        self.eog = eog;
        self.apply_eog_exceptions();
        Ok(())
    }

    /// Harmony-style vocabularies end turns with `<|return|>`/`<|call|>`, so `<|end|>` is
    /// not an end there; with `<|tool_response>` or PLaMo's marker, `</s>` is plain text.
    fn apply_eog_exceptions(&mut self) {
        let in_eog = |v: &Vocab, text: &str| {
            v.text_to_token(text)
                .filter(|id| v.eog.binary_search(id).is_ok())
        };
        let has = |v: &Vocab, text: &str| in_eog(v, text).is_some();
        let has_call = has(self, "<|call|>") || has(self, "<|calls|>");
        if let Some(end) = in_eog(self, "<|end|>") {
            if has_call && (has(self, "<|return|>") || has(self, "<|flush|>")) {
                self.eog.retain(|&id| id != end);
                self.tokens[end as usize].set_kind(TokenKind::UserDefined);
            }
        }
        if let Some(s) = in_eog(self, "</s>") {
            if has(self, "<|tool_response>") || has(self, "<|plamo:eos|>") {
                self.eog.retain(|&id| id != s);
                self.tokens[s as usize].set_kind(TokenKind::Normal);
            }
        }
    }

    /// First token whose text is in `texts`.
    fn find(&self, texts: &[&str]) -> Option<TokenId> {
        texts.iter().find_map(|t| self.text_to_token(t))
    }

    /// First token whose text is in `texts`, forced to CONTROL.
    fn find_and_mark_control(&mut self, texts: &[&str]) -> Option<TokenId> {
        let id = self.find(texts)?;
        self.tokens[id as usize].set_kind(TokenKind::Control);
        Some(id)
    }

    /// llama.cpp strips spaces after every special token of Phi-3 models (chosen by name).
    fn apply_name_rules(&mut self, gguf: &GgufFile) {
        let name = gguf
            .get_str("general.name")
            .unwrap_or_default()
            .to_lowercase();
        if !(name.contains("phi-3") || name.contains("phi3")) {
            return;
        }
        for t in &mut self.tokens {
            if is_special_kind(t.kind()) {
                t.set_rstrip(true);
            }
        }
        for (text, on) in [
            ("</s>", true),
            ("<unk>", false),
            ("<s>", false),
            ("<|endoftext|>", false),
        ] {
            if let Some(id) = self.text_to_token(text) {
                self.tokens[id as usize].set_rstrip(on);
            }
        }
    }

    fn collect_special(&mut self) {
        let mut ids: Vec<TokenId> = (0..self.tokens.len() as TokenId)
            .filter(|&id| {
                is_special_kind(self.tokens[id as usize].kind()) && !self.text(id).is_empty()
            })
            .collect();
        // Stable, so equal lengths keep id order.
        ids.sort_by_key(|&id| std::cmp::Reverse(self.text(id).len()));
        self.special_by_len = ids;
    }
}

fn is_special_kind(kind: TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::Control | TokenKind::UserDefined | TokenKind::Unknown
    )
}

fn bad(key: &'static str, reason: impl Into<String>) -> TokenizerError {
    TokenizerError::BadKey {
        key,
        reason: reason.into(),
    }
}

/// The token texts and scores (shared handles on the GGUF's arrays, where packed) and each
/// token's attributes.
fn load_tokens(gguf: &GgufFile) -> Result<(Array, Option<Array>, Vec<TokenData>), TokenizerError> {
    let texts = gguf
        .get(KEY_TOKENS)
        .ok_or(TokenizerError::MissingKey(KEY_TOKENS))?
        .as_array()
        .ok_or_else(|| bad(KEY_TOKENS, "not an array"))?;
    if texts.is_empty() {
        return Err(bad(KEY_TOKENS, "empty vocabulary"));
    }
    if texts.len() > TokenId::MAX as usize {
        return Err(bad(KEY_TOKENS, "too many tokens"));
    }
    let scores = optional_array(gguf, KEY_SCORES, texts.len())?;
    let types = optional_array(gguf, KEY_TYPES, texts.len())?;

    let tokens = (0..texts.len())
        .map(|i| {
            if texts.str(i).is_none() {
                return Err(bad(KEY_TOKENS, format!("element {i} is not a string")));
            }
            let kind = match types {
                Some(t) => TokenKind::from_gguf(
                    t.i64(i)
                        .ok_or_else(|| bad(KEY_TYPES, format!("element {i} is not an integer")))?,
                ),
                None => TokenKind::Normal,
            };
            Ok(TokenData::new(kind))
        })
        .collect::<Result<_, _>>()?;
    let scores = match scores {
        Some(s) if s.is_packed_f32() => Some(s.clone()),
        Some(s) => Some(Array::from_f32s(
            (0..s.len())
                .map(|i| {
                    s.f32(i)
                        .ok_or_else(|| bad(KEY_SCORES, format!("element {i} is not a number")))
                })
                .collect::<Result<_, _>>()?,
        )),
        None => None,
    };
    Ok((texts.clone(), scores, tokens))
}

/// An array that must have one element per token when present.
fn optional_array<'a>(
    gguf: &'a GgufFile,
    key: &'static str,
    n: usize,
) -> Result<Option<&'a Array>, TokenizerError> {
    let Some(v) = gguf.get(key) else {
        return Ok(None);
    };
    let arr = v.as_array().ok_or_else(|| bad(key, "not an array"))?;
    if arr.len() != n {
        return Err(bad(
            key,
            format!("has {} elements, vocabulary has {n}", arr.len()),
        ));
    }
    Ok(Some(arr))
}

/// `tokenizer.ggml.suppress_tokens`: an INT32 array (another type is an error, as in
/// llama.cpp); ids outside the vocabulary are dropped.
fn suppressed_tokens(gguf: &GgufFile, n_vocab: usize) -> Result<Vec<TokenId>, TokenizerError> {
    const KEY: &str = "tokenizer.ggml.suppress_tokens";
    let Some(value) = gguf.get(KEY) else {
        return Ok(Vec::new());
    };
    let ids = value
        .as_array()
        .filter(|a| a.elem_type() == crate::gguf::ValueType::I32)
        .ok_or_else(|| bad(KEY, "not an array of INT32"))?;
    let mut out: Vec<TokenId> = (0..ids.len())
        .filter_map(|i| ids.i64(i))
        .filter_map(|id| TokenId::try_from(id).ok())
        .filter(|&id| (id as usize) < n_vocab)
        .collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

pub(crate) fn get_bool(gguf: &GgufFile, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match gguf.get(key) {
        None => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| bad(key, "not a bool")),
    }
}

/// A special token id from metadata; out-of-range ids keep the default, as llama.cpp does.
fn special_id(
    gguf: &GgufFile,
    key: &'static str,
    default: Option<TokenId>,
    n_vocab: usize,
) -> Result<Option<TokenId>, TokenizerError> {
    let Some(v) = gguf.get(key) else {
        return Ok(default);
    };
    let id = v.as_u64().ok_or_else(|| bad(key, "not an integer"))?;
    Ok(if id < n_vocab as u64 {
        Some(id as TokenId)
    } else {
        default
    })
}
