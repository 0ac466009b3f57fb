//! API flavors: one file each, one arm per function here. A flavor knows its path, the body
//! that carries the prompt and its generation limits, how its stream is framed, and what one
//! event of it carried; the envelope around it (request id, cache busting, priority, deadlines,
//! caps, outcomes) lives in `probe` and is shared.

pub mod anthropic_messages;
pub mod azure_openai;
pub mod bedrock;
pub mod gemini;
pub mod ollama;
pub mod openai_chat;
pub mod openai_completions;
pub mod openai_responses;

use serde_json::{Map, Value};

use crate::checks::tool_call::{Tool, ToolCall};
use crate::config::{Api, Probe};

/// A piece of a tool call as it streams: the call it belongs to (`slot`: the flavor's index of
/// it; `None` when every piece is a whole call of its own, as Ollama sends them), the tool's
/// name when this piece carries it, and the next stretch of its arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallPiece {
    pub slot: Option<u64>,
    pub name: Option<String>,
    pub arguments: String,
}

/// Tool calls put together from their pieces, in the order they began.
#[derive(Debug, Clone, Default)]
pub struct ToolCalls {
    calls: Vec<ToolCall>,
    /// Each call's slot, beside `calls`.
    slots: Vec<Option<u64>>,
}

impl ToolCalls {
    /// Adds a piece to the call it continues (the same slot), or starts a call with it.
    pub fn take(&mut self, piece: ToolCallPiece) {
        let open = piece
            .slot
            .and_then(|s| self.slots.iter().rposition(|&o| o == Some(s)));
        match open {
            Some(i) => {
                let call = &mut self.calls[i];
                if call.name.is_empty() {
                    call.name = piece.name.unwrap_or_default();
                }
                call.arguments.push_str(&piece.arguments);
            }
            None => {
                self.calls.push(ToolCall {
                    name: piece.name.unwrap_or_default(),
                    arguments: piece.arguments,
                });
                self.slots.push(piece.slot);
            }
        }
    }

    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }
}

/// What one event (or a whole non-streamed answer) carried, as a flavor reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// Generated text the user sees: answer text and tool-call text.
    pub text: String,
    /// The same tool-call text, by call: names and arguments.
    pub tool_calls: Vec<ToolCallPiece>,
    pub reasoning_chars: usize,
    /// In OpenAI's words: `stop`, `length` (the token limit cut the answer), `tool_calls`...
    pub finish_reason: Option<String>,
    /// The server's count of output tokens so far (a total, never a piece to add up).
    pub output_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// The server's count of prompt (input) tokens.
    pub input_tokens: Option<u64>,
    /// The server's count of prompt tokens served from its prefix cache: OpenAI's and vLLM's
    /// `usage.prompt_tokens_details.cached_tokens` (the Responses API's
    /// `input_tokens_details`), llama.cpp's `timings.cache_n`, Anthropic's
    /// `cache_read_input_tokens` (which its `input_tokens` leaves out).
    pub cached_tokens: Option<u64>,
    /// An error the server reported inside a successful response.
    pub error: Option<String>,
    /// The flavor's last event: nothing more will come.
    pub done: bool,
    /// The server's own timings, under their own names.
    pub server_timings: Option<Value>,
    /// The model name the server echoes.
    pub model: Option<String>,
    /// What the server says identifies its build (`system_fingerprint`).
    pub fingerprint: Option<String>,
}

impl Delta {
    /// Text, reasoning or a tool call: a role-only or empty chunk is not a token.
    pub fn is_generated(&self) -> bool {
        !self.text.is_empty() || self.reasoning_chars > 0
    }

    /// A tool call's piece, whose text also counts as generated text.
    fn push_call(&mut self, slot: Option<u64>, name: Option<&str>, arguments: &str) {
        let name = name.filter(|n| !n.is_empty());
        self.text.push_str(name.unwrap_or_default());
        self.text.push_str(arguments);
        self.tool_calls.push(ToolCallPiece {
            slot,
            name: name.map(str::to_string),
            arguments: arguments.to_string(),
        });
    }
}

