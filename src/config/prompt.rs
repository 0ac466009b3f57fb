//! A prompt as loaded from `prompts/`: the chat messages a probe sends.

use crate::probe::flavor::{Message, Role};

/// A prompt: the chat messages to send (a `.txt` file is one user message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub name: String,
    pub messages: Vec<Message>,
}

impl Prompt {
    pub fn user(name: &str, text: &str) -> Self {
        Prompt {
            name: name.into(),
            messages: vec![Message {
                role: Role::User,
                content: text.into(),
            }],
        }
    }

    /// The text for a completions API: the messages' contents, one paragraph each.
    pub fn as_text(&self) -> String {
        let parts: Vec<&str> = self.messages.iter().map(|m| m.content.as_str()).collect();
        parts.join("\n\n")
    }
}
