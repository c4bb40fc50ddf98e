//! Reranking on a synthetic Qwen3 reranker (scripts/make-synthetic-models.py's
//! qwen3-reranker-tiny: rank pooling, a yes/no classifier head, the `rerank` template):
//! `/v1/rerank` orders the documents as llama-server does and scores them as it does
//! (tests/data/rerank, written by scripts/rerank-reference.py), in Jina's and TEI's shapes,
//! with `top_n`; the routes without `/v1` answer too; bad requests and a model that is not a
//! reranker are refused with the reason.

mod common;

use common::server::Server;
use common::synthetic::synthetic_path;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// llama.cpp computes in f16 and f32 in another order: scores may differ by this much.
const SCORE_TOL: f64 = 2e-3;

fn body(text: &str) -> Value {
    let (_, body) = text.split_once("\r\n\r\n").expect("a response");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// (index, score) of each result, in order.
fn ranked(results: &Value) -> Vec<(u64, f64)> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let score = r.get("relevance_score").or(r.get("score")).unwrap();
            (r["index"].as_u64().unwrap(), score.as_f64().unwrap())
        })
        .collect()
}

fn reranker() -> std::path::PathBuf {
    let path = synthetic_path("qwen3-reranker-tiny");
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(common::data_path("rerank/llama-server.json")).unwrap(),
    )
    .unwrap();
    let hex: String = Sha256::digest(std::fs::read(&path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex, reference["model_sha256"],
        "the reranker is not the file the reference was recorded on: run \
         scripts/rerank-reference.py"
    );
    path
}

#[test]
fn documents_are_ranked_as_llama_server_ranks_them() {
    let read = |name: &str| -> Value {
        let path = common::data_path(&format!("rerank/{name}"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let (cases, reference) = (read("requests.json"), read("llama-server.json"));
    let server = Server::start_model("rerank", &reranker(), &["-c", "2048"]);
    for (case, answer) in cases
        .as_array()
        .unwrap()
        .iter()
        .zip(reference["cases"].as_array().unwrap())
    {
        let name = &case["name"];
        let (status, text) =
            server.request("", "POST", "/v1/rerank", &case["request"].to_string(), None);
        assert_eq!(status, 200, "{name}: {text}");
        let got = body(&text);
        let want = &answer["response"];
        let (got_results, want_results) = match want {
            Value::Array(_) => (&got, want),
            _ => {
                assert_eq!(got["object"], "list");
                assert_eq!(got["usage"], want["usage"], "{name}");
                (&got["results"], &want["results"])
            }
        };
        let (got_ranks, want_ranks) = (ranked(got_results), ranked(want_results));
        assert_eq!(got_ranks.len(), want_ranks.len(), "{name}: {text}");
        for (g, w) in got_ranks.iter().zip(&want_ranks) {
            assert_eq!(
                g.0, w.0,
                "{name}: order {got_ranks:?}, llama-server's {want_ranks:?}"
            );
            assert!(
                (g.1 - w.1).abs() < SCORE_TOL,
                "{name}: {got_ranks:?} vs {want_ranks:?}"
            );
        }
        // TEI's texts come back where asked for.
        for (g, w) in got_results
            .as_array()
            .unwrap()
            .iter()
            .zip(want_results.as_array().unwrap())
        {
            assert_eq!(g.get("text"), w.get("text"), "{name}");
        }
    }

    // Jina's document objects and return_documents; the route without /v1.
    let request = json!({
        "query": "capital of France",
        "documents": [{"text": "Paris is in France."}, "Berlin is in Germany."],
        "return_documents": true,
        "top_n": 1,
    });
    let (status, text) = server.request("", "POST", "/rerank", &request.to_string(), None);
    assert_eq!(status, 200, "{text}");
    let results = &body(&text)["results"];
    assert_eq!(results.as_array().unwrap().len(), 1);
    let i = results[0]["index"].as_u64().unwrap() as usize;
    let texts = ["Paris is in France.", "Berlin is in Germany."];
    assert_eq!(results[0]["document"]["text"], texts[i]);

    // Bad requests: the reason, and the parameter.
    for (request, param) in [
        (json!({"documents": ["a"]}), "query"),
        (json!({"query": 3, "documents": ["a"]}), "query"),
        (json!({"query": "q", "documents": []}), "documents"),
        (json!({"query": "q", "documents": [7]}), "documents"),
        (
            json!({"query": "q", "documents": ["a"], "top_n": 0}),
            "top_n",
        ),
        (
            json!({"query": "q", "documents": ["a ".repeat(3000)]}),
            "documents",
        ),
    ] {
        let (status, text) = server.request("", "POST", "/v1/rerank", &request.to_string(), None);
        assert_eq!(status, 400, "{request}: {text}");
        assert_eq!(body(&text)["error"]["param"], param, "{request}: {text}");
    }
    // Ollama's model facts name the capability.
    let (_, text) = server.request(
        "",
        "POST",
        "/api/show",
        r#"{"model":"qwen3-reranker-tiny-v1"}"#,
        None,
    );
    assert!(
        body(&text)["capabilities"].to_string().contains("rerank"),
        "{text}"
    );
    let log = server.stop();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_model_that_is_not_a_reranker_says_so() {
    let server = Server::start_model("rerank-plain", &synthetic_path("qwen3-tiny"), &[]);
    let request = json!({"query": "q", "documents": ["a", "b"]});
    let (status, text) = server.request("", "POST", "/v1/rerank", &request.to_string(), None);
    assert_eq!(status, 501, "{text}");
    assert!(text.contains("not a reranker"), "{text}");
}