/// A tool's name, description (when it has one) and parameters' schema under `schema_key`,
/// the fields every flavor sends, each in its own envelope.
pub fn tool_fields(t: &Tool, schema_key: &str) -> Map<String, Value> {
    let mut f = Map::new();
    f.insert("name".into(), Value::String(t.name.clone()));
    if let Some(d) = &t.description {
        f.insert("description".into(), Value::String(d.clone()));
    }
    f.insert(schema_key.into(), t.parameters.clone());
    f
}

/// The probe's tools as OpenAI chat (and Ollama) take them: the definitions as written.
pub fn openai_tools(tools: &[Tool]) -> Value {
    tools
        .iter()
        .map(|t| serde_json::json!({"type": "function", "function": tool_fields(t, "parameters")}))
        .collect()
}

/// How a flavor frames its events on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    Sse,
    /// One JSON object per line.
    Ndjson,
    /// AWS's binary event stream: length-prefixed frames with CRCs.
    EventStream,
}

/// The path (and query) the flavor appends to the target's `base_url`; the hosted APIs name
/// the model (or deployment) in it.
pub fn path(api: Api, model: &str) -> String {
    match api {
        Api::OpenaiChat => openai_chat::PATH.into(),
        Api::OpenaiCompletions => openai_completions::PATH.into(),
        Api::OpenaiResponses => openai_responses::PATH.into(),
        Api::AnthropicMessages => anthropic_messages::PATH.into(),
        Api::Ollama => ollama::PATH.into(),
        Api::AzureOpenai => azure_openai::path(model),
        Api::Gemini => gemini::path(model),
        Api::Bedrock => bedrock::path(model),
    }
}

/// Whether the body names the model: in every flavor but Gemini's and Bedrock's, whose paths
/// name it (Gemini's request has no `model` field; Bedrock's body refuses unknown keys).
pub fn model_in_body(api: Api) -> bool {
    !matches!(api, Api::Gemini | Api::Bedrock)
}

pub fn framing(api: Api) -> Framing {
    match api {
        Api::Ollama => Framing::Ndjson,
        Api::Bedrock => Framing::EventStream,
        _ => Framing::Sse,
    }
}

/// The flavor's part of the body: the prompt (with `nonce` first when caches are busted by
/// prefix), streaming on, the token limit and the temperature.
pub fn body(api: Api, probe: &Probe, nonce: Option<&str>) -> Map<String, Value> {
    match api {
        Api::OpenaiChat | Api::AzureOpenai => openai_chat::body(probe, nonce),
        Api::OpenaiCompletions => openai_completions::body(probe, nonce),
        Api::OpenaiResponses => openai_responses::body(probe, nonce),
        Api::AnthropicMessages => anthropic_messages::body(probe, nonce),
        Api::Ollama => ollama::body(probe, nonce),
        Api::Gemini => gemini::body(probe, nonce),
        Api::Bedrock => bedrock::body(probe, nonce),
    }
}

/// What one event carried. `kind` is the SSE event name (`message` when unnamed), or an
/// event-stream frame's event type.
pub fn event(api: Api, kind: &str, v: &Value) -> Delta {
    match api {
        Api::OpenaiChat | Api::AzureOpenai => openai_chunk(v, openai_chat::delta),
        Api::OpenaiCompletions => openai_chunk(v, openai_completions::delta),
        Api::OpenaiResponses => openai_responses::event(kind, v),
        Api::AnthropicMessages => anthropic_messages::event(kind, v),
        Api::Ollama => ollama::event(v),
        Api::Gemini => gemini::event(v),
        Api::Bedrock => bedrock::event(kind, v),
    }
}

/// What a whole, non-streamed answer carried (a server that ignored `stream: true`).
pub fn whole(api: Api, v: &Value) -> Delta {
    match api {
        Api::OpenaiResponses => openai_responses::whole(v),
        Api::AnthropicMessages => anthropic_messages::whole(v),
        Api::Bedrock => bedrock::whole(v),
        _ => event(api, "message", v),
    }
}

