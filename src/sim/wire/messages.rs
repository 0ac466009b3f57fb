//! Anthropic Messages (`/v1/messages`): a `system` and `messages` in; named events out —
//! `message_start` (output tokens counted from 1, as Anthropic does) and a `ping`, a content
//! block per kind of content (text, thinking, `tool_use`) with its deltas, `message_delta` with
//! the stop reason and the cumulative usage, `message_stop` — and pings between deltas, as
//! Anthropic's servers keep a stream alive.

use serde_json::{json, Value};

use super::{named, openai, Ending, Event, Frame, PieceKind, Style, Wire};

/// Anthropic Messages.
pub(super) struct Messages;

/// A ping event's data, as Anthropic's servers write it between deltas.
const PING: &str = "{\"type\": \"ping\"}";

/// OpenAI's finish reason as Anthropic's `stop_reason`.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        crate::checks::CONTENT_FILTER => "refusal",
        _ => "end_turn",
    }
}

impl Wire for Messages {
    fn serves(&self, route: &str) -> bool {
        route == "/v1/messages"
    }

    fn route(&self) -> String {
        "/v1/messages".into()
    }

    /// The system prompt (a string or text blocks), then the messages.
    fn prompt(&self, body: &Value) -> String {
        let system = openai::content_text(&body["system"]);
        let messages = openai::messages_text(&body["messages"]);
        if system.is_empty() {
            messages
        } else {
            format!("{system}\n{messages}")
        }
    }

    fn tool_name(&self, body: &Value) -> Option<String> {
        body["tools"][0]["name"].as_str().map(str::to_string)
    }

    fn sends_usage(&self, _body: &Value) -> bool {
        true
    }

    /// Pings are not chunks: a quiet stream kept alive with them is still a stall.
    fn ping(&self, style: Style) -> Option<Vec<u8>> {
        Some(openai::sse(Some("ping"), PING, style))
    }

    fn opening(&self, model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![
            named(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg-sim", "type": "message", "role": "assistant", "model": model,
                       "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            named("ping", json!({"type": "ping"})),
        ]
    }

    /// A content block opens before its first delta, and closes when the kind of content
    /// changes. A tool call's block is opened by [`Wire::tool_call_start`].
    fn block_change(&self, from: Option<PieceKind>, to: PieceKind, index: usize) -> Vec<Event> {
        if from == Some(to) {
            return vec![];
        }
        let mut v = Vec::new();
        if from.is_some() {
            v.push(named(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index - 1}),
            ));
        }
        let block = match to {
            PieceKind::Answer => json!({"type": "text", "text": ""}),
            PieceKind::Reasoning => json!({"type": "thinking", "thinking": ""}),
            PieceKind::Tool => return v,
        };
        v.push(named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        v
    }

    /// The `tool_use` block.
    fn tool_call_start(&self, _model: &str, name: &str, block: usize) -> Vec<Event> {
        vec![named(
            "content_block_start",
            json!({"type": "content_block_start", "index": block,
                   "content_block": {"type": "tool_use", "id": "toolu_sim", "name": name, "input": {}}}),
        )]
    }

    fn piece(&self, _model: &str, kind: PieceKind, text: &str, block: usize) -> Event {
        let delta = match kind {
            PieceKind::Tool => json!({"type": "input_json_delta", "partial_json": text}),
            PieceKind::Answer => json!({"type": "text_delta", "text": text}),
            PieceKind::Reasoning => json!({"type": "thinking_delta", "thinking": text}),
        };
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": block, "delta": delta}),
        )
    }

    fn closing(&self, _model: &str, end: Ending) -> Vec<Frame> {
        let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(end.finish), "stop_sequence": null}});
        if let Some(u) = end.usage {
            // Cumulative, as Anthropic sends it: the whole count, not what came since
            // message_start's 1.
            delta["usage"] = json!({"output_tokens": u.completion});
        }
        vec![
            Frame::Event(named(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": end.block}),
            )),
            Frame::Event(named("message_delta", delta)),
            Frame::Event(named("message_stop", json!({"type": "message_stop"}))),
        ]
    }

    fn error(&self, message: &str) -> Event {
        named(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        )
    }

    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        let (prompt, completion) = end.usage.map_or((0, 0), |u| (u.prompt, u.completion));
        let mut v = json!({"id": "msg-sim", "type": "message", "role": "assistant", "model": model,
                           "content": [{"type": "text", "text": text}],
                           "stop_reason": stop_reason(end.finish),
                           "usage": {"input_tokens": prompt, "output_tokens": completion}});
        if let Some(c) = end.call {
            v["content"] = json!([{"type": "tool_use", "id": "toolu_sim", "name": c.name, "input": c.arguments_value()}]);
        }
        v
    }
}
