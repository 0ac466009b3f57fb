//! The `openai-chat` flavor: `POST {base_url}/chat/completions` with `messages`; streamed
//! deltas carry `content`, `reasoning_content` (or `reasoning`) and `tool_calls`.

use serde_json::{json, Map, Value};

use super::Delta;
use crate::config::Prompt;

pub const PATH: &str = "/chat/completions";

pub fn body(prompt: &Prompt, nonce_line: Option<&str>) -> Map<String, Value> {
    let mut messages: Vec<Value> = prompt
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    if let (Some(nonce), Some(first)) = (nonce_line, messages.first_mut()) {
        let content = first["content"].as_str().unwrap_or_default();
        first["content"] = Value::String(format!("{nonce}\n{content}"));
    }
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(messages));
    body
}

fn text_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// One streamed choice (`choices[0]`), or a whole non-streamed one (`message` instead of
/// `delta`).
pub fn delta(choice: &Value) -> Delta {
    let d = choice
        .get("delta")
        .or_else(|| choice.get("message"))
        .unwrap_or(&Value::Null);
    let content = text_of(&d["content"]);
    let reasoning = if d["reasoning_content"].is_string() {
        text_of(&d["reasoning_content"])
    } else {
        text_of(&d["reasoning"])
    };
    let mut text = content.to_string();
    if let Some(calls) = d["tool_calls"].as_array() {
        for c in calls {
            text.push_str(text_of(&c["function"]["name"]));
            text.push_str(text_of(&c["function"]["arguments"]));
        }
    }
    Delta {
        text,
        reasoning_chars: reasoning.chars().count(),
        finish_reason: choice["finish_reason"].as_str().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_only_chunk_is_not_content() {
        let d = delta(
            &json!({"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}),
        );
        assert!(!d.is_generated());
    }

    #[test]
    fn reasoning_and_tool_calls_are_generated_content() {
        let d = delta(&json!({"delta":{"reasoning_content":"hmm"}}));
        assert!(d.is_generated());
        assert_eq!(d.text, "");
        let d =
            delta(&json!({"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}));
        assert_eq!(d.text, "{\"a\"");
        let d = delta(
            &json!({"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}),
        );
        assert_eq!(
            (d.text.as_str(), d.finish_reason.as_deref()),
            ("Paris.", Some("stop"))
        );
    }

    #[test]
    fn nonce_goes_first() {
        let p = Prompt::user("x", "What is the capital of France?");
        let b = body(&p, Some("[canary 1234]"));
        assert_eq!(
            b["messages"][0]["content"],
            "[canary 1234]\nWhat is the capital of France?"
        );
        assert_eq!(b["messages"][0]["role"], "user");
    }
}
