//! API flavors: one file each, each a unit struct behind [`Flavor`], whose default methods are
//! the OpenAI-compatible behaviour (OpenAI chat's) and which a flavor overrides where its API
//! differs: its path, the body that carries the prompt and its generation limits, how its
//! stream is framed and what one event of it carried, the header its key goes in, its model
//! list, its prompt-cache counts, its OpenTelemetry names, what it asks of a target. [`Api`]
//! names the flavors as `api:` spells them, and [`Api::flavor`] is the one place that maps a
//! name to its flavor. The envelope around a flavor (request id, cache busting, priority,
//! deadlines, caps, outcomes) lives in `probe` and is shared.
//!
//! This module takes plain values ([`Ask`]) and imports nothing from config, so config may
//! name an API and ask its flavor without closing a cycle.

pub mod anthropic_messages;
mod ask;
pub mod azure_openai;
pub mod bedrock;
mod delta;
pub mod gemini;
mod helpers;
mod interface;
pub mod ollama;
mod openai;
pub mod openai_chat;
pub mod openai_completions;
pub mod openai_responses;
mod sigv4;

#[cfg(test)]
mod layout_tests;

use serde::{Deserialize, Serialize};

pub use ask::{Ask, Message, Role};
pub use delta::{Delta, ToolCalls};
pub use helpers::{
    as_text, chat_messages, error_message, llama_timings, model_entry, non_empty, openai_chunk,
    openai_tools, server_ttft_ms, text_of, tool_fields,
};
pub use interface::{
    Flavor, Framing, PrefixCache, PromptCounts, Signer, TargetError, TargetField, EVENT_STREAM,
};
pub use sigv4::{AwsAuth, AwsCredentials, AwsKeys};

/// The API a target speaks (`api:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    #[default]
    OpenaiChat,
    OpenaiCompletions,
    OpenaiResponses,
    AnthropicMessages,
    Ollama,
    AzureOpenai,
    Gemini,
    Bedrock,
}

impl Api {
    /// The flavor that speaks this API: the one mapping from a name to its behaviour. A
    /// `'static` unit struct, so a call per stream event costs a jump, never an allocation.
    pub fn flavor(self) -> &'static dyn Flavor {
        match self {
            Api::OpenaiChat => &openai_chat::OpenaiChat,
            Api::OpenaiCompletions => &openai_completions::OpenaiCompletions,
            Api::OpenaiResponses => &openai_responses::OpenaiResponses,
            Api::AnthropicMessages => &anthropic_messages::AnthropicMessages,
            Api::Ollama => &ollama::Ollama,
            Api::AzureOpenai => &azure_openai::AzureOpenai,
            Api::Gemini => &gemini::Gemini,
            Api::Bedrock => &bedrock::Bedrock,
        }
    }

    /// The name `api:` spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenaiChat => "openai-chat",
            Api::OpenaiCompletions => "openai-completions",
            Api::OpenaiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::Ollama => "ollama",
            Api::AzureOpenai => "azure-openai",
            Api::Gemini => "gemini",
            Api::Bedrock => "bedrock",
        }
    }

    /// A provider's hosted API: no server of ours behind it, so no metrics or timings of its
    /// own to read, and no cache-busting field.
    pub fn is_hosted(self) -> bool {
        self.flavor().hosted()
    }
}

/// An ask of `messages` with the limits the flavors' tests expect (64 tokens, temperature 0).
#[cfg(test)]
pub fn ask_of(messages: &[Message]) -> Ask<'_> {
    Ask {
        messages,
        max_tokens: 64,
        temperature: Some(0.0),
        tools: None,
    }
}

/// Messages of these (role, content) pairs, for the flavors' tests.
#[cfg(test)]
pub fn messages(pairs: &[(Role, &str)]) -> Vec<Message> {
    pairs
        .iter()
        .map(|&(role, content)| Message {
            role,
            content: content.into(),
        })
        .collect()
}
