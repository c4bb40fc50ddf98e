//! llama.cpp's GBNF, translated to llguidance's Lark dialect.
//!
//! GBNF: `name ::= alternatives`, one rule per line (a rule continues on the next line only
//! inside parentheses or after `|`), `root` the start; items are `"literals"`, `[classes]`,
//! `[^negated]`, `.`, rule names, `( groups )`, each with `*`, `+`, `?` or `{m}`, `{m,}`,
//! `{m,n}`, `{,n}`; `#` comments. Lark wants other names and spells classes as regexes,
//! so the translation parses GBNF fully and writes each construct in Lark's terms.

use std::collections::HashMap;
use std::fmt::Write;

use super::GrammarError;

/// Translates a GBNF grammar into an equivalent Lark grammar for llguidance.
pub fn gbnf_to_lark(gbnf: &str) -> Result<String, GrammarError> {
    let rules = Parser::new(gbnf).rules()?;
    let names = lark_names(&rules);
    let root = names
        .get("root")
        .ok_or_else(|| GrammarError::Invalid("GBNF grammar has no `root` rule".into()))?;
    let mut out = format!("start: {root}\n");
    for rule in &rules {
        let _ = write!(out, "{}: ", names[rule.name.as_str()]);
        write_alternatives(&mut out, &rule.body, &names)?;
        out.push('\n');
    }
    Ok(out)
}

struct Rule {
    name: String,
    body: Vec<Vec<Item>>,
}

enum Atom {
    Literal(String),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Any,
    Ref(String),
    Group(Vec<Vec<Item>>),
}

struct Item {
    atom: Atom,
    /// `(min, max)`, `max = None` unbounded; `(1, Some(1))` for a plain item.
    repeat: (u32, Option<u32>),
}

/// Lark rule names are lowercase; GBNF's may not be. Each gets a unique lowercase name.
fn lark_names(rules: &[Rule]) -> HashMap<&str, String> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                r.name.as_str(),
                format!("r{i}_{}", r.name.to_ascii_lowercase()),
            )
        })
        .collect()
}

fn write_alternatives(
    out: &mut String,
    alternatives: &[Vec<Item>],
    names: &HashMap<&str, String>,
) -> Result<(), GrammarError> {
    for (i, sequence) in alternatives.iter().enumerate() {
        if i > 0 {
            out.push_str(" | ");
        }
        if sequence.is_empty() {
            out.push_str("\"\"");
        }
        for (j, item) in sequence.iter().enumerate() {
            if j > 0 {
                out.push(' ');
            }
            write_item(out, item, names)?;
        }
    }
    Ok(())
}

fn write_item(
    out: &mut String,
    item: &Item,
    names: &HashMap<&str, String>,
) -> Result<(), GrammarError> {
    if item.repeat.1 == Some(0) {
        out.push_str("\"\"");
        return Ok(());
    }
    match &item.atom {
        Atom::Literal(text) => write_literal(out, text),
        Atom::Class { negated, ranges } => write_class(out, *negated, ranges),
        Atom::Any => out.push_str("/(?s:.)/"),
        Atom::Ref(name) => match names.get(name.as_str()) {
            Some(lark) => out.push_str(lark),
            None => return Err(GrammarError::Invalid(format!("undefined rule `{name}`"))),
        },
        Atom::Group(alternatives) => {
            out.push('(');
            write_alternatives(out, alternatives, names)?;
            out.push(')');
        }
    }
    match item.repeat {
        (1, Some(1)) => {}
        (0, None) => out.push('*'),
        (1, None) => out.push('+'),
        (0, Some(1)) => out.push('?'),
        (min, None) => {
            let _ = write!(out, "{{{min},}}");
        }
        (min, Some(max)) => {
            let _ = write!(out, "{{{min},{max}}}");
        }
    }
    Ok(())
}

