use super::*;

fn think() -> ReasoningSyntax {
    ReasoningSyntax::tags("<think>", "</think>")
}

/// Splits `reply` pushed in pieces of `step` bytes (on char boundaries), as a stream would.
fn split_in_steps(
    syntax: &ReasoningSyntax,
    opened: bool,
    reply: &str,
    step: usize,
) -> (String, String, Vec<(String, String)>) {
    let mut s = ReasoningSplitter::new(syntax, opened, None);
    let mut joined = Joined::default();
    let mut at = 0;
    while at < reply.len() {
        let mut end = (at + step).min(reply.len());
        while !reply.is_char_boundary(end) {
            end += 1;
        }
        for p in s.push(&reply[at..end]) {
            joined.add(p);
        }
        at = end;
    }
    for p in s.finish() {
        joined.add(p);
    }
    (joined.reasoning, joined.content, joined.calls)
}

/// Every split of the stream gives the whole reply's answer.
fn check_all_steps(syntax: &ReasoningSyntax, opened: bool, reply: &str) -> (String, String) {
    let whole = split_whole(syntax, opened, None, reply);
    for step in 1..reply.len().max(2) {
        assert_eq!(
            split_in_steps(syntax, opened, reply, step),
            whole,
            "{reply:?} in steps of {step}"
        );
    }
    (whole.0, whole.1)
}

#[test]
fn a_think_block_is_reasoning_and_the_rest_the_answer() {
    let (r, c) = check_all_steps(
        &think(),
        false,
        "<think>\nLet me see.\n\n</think>\n\nIt is 4.",
    );
    assert_eq!((r.as_str(), c.as_str()), ("Let me see.", "It is 4."));
    // Whitespace inside the thinking is kept; only its ends go.
    let (r, _) = check_all_steps(&think(), false, "  <think> a \n b </think>x");
    assert_eq!(r, "a \n b");
}

#[test]
fn a_reply_without_the_tag_is_unchanged() {
    for reply in [
        "  Plain answer.\n",
        "<thinking>no</thinking>",
        "<thi",
        "",
        " \n",
    ] {
        let (r, c) = check_all_steps(&think(), false, reply);
        assert_eq!((r.as_str(), c.as_str()), ("", reply));
    }
    // The tag counts only at the start; later it is text.
    let later = "Answer <think>x</think>";
    assert_eq!(check_all_steps(&think(), false, later).1, later);
    // A close without an open is text, not lost.
    let stray = "a</think>b";
    assert_eq!(check_all_steps(&think(), false, stray).1, stray);
}

#[test]
fn a_prompt_that_opened_the_block_starts_the_reply_inside_it() {
    let (r, c) = check_all_steps(&think(), true, "step one\n</think>\n\nDone");
    assert_eq!((r.as_str(), c.as_str()), ("step one", "Done"));
    assert!(think().prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    assert!(!think().prompt_opens_reasoning("<think>\n\n</think>\n\n"));
}

#[test]
fn unfinished_thinking_becomes_the_answer() {
    let (r, c) = check_all_steps(&think(), false, "<think>\nstill going ");
    assert_eq!((r.as_str(), c.as_str()), ("", "<think>\nstill going "));
    // Parts as streamed: the reasoning passes on, then the same text as answer.
    let mut s = ReasoningSplitter::new(&think(), true, None);
    let mut parts = s.push("abc");
    assert!(s.in_reasoning());
    parts.extend(s.finish());
    assert_eq!(
        parts,
        vec![
            Part::Reasoning("abc".into()),
            Part::Unfinished {
                raw: "abc".into(),
                emitted: 3
            }
        ]
    );
}

#[test]
fn streaming_holds_back_only_a_possible_tag() {
    let mut s = ReasoningSplitter::new(&think(), false, None);
    assert_eq!(s.push(" <th"), vec![]);
    assert_eq!(s.push("ink>Hmm"), vec![Part::Reasoning("Hmm".into())]);
    assert_eq!(s.push(", ok </thi"), vec![Part::Reasoning(", ok".into())]);
    assert_eq!(s.push("nk>\n"), vec![]);
    assert!(!s.in_reasoning());
    assert_eq!(s.push("Yes"), vec![Part::Content("Yes".into())]);
    assert_eq!(s.finish(), vec![]);
}

const HARMONY_REPLY: &str = "<|channel|>analysis<|message|>User wants weather. Call tool.<|end|>\
<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>\
{\"city\": \"Oslo\"}<|call|>";

#[test]
fn harmony_channels_split_into_reasoning_calls_and_answer() {
    let h = ReasoningSyntax::Harmony;
    let whole = split_whole(&h, false, None, HARMONY_REPLY);
    assert_eq!(whole.0, "User wants weather. Call tool.");
    assert_eq!(whole.1, "");
    assert_eq!(
        whole.2,
        vec![("get_weather".to_string(), "{\"city\":\"Oslo\"}".to_string())]
    );
    // `<|call|>` is an end-of-generation token, so the text usually ends with the JSON.
    let cut = HARMONY_REPLY.strip_suffix("<|call|>").unwrap();
    assert_eq!(split_whole(&h, false, None, cut), whole);
    for step in 1..HARMONY_REPLY.len() {
        assert_eq!(split_in_steps(&h, false, HARMONY_REPLY, step), whole);
    }
    let answer = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant\
                  <|channel|>final<|message|>The answer.";
    let (r, c) = check_all_steps(&h, false, answer);
    assert_eq!((r.as_str(), c.as_str()), ("Think.", "The answer."));
    // The recipient may come before the channel.
    let early = "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}";
    assert_eq!(split_whole(&h, false, None, early).2[0].0, "f");
}

#[test]
fn broken_harmony_keeps_its_text() {
    let h = ReasoningSyntax::Harmony;
    for reply in [
        "Just text, no channels.",
        "<|channel|>final and then nothing",
        "",
    ] {
        assert_eq!(check_all_steps(&h, false, reply).1, reply);
    }
    // A call to a tool the request did not give, or with arguments that are not JSON.
    let unknown = "<|channel|>commentary to=functions.nope<|message|>{}";
    let (_, c, calls) = split_whole(&h, false, Some(vec!["f".into()]), unknown);
    assert!(calls.is_empty());
    assert_eq!(c, unknown);
    let not_json = "<|channel|>commentary to=functions.f<|message|>{oops";
    assert_eq!(split_whole(&h, false, None, not_json).1, not_json);
    // Analysis that never ends: answer text, markup and all.
    let open = "<|channel|>analysis<|message|>hmm";
    assert_eq!(
        check_all_steps(&h, false, open),
        (String::new(), open.to_string())
    );
    // An unknown channel keeps its header.
    let odd = "<|channel|>weird<|message|>x";
    assert_eq!(check_all_steps(&h, false, odd).1, odd);
}

#[test]
fn templates_name_their_markup() {
    assert_eq!(
        ReasoningSyntax::detect("{{ '<|start|>assistant<|channel|>final<|message|>' }}"),
        Some(ReasoningSyntax::Harmony)
    );
    assert_eq!(
        ReasoningSyntax::detect("{% if x %}<think>\n\n</think>{% endif %}"),
        Some(think())
    );
    assert_eq!(ReasoningSyntax::detect("<|im_start|>assistant\n"), None);
}
