//! The sim as Amazon Bedrock's ConverseStream (`/v1/model/<model id>/converse-stream`, base
//! URL `.../v1` here, or the server root): its request (`system`, `messages`,
//! `inferenceConfig`, `toolConfig`), its events (`messageStart`, `contentBlockDelta`s,
//! `contentBlockStop`, `messageStop`, `metadata`) in AWS's binary event stream, written by
//! `aws-smithy-eventstream` so they are correct by construction (and a fault is one on
//! purpose); its error answers (a `{"message"}` body with the type in `x-amzn-ErrorType`) and
//! in-stream exceptions (their bodies and types in `errors`); and its door, SigV4 (`door`).

mod door;
mod errors;

use std::sync::LazyLock;

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use serde_json::{json, Value};

use self::errors::{error_body, error_type_header};
use super::{named, Ending, Event, Frame, Oversized, PieceKind, Refusal, Style, Wire};
use crate::sim::credentials::Issued;
use crate::sim::http::HttpRequest;
pub use door::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};

/// One frame (AWS's message): an event (named by its type) or, named `exception:<type>`, an
/// exception.
fn message(name: &str, payload: &[u8]) -> Vec<u8> {
    // An exception names its type where an event names itself; the headers come in one order.
    let (kind, value, message_type) = match name.strip_prefix("exception:") {
        Some(ty) => (":exception-type", ty, "exception"),
        None => (":event-type", name, "event"),
    };
    let m = Message::new(payload.to_vec())
        .add_header(Header::new(
            kind,
            HeaderValue::String(value.to_string().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(message_type.into()),
        ));
    let mut out = Vec::new();
    // Only a header name over 255 bytes fails, and these are fixed.
    write_message_to(&m, &mut out).expect("the sim's frames have short header names");
    out
}

/// What keeps a Bedrock stream busy without content: an empty text delta.
static KEEP_ALIVE: LazyLock<Vec<u8>> = LazyLock::new(|| {
    message(
        "contentBlockDelta",
        br#"{"contentBlockIndex":0,"delta":{"text":""}}"#,
    )
});

/// A frame whose prelude claims more than any cap allows, whole and correct: the client must
/// refuse it from its first twelve bytes.
fn huge_frame() -> Vec<u8> {
    let text = "x".repeat(2 * 1024 * 1024);
    let payload = json!({"contentBlockIndex": 0, "delta": {"text": text}}).to_string();
    message("contentBlockDelta", payload.as_bytes())
}

/// The model id in a ConverseStream path (`.../model/<id>/converse-stream`), decoded.
fn model_of(path: &str) -> Option<String> {
    let rest = path.split("/model/").nth(1)?;
    let id = rest.strip_suffix("/converse-stream")?;
    percent_encoding::percent_decode_str(id)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// Bedrock's ConverseStream.
pub struct Bedrock;

/// A finish reason in OpenAI's words as Bedrock's `stopReason`.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        crate::checks::CONTENT_FILTER => "content_filtered",
        _ => "end_turn",
    }
}

impl Wire for Bedrock {
    /// The model id in the path, under the sim's `/v1` or at the root.
    fn serves(&self, route: &str) -> bool {
        (route.starts_with("/v1/model/") || route.starts_with("/model/"))
            && route.ends_with("/converse-stream")
    }

    fn route(&self) -> String {
        format!("Bedrock's /v1/model/<model id>/converse-stream (signed with the sim's test key, access key id {ACCESS_KEY_ID})")
    }

