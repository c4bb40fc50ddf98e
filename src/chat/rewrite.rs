//! Source rewrites a template gets before it compiles, found on minijinja's syntax tree:
//! - in templates that make markup, `a + b` and `a ~ b` become calls that compute them as
//!   Jinja2 does (`markup.rs`);
//! - after every assignment to a namespace attribute, a check that the namespace does not now
//!   hold itself (`namespaces.rs`).
//!
//! Edits are insertions at byte offsets of the source (and one operator byte replaced by a
//! comma), so everything else, whitespace control included, stays as written.

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt};
use minijinja::machinery::{parse, Span};
use minijinja::syntax::SyntaxConfig;

use super::markup::{ADD, JOIN, MARKUP_FILTERS};
use super::namespaces::SETTLED;

/// What `rewrite` makes of a template.
pub(super) enum Rewritten {
    /// Nothing to change (or the template does not parse: compiling it reports that).
    Unchanged,
    Source(String),
    /// A namespace assignment this rewrite cannot follow, so cannot check.
    Unsupported(String),
}

/// Rewrites `source`; `all_operators` turns `+` and `~` into calls even where the template
/// makes no markup (the tests check that this changes no output).
pub(super) fn rewrite(source: &str, syntax: &SyntaxConfig, all_operators: bool) -> Rewritten {
    let Ok(ast) = parse(source, "chat", syntax.clone()) else {
        return Rewritten::Unchanged;
    };
    let mut walk = Walk {
        source: source.as_bytes(),
        operators: Vec::new(),
        assignments: Vec::new(),
        makes_markup: false,
        operators_unfollowed: false,
        unsupported: None,
    };
    walk.stmt(&ast);
    if let Some(why) = walk.unsupported {
        return Rewritten::Unsupported(why);
    }
    let checks_namespaces = !walk.assignments.is_empty();
    let mut edits = walk.assignments;
    if (walk.makes_markup || all_operators) && !walk.operators_unfollowed {
        edits.extend(walk.operators);
    }
    if edits.is_empty() {
        return Rewritten::Unchanged;
    }
    match apply(source, edits) {
        Some(rewritten) => Rewritten::Source(rewritten),
        // Without its namespace checks a template could build a cycle: refuse it.
        None if checks_namespaces => Rewritten::Unsupported("edits that overlap".into()),
        None => Rewritten::Unchanged,
    }
}

enum EditKind {
    Close,
    Insert(String),
    Open(&'static str),
    Comma,
}

struct Edit {
    at: usize,
    kind: EditKind,
}

fn apply(source: &str, mut edits: Vec<Edit>) -> Option<String> {
    // Stable: opens at one offset stay outermost first, the order the walk met them.
    edits.sort_by_key(|e| (e.at, rank(&e.kind)));
    let mut out = String::with_capacity(source.len() + edits.len() * 24);
    let mut from = 0;
    for e in edits {
        out.push_str(source.get(from..e.at)?);
        from = e.at;
        match e.kind {
            EditKind::Close => out.push(')'),
            EditKind::Insert(text) => out.push_str(&text),
            EditKind::Open(name) => {
                out.push_str(name);
                out.push('(');
            }
            EditKind::Comma => {
                out.push(',');
                from += 1; // the operator it replaces
            }
        }
    }
    out.push_str(source.get(from..)?);
    Some(out)
}

/// At one offset: an expression's end, then what follows a statement's value, then the next
/// expression's start.
fn rank(kind: &EditKind) -> u8 {
    match kind {
        EditKind::Close => 0,
        EditKind::Insert(_) => 1,
        EditKind::Open(_) => 2,
        EditKind::Comma => 3,
    }
}

/// Walks the template, noting markup filters and the edits for operators and assignments.
struct Walk<'s> {
    source: &'s [u8],
    operators: Vec<Edit>,
    assignments: Vec<Edit>,
    makes_markup: bool,
    /// An operator whose text is not where the tree says: operators are then left alone.
    operators_unfollowed: bool,
    unsupported: Option<String>,
}

