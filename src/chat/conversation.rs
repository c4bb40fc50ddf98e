//! A conversation on disk, as `kolibri chat`'s `/save` writes it and `/load` reads it: `{"messages": [{"role", "content"}, ...]}`,
//! the shape of OpenAI's chat messages, so a saved chat can be sent to the server as it is.

use serde_json::{json, Value};

/// A system prompt and the turns after it, as (role, text).
#[derive(Debug, Default, PartialEq)]
pub struct Conversation {
    pub system: Option<String>,
    pub turns: Vec<(&'static str, String)>,
}

impl Conversation {
    pub fn to_json(&self) -> String {
        let system = self.system.iter().map(|s| ("system", s.as_str()));
        let turns = self.turns.iter().map(|(r, t)| (*r, t.as_str()));
        let messages: Vec<Value> = system
            .chain(turns)
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let doc = json!({ "messages": messages });
        serde_json::to_string_pretty(&doc).expect("JSON values serialize")
    }

    /// Reads what [`Conversation::to_json`] writes, or a bare list of messages. A system
    /// message may come first; the others are user and assistant turns with text content.
    pub fn from_json(text: &str) -> Result<Conversation, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let messages = doc
            .get("messages")
            .unwrap_or(&doc)
            .as_array()
            .ok_or("expected {\"messages\": [...]} or a list of messages")?;
        let mut conversation = Conversation::default();
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str);
            let content = m.get("content").and_then(Value::as_str);
            let (Some(role), Some(content)) = (role, content) else {
                return Err(format!(
                    "message {i}: needs a \"role\" and a text \"content\""
                ));
            };
            let content = content.to_string();
            match role {
                "system" if i == 0 => conversation.system = Some(content),
                "user" => conversation.turns.push(("user", content)),
                "assistant" => conversation.turns.push(("assistant", content)),
                other => return Err(format!("message {i}: role {other:?} is not kept in a chat")),
            }
        }
        Ok(conversation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_conversation_loads_back() {
        let c = Conversation {
            system: Some("Be brief.".into()),
            turns: vec![
                ("user", "Hi \"there\"\n".into()),
                ("assistant", "Hello.".into()),
            ],
        };
        assert_eq!(Conversation::from_json(&c.to_json()).unwrap(), c);
        let bare = r#"[{"role": "user", "content": "x"}]"#;
        assert_eq!(Conversation::from_json(bare).unwrap().turns.len(), 1);
    }

    #[test]
    fn damaged_files_are_errors() {
        for bad in [
            "",
            "{}",
            "[1]",
            r#"[{"role": "tool", "content": "x"}]"#,
            r#"[{"role": "user"}]"#,
            r#"[{"role": "user", "content": "x"}, {"role": "system", "content": "late"}]"#,
        ] {
            assert!(Conversation::from_json(bad).is_err(), "{bad}");
        }
    }
}
