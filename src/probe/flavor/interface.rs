//! What every API flavor is: the `Flavor` trait, whose defaults are OpenAI chat's, and the
//! values it speaks (a prompt's messages, an ask, a framing, what a target must carry).

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use super::ask::Ask;
use super::delta::Delta;
use super::errors::{self, ErrorSigns, Words};
use super::helpers::{chat_messages, model_entry, openai_chunk, openai_tools};
use super::openai::{self, openai_generation};
use super::sigv4::{AwsKeys, SignError};

/// The content type of AWS's event stream.
pub(crate) const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// How a flavor frames its events on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    Sse,
    /// One JSON object per line.
    Ndjson,
    /// AWS's binary event stream: length-prefixed frames with CRCs.
    EventStream,
}

impl Framing {
    /// The `Accept` a request sends: AWS's event stream for its framing, `text/event-stream`
    /// for the others.
    pub fn accept(self) -> &'static str {
        match self {
            Framing::EventStream => EVENT_STREAM,
            Framing::Sse | Framing::Ndjson => "text/event-stream",
        }
    }

    /// The content types a stream of this framing comes as.
    pub fn content_types(self) -> &'static [&'static str] {
        match self {
            Framing::Sse => &["text/event-stream"],
            Framing::Ndjson => &["application/x-ndjson", "application/ndjson"],
            Framing::EventStream => &[EVENT_STREAM],
        }
    }
}

/// A target's field a flavor finds fault with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetField {
    Model,
    BaseUrl,
}

/// Why a flavor cannot speak to a target as configured: the field, and a sentence for the
/// user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TargetError {
    pub field: TargetField,
    pub message: String,
}

/// Where a prompt's prefix may be cached, which says what `cache_bust: auto` can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixCache {
    /// The server behind the API, which may honour a body field of its own on this endpoint:
    /// vLLM's `cache_salt` where it is documented, llama.cpp's `cache_prompt: false` where its
    /// server honours it (measured: not on `/v1/messages`).
    Server {
        vllm_cache_salt: bool,
        llama_cache_prompt: bool,
    },
    /// The provider's, for long prompts, with no field to skip it.
    Provider,
    /// Only up to a point the request marks, which a probe never does: nothing to defeat.
    Marked,
}

/// A run's prompt token counts, as the server reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptCounts {
    pub input: Option<u64>,
    pub cached: Option<u64>,
}

/// How an API's provider takes a key on its own server, where that is neither a bearer token
/// nor a header its API names for every server ([`Flavor::key_header`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderAuth {
    /// The `server:` kind that names the provider's own server, which takes its key this way
    /// whatever API it is asked in.
    pub server: &'static str,
    /// The header the key goes in, as it is.
    pub key_header: &'static str,
    /// The headers every request to it carries beside the key: (name, value).
    pub headers: &'static [(&'static str, &'static str)],
}

impl ProviderAuth {
    /// Where the key goes and what goes with it, for `check`.
    pub fn describe(&self) -> String {
        let with: Vec<&str> = self.headers.iter().map(|(name, _)| *name).collect();
        match with.is_empty() {
            true => format!("key in {}", self.key_header),
            false => format!("key in {}, with {}", self.key_header, with.join(", ")),
        }
    }
}

/// Signs a request with SigV4 at a time, over its headers and body.
pub(crate) type Signer = fn(
    &mut reqwest::header::HeaderMap,
    &str,
    &[u8],
    &str,
    &AwsKeys,
    std::time::SystemTime,
) -> Result<(), SignError>;

/// One API flavor. Every default is OpenAI chat's (`POST /chat/completions`, SSE chunks), which
/// most servers speak; a flavor overrides what its API does otherwise.
pub trait Flavor: Sync {
    /// The path (and query) appended to the target's `base_url`; the hosted APIs name the
    /// model (or deployment) in it.
    fn path(&self, _model: &str) -> String {
        openai::PATH.into()
    }

    /// Whether the body names the model (`model`), or the path does.
    fn model_in_body(&self) -> bool {
        true
    }

