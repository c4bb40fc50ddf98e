//! Fill-in-the-middle on the 0.5B (a FIM model): `/infill` lays out llama-server's prompt (its
//! length) and gives llama-server's middle for the same requests (greedy; tests/data/infill,
//! written by scripts/infill-reference.py) up to its first close call (a lead under
//! [`CLOSE_CALL`] nat, where our arithmetic and llama.cpp's may part as its own flash-attention
//! on and off runs do), with project files as context too; `/v1/completions` with `suffix`
//! fills the same gap; a model without FIM tokens and a request without its prefix are
//! refused.

mod common;

use common::server::Server;
use serde_json::{json, Value};

/// The JSON body of a response `text` (headers, then the body).
fn body(text: &str) -> Value {
    let (_, body) = text.split_once("\r\n\r\n").expect("a response");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A lead over the runner-up below which a greedy choice may go either way.
const CLOSE_CALL: f64 = 0.5;

/// llama-server's middle up to its first close call, and how many tokens that is.
fn sure_part(answer: &Value) -> (String, usize) {
    let steps = answer["steps"].as_array().unwrap();
    let sure = steps
        .iter()
        .take_while(|s| s["gap"].as_f64().unwrap() >= CLOSE_CALL);
    let text: String = sure.clone().map(|s| s["text"].as_str().unwrap()).collect();
    (text, sure.count())
}

fn reference() -> (Vec<Value>, Vec<Value>) {
    let read = |name: &str| -> Vec<Value> {
        let path = common::data_path(&format!("infill/{name}"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    (read("requests.json"), read("llama-server.json"))
}

#[test]
fn the_middle_is_llama_servers() {
    let (cases, answers) = reference();
    assert_eq!(cases.len(), answers.len());
    let server = Server::start("infill", &["--parallel", "1", "-c", "4096"]);
    for (case, answer) in cases.iter().zip(&answers) {
        let request = case["request"].to_string();
        let (status, text) = server.request("", "POST", "/infill", &request, None);
        assert_eq!(status, 200, "{text}");
        let got = body(&text);
        assert_eq!(got["content"], answer["content"], "{}", case["name"]);
        assert_eq!(
            got["tokens_evaluated"], answer["tokens_evaluated"],
            "{}",
            case["name"]
        );
        assert_eq!(got["stop"], true);
    }
    // The gap without project files, as an OpenAI completion with `suffix`.
    let plain = &cases[1]["request"];
    let completion = json!({
        "prompt": plain["input_prefix"],
        "suffix": plain["input_suffix"],
        "max_tokens": plain["n_predict"],
        "temperature": 0,
    });
    let (status, text) =
        server.request("", "POST", "/v1/completions", &completion.to_string(), None);
    assert_eq!(status, 200, "{text}");
    let middle = body(&text)["choices"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(middle.starts_with(&sure_part(&answers[1]).0), "{middle:?}");
    // The same route without `/v1`, as llama-server also answers.
    let (_, again) = server.request("", "POST", "/completions", &completion.to_string(), None);
    assert_eq!(body(&again)["choices"][0]["text"], middle.as_str());
    // Streamed: the same middle, piece by piece, then the last object.
    let mut streamed = plain.clone();
    streamed["stream"] = json!(true);
    let (_, text) = server.request("", "POST", "/infill", &streamed.to_string(), None);
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pieces: String = events
        .iter()
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(pieces, middle);
    assert_eq!(events.last().unwrap()["stop"], true);
    // A request without its prefix.
    let (status, text) = server.request("", "POST", "/infill", r#"{"input_suffix": "x"}"#, None);
    assert!(status == 400 && text.contains("input_prefix"), "{text}");
    server.stop();
}

#[test]
fn a_model_without_fim_tokens_is_refused() {
    let gemma = common::model_path("gemma-3-270m-q4_k_m.gguf");
    let server = Server::start("infill-gemma", &["-m", gemma.to_str().unwrap()]);
    let request = r#"{"input_prefix": "a", "input_suffix": "b"}"#;
    let (status, text) = server.request("", "POST", "/infill", request, None);
    assert!(
        status == 501 && text.contains("infill is not supported"),
        "{text}"
    );
    let completion = r#"{"prompt": "a", "suffix": "b", "max_tokens": 2}"#;
    let (status, text) = server.request("", "POST", "/v1/completions", completion, None);
    assert!(
        status == 400 && text.contains("fill-in-the-middle"),
        "{text}"
    );
    server.stop();
}
