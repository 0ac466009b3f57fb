//! API flavors: one file each, one arm per function here. A flavor knows its path, the body
//! that carries the prompt, and what one event of its stream carried; the envelope around it
//! (request id, cache busting, deadlines, caps, outcomes) lives in `probe` and is shared.

pub mod openai_chat;
pub mod openai_completions;

use serde_json::{Map, Value};

use crate::config::{Api, Probe};

/// What one event (or a whole non-streamed answer) carried, as a flavor reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// Generated text the user sees (content and tool-call text).
    pub text: String,
    pub reasoning_chars: usize,
    pub finish_reason: Option<String>,
}

impl Delta {
    /// Text, reasoning or a tool call: a role-only or empty chunk is not a token.
    pub fn is_generated(&self) -> bool {
        !self.text.is_empty() || self.reasoning_chars > 0
    }
}

/// The path the flavor appends to the target's `base_url`.
pub fn path(api: Api) -> &'static str {
    match api {
        Api::OpenaiChat => openai_chat::PATH,
        Api::OpenaiCompletions => openai_completions::PATH,
    }
}

/// The part of the body that carries the prompt; `nonce` goes first when caches are busted by
/// prefix.
pub fn body(api: Api, probe: &Probe, nonce: Option<&str>) -> Map<String, Value> {
    match api {
        Api::OpenaiChat => openai_chat::body(&probe.prompt, nonce),
        Api::OpenaiCompletions => openai_completions::body(&probe.prompt, nonce),
    }
}

/// What one streamed choice (`choices[0]`) carried.
pub fn delta(api: Api, choice: &Value) -> Delta {
    match api {
        Api::OpenaiChat => openai_chat::delta(choice),
        Api::OpenaiCompletions => openai_completions::delta(choice),
    }
}
