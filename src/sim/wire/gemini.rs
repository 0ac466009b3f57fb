//! The sim's answers in Gemini's words: the route `/v1beta/models/{model}:streamGenerateContent`
//! (or under `/v1`, the sim's other flavors' base), the request's prompt and limits, each
//! streamed `GenerateContentResponse` (answer text, `thought: true` parts, whole
//! `functionCall`s), the closing chunk with `finishReason` and `usageMetadata`, and Google's
//! error bodies (`{"error": {"code", "message", "status"}}`), as the real API sends them.

use serde_json::{json, Value};

use super::{openai, plain, Call, Ending, Event, Frame, PieceKind, Usage, Wire};
use crate::sim::http::HttpRequest;

const METHOD: &str = ":streamGenerateContent";

/// Gemini's `streamGenerateContent`.
pub(super) struct Gemini;

impl Wire for Gemini {
    fn serves(&self, route: &str) -> bool {
        model_of(route).is_some()
    }

    fn route(&self) -> String {
        format!("Gemini's /v1beta/models/<model>{METHOD} (base_url .../v1beta, or .../v1)")
    }

    fn prompt(&self, body: &Value) -> String {
        prompt(body)
    }

    /// A bearer token, or Gemini's own key header.
    fn credential<'r>(&self, req: &'r HttpRequest) -> Option<&'r str> {
        req.header("authorization")
            .or_else(|| req.header("x-goog-api-key"))
    }

    fn max_tokens(&self, body: &Value) -> Option<u64> {
        max_tokens(body)
    }

    /// Its route is the streaming method.
    fn stream(&self, body: &Value) -> bool {
        body["stream"].as_bool().unwrap_or(true)
    }

    fn tool_name(&self, body: &Value) -> Option<String> {
        tool_name(body)
    }

    fn sends_usage(&self, _body: &Value) -> bool {
        true
    }

    /// The body's, or the route's.
    fn model(&self, _req: &HttpRequest, route: &str, body: &Value) -> Option<String> {
        body["model"]
            .as_str()
            .or_else(|| model_of(route))
            .map(str::to_string)
    }

    /// Google's body where it has one for the status, else OpenAI's.
    fn refusal(&self, status: u16, model: &str) -> Value {
        refusal(status, model).unwrap_or_else(|| openai::refusal(status))
    }

    fn opening(&self, _model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![]
    }

    fn tool_call_start(&self, _model: &str, _name: &str, _block: usize) -> Vec<Event> {
        vec![]
    }

    fn whole_call(&self, model: &str, call: &Call) -> Option<Event> {
        Some(plain(whole_call(model, call)))
    }

    fn piece(&self, model: &str, kind: PieceKind, text: &str, _block: usize) -> Event {
        plain(piece(model, kind, text))
    }

    fn closing(&self, model: &str, end: Ending) -> Vec<Frame> {
        vec![Frame::Event(plain(closing(model, end.finish, end.usage)))]
    }

    fn error(&self, message: &str) -> Event {
        plain(error(message))
    }

    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        whole(model, text, end)
    }
}

/// The model a Gemini route names, when `route` is one (`/v1beta/models/M:streamGenerateContent`).
fn model_of(route: &str) -> Option<&str> {
    let rest = route
        .strip_prefix("/v1beta/models/")
        .or_else(|| route.strip_prefix("/v1/models/"))?;
    let model = rest.strip_suffix(METHOD)?;
    (!model.is_empty() && !model.contains('/')).then_some(model)
}

/// The prompt's text: the system instruction, then every part of every turn.
fn prompt(body: &Value) -> String {
    let texts = |parts: &Value| -> Vec<String> {
        parts
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str().map(str::to_string))
            .collect()
    };
    let mut all = texts(&body["systemInstruction"]["parts"]);
    for turn in body["contents"].as_array().into_iter().flatten() {
        all.extend(texts(&turn["parts"]));
    }
    all.join("\n")
}

fn max_tokens(body: &Value) -> Option<u64> {
    body["generationConfig"]["maxOutputTokens"].as_u64()
}

fn tool_name(body: &Value) -> Option<String> {
    body["tools"][0]["functionDeclarations"][0]["name"]
        .as_str()
        .map(str::to_string)
}