/// A JSON string literal (Lark's string syntax), every control character escaped.
fn write_literal(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A one-character regex class, every member written as `\x{..}` so nothing needs quoting.
fn write_class(out: &mut String, negated: bool, ranges: &[(char, char)]) {
    out.push_str("/[");
    if negated {
        out.push('^');
    }
    for &(lo, hi) in ranges {
        let _ = write!(out, "\\x{{{:x}}}", lo as u32);
        if hi != lo {
            let _ = write!(out, "-\\x{{{:x}}}", hi as u32);
        }
    }
    out.push_str("]/");
}

/// A recursive-descent parser of GBNF, following llama.cpp's grammar parser's rules for
/// where newlines may stand.
struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

/// Groups nested deeper than this are refused rather than risking the stack.
const MAX_NESTING: usize = 256;

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser { src, pos: 0 }
    }

    fn rules(mut self) -> Result<Vec<Rule>, GrammarError> {
        let mut rules: Vec<Rule> = Vec::new();
        self.skip_space(true);
        while !self.at_end() {
            let name = self.name()?;
            if rules.iter().any(|r| r.name == name) {
                return Err(self.error(&format!("rule `{name}` is defined twice")));
            }
            self.skip_space(false);
            if !self.rest().starts_with("::=") {
                return Err(self.error("expected `::=`"));
            }
            self.pos += 3;
            self.skip_space(true);
            let body = self.alternatives(0)?;
            match self.peek() {
                None | Some('\n') | Some('\r') => {}
                Some(_) => return Err(self.error("expected the end of the line")),
            }
            self.skip_space(true);
            rules.push(Rule { name, body });
        }
        if rules.is_empty() {
            return Err(GrammarError::Invalid("GBNF grammar is empty".into()));
        }
        Ok(rules)
    }

    fn alternatives(&mut self, depth: usize) -> Result<Vec<Vec<Item>>, GrammarError> {
        let mut alternatives = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            self.skip_space(true);
            alternatives.push(self.sequence(depth)?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self, depth: usize) -> Result<Vec<Item>, GrammarError> {
        let nested = depth > 0;
        let mut items = Vec::new();
        loop {
            let atom = match self.peek() {
                Some('"') => Atom::Literal(self.literal()?),
                Some('[') => self.class()?,
                Some('.') => {
                    self.pos += 1;
                    Atom::Any
                }
                Some('(') => {
                    if depth >= MAX_NESTING {
                        return Err(self.error("groups nested too deeply"));
                    }
                    self.pos += 1;
                    self.skip_space(true);
                    let inner = self.alternatives(depth + 1)?;
                    if self.peek() != Some(')') {
                        return Err(self.error("expected `)`"));
                    }
                    self.pos += 1;
                    Atom::Group(inner)
                }
                Some('<') | Some('!') => {
                    return Err(self.error("token references (`<...>`) are not supported"))
                }
                Some(c) if is_name_char(c) => Atom::Ref(self.name()?),
                _ => break,
            };
            self.skip_space(nested);
            let repeat = self.repetition()?;
            self.skip_space(nested);
            items.push(Item { atom, repeat });
        }
        Ok(items)
    }

    fn repetition(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        let repeat = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => return self.braces(),
            _ => return Ok((1, Some(1))),
        };
        self.pos += 1;
        Ok(repeat)
    }

    /// `{m}`, `{m,}`, `{m,n}` or `{,n}`.
    fn braces(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        self.pos += 1;
        self.skip_space(false);
        let min = self.number()?;
        self.skip_space(false);
        let repeat = if self.peek() == Some(',') {
            self.pos += 1;
            self.skip_space(false);
            (min.unwrap_or(0), self.number()?)
        } else {
            let n = min.ok_or_else(|| self.error("expected a number in `{}`"))?;
            (n, Some(n))
        };
        self.skip_space(false);
        if self.peek() != Some('}') {
            return Err(self.error("expected `}`"));
        }
        self.pos += 1;
        if repeat.1.is_some_and(|max| max < repeat.0) {
            return Err(self.error("repetition maximum below its minimum"));
        }
        Ok(repeat)
    }

    fn number(&mut self) -> Result<Option<u32>, GrammarError> {
        let digits = self.rest().chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Ok(None);
        }
        let text = &self.rest()[..digits];
        self.pos += digits;
        text.parse()
            .map(Some)
            .map_err(|_| self.error("repetition count too large"))
    }

    fn name(&mut self) -> Result<String, GrammarError> {
        let len: usize = self
            .rest()
            .chars()
            .take_while(|&c| is_name_char(c))
            .map(char::len_utf8)
            .sum();
        if len == 0 {
            return Err(self.error("expected a rule name"));
        }
        let name = self.rest()[..len].to_string();
        self.pos += len;
        Ok(name)
    }

    fn literal(&mut self) -> Result<String, GrammarError> {
        self.pos += 1; // the opening quote
        let mut text = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string literal")),
                Some('"') => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some(_) => text.push(self.char_in_literal()?),
            }
        }
    }

    fn class(&mut self) -> Result<Atom, GrammarError> {
        self.pos += 1; // '['
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated character class")),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let lo = self.char_in_literal()?;
                    let mut chars = self.rest().chars();
                    let hi =
                        if chars.next() == Some('-') && !matches!(chars.next(), Some(']') | None) {
                            self.pos += 1;
                            self.char_in_literal()?
                        } else {
                            lo
                        };
                    if hi < lo {
                        return Err(self.error("character range runs backwards"));
                    }
                    ranges.push((lo, hi));
                }
            }
        }
        if ranges.is_empty() && !negated {
            return Err(self.error("empty character class"));
        }
        Ok(Atom::Class { negated, ranges })
    }

    /// One character of a literal or class, escapes decoded.
    fn char_in_literal(&mut self) -> Result<char, GrammarError> {
        let c = self.peek().ok_or_else(|| self.error("unexpected end"))?;
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c);
        }
        let e = self
            .peek()
            .ok_or_else(|| self.error("unexpected end after `\\`"))?;
        self.pos += e.len_utf8();
        let hex_digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '\\' | '"' | '[' | ']' | '-' | '^' => return Ok(e),
            _ => return Err(self.error(&format!("unknown escape `\\{e}`"))),
        };
        let hex = self.rest().get(..hex_digits).unwrap_or("");
        let value = u32::from_str_radix(hex, 16)
            .ok()
            .filter(|_| hex.len() == hex_digits && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("bad hex escape"))?;
        self.pos += hex_digits;
        char::from_u32(value).ok_or_else(|| self.error("escape is not a Unicode scalar value"))
    }

    /// Spaces, tabs and `#` comments; newlines too where `newlines` allows them.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\r' | '\n' if newlines => self.pos += 1,
                '#' => {
                    let line = self.rest().find('\n').unwrap_or(self.rest().len());
                    self.pos += line;
                }
                _ => break,
            }
        }
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn error(&self, what: &str) -> GrammarError {
        let line = self.src[..self.pos].matches('\n').count() + 1;
        let col = self.src[..self.pos]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
            + 1;
        GrammarError::Invalid(format!("GBNF line {line}, column {col}: {what}"))
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}
