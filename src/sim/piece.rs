//! What an answer is made of, whatever flavor frames it: its pieces, its tool call, its usage
//! and its ending; the vocabulary `generate` and every flavor in `wire` share.

use serde_json::{json, Value};

/// What one piece of the answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PieceKind {
    Answer,
    Reasoning,
    /// A stretch of a tool call's arguments.
    Tool,
}

/// The figures the closing events report.
pub(super) struct Usage {
    pub prompt: usize,
    /// Of the prompt tokens, those served from the prefix cache.
    pub cached: usize,
    pub completion: usize,
    pub reasoning: usize,
}

/// The tool call an answer makes: the tool's name and its arguments (JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub name: String,
    pub arguments: String,
}

impl Call {
    /// The arguments as a JSON value (a string when they do not parse), as the flavors that
    /// send an object want them.
    pub(super) fn arguments_value(&self) -> Value {
        serde_json::from_str(&self.arguments).unwrap_or_else(|_| json!(self.arguments))
    }
}

/// How an answer ends: its finish reason in OpenAI's words, usage when sent, the server's
/// timings, the last content block, and the tool call it made.
pub(super) struct Ending<'a> {
    pub finish: &'a str,
    pub usage: Option<&'a Usage>,
    pub timings: Option<Value>,
    pub block: usize,
    pub call: Option<&'a Call>,
}
