//! What several flavors read and write alike: OpenAI's chunk and tool definitions, the chat
//! messages, llama.cpp's timings, a name that must be one path segment.

use serde_json::{Map, Value};

use super::errors::stream_error;
use super::{Ask, Delta};
use crate::checks::tool_call::Tool;

/// A tool's name, description (when it has one) and parameters' schema under `schema_key`,
/// the fields every flavor sends, each in its own envelope.
pub(crate) fn tool_fields(t: &Tool, schema_key: &str) -> Map<String, Value> {
    let mut f = Map::new();
    f.insert("name".into(), Value::String(t.name.clone()));
    if let Some(d) = &t.description {
        f.insert("description".into(), Value::String(d.clone()));
    }
    f.insert(schema_key.into(), t.parameters.clone());
    f
}

/// The probe's tools as OpenAI chat (and Ollama) take them: the definitions as written.
pub(crate) fn openai_tools(tools: &[Tool]) -> Value {
    tools
        .iter()
        .map(|t| serde_json::json!({"type": "function", "function": tool_fields(t, "parameters")}))
        .collect()
}

/// The chunk both OpenAI chat and completions send: an error object, usage (in the last chunk
/// with `stream_options.include_usage`), llama.cpp's `timings`, and `choices[0]`.
pub(crate) fn openai_chunk(v: &Value, choice: fn(&Value) -> Delta) -> Delta {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Delta {
            error: Some(stream_error(err)),
            ..Delta::default()
        };
    }
    let mut d = v["choices"].get(0).map(choice).unwrap_or_default();
    d.output_tokens = v["usage"]["completion_tokens"].as_u64();
    d.reasoning_tokens = v["usage"]["completion_tokens_details"]["reasoning_tokens"].as_u64();
    d.input_tokens = v["usage"]["prompt_tokens"].as_u64();
    d.server_timings = llama_timings(v);
    d.cached_tokens = v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or_else(|| d.server_timings.as_ref()?["cache_n"].as_u64());
    d.model = non_empty(&v["model"]);
    d.fingerprint = non_empty(&v["system_fingerprint"]);
    d
}

/// llama.cpp's own `timings` object beside an event (chat, completions, and Responses'
/// `response.completed`).
pub(crate) fn llama_timings(v: &Value) -> Option<Value> {
    v.get("timings").filter(|t| t.is_object()).cloned()
}

/// A non-empty string field, owned.
pub(crate) fn non_empty(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The server's own time to first token from its timings, in milliseconds: llama.cpp's
/// `prompt_ms`, or Ollama's `load_duration` + `prompt_eval_duration` (nanoseconds).
pub(crate) fn server_ttft_ms(timings: &Value) -> Option<f64> {
    if let Some(ms) = timings["prompt_ms"].as_f64() {
        return Some(ms);
    }
    let ns = timings["prompt_eval_duration"].as_f64()?
        + timings["load_duration"].as_f64().unwrap_or(0.0);
    Some(ns / 1e6)
}

/// A name the path carries as its own segment (Gemini's model ids, Azure's deployment names):
/// letters, digits, `-`, `_` and `.`, never empty, so no `/`, `:`, `?` or space changes the
/// path.
pub(super) fn path_segment(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The prompt's messages as `{role, content}` objects, the nonce line first in the first one.
pub(crate) fn chat_messages(ask: &Ask, nonce: Option<&str>) -> Vec<Value> {
    let mut messages: Vec<Value> = ask
        .messages
        .iter()
        .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
        .collect();
    if let (Some(nonce), Some(first)) = (nonce, messages.first_mut()) {
        let content = first["content"].as_str().unwrap_or_default();
        first["content"] = Value::String(format!("{nonce}\n{content}"));
    }
    messages
}

/// The messages' contents, one paragraph each: the prompt as one text.
pub(crate) fn as_text(ask: &Ask) -> String {
    let parts: Vec<&str> = ask.messages.iter().map(|m| m.content.as_str()).collect();
    parts.join("\n\n")
}

/// A string field of a JSON value, or "".
pub(crate) fn text_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The entry for `model` in a model list's `entries`, found by its `key` (the id or name, with
/// or without Ollama's `:latest`), or the only entry of a server that serves one (llama.cpp
/// lists its file path whatever the request names).
pub(crate) fn model_entry<'v>(entries: &'v [Value], key: &str, model: &str) -> Option<&'v Value> {
    let named = |e: &&Value| {
        e[key]
            .as_str()
            .is_some_and(|n| n == model || n.strip_suffix(":latest") == Some(model))
    };
    match entries.iter().find(named) {
        Some(e) => Some(e),
        None if entries.len() == 1 => Some(&entries[0]),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_segment_is_letters_digits_and_three_marks() {
        for good in ["gemini-2.0-flash-001", "gpt-4o_mini.2"] {
            assert!(path_segment(good), "{good}");
        }
        for bad in [
            "",
            "models/gemini-2.5-flash",
            "a/b",
            "a:b",
            "a b",
            "a?x",
            "ü",
        ] {
            assert!(!path_segment(bad), "{bad}");
        }
    }
}