impl Walk<'_> {
    fn stmts(&mut self, stmts: &[Stmt<'_>]) {
        stmts.iter().for_each(|s| self.stmt(s));
    }

    fn stmt(&mut self, stmt: &Stmt<'_>) {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
            Stmt::ForLoop(f) => {
                self.expr(&f.target);
                self.expr(&f.iter);
                self.opt(f.filter_expr.as_ref());
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr);
                self.stmts(&i.true_body);
                self.stmts(&i.false_body);
            }
            Stmt::WithBlock(w) => {
                for (target, value) in &w.assignments {
                    self.expr(target);
                    self.expr(value);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(s) => {
                self.expr(&s.target);
                self.expr(&s.expr);
                self.assignment(&s.target, &s.expr);
            }
            Stmt::SetBlock(s) => {
                self.expr(&s.target);
                self.opt(s.filter.as_ref());
                self.stmts(&s.body);
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body);
            }
            Stmt::Macro(m) => {
                m.args.iter().chain(&m.defaults).for_each(|e| self.expr(e));
                self.stmts(&m.body);
            }
            Stmt::CallBlock(c) => {
                self.expr(&c.call.expr);
                self.args(&c.call.args);
                let m = &c.macro_decl;
                m.args.iter().chain(&m.defaults).for_each(|e| self.expr(e));
                self.stmts(&m.body);
            }
            Stmt::Do(d) => {
                self.expr(&d.call.expr);
                self.args(&d.call.args);
            }
        }
    }

    fn opt(&mut self, expr: Option<&Expr<'_>>) {
        if let Some(e) = expr {
            self.expr(e);
        }
    }

    fn args(&mut self, args: &[CallArg<'_>]) {
        for arg in args {
            match arg {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) => self.expr(e),
                CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, expr: &Expr<'_>) {
        match expr {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                self.opt(s.start.as_ref());
                self.opt(s.stop.as_ref());
                self.opt(s.step.as_ref());
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                match b.op {
                    BinOpKind::Add => self.operator(b.span(), &b.left, &b.right, b'+', ADD),
                    BinOpKind::Concat => self.operator(b.span(), &b.left, &b.right, b'~', JOIN),
                    _ => {}
                }
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                c.ops.iter().for_each(|op| self.expr(&op.expr));
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                self.opt(i.false_expr.as_ref());
            }
            Expr::Filter(f) => {
                self.makes_markup |= MARKUP_FILTERS.contains(&f.name);
                self.opt(f.expr.as_ref());
                self.args(&f.args);
            }
            Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => {
                self.expr(&c.expr);
                self.args(&c.args);
            }
            Expr::List(l) => l.items.iter().for_each(|e| self.expr(e)),
            Expr::Tuple(t) => t.items.iter().for_each(|e| self.expr(e)),
            Expr::Map(m) => m.keys.iter().chain(&m.values).for_each(|e| self.expr(e)),
        }
    }

    /// `left OP right` → `NAME(left, right)`: the operator is the one `op` byte between the
    /// operands (only blanks and parentheses may sit beside it); anything else gives up.
    fn operator(
        &mut self,
        whole: Span,
        left: &Expr<'_>,
        right: &Expr<'_>,
        op: u8,
        name: &'static str,
    ) {
        let (start, end) = (whole.start_offset as usize, whole.end_offset as usize);
        let gap_from = left.span().end_offset as usize;
        let gap_to = leftmost_start(right);
        let Some(gap) = self.source.get(gap_from..gap_to) else {
            self.operators_unfollowed = true;
            return;
        };
        let allowed = |c: &u8| c.is_ascii_whitespace() || matches!(c, b'(' | b')') || *c == op;
        let ops: Vec<usize> = (0..gap.len()).filter(|&i| gap[i] == op).collect();
        let in_order = start <= gap_from && gap_to <= end && end <= self.source.len();
        if ops.len() != 1 || !gap.iter().all(allowed) || !in_order {
            self.operators_unfollowed = true;
            return;
        }
        self.operators.push(Edit {
            at: start,
            kind: EditKind::Open(name),
        });
        self.operators.push(Edit {
            at: gap_from + ops[0],
            kind: EditKind::Comma,
        });
        self.operators.push(Edit {
            at: end,
            kind: EditKind::Close,
        });
    }

    /// `{% set ns.name = value %}` → `{% set ns.name = value %}{% do SETTLED(ns, "name") %}`:
    /// the check goes where the value ends, so the statement's own closing (`%}` or `-%}`)
    /// closes it and whitespace control is unchanged. Destructured targets get one per
    /// attribute.
    fn assignment(&mut self, target: &Expr<'_>, value: &Expr<'_>) {
        let mut attributes = Vec::new();
        collect_attributes(target, &mut attributes);
        if attributes.is_empty() {
            return;
        }
        let mut checks = String::from("%}");
        for (holder, name) in attributes {
            let Some(holder) = dotted_name(holder) else {
                let why = "an assignment to an attribute of something other than a name";
                self.unsupported = Some(why.into());
                return;
            };
            checks.push_str(&format!("{{% do {SETTLED}({holder}, \"{name}\") %}}"));
        }
        // The last check is closed by the statement's own closing.
        checks.truncate(checks.len() - "%}".len());
        let Some(at) = self.statement_close(value.span().end_offset as usize) else {
            self.unsupported = Some("an assignment whose end this rewrite cannot find".into());
            return;
        };
        self.assignments.push(Edit {
            at,
            kind: EditKind::Insert(checks),
        });
    }

    /// Where the `%}` (or `-%}`, `+%}`) closing a statement begins, from the end of its last
    /// expression: only blanks, closing parentheses and a trailing comma may come between.
    fn statement_close(&self, from: usize) -> Option<usize> {
        let rest = self.source.get(from..)?;
        let skip = rest
            .iter()
            .position(|c| !(c.is_ascii_whitespace() || matches!(c, b')' | b',')))?;
        let at = from + skip;
        let tail = self.source.get(at..)?;
        (tail.starts_with(b"%}") || tail.starts_with(b"-%}") || tail.starts_with(b"+%}"))
            .then_some(at)
    }
}

