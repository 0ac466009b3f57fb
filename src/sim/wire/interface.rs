//! What every API flavor is to the sim: the [`Wire`] trait, whose defaults are OpenAI chat's
//! (`super::openai`), and what its door and its framing hand back (a refusal, an oversized
//! stream).

use serde_json::Value;

use super::event::{Event, Frame, Style};
use super::openai;
use crate::sim::credentials::Issued;
use crate::sim::http::HttpRequest;
use crate::sim::piece::{Call, Ending, PieceKind};

/// What a stream too large for any cap is, in a flavor's framing.
pub(crate) enum Oversized {
    /// A line that never ends: its start, then `x` after `x`.
    Line(&'static [u8]),
    /// One whole frame whose prelude claims more than any cap allows.
    Frame(Vec<u8>),
}

/// Why a request is refused at its flavor's door: status, the headers the flavor sends with
/// the refusal, body.
pub(crate) struct Refusal {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

/// One API flavor as the sim speaks it. Every default is OpenAI chat's (`POST
/// /v1/chat/completions`, SSE chunks ending with `[DONE]`); a flavor overrides what its API
/// does otherwise.
pub(crate) trait Wire: Sync {
    /// Whether this flavor is served at `route` (after any `/s/<scenario>` prefix, without
    /// the query).
    fn serves(&self, route: &str) -> bool;

    /// Where the flavor is served, for a person: the route, and what to know about it.
    fn route(&self) -> String;

    /// The prompt's text, from the body this flavor takes.
    fn prompt(&self, body: &Value) -> String {
        openai::messages_text(&body["messages"])
    }

    /// The token limit the body asks for.
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["max_tokens"].as_u64()
    }

    /// Whether the body asks for a stream.
    fn stream(&self, body: &Value) -> bool {
        body["stream"].as_bool().unwrap_or(false)
    }

    /// The first tool the request offers, in this flavor's shape.
    fn tool_name(&self, body: &Value) -> Option<String> {
        body["tools"][0]["function"]["name"]
            .as_str()
            .map(str::to_string)
    }

    /// Whether the closing events carry usage: OpenAI's chunk flavors only when asked.
    fn sends_usage(&self, body: &Value) -> bool {
        body["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false)
    }

    /// The model the request names (in its body, or where the flavor names it, its route).
    fn model(&self, _req: &HttpRequest, _route: &str, body: &Value) -> Option<String> {
        body["model"].as_str().map(str::to_string)
    }

    /// The credential a leaky proxy would echo (the `echo-auth` scenario): a bearer token.
    fn credential<'r>(&self, req: &'r HttpRequest) -> Option<&'r str> {
        req.header("authorization")
    }

    /// The flavor's door: whether the request's credentials let it in.
    fn admit(&self, _req: &HttpRequest, _issued: &Issued) -> Result<(), Refusal> {
        Ok(())
    }

    /// A scenario's refusal with `status`, in the flavor's own shape.
    fn refusal(&self, status: u16, _model: &str) -> Value {
        openai::refusal(status)
    }

    /// The headers any refusal with `status` comes with.
    fn refusal_headers(&self, status: u16) -> Vec<(&'static str, String)> {
        openai::refusal_headers(status)
    }

    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }

    /// One event as bytes, laid out in `style`: SSE (named or not), by default.
    fn encode(&self, name: Option<&str>, data: &str, style: Style) -> Vec<u8> {
        openai::sse(name, data, style)
    }

    /// What keeps a stream busy without content: an SSE comment, by default.
    fn keep_alive(&self) -> &'static [u8] {
        b": keep-alive\n\n"
    }

    /// A stream too large for any cap: by default, an SSE data line that never ends.
    fn oversized(&self) -> Oversized {
        Oversized::Line(b"data: {\"choices\":[{\"delta\":{\"content\":\"")
    }

    /// What the server writes between events to show it is alive, when it does (not a token).
    fn ping(&self, _style: Style) -> Option<Vec<u8>> {
        None
    }

    /// What comes before the first token: vLLM's role-only chunk (`role_chunk`; llama.cpp
    /// sends none).
    fn opening(&self, model: &str, role_chunk: bool) -> Vec<Event> {
        if role_chunk {
            vec![openai::role_chunk(model)]
        } else {
            vec![]
        }
    }

    /// The events that close the content block of kind `from` and open one of kind `to`, at
    /// `index`, where the flavor has content blocks.
    fn block_change(&self, _from: Option<PieceKind>, _to: PieceKind, _index: usize) -> Vec<Event> {
        vec![]
    }

    /// What opens a tool call, before its arguments stream: OpenAI chat's first `tool_calls`
    /// delta (id, name, empty arguments).
    fn tool_call_start(&self, model: &str, name: &str, _block: usize) -> Vec<Event> {
        vec![openai::tool_call_start(model, name)]
    }

    /// The whole tool call in one event, for a flavor that does not stream its arguments;
    /// `None`: they stream, piece by piece.
    fn whole_call(&self, _model: &str, _call: &Call) -> Option<Event> {
        None
    }

    /// One token of the answer or of the reasoning, or a stretch of tool-call arguments.
    fn piece(&self, model: &str, kind: PieceKind, text: &str, _block: usize) -> Event {
        openai::chat_piece(model, kind, text)
    }

    /// The events after the last token: the finish reason (OpenAI's `stop`/`length` in the
    /// flavor's own words), usage when sent, the server's timings (llama.cpp's `timings`) and
    /// the end marker.
    fn closing(&self, model: &str, end: Ending) -> Vec<Frame> {
        let last = openai::chat_last_chunk(model, end.finish);
        openai::closing(last, model, end)
    }

    /// An error reported inside a stream that already started with a 200.
    fn error(&self, message: &str) -> Event {
        openai::error(message)
    }

    /// A whole answer, for a request that did not ask to stream: its text and tool call.
    fn whole(&self, model: &str, text: &str, end: &Ending) -> Value {
        openai::chat_whole(model, text, end)
    }

    /// One write of a stream's end, as bytes.
    fn write(&self, frame: &Frame, style: Style) -> Vec<u8> {
        match frame {
            Frame::Event(ev) => self.encode(ev.name, &ev.data.to_string(), style),
            Frame::Done => self.encode(None, openai::DONE, style),
        }
    }
}
