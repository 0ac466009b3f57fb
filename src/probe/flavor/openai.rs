//! OpenAI's chat wire format, `POST {base_url}/chat/completions` with `messages`, whose streamed
//! deltas carry `content`, `reasoning_content` (or `reasoning`) and `tool_calls`: the pieces the
//! `Flavor` trait's defaults speak (they build the body from them), and other flavors borrow.

use serde_json::{json, Map, Value};

use super::ask::Ask;
use super::delta::Delta;
use super::helpers::text_of;

pub(super) const PATH: &str = "/chat/completions";

/// Streaming with usage, the token limit and the temperature, as both OpenAI flavors take them.
pub(crate) fn openai_generation(body: &mut Map<String, Value>, ask: &Ask) {
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    body.insert("max_tokens".into(), json!(ask.max_tokens));
    if let Some(t) = ask.temperature {
        body.insert("temperature".into(), json!(t));
    }
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
    let mut delta = Delta {
        text: content.to_string(),
        reasoning_chars: reasoning.chars().count(),
        finish_reason: choice["finish_reason"].as_str().map(str::to_string),
        ..Delta::default()
    };
    // Streamed, a call's first piece has its index, id and name; the rest add arguments.
    for (i, c) in d["tool_calls"].as_array().into_iter().flatten().enumerate() {
        let slot = c["index"].as_u64().or(Some(i as u64));
        let f = &c["function"];
        delta.push_call(slot, f["name"].as_str(), text_of(&f["arguments"]));
    }
    delta
}