/// The chunk both OpenAI chat and completions send: an error object, usage (in the last chunk
/// with `stream_options.include_usage`), llama.cpp's `timings`, and `choices[0]`.
fn openai_chunk(v: &Value, choice: fn(&Value) -> Delta) -> Delta {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Delta {
            error: Some(error_message(err)),
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
fn llama_timings(v: &Value) -> Option<Value> {
    v.get("timings").filter(|t| t.is_object()).cloned()
}

/// A non-empty string field, owned.
pub fn non_empty(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The server's own time to first token from its timings, in milliseconds: llama.cpp's
/// `prompt_ms`, or Ollama's `load_duration` + `prompt_eval_duration` (nanoseconds).
pub fn server_ttft_ms(timings: &Value) -> Option<f64> {
    if let Some(ms) = timings["prompt_ms"].as_f64() {
        return Some(ms);
    }
    let ns = timings["prompt_eval_duration"].as_f64()?
        + timings["load_duration"].as_f64().unwrap_or(0.0);
    Some(ns / 1e6)
}

/// An error object's message (`{"message": ...}`), or the object itself as text.
pub fn error_message(err: &Value) -> String {
    err["message"]
        .as_str()
        .or(err["error"]["message"].as_str())
        .or(err.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string())
}

/// The prompt's messages as `{role, content}` objects, the nonce line first in the first one.
pub fn chat_messages(probe: &Probe, nonce: Option<&str>) -> Vec<Value> {
    let mut messages: Vec<Value> = probe
        .prompt
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

/// A string field of a JSON value, or "".
pub fn text_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A prompt of these (role, content) messages, for the flavors' tests.
#[cfg(test)]
pub fn prompt_of(messages: &[(crate::config::Role, &str)]) -> crate::config::Prompt {
    crate::config::Prompt {
        name: "x".into(),
        messages: messages
            .iter()
            .map(|&(role, content)| crate::config::Message {
                role,
                content: content.into(),
            })
            .collect(),
    }
}

/// A probe with defaults around `prompt`, for the flavors' tests.
#[cfg(test)]
pub fn probe_for(prompt: crate::config::Prompt) -> Probe {
    Probe {
        name: "p".into(),
        file: "p.yaml".into(),
        schedule: None,
        timezone: jiff::tz::TimeZone::UTC,
        jitter: std::time::Duration::ZERO,
        targets: vec![],
        prompt: std::sync::Arc::new(prompt),
        max_tokens: 64,
        temperature: Some(0.0),
        cache_bust: crate::config::CacheBust::Auto,
        tools: None,
        timeouts: crate::config::Timeouts::default(),
        checks: crate::checks::CheckSpec::default(),
        gate: crate::config::GateSpec::default(),
        confirm: crate::config::Confirm::OFF,
        slo: None,
        cache_check: None,
        ladder: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(slot: Option<u64>, name: Option<&str>, arguments: &str) -> ToolCallPiece {
        ToolCallPiece {
            slot,
            name: name.map(str::to_string),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn tool_call_pieces_join_by_slot() {
        let mut calls = ToolCalls::default();
        for p in [
            piece(Some(0), Some("get_weather"), ""),
            piece(Some(0), None, "{\"city\":"),
            piece(Some(1), Some("get_time"), "{}"),
            piece(Some(0), None, " \"Paris\"}"),
            // Whole calls without a slot (Ollama) each stand alone.
            piece(None, Some("a"), "{}"),
            piece(None, Some("b"), "{}"),
        ] {
            calls.take(p);
        }
        let got: Vec<(&str, &str)> = calls
            .calls()
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("get_weather", "{\"city\": \"Paris\"}"),
                ("get_time", "{}"),
                ("a", "{}"),
                ("b", "{}")
            ]
        );
    }
}
