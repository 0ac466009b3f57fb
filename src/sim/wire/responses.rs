//! OpenAI Responses (`/v1/responses`): `input` in; named events out — `response.created`, the
//! text, reasoning and function-call argument deltas, and `response.completed` (or
//! `response.incomplete`, with its reason) carrying the usage and the output.

use serde_json::{json, Value};

use super::{named, openai, Ending, Event, Frame, PieceKind, Wire};

/// OpenAI Responses.
pub(super) struct Responses;

/// A tool call as an output item, done.
fn call_item(c: &super::Call) -> Value {
    json!({"type": "function_call", "id": "fc-sim", "call_id": "call_sim", "name": c.name, "arguments": c.arguments, "status": "completed"})
}

impl Wire for Responses {
    fn serves(&self, route: &str) -> bool {
        route == "/v1/responses"
    }

    fn route(&self) -> String {
        "/v1/responses".into()
    }

    /// A string, or messages.
    fn prompt(&self, body: &Value) -> String {
        match &body["input"] {
            Value::String(s) => s.clone(),
            v => openai::messages_text(v),
        }
    }

    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["max_output_tokens"].as_u64()
    }

    fn tool_name(&self, body: &Value) -> Option<String> {
        body["tools"][0]["name"].as_str().map(str::to_string)
    }

    fn sends_usage(&self, _body: &Value) -> bool {
        true
    }

    fn opening(&self, model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![named(
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp-sim", "status": "in_progress", "model": model}}),
        )]
    }

    /// The `function_call` output item, added.
    fn tool_call_start(&self, _model: &str, name: &str, block: usize) -> Vec<Event> {
        vec![named(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": block,
                   "item": {"type": "function_call", "id": "fc-sim", "call_id": "call_sim", "name": name, "arguments": "", "status": "in_progress"}}),
        )]
    }

    fn piece(&self, _model: &str, kind: PieceKind, text: &str, block: usize) -> Event {
        match kind {
            PieceKind::Tool => named(
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "item_id": "fc-sim", "output_index": block, "delta": text}),
            ),
            PieceKind::Answer => named(
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "item_id": "msg-sim", "output_index": 0, "content_index": 0, "delta": text}),
            ),
            PieceKind::Reasoning => named(
                "response.reasoning_text.delta",
                json!({"type": "response.reasoning_text.delta", "item_id": "rs-sim", "output_index": 0, "content_index": 0, "delta": text}),
            ),
        }
    }

    /// The call's item done, then the response completed, or incomplete for its length or
    /// the content filter.
    fn closing(&self, model: &str, end: Ending) -> Vec<Frame> {
        let usage = end.usage.map(|u| json!({"input_tokens": u.prompt, "output_tokens": u.completion, "total_tokens": u.prompt + u.completion,
                                              "input_tokens_details": {"cached_tokens": u.cached},
                                              "output_tokens_details": {"reasoning_tokens": u.reasoning}}));
        let (name, status, details) = if end.finish == "length" {
            (
                "response.incomplete",
                "incomplete",
                json!({"reason": "max_output_tokens"}),
            )
        } else if end.finish == crate::checks::CONTENT_FILTER {
            (
                "response.incomplete",
                "incomplete",
                json!({"reason": "content_filter"}),
            )
        } else {
            ("response.completed", "completed", Value::Null)
        };
        let mut v = Vec::new();
        let output: Vec<Value> = end.call.map(call_item).into_iter().collect();
        if let Some(item) = output.first() {
            v.push(Frame::Event(named(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": end.block, "item": item}),
            )));
        }
        let mut last = json!({"type": name, "response": {"id": "resp-sim", "status": status, "model": model, "incomplete_details": details, "usage": usage, "output": output}});
        // llama.cpp's timings beside the response, as its /v1/responses sends them.
        if let Some(t) = end.timings {
            last["timings"] = t;
        }
        v.push(Frame::Event(named(name, last)));
        v
    }

    fn error(&self, message: &str) -> Event {
        named(
            "error",
            json!({"type": "error", "code": "server_error", "message": message}),
        )
    }

    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        let length = end.finish == "length";
        let (prompt, completion) = end.usage.map_or((0, 0), |u| (u.prompt, u.completion));
        let mut v = json!({"id": "resp-sim", "object": "response", "status": if length { "incomplete" } else { "completed" }, "model": model,
                           "incomplete_details": if length { json!({"reason": "max_output_tokens"}) } else { Value::Null },
                           "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
                           "usage": {"input_tokens": prompt, "output_tokens": completion}});
        if let Some(c) = end.call {
            v["output"] = json!([call_item(c)]);
        }
        v
    }
}