    /// The system blocks' text, then every message's text blocks.
    fn prompt(&self, body: &Value) -> String {
        let texts = |v: &Value| -> Vec<String> {
            let blocks = v.as_array().into_iter().flatten();
            let nested = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
            blocks
                .flat_map(|m| match m["text"].as_str() {
                    Some(t) => vec![t.to_string()],
                    None => nested(m)
                        .iter()
                        .filter_map(|b| b["text"].as_str().map(str::to_string))
                        .collect(),
                })
                .collect()
        };
        let mut all = texts(&body["system"]);
        all.extend(texts(&body["messages"]));
        all.join("\n")
    }

    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["inferenceConfig"]["maxTokens"].as_u64()
    }

    /// ConverseStream always streams.
    fn stream(&self, body: &Value) -> bool {
        body["stream"].as_bool().unwrap_or(true)
    }

    fn tool_name(&self, body: &Value) -> Option<String> {
        body["toolConfig"]["tools"][0]["toolSpec"]["name"]
            .as_str()
            .map(str::to_string)
    }

    fn sends_usage(&self, _body: &Value) -> bool {
        true
    }

    /// The model is named in the path, as sent.
    fn model(&self, req: &HttpRequest, _route: &str, _body: &Value) -> Option<String> {
        model_of(&req.path)
    }

    fn admit(&self, req: &HttpRequest, issued: &Issued) -> Result<(), Refusal> {
        door::check_auth(req, issued)
    }

    fn refusal(&self, status: u16, _model: &str) -> Value {
        error_body(status)
    }

    /// Every error answer names its type in `x-amzn-ErrorType`.
    fn refusal_headers(&self, status: u16) -> Vec<(&'static str, String)> {
        if status >= 400 {
            vec![error_type_header(status)]
        } else {
            vec![]
        }
    }

    fn content_type(&self) -> &'static str {
        crate::probe::flavor::EVENT_STREAM
    }

    /// A binary frame; there are no lines to lay out.
    fn encode(&self, name: Option<&str>, data: &str, _style: Style) -> Vec<u8> {
        message(name.unwrap_or_default(), data.as_bytes())
    }

    /// An empty text delta.
    fn keep_alive(&self) -> &'static [u8] {
        &KEEP_ALIVE
    }

    fn oversized(&self) -> Oversized {
        Oversized::Frame(huge_frame())
    }

    fn opening(&self, _model: &str, _role_chunk: bool) -> Vec<Event> {
        vec![named("messageStart", json!({"role": "assistant"}))]
    }

    /// A block closes when the kind of content changes; only a tool call's is opened.
    fn block_change(&self, from: Option<PieceKind>, to: PieceKind, index: usize) -> Vec<Event> {
        if from.is_some_and(|f| f != to) {
            return vec![named(
                "contentBlockStop",
                json!({"contentBlockIndex": index - 1}),
            )];
        }
        vec![]
    }

    fn tool_call_start(&self, _model: &str, name: &str, block: usize) -> Vec<Event> {
        vec![named(
            "contentBlockStart",
            json!({"contentBlockIndex": block, "start": {"toolUse": {"toolUseId": "tooluse_sim", "name": name}}}),
        )]
    }

    fn piece(&self, _model: &str, kind: PieceKind, text: &str, block: usize) -> Event {
        let delta = match kind {
            PieceKind::Tool => json!({"toolUse": {"input": text}}),
            PieceKind::Answer => json!({"text": text}),
            PieceKind::Reasoning => json!({"reasoningContent": {"text": text}}),
        };
        named(
            "contentBlockDelta",
            json!({"contentBlockIndex": block, "delta": delta}),
        )
    }

    /// The block's stop, the stop reason, then the usage and metrics.
    fn closing(&self, _model: &str, end: Ending) -> Vec<Frame> {
        let mut metadata = json!({"metrics": {"latencyMs": 0}});
        if let Some(u) = end.usage {
            metadata["usage"] = json!({"inputTokens": u.prompt, "outputTokens": u.completion, "totalTokens": u.prompt + u.completion});
        }
        vec![
            Frame::Event(named(
                "contentBlockStop",
                json!({"contentBlockIndex": end.block}),
            )),
            Frame::Event(named(
                "messageStop",
                json!({"stopReason": stop_reason(end.finish)}),
            )),
            Frame::Event(named("metadata", metadata)),
        ]
    }

    /// An exception frame.
    fn error(&self, message: &str) -> Event {
        named(
            "exception:modelStreamErrorException",
            json!({"message": message, "originalStatusCode": 500}),
        )
    }

    /// Converse's answer.
    fn whole(&self, _model: &str, text: &str, end: &Ending) -> Value {
        let (prompt, completion) = end.usage.map_or((0, 0), |u| (u.prompt, u.completion));
        let mut v = json!({"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                           "stopReason": stop_reason(end.finish),
                           "usage": {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion},
                           "metrics": {"latencyMs": 0}});
        if let Some(c) = end.call {
            v["output"]["message"]["content"] = json!([{"toolUse": {"toolUseId": "tooluse_sim", "name": c.name, "input": c.arguments_value()}}]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_from_paths() {
        assert_eq!(
            model_of("/s/x/v1/model/anthropic.claude-v2%3A1/converse-stream").as_deref(),
            Some("anthropic.claude-v2:1")
        );
        assert_eq!(model_of("/v1/chat/completions"), None);
    }
}
