//! The chat-template corpus: llama.cpp's real templates (`models/templates/` of its PyPI
//! source package, fetched by `scripts/fetch-models.py templates`) rendered by Kolibri on
//! conversations with a system prompt, several turns, tool definitions, a tool call and its
//! result, byte for byte against jinja2 set up as transformers sets it up
//! (`scripts/template-reference.py`). Cases the reference itself refuses are listed and
//! skipped.

mod common;

use std::process::Command;

use kolibri::chat::ChatTemplate;
use serde_json::Value;

/// Templates Kolibri does not yet render byte-identically, with why. The test fails when one
/// of them starts to pass, so the list only shrinks.
const KNOWN_GAPS: &[(&str, &str)] = &[];

fn reference_cases() -> Vec<Value> {
    let dir = common::model_dir().join("llama-templates");
    assert!(
        dir.join(".complete").exists(),
        "{} is missing: run `scripts/fetch-models.py templates` first",
        dir.display()
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/template-reference.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&dir)
        // strftime_now: both sides read the same clock in UTC.
        .env("TZ", "UTC")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Renders a case; `rewritten` compiles it with every `+` and `~` turned into the calls that
/// give Jinja2's markup arithmetic, which templates without markup must not notice.
fn render(case: &Value, rewritten: bool) -> Result<String, String> {
    let s = |k: &str| case[k].as_str().unwrap();
    let compile = match rewritten {
        false => ChatTemplate::new,
        true => ChatTemplate::with_operators_rewritten,
    };
    let template =
        compile(s("source"), s("bos_token"), s("eos_token")).map_err(|e| e.to_string())?;
    let tools = Some(&case["tools"]).filter(|t| !t.is_null());
    template
        .render_json(
            &case["messages"],
            tools,
            case["add_generation_prompt"].as_bool().unwrap(),
        )
        .map_err(|e| e.to_string())
}

/// Where two renderings first differ, with a little context.
fn first_difference(ours: &str, theirs: &str) -> String {
    let at = ours
        .char_indices()
        .zip(theirs.chars())
        .find(|((_, a), b)| a != b)
        .map_or(ours.len().min(theirs.len()), |((i, _), _)| i);
    let from = ours[..at]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(i, _)| i);
    let theirs_at = theirs
        .char_indices()
        .nth(ours[..at].chars().count())
        .map_or(theirs.len(), |(i, _)| i);
    let theirs_from = theirs[..theirs_at]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(i, _)| i);
    format!(
        "ours {:?} | reference {:?}",
        &ours[from..ours.len().min(at + 40)],
        &theirs[theirs_from..theirs.len().min(theirs_at + 40)]
    )
}

#[test]
fn real_templates_render_as_transformers_renders_them() {
    let cases = reference_cases();
    assert!(cases.len() >= 300, "only {} cases", cases.len());
    let (mut passed, mut skipped, mut failed) = (0, Vec::new(), Vec::new());
    let mut failing_templates = std::collections::BTreeSet::new();
    for case in &cases {
        let name = format!("{} / {}", case["template"].as_str().unwrap(), case["case"]);
        if let Some(why) = case["error"].as_str() {
            skipped.push(format!("{name}: reference refuses: {why}"));
            continue;
        }
        let expected = case["output"].as_str().unwrap();
        for rewritten in [false, true] {
            let name = format!("{name}{}", if rewritten { " (rewritten)" } else { "" });
            match render(case, rewritten) {
                Ok(ours) if ours == expected => passed += 1,
                Ok(ours) => failed.push(format!("{name}: {}", first_difference(&ours, expected))),
                Err(e) => failed.push(format!("{name}: we refuse: {e}")),
            }
        }
        if failed.last().is_some_and(|f| f.starts_with(&name)) {
            failing_templates.insert(case["template"].as_str().unwrap().to_string());
        }
    }
    println!(
        "{passed} identical, {} skipped, {} different",
        skipped.len(),
        failed.len()
    );
    for s in &skipped {
        println!("skipped  {s}");
    }
    for f in &failed {
        println!("DIFFERENT {f}");
    }
    let known: std::collections::BTreeSet<String> =
        KNOWN_GAPS.iter().map(|(t, _)| t.to_string()).collect();
    let fixed: Vec<_> = known.difference(&failing_templates).collect();
    let new: Vec<_> = failing_templates.difference(&known).collect();
    assert!(
        fixed.is_empty(),
        "now identical, remove from KNOWN_GAPS: {fixed:?}"
    );
    assert!(new.is_empty(), "templates rendering differently: {new:?}");
}