/// The `(holder, attribute)` pairs an assignment target sets.
fn collect_attributes<'a, 'e>(target: &'e Expr<'a>, out: &mut Vec<(&'e Expr<'a>, &'a str)>) {
    match target {
        Expr::GetAttr(g) => out.push((&g.expr, g.name)),
        Expr::List(l) => l.items.iter().for_each(|e| collect_attributes(e, out)),
        Expr::Tuple(t) => t.items.iter().for_each(|e| collect_attributes(e, out)),
        _ => {}
    }
}

/// `a` or `a.b.c` as source text.
fn dotted_name(expr: &Expr<'_>) -> Option<String> {
    match expr {
        Expr::Var(v) => Some(v.id.to_owned()),
        Expr::GetAttr(g) => Some(format!("{}.{}", dotted_name(&g.expr)?, g.name)),
        _ => None,
    }
}

/// Where an expression's text begins: a postfix node's span (filter, attribute, item, call,
/// test, slice) begins at its operator, after the expression it applies to.
fn leftmost_start(expr: &Expr<'_>) -> usize {
    let first = match expr {
        Expr::Filter(f) => f.expr.as_ref(),
        Expr::Test(t) => Some(&t.expr),
        Expr::GetAttr(g) => Some(&g.expr),
        Expr::GetItem(g) => Some(&g.expr),
        Expr::Call(c) => Some(&c.expr),
        Expr::Slice(s) => Some(&s.expr),
        Expr::BinOp(b) => Some(&b.left),
        Expr::Compare(c) => Some(&c.expr),
        Expr::IfExpr(i) => Some(&i.true_expr),
        // A bare tuple's span begins after its first item.
        Expr::Tuple(t) => t.items.first(),
        _ => None,
    };
    let own = expr.span().start_offset as usize;
    first.map_or(own, |e| own.min(leftmost_start(e)))
}
