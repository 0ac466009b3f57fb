//! Ollama's chat (`/api/chat`, its base URL has no `/v1`): `options.num_predict`, streaming
//! unless told not to; NDJSON lines out, each a message with `content` or `thinking`, a tool
//! call whole in one line, and a last line `done: true` with the reason and the counts and
//! durations Ollama reports.

use serde_json::{json, Value};

use super::{plain, Call, Ending, Event, Frame, Oversized, PieceKind, Style, Wire};

/// Ollama.
pub(super) struct Ollama;

impl Wire for Ollama {
    fn serves(&self, route: &str) -> bool {
        route == "/api/chat"
    }

    fn route(&self) -> String {
        "Ollama's /api/chat (its base_url has no /v1)".into()
    }

    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["options"]["num_predict"].as_u64()
    }

    fn stream(&self, body: &Value) -> bool {
        body["stream"].as_bool().unwrap_or(true)
    }

    fn sends_usage(&self, _body: &Value) -> bool {
        true
    }

    fn content_type(&self) -> &'static str {
        "application/x-ndjson"
    }

    /// One JSON object a line; there are no event names.
    fn encode(&self, _name: Option<&str>, data: &str, style: Style) -> Vec<u8> {
        format!("{data}{}", style.newline()).into_bytes()
    }

    /// A blank line.
    fn keep_alive(&self) -> &'static [u8] {
        b"\n"
    }

    fn oversized(&self) -> Oversized {
        Oversized::Line(b"{\"message\":{\"content\":\"")
    }

    fn opening(&self, _model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![]
    }

    fn tool_call_start(&self, _model: &str, _name: &str, _block: usize) -> Vec<Event> {
        vec![]
    }

    fn whole_call(&self, model: &str, call: &Call) -> Option<Event> {
        Some(plain(
            json!({"model": model, "created_at": "2026-01-01T00:00:00Z",
                   "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": call.name, "arguments": call.arguments_value()}}]},
                   "done": false}),
        ))
    }

    /// A message with the answer's `content` or the reasoning's `thinking`.
    fn piece(&self, model: &str, kind: PieceKind, text: &str, _block: usize) -> Event {
        let field = if kind == PieceKind::Reasoning {
            "thinking"
        } else {
            "content"
        };
        plain(
            json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": {"role": "assistant", field: text}, "done": false}),
        )
    }

    fn closing(&self, model: &str, end: Ending) -> Vec<Frame> {
        let length = end.finish == "length";
        let mut last = json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": {"role": "assistant", "content": ""},
                              "done": true, "done_reason": if length { "length" } else { "stop" }});
        if let Some(u) = end.usage {
            // Ollama counts only the prompt tokens it evaluated: not the cached ones.
            last["prompt_eval_count"] = json!(u.prompt - u.cached);
            last["eval_count"] = json!(u.completion);
        }
        if let Some(t) = end.timings {
            for k in [
                "total_duration",
                "load_duration",
                "prompt_eval_duration",
                "eval_duration",
            ] {
                last[k] = t[k].clone();
            }
        }
        vec![Frame::Event(plain(last))]
    }

    fn error(&self, message: &str) -> Event {
        plain(json!({"error": message}))
    }

    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        let length = end.finish == "length";
        let completion = end.usage.map_or(0, |u| u.completion);
        let mut v = json!({"model": model, "message": {"role": "assistant", "content": text}, "done": true,
                           "done_reason": if length { "length" } else { "stop" }, "eval_count": completion});
        if let Some(c) = end.call {
            v["message"]["tool_calls"] =
                json!([{"function": {"name": c.name, "arguments": c.arguments_value()}}]);
        }
        v
    }
}
