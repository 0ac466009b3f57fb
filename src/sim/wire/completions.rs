//! OpenAI completions (`/v1/completions`): a `prompt` string in, `text_completion` chunks out,
//! ending as chat's do (usage chunk, `[DONE]`); no tool calls, so a call's arguments come as
//! text.

use serde_json::{json, Value};

use super::{openai, plain, Ending, Event, Frame, PieceKind, Wire};

/// OpenAI completions.
pub(super) struct Completions;

impl Wire for Completions {
    fn serves(&self, route: &str) -> bool {
        route == "/v1/completions"
    }

    fn route(&self) -> String {
        "/v1/completions".into()
    }

    fn prompt(&self, body: &Value) -> String {
        body["prompt"].as_str().unwrap_or_default().to_string()
    }

    fn tool_name(&self, body: &Value) -> Option<String> {
        body["tools"][0]["name"].as_str().map(str::to_string)
    }

    /// No role chunk: the first chunk carries text.
    fn opening(&self, _model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![]
    }

    fn tool_call_start(&self, _model: &str, _name: &str, _block: usize) -> Vec<Event> {
        vec![]
    }

    /// The answer's text; reasoning has no field here, and a tool call's arguments are text.
    fn piece(&self, model: &str, kind: PieceKind, text: &str, _block: usize) -> Event {
        let shown = kind != PieceKind::Reasoning;
        plain(
            json!({"id": "cmpl-sim", "object": "text_completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "text": if shown { text } else { "" }, "logprobs": null, "finish_reason": null}]}),
        )
    }

    fn closing(&self, model: &str, end: Ending) -> Vec<Frame> {
        let last = json!({"id": "cmpl-sim", "object": "text_completion", "created": 0, "model": model,
                          "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": end.finish}]});
        openai::closing(last, model, end)
    }

    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        json!({"id": "sim", "object": "text_completion", "model": model,
               "choices": [{"index": 0, "text": text, "finish_reason": end.finish}], "usage": openai::whole_usage(end)})
    }
}