    /// The flavor's part of the body: the prompt (with `nonce` first when caches are busted by
    /// prefix), streaming on, the token limit and the temperature.
    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("messages".into(), Value::Array(chat_messages(ask, nonce)));
        if let Some(tools) = ask.tools {
            body.insert("tools".into(), openai_tools(tools));
        }
        openai_generation(&mut body, ask);
        body
    }

    /// Marks a cache check's `prefix`, which the prompt starts with, for the server to cache,
    /// where the API caches only what a request marks.
    fn mark_cacheable(&self, _body: &mut Map<String, Value>, _prefix: &str) {}

    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// What one event carried. `kind` is the SSE event name (`message` when unnamed), or an
    /// event-stream frame's event type.
    fn event(&self, _kind: &str, v: &Value) -> Delta {
        openai_chunk(v, openai::delta)
    }

    /// What a whole, non-streamed answer carried (a server that ignored `stream: true`).
    fn whole(&self, v: &Value) -> Delta {
        self.event("message", v)
    }

    /// The header the API key goes in, as it is, on every server; `None`: the server's own
    /// way (a bearer token, or the provider's own on its own server: [`Flavor::provider_auth`]).
    fn key_header(&self) -> Option<&'static str> {
        None
    }

    /// How the API's provider takes a key on its own server, when not as a bearer token: on
    /// its own host ([`Flavor::provider_host`]), or on a target whose `server:` names it.
    fn provider_auth(&self) -> Option<ProviderAuth> {
        None
    }

    /// Whether `base_url` is on the API's provider's own host, whose key goes the provider's
    /// own way ([`Flavor::provider_auth`]) with no `server:` to say so.
    fn provider_host(&self, _base_url: &reqwest::Url) -> bool {
        false
    }

    /// What signs the requests of a flavor whose requests AWS signs (SigV4); only its targets
    /// take `aws:`.
    fn aws_signer(&self) -> Option<Signer> {
        None
    }

    /// The `api-version` a request names in its query unless the target's `api_version` says
    /// otherwise; `None`: the API has no such version, and its targets take no `api_version`.
    fn api_version(&self) -> Option<&'static str> {
        None
    }

    /// Whether the API takes Microsoft Entra ID bearer tokens in place of its key (`entra:`).
    fn takes_entra(&self) -> bool {
        false
    }

    /// What the flavor finds wrong with a target's model or base URL.
    fn check_target(&self, _model: &str, _base_url: &reqwest::Url) -> Result<(), TargetError> {
        Ok(())
    }

    /// Whether the API takes the probe's `tools:`.
    fn takes_tools(&self) -> bool {
        true
    }

    /// A provider's hosted API: no server of ours behind it, so no metrics or timings of its
    /// own to read.
    fn hosted(&self) -> bool {
        false
    }

    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Server {
            vllm_cache_salt: true,
            llama_cache_prompt: true,
        }
    }

    /// The warm run's cached and whole prompt token counts, from what the server said of the
    /// cold and the warm run; `None` when it said nothing to tell them by.
    fn cached_share(&self, _cold: PromptCounts, warm: PromptCounts) -> Option<(u64, u64)> {
        Some((warm.cached?, warm.input?))
    }

    /// The path, after the base URL, that lists what the server serves; `None` when the API
    /// has no such list to ask.
    fn models_path(&self) -> Option<&'static str> {
        Some("/models")
    }

    /// What identifies `model` in the server's model list: its entry's identifying fields
    /// (vLLM's `root` and `max_model_len`, llama.cpp's `meta` with the file's size and
    /// quantization, the owner). Not the rest: vLLM's `permission` objects get a new id and
    /// time on every request, `created` is the listing's time.
    fn model_identity(&self, model: &str, list: &Value) -> Option<Value> {
        const STABLE: [&str; 6] = ["id", "root", "parent", "max_model_len", "meta", "owned_by"];
        let map = model_entry(list["data"].as_array()?, "id", model)?.as_object()?;
        let stable: Map<String, Value> = STABLE
            .iter()
            .filter_map(|k| Some((k.to_string(), map.get(*k)?.clone())))
            .collect();
        Some(Value::Object(stable))
    }

    /// When a refused run's body says to come back, where the API says it in no header.
    fn retry_delay(&self, _body: &Value) -> Option<String> {
        None
    }

    /// The message of an error: a refused run's body, an error event, or an error object
    /// inside one. `None` when it has none.
    fn error_message<'v>(&self, v: &'v Value) -> Option<&'v str> {
        errors::error_message(v)
    }

    /// The API's own error words, beside OpenAI's, which every flavor reads (every API is
    /// served by some OpenAI-compatible server too).
    fn error_words(&self) -> &'static Words {
        &Words::NONE
    }

    /// The fields of a refused run's body and headers the API's own error words are looked for
    /// in (its error's type, code or status).
    fn error_fields(&self, _body: &Value, _headers: &HeaderMap) -> Vec<String> {
        Vec::new()
    }

    /// What a refused run's body (`Null` when it is not JSON) and headers show of why: OpenAI's
    /// words in OpenAI's fields, and the API's own in its own; the status decides with them
    /// (`probe::http_reason`).
    fn error_signs(&self, body: &Value, headers: &HeaderMap) -> ErrorSigns {
        let message = self.error_message(body).unwrap_or_default();
        let own = self
            .error_words()
            .signs(&self.error_fields(body, headers), message);
        errors::openai_signs(body, message) | own
    }

    /// The prefixes of the rate-limit headers the API's provider sends beside `Retry-After`,
    /// kept in a refused run's record.
    fn rate_limit_prefixes(&self) -> &'static [&'static str] {
        &["x-ratelimit-"]
    }

    /// `gen_ai.operation.name`.
    fn otel_operation(&self) -> &'static str {
        "chat"
    }

    /// `gen_ai.provider.name`: the API's own provider, which is the telemetry flavor an
    /// OpenAI-compatible server (vLLM, SGLang, llama.cpp) speaks too.
    fn otel_provider(&self) -> &'static str {
        "openai"
    }
}
