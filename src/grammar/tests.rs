use super::*;

fn lark(gbnf: &str) -> String {
    gbnf_to_lark(gbnf).unwrap_or_else(|e| panic!("{gbnf:?}: {e}"))
}

fn refused(gbnf: &str) -> String {
    match gbnf_to_lark(gbnf) {
        Err(GrammarError::Invalid(why)) => why,
        Ok(out) => panic!("{gbnf:?} was accepted as {out:?}"),
    }
}

#[test]
fn gbnf_rules_become_lark_rules_with_lowercase_names() {
    assert_eq!(
        lark("root ::= Answer \".\"\nAnswer ::= \"yes\" | \"no\""),
        "start: r0_root\nr0_root: r1_answer \".\"\nr1_answer: \"yes\" | \"no\"\n"
    );
}

#[test]
fn gbnf_classes_escapes_and_any_are_written_as_regexes() {
    assert_eq!(
        lark(r#"root ::= [a-z0-9_] [^"\\\n] . "\x41\u00e9\t""#),
        "start: r0_root\nr0_root: /[\\x{61}-\\x{7a}\\x{30}-\\x{39}\\x{5f}]/ \
         /[^\\x{22}\\x{5c}\\x{a}]/ /(?s:.)/ \"A\u{e9}\\u0009\"\n"
    );
}

#[test]
fn gbnf_repetitions_groups_and_comments() {
    let g = "# numbers\nroot ::= ( digit{1,3} | \"x\"{2,} )* sign? digit{,4} digit{2} # trailing\n\
             digit ::= [0-9]\nsign ::= \"-\"+";
    assert_eq!(
        lark(g),
        "start: r0_root\nr0_root: (r1_digit{1,3} | \"x\"{2,})* r2_sign? r1_digit{0,4} \
         r1_digit{2,2}\nr1_digit: /[\\x{30}-\\x{39}]/\nr2_sign: \"-\"+\n"
    );
}

#[test]
fn gbnf_rules_continue_inside_groups_and_after_bars_only() {
    let g = "root ::= ( \"a\"\n  \"b\" ) |\n  \"c\"\nother ::= \"d\"";
    assert_eq!(
        lark(g),
        "start: r0_root\nr0_root: (\"a\" \"b\") | \"c\"\nr1_other: \"d\"\n"
    );
}

#[test]
fn gbnf_mistakes_are_named_with_their_place() {
    assert!(refused("").contains("empty"));
    assert!(refused("start ::= \"a\"").contains("no `root`"));
    assert!(refused("root ::= missing").contains("undefined rule `missing`"));
    assert!(refused("root ::= \"a\"\nroot ::= \"b\"").contains("defined twice"));
    assert!(refused("root = \"a\"").contains("line 1, column 6: expected `::=`"));
    assert!(refused("root ::= \"abc").contains("unterminated string"));
    assert!(refused("root ::= [a-").contains("unterminated character class"));
    assert!(refused("root ::= [z-a]").contains("backwards"));
    assert!(refused("root ::= \"\\q\"").contains("unknown escape"));
    assert!(refused("root ::= \"\\x4\"").contains("bad hex escape"));
    assert!(refused("root ::= \"\\uD800\"").contains("not a Unicode scalar"));
    assert!(refused("root ::= \"a\"{3,1}").contains("below its minimum"));
    assert!(refused("root ::= ( \"a\"").contains("expected `)`"));
    assert!(refused("root ::= \"a\" )").contains("end of the line"));
    assert!(refused("root ::= <think>").contains("token references"));
    assert!(refused("root ::= \"a\"{99999999999}").contains("too large"));
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(300), ")".repeat(300));
    assert!(refused(&deep).contains("nested too deeply"));
}

/// Mutations of real grammars (bytes inserted, deleted, replaced by grammar punctuation):
/// the translator answers every one with a translation or an error, never a panic.
#[test]
fn gbnf_translation_survives_mutated_grammars() {
    let seeds = [
        "root ::= answer \", \" num \"!\"\nanswer ::= \"yes\" | \"no\"\nnum ::= [1-9] [0-9]{0,2}",
        "root ::= object\nobject ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\"\n\
         value ::= object | string | [0-9]+ | \"true\" | \"false\"\nstring ::= \"\\\"\" [^\"\\\\\\x7F\\x00-\\x1F]* \"\\\"\"\n\
         ws ::= [ \\t\\n]* # spaces",
        "root ::= (\"a\" | [b-dé] | .)+ \"\\u00e9\" x{2,}\nx ::= \"x\"?",
    ];
    let alphabet = b"::=|()[]{}\"\\^-*+?.#,\n 0123456789abcxyz\xc3\xa9";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for round in 0..20_000 {
        let mut bytes = seeds[round % seeds.len()].as_bytes().to_vec();
        for _ in 0..1 + next(6) {
            let at = next(bytes.len() + 1);
            match next(3) {
                0 => bytes.insert(at, alphabet[next(alphabet.len())]),
                1 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ if at < bytes.len() => bytes[at] = alphabet[next(alphabet.len())],
                _ => {}
            }
        }
        // The parser takes text: a mutation that broke UTF-8 is read lossily, as callers must.
        let text = String::from_utf8_lossy(&bytes);
        let _ = gbnf_to_lark(&text);
    }
}