/// One streamed response holding `parts`, with the model's version as Gemini echoes it.
fn chunk(model: &str, parts: Value) -> Value {
    json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
           "modelVersion": model, "responseId": "sim-gemini"})
}

/// One token of the answer or of the thoughts.
fn piece(model: &str, kind: PieceKind, text: &str) -> Value {
    match kind {
        PieceKind::Reasoning => chunk(model, json!([{"text": text, "thought": true}])),
        _ => chunk(model, json!([{"text": text}])),
    }
}

/// A whole function call: Gemini never streams its arguments.
fn whole_call(model: &str, call: &Call) -> Value {
    let args = serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({}));
    chunk(
        model,
        json!([{"functionCall": {"name": call.name, "args": args}}]),
    )
}

/// OpenAI's finish reason in Gemini's words (a tool call ends with `STOP` there).
fn finish_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "MAX_TOKENS",
        crate::checks::CONTENT_FILTER => "SAFETY",
        _ => "STOP",
    }
}

/// The running counts: the answer's tokens apart from the thoughts'.
fn usage(u: Option<&Usage>) -> Option<Value> {
    let u = u?;
    let mut v = json!({"promptTokenCount": u.prompt, "candidatesTokenCount": u.completion - u.reasoning,
                       "totalTokenCount": u.prompt + u.completion});
    if u.reasoning > 0 {
        v["thoughtsTokenCount"] = json!(u.reasoning);
    }
    Some(v)
}

/// The last chunk: an empty part with the finish reason and the final counts.
fn closing(model: &str, finish: &str, counts: Option<&Usage>) -> Value {
    let mut last = chunk(model, json!([{"text": ""}]));
    last["candidates"][0]["finishReason"] = json!(finish_reason(finish));
    if let Some(u) = usage(counts) {
        last["usageMetadata"] = u;
    }
    last
}

/// A whole answer, for the scenario that does not stream.
fn whole(model: &str, text: &str, end: &Ending) -> Value {
    let mut v = match end.call {
        Some(c) => whole_call(model, c),
        None => chunk(model, json!([{"text": text}])),
    };
    v["candidates"][0]["finishReason"] = json!(finish_reason(end.finish));
    if let Some(u) = usage(end.usage) {
        v["usageMetadata"] = u;
    }
    v
}

/// An error inside a stream that began with a 200.
fn error(message: &str) -> Value {
    json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}})
}

/// Google's error body for a refused request, with its status word (`None`: no shape of
/// Google's for that status; the sim's default answers).
fn refusal(status: u16, model: &str) -> Option<Value> {
    let (message, word) = match status {
        400 => (
            "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).".to_string(),
            "INVALID_ARGUMENT",
        ),
        404 => (
            format!("models/{model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."),
            "NOT_FOUND",
        ),
        429 => (
            "You exceeded your current quota, please check your plan and billing details.".to_string(),
            "RESOURCE_EXHAUSTED",
        ),
        500 => (
            "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting".to_string(),
            "INTERNAL",
        ),
        503 => (
            "The model is overloaded. Please try again later.".to_string(),
            "UNAVAILABLE",
        ),
        _ => return None,
    };
    let mut body = json!({"error": {"code": status, "message": message, "status": word}});
    if status == 429 {
        // When to come back: in the body, as Google sends it, not in a header.
        body["error"]["details"] =
            json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_name_the_model() {
        assert_eq!(
            model_of("/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
            Some("gemini-2.5-flash")
        );
        assert_eq!(model_of("/v1/models/m:streamGenerateContent"), Some("m"));
        for no in [
            "/v1/models",
            "/v1beta/models/m:generateContent",
            "/v1beta/models/:streamGenerateContent",
            "/v1beta/models/a/b:streamGenerateContent",
        ] {
            assert_eq!(model_of(no), None, "{no}");
        }
    }

    #[test]
    fn prompt_joins_system_and_turns() {
        let body = json!({"systemInstruction": {"parts": [{"text": "Be brief."}]},
                          "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
                          "generationConfig": {"maxOutputTokens": 64}});
        assert_eq!(prompt(&body), "Be brief.\nHi");
        assert_eq!(max_tokens(&body), Some(64));
    }
}
