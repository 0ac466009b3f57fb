//! API flavors: one file each, each a unit struct behind [`Flavor`], whose default methods are
//! the OpenAI-compatible behaviour (OpenAI chat's) and which a flavor overrides where its API
//! differs: its path, the body that carries the prompt and its generation limits, how its
//! stream is framed and what one event of it carried, the header its key goes in, its model
//! list, its prompt-cache counts, its OpenTelemetry names, what it asks of a target, how its
//! provider takes a key, and its error bodies (their message, and the words that say why a run
//! was refused). [`Api`] names the flavors as `api:` spells them: the registry below is the one
//! place that maps a name to its flavor, a line each. The envelope around a flavor (request id,
//! cache busting, priority, deadlines, caps, outcomes) lives in `probe` and is shared.
//!
//! This module takes plain values ([`Ask`]) and imports nothing from config, so config may
//! name an API and ask its flavor without closing a cycle.

pub(crate) mod anthropic_messages;
mod ask;
pub(crate) mod azure_openai;
pub(crate) mod bedrock;
mod delta;
mod errors;
pub(crate) mod gemini;
mod helpers;
mod interface;
pub(crate) mod ollama;
mod openai;
pub(crate) mod openai_chat;
pub(crate) mod openai_completions;
pub(crate) mod openai_responses;
mod sigv4;

#[cfg(test)]
mod layout_tests;

use serde::{Deserialize, Serialize};

pub(crate) use ask::{Ask, Message, Role};
pub(crate) use delta::{Delta, ToolCalls};
pub(crate) use errors::ErrorSigns;
pub(crate) use helpers::{
    as_text, chat_messages, llama_timings, model_entry, non_empty, openai_chunk, openai_tools,
    server_ttft_ms, text_of, tool_fields,
};
// `Flavor` is reached from outside through `testing`.
pub use interface::Flavor;
pub(crate) use interface::{
    Framing, PrefixCache, PromptCounts, ProviderAuth, Signer, TargetError, TargetField,
    EVENT_STREAM,
};
pub(crate) use sigv4::{AwsAuth, AwsCredentials, AwsKeys};

/// The registry: each line names an API as `api:` spells it and the flavor that speaks it.
/// It makes [`Api`] (a variant per line), [`Api::ALL`], [`Api::flavor`] and [`Api::as_str`].
macro_rules! registry {
    ($($variant:ident = $name:literal => $flavor:expr,)+) => {
        /// The API a target speaks (`api:`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
        pub enum Api {
            $(#[serde(rename = $name)] $variant,)+
        }

        impl Api {
            /// Every API, in the registry's order.
            pub const ALL: &'static [Api] = &[$(Api::$variant,)+];

            /// The flavor that speaks this API: the one mapping from a name to its behaviour.
            /// A `'static` unit struct, so a call per stream event costs a jump, never an
            /// allocation.
            pub fn flavor(self) -> &'static dyn Flavor {
                match self {
                    $(Api::$variant => &$flavor,)+
                }
            }

            /// The name `api:` spells it with.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Api::$variant => $name,)+
                }
            }
        }
    };
}

registry! {
    OpenaiChat = "openai-chat" => openai_chat::OpenaiChat,
    OpenaiCompletions = "openai-completions" => openai_completions::OpenaiCompletions,
    OpenaiResponses = "openai-responses" => openai_responses::OpenaiResponses,
    AnthropicMessages = "anthropic-messages" => anthropic_messages::AnthropicMessages,
    Ollama = "ollama" => ollama::Ollama,
    AzureOpenai = "azure-openai" => azure_openai::AzureOpenai,
    Gemini = "gemini" => gemini::Gemini,
    Bedrock = "bedrock" => bedrock::Bedrock,
}

/// The first API of the registry, OpenAI chat, which most servers speak.
impl Default for Api {
    fn default() -> Api {
        Api::ALL[0]
    }
}

impl Api {
    /// A provider's hosted API: no server of ours behind it, so no metrics or timings of its
    /// own to read, and no cache-busting field.
    pub fn is_hosted(self) -> bool {
        self.flavor().hosted()
    }
}

/// The APIs whose flavor `takes` something (a setting only some APIs have), as `api:` spells
/// them, for an error that says where the setting applies.
pub(crate) fn apis_where(takes: impl Fn(&dyn Flavor) -> bool) -> String {
    let names: Vec<&str> = Api::ALL
        .iter()
        .filter(|api| takes(api.flavor()))
        .map(|api| api.as_str())
        .collect();
    names.join(" or ")
}

/// How the provider whose own server `server:` names (`anthropic`) takes a key there, whatever
/// API the target speaks; `None` for a server kind no flavor's provider claims.
pub(crate) fn server_auth(server: &str) -> Option<ProviderAuth> {
    Api::ALL
        .iter()
        .filter_map(|api| api.flavor().provider_auth())
        .find(|auth| auth.server == server)
}

/// An ask of `messages` with the limits the flavors' tests expect (64 tokens, temperature 0).
#[cfg(test)]
pub(crate) fn ask_of(messages: &[Message]) -> Ask<'_> {
    Ask {
        messages,
        max_tokens: 64,
        temperature: Some(0.0),
        tools: None,
    }
}

/// Messages of these (role, content) pairs, for the flavors' tests.
#[cfg(test)]
pub(crate) fn messages(pairs: &[(Role, &str)]) -> Vec<Message> {
    pairs
        .iter()
        .map(|&(role, content)| Message {
            role,
            content: content.into(),
        })
        .collect()
}
