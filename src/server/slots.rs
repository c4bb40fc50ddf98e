//! `POST /slots/{id}?action=save|restore|erase` (llama-server's slot persistence): a slot's
//! tokens and KV cache written to a file under `--slot-save-path` and read back, so a long
//! shared prompt survives a restart. Save and restore take `{"filename": "NAME"}`: a plain
//! file name inside that directory, never a path.

use std::path::PathBuf;

use crate::batching::{SlotAction, SlotError};
use crate::model::ModelError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::routes::{body_bytes, App};

pub async fn slot_action(
    State(app): App,
    headers: HeaderMap,
    Path(id): Path<String>,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    app.authorize(&headers)?;
    let Some(dir) = app.slot_save_path.clone() else {
        return Err(ApiError::not_implemented(
            "slot save and restore are off: start the server with --slot-save-path DIR".into(),
        ));
    };
    let slot: usize = id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("slot id {id:?} is not a number"), None))?;
    let action = query_value(&uri, "action").unwrap_or_default();
    let named = |body| -> Result<(PathBuf, String), ApiError> {
        let name = file_name(&body_bytes(body)?)?;
        Ok((dir.join(&name), name))
    };
    let (action, filename) = match action.as_str() {
        "save" => {
            let (path, name) = named(body)?;
            (SlotAction::Save(path), Some(name))
        }
        "restore" => {
            let (path, name) = named(body)?;
            (SlotAction::Restore(path), Some(name))
        }
        "erase" => (SlotAction::Erase, None),
        other => {
            return Err(ApiError::bad_request(
                format!("action {other:?}: use ?action=save, restore or erase"),
                Some("action"),
            ))
        }
    };
    let kind = action.clone();
    // Loading on demand, `?model=NAME` says whose slot (else the one model resident).
    let engine = app.engine(query_value(&uri, "model").as_deref()).await?;
    let done = tokio::task::spawn_blocking(move || engine.scheduler.slot_action(slot, action))
        .await
        .map_err(|e| ApiError::server(format!("slot action failed: {e}")))?;
    let report = done.map_err(|e| slot_error(e, &kind))?;
    let ms = report.elapsed.as_secs_f64() * 1e3;
    let body: Value = match kind {
        SlotAction::Save(_) => json!({
            "id_slot": slot, "filename": filename, "n_saved": report.n_tokens,
            "n_written": report.n_bytes, "timings": { "save_ms": ms },
        }),
        SlotAction::Restore(_) => json!({
            "id_slot": slot, "filename": filename, "n_restored": report.n_tokens,
            "n_read": report.n_bytes, "timings": { "restore_ms": ms },
        }),
        SlotAction::Erase => json!({ "id_slot": slot, "n_erased": report.n_tokens }),
    };
    Ok(Json(body).into_response())
}

fn slot_error(e: SlotError, action: &SlotAction) -> ApiError {
    match e {
        SlotError::NoSuchSlot { .. } => ApiError::bad_request(e.to_string(), Some("id_slot")),
        SlotError::Busy { .. } => ApiError::conflict(e.to_string()),
        SlotError::Stopped => ApiError::unavailable(e.to_string()),
        SlotError::State(ModelError::Io(m)) if matches!(action, SlotAction::Restore(_)) => {
            ApiError::bad_request(m, Some("filename"))
        }
        SlotError::State(ModelError::BadState(m)) => ApiError::bad_request(m, Some("filename")),
        SlotError::State(other) => ApiError::server(other.to_string()),
    }
}

/// The value of `key` in the URI's query (`a=b&c=d`; the values used here need no decoding).
fn query_value(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// The `filename` of a JSON body, if it is a plain file name: no directories, no leading dot,
/// no characters file systems treat specially, at most 255 bytes.
fn file_name(body: &[u8]) -> Result<String, ApiError> {
    let bad = |m: &str| ApiError::bad_request(m.into(), Some("filename"));
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}"), None))?;
    let name = v
        .get("filename")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the body needs a string \"filename\""))?;
    let special = |c: char| c.is_control() || "/\\:*?\"<>|".contains(c);
    if name.is_empty() || name.len() > 255 {
        return Err(bad("filename must be 1 to 255 bytes"));
    }
    if name.starts_with('.') || name.ends_with(' ') || name.chars().any(special) {
        return Err(bad(
            "filename must be a plain file name: no directories, no leading dot, none of \
             / \\ : * ? \" < > | or control characters",
        ));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Result<String, ApiError> {
        file_name(json!({ "filename": s }).to_string().as_bytes())
    }

    #[test]
    fn only_plain_file_names_pass() {
        for ok in ["slot.bin", "a b.state", "x", "ünïcode.bin"] {
            assert_eq!(name(ok).unwrap(), ok);
        }
        let long = "a".repeat(256);
        for bad in [
            "",
            "../x",
            "a/b",
            "/etc/passwd",
            ".hidden",
            "..",
            "a\\b",
            "c:x",
            "a\nb",
            &long,
        ] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
        assert!(file_name(b"{}").is_err());
        assert!(file_name(b"not json").is_err());
        assert!(file_name(br#"{"filename": 3}"#).is_err());
    }

    #[test]
    fn query_values() {
        let uri: Uri = "/slots/0?x=1&action=save".parse().unwrap();
        assert_eq!(query_value(&uri, "action").as_deref(), Some("save"));
        assert_eq!(query_value(&uri, "y"), None);
        assert_eq!(query_value(&"/slots/0".parse().unwrap(), "action"), None);
    }
}
