//! What a probe asks, as every flavor reads it: a prompt's messages and the limits and tools
//! that go with them.

use serde::{Deserialize, Serialize};

use crate::checks::tool_call::Tool;

/// A chat message of a prompt, as every flavor sends it in its own envelope.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// What a probe asks of the model, as a flavor turns it into a body.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub messages: &'a [Message],
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    /// The functions offered to the model.
    pub tools: Option<&'a [Tool]>,
}
