//! What a flavor's events are, whatever writes them: an event (named or not) and its data, a
//! write of a stream's end (an event or the end marker), and how a server lays out its lines.

use serde_json::Value;

/// One event to write: its SSE name (none for OpenAI chunks and NDJSON) and data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub name: Option<&'static str>,
    pub data: Value,
}

/// An event with an SSE name (or, on Bedrock, an event type).
pub(crate) fn named(name: &'static str, data: Value) -> Event {
    Event {
        name: Some(name),
        data,
    }
}

/// An event without a name: an OpenAI chunk, an NDJSON line.
pub(crate) fn plain(data: Value) -> Event {
    Event { name: None, data }
}

/// One write of a stream's end: an event, or the end marker of a flavor whose stream ends
/// with one of its own (OpenAI's `[DONE]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    Event(Event),
    Done,
}

/// How the scenario's server lays out its lines: CRLF or LF, and a space after `data:` or not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    pub crlf: bool,
    pub space: bool,
}

impl Style {
    pub(crate) fn newline(self) -> &'static str {
        if self.crlf {
            "\r\n"
        } else {
            "\n"
        }
    }
}
