//! OpenAI's shapes, which the [`Wire`](super::Wire) defaults speak and the OpenAI-compatible
//! flavors share: chat's chunks and whole answer, the usage chunk and `[DONE]` that end the
//! chunk flavors' streams, the error chunk, the refusal bodies and rate-limit headers, the
//! prompt read from `messages`, and SSE.

use serde_json::{json, Value};

use super::{plain, Ending, Event, Frame, PieceKind, Style};

/// The build the sim reports as its `system_fingerprint`.
pub(super) const FINGERPRINT: &str = concat!("llm-canary-sim-", env!("CARGO_PKG_VERSION"));

/// The data of the end marker.
pub(super) const DONE: &str = "[DONE]";

/// One event as an SSE event: its name if it has one, then its data.
pub(super) fn sse(name: Option<&str>, data: &str, style: Style) -> Vec<u8> {
    let nl = style.newline();
    let prefix = if style.space { "data: " } else { "data:" };
    let event = name.map(|n| format!("event: {n}{nl}")).unwrap_or_default();
    format!("{event}{prefix}{data}{nl}{nl}").into_bytes()
}

/// A message's text: a string, or Anthropic's text blocks.
pub(super) fn content_text(v: &Value) -> String {
    match v.as_array() {
        Some(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        None => v.as_str().unwrap_or_default().to_string(),
    }
}

/// Every message's text, one a line.
pub(super) fn messages_text(messages: &Value) -> String {
    messages
        .as_array()
        .map(|m| {
            m.iter()
                .map(|x| content_text(&x["content"]))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// vLLM's first chat chunk: the role, no token.
pub(super) fn role_chunk(model: &str) -> Event {
    plain(
        json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]}),
    )
}

/// The first `tool_calls` delta: the call's id and name, empty arguments.
pub(super) fn tool_call_start(model: &str, name: &str) -> Event {
    plain(
        json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
               "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_sim", "type": "function", "function": {"name": name, "arguments": ""}}]},
                            "logprobs": null, "finish_reason": null}]}),
    )
}

/// A chat chunk with one token of the answer (`content`) or of the reasoning
/// (`reasoning_content`), or a stretch of the tool call's arguments.
pub(super) fn chat_piece(model: &str, kind: PieceKind, text: &str) -> Event {
    if kind == PieceKind::Tool {
        return plain(
            json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                   "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}, "logprobs": null, "finish_reason": null}]}),
        );
    }
    let field = if kind == PieceKind::Answer {
        "content"
    } else {
        "reasoning_content"
    };
    plain(
        json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
               "choices": [{"index": 0, "delta": {field: text}, "logprobs": null, "finish_reason": null}]}),
    )
}

/// Chat's last chunk: an empty delta with the finish reason.
pub(super) fn chat_last_chunk(model: &str, finish: &str) -> Value {
    json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
           "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]})
}

/// A chunk flavor's end: its `last` chunk (with llama.cpp's `timings`, when the server sends
/// them), the usage chunk when usage is sent, then `[DONE]`.
pub(super) fn closing(mut last: Value, model: &str, end: Ending) -> Vec<Frame> {
    if let Some(t) = end.timings {
        last["timings"] = t;
    }
    let mut v = vec![Frame::Event(plain(last))];
    if let Some(u) = end.usage {
        v.push(Frame::Event(plain(
            json!({"id": "sim", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
                   "usage": {"prompt_tokens": u.prompt, "completion_tokens": u.completion, "total_tokens": u.prompt + u.completion,
                             "prompt_tokens_details": {"cached_tokens": u.cached},
                             "completion_tokens_details": {"reasoning_tokens": u.reasoning}}}),
        )));
    }
    v.push(Frame::Done);
    v
}

/// The usage of a whole answer, as the chunk flavors count it.
pub(super) fn whole_usage(end: &Ending) -> Value {
    let (prompt, completion) = end.usage.map_or((0, 0), |u| (u.prompt, u.completion));
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// Chat's whole answer, with its tool call.
pub(super) fn chat_whole(model: &str, text: &str, end: &Ending) -> Value {
    let mut v = json!({"id": "sim", "object": "chat.completion", "model": model, "system_fingerprint": FINGERPRINT,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": end.finish}], "usage": whole_usage(end)});
    if let Some(c) = end.call {
        v["choices"][0]["message"]["tool_calls"] = json!([{"id": "call_sim", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}]);
    }
    v
}

/// An error chunk inside a stream.
pub(super) fn error(message: &str) -> Event {
    plain(json!({"error": {"message": message, "type": "server_error", "code": 500}}))
}

/// A refusal's body in OpenAI's shape (and, for 529, Anthropic's: its own overload status,
/// whatever the route).
pub(super) fn refusal(status: u16) -> Value {
    let (msg, ty, code_field) = match status {
        400 => (
            "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens.",
            "invalid_request_error",
            json!("context_length_exceeded"),
        ),
        404 => (
            "The model does not exist or you do not have access to it.",
            "invalid_request_error",
            json!("model_not_found"),
        ),
        429 => ("Rate limit exceeded, retry later", "rate_limit_error", json!(status)),
        503 => ("The model is overloaded", "server_error", json!(status)),
        529 => {
            return json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        }
        _ => ("Internal server error", "server_error", json!(status)),
    };
    json!({"error": {"message": msg, "type": ty, "code": code_field}})
}

/// What OpenAI sends with a 429: when to come back, and what is left.
pub(super) fn refusal_headers(status: u16) -> Vec<(&'static str, String)> {
    if status != 429 {
        return vec![];
    }
    vec![
        ("retry-after", "2".into()),
        ("x-ratelimit-remaining-requests", "0".into()),
        ("x-ratelimit-reset-requests", "2s".into()),
    ]
}
