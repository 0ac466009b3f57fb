//! The `anthropic-messages` flavor: `POST {base_url}/messages` with `messages` (system prompts
//! go in `system`); named events: `content_block_delta` carries `text_delta` (answer),
//! `thinking_delta` (reasoning) or `input_json_delta` (a tool call); `message_delta` carries
//! the stop reason and the cumulative output token count; `message_stop` ends the stream;
//! `ping` is no chunk; an `error` event inside a 200 is an error.

use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use super::errors::{self, stream_error, Words};
use super::{chat_messages, text_of, Ask, Delta, Flavor, PrefixCache, PromptCounts, ProviderAuth};

pub(crate) const PATH: &str = "/messages";

/// Anthropic's own API, which takes its key in `x-api-key`, never as a bearer token.
const HOST: &str = "api.anthropic.com";

/// The API version Anthropic's own server is told a request speaks.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic's own server (its host, or a target with `server: anthropic`) takes the key in
/// `x-api-key`, with the version header; any other server speaking the API (vLLM, llama.cpp)
/// takes a bearer token.
const AUTH: ProviderAuth = ProviderAuth {
    server: "anthropic",
    key_header: "x-api-key",
    headers: &[("anthropic-version", ANTHROPIC_VERSION)],
};

/// Anthropic's error types (`{"type": "error", "error": {"type"}}`) and its words for a prompt
/// over the context window.
const WORDS: Words = Words {
    overloaded: &["overloaded_error"],
    rate_limited: &[],
    auth: &[],
    not_found: &["not_found_error"],
    context_codes: &[],
    context_phrases: &["prompt is too long"],
};

pub(crate) struct AnthropicMessages;

impl Flavor for AnthropicMessages {
    fn path(&self, _model: &str) -> String {
        PATH.into()
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let (system, messages): (Vec<Value>, Vec<Value>) = chat_messages(ask, nonce)
            .into_iter()
            .partition(|m| m["role"] == "system");
        let mut body = Map::new();
        if !system.is_empty() {
            let text: Vec<&str> = system.iter().map(|m| text_of(&m["content"])).collect();
            body.insert("system".into(), json!(text.join("\n\n")));
        }
        body.insert("messages".into(), Value::Array(messages));
        if let Some(tools) = ask.tools {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| Value::Object(super::tool_fields(t, "input_schema")))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert("stream".into(), json!(true));
        body.insert("max_tokens".into(), json!(ask.max_tokens));
        if let Some(t) = ask.temperature {
            body.insert("temperature".into(), json!(t));
        }
        body
    }

    /// Marks `prefix`, which the prompt starts with, as a cache breakpoint (`cache_control:
    /// ephemeral`): Anthropic caches only what a request marks, from 1,024 tokens on (2,048 for
    /// its smallest models). The prefix becomes a text block of its own, in `system` when the
    /// prompt starts with a system message, else in the first message.
    fn mark_cacheable(&self, body: &mut Map<String, Value>, prefix: &str) {
        let split = |text: &str| -> Option<Value> {
            let rest = text.strip_prefix(prefix)?.trim_start_matches('\n');
            let mut blocks = vec![
                json!({"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}),
            ];
            if !rest.is_empty() {
                blocks.push(json!({"type": "text", "text": rest}));
            }
            Some(Value::Array(blocks))
        };
        if let Some(blocks) = body.get("system").and_then(Value::as_str).and_then(split) {
            body.insert("system".into(), blocks);
        } else if let Some(first) = body.get_mut("messages").and_then(|m| m.get_mut(0)) {
            if let Some(blocks) = first["content"].as_str().and_then(split) {
                first["content"] = blocks;
            }
        }
    }

    /// What one event carried; its type is the data's `type` (the SSE event name when absent).
    fn event(&self, kind: &str, v: &Value) -> Delta {
        let kind = v["type"].as_str().unwrap_or(kind);
        let mut d = Delta::default();
        match kind {
            "message_start" => {
                d.output_tokens = v["message"]["usage"]["output_tokens"].as_u64();
                d.input_tokens = v["message"]["usage"]["input_tokens"].as_u64();
                d.cached_tokens = v["message"]["usage"]["cache_read_input_tokens"].as_u64();
                d.model = super::non_empty(&v["message"]["model"]);
            }
            // Its `input` here is always `{}`: the arguments follow as JSON pieces.
            "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                d.push_call(v["index"].as_u64(), v["content_block"]["name"].as_str(), "");
            }
            "content_block_delta" => {
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => d.text = text_of(&delta["text"]).to_string(),
                    Some("input_json_delta") => {
                        d.push_call(v["index"].as_u64(), None, text_of(&delta["partial_json"]))
                    }
                    Some("thinking_delta") => {
                        d.reasoning_chars = text_of(&delta["thinking"]).chars().count()
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                // Cumulative: the latest count is the count.
                d.output_tokens = v["usage"]["output_tokens"].as_u64();
                d.finish_reason = v["delta"]["stop_reason"].as_str().map(finish_reason);
            }
            "message_stop" => d.done = true,
            "error" => d.error = Some(stream_error(&v["error"])),
            _ => {}
        }
        d
    }

    /// A whole message: its content blocks, stop reason and usage.
    fn whole(&self, v: &Value) -> Delta {
        if v["type"] == "error" {
            return self.event("error", v);
        }
        let mut d = Delta {
            finish_reason: v["stop_reason"].as_str().map(finish_reason),
            output_tokens: v["usage"]["output_tokens"].as_u64(),
            cached_tokens: v["usage"]["cache_read_input_tokens"].as_u64(),
            model: super::non_empty(&v["model"]),
            done: true,
            ..Delta::default()
        };
        for (i, block) in v["content"].as_array().into_iter().flatten().enumerate() {
            match block["type"].as_str() {
                Some("text") => d.text.push_str(text_of(&block["text"])),
                Some("thinking") => {
                    d.reasoning_chars += text_of(&block["thinking"]).chars().count()
                }
                Some("tool_use") => {
                    let input = block["input"].to_string();
                    d.push_call(Some(i as u64), block["name"].as_str(), &input);
                }
                _ => {}
            }
        }
        d
    }

    /// Neither server's field: vLLM documents `cache_salt` on the OpenAI endpoints, and
    /// llama.cpp serves a repeated prompt over Messages from its cache with `cache_prompt:
    /// false` set (measured).
    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Server {
            vllm_cache_salt: false,
            llama_cache_prompt: false,
        }
    }

    /// Anthropic's `input_tokens` leaves the cached tokens out.
    fn cached_share(&self, _cold: PromptCounts, warm: PromptCounts) -> Option<(u64, u64)> {
        let cached = warm.cached?;
        Some((cached, warm.input? + cached))
    }

    fn otel_provider(&self) -> &'static str {
        "anthropic"
    }

    fn provider_auth(&self) -> Option<ProviderAuth> {
        Some(AUTH)
    }

    fn provider_host(&self, base_url: &reqwest::Url) -> bool {
        base_url.host_str() == Some(HOST)
    }

    fn error_words(&self) -> &'static Words {
        &WORDS
    }

    /// Anthropic's error type sits where OpenAI's does (`{"error": {"type"}}`).
    fn error_fields(&self, body: &Value, _headers: &HeaderMap) -> Vec<String> {
        errors::openai_fields(body)
    }

    /// Anthropic's own `anthropic-ratelimit-*` beside the usual ones.
    fn rate_limit_prefixes(&self) -> &'static [&'static str] {
        &["x-ratelimit-", "anthropic-ratelimit-"]
    }
}

/// Anthropic's stop reasons in OpenAI's words, so `truncated` means the same everywhere.
fn finish_reason(stop: &str) -> String {
    match stop {
        "max_tokens" => "length",
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "refusal" => crate::checks::CONTENT_FILTER,
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::flavor::{ask_of, messages, Role};

    #[test]
    fn only_anthropics_own_host_is_the_providers() {
        let host = |u: &str| AnthropicMessages.provider_host(&reqwest::Url::parse(u).unwrap());
        assert!(host("https://api.anthropic.com/v1"));
        assert!(!host("https://api.anthropic.com.example.net/v1"));
        assert!(!host("http://127.0.0.1:8000/v1"));
    }

    #[test]
    fn a_cache_checks_prefix_is_marked_cacheable() {
        let m = messages(&[(Role::User, "Why?")]);
        let mut b = AnthropicMessages.body(&ask_of(&m), Some("PREFIX"));
        AnthropicMessages.mark_cacheable(&mut b, "PREFIX");
        assert_eq!(
            b["messages"][0]["content"],
            json!([{"type": "text", "text": "PREFIX", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Why?"}])
        );
        let m = messages(&[(Role::System, "Be brief."), (Role::User, "Why?")]);
        let mut b = AnthropicMessages.body(&ask_of(&m), Some("PREFIX"));
        AnthropicMessages.mark_cacheable(&mut b, "PREFIX");
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["system"][1]["text"], "Be brief.");
        assert_eq!(b["messages"][0]["content"], "Why?");
    }

    #[test]
    fn cache_reads_are_the_cached_tokens() {
        let d = AnthropicMessages.event(
            "message_start",
            &json!({"type":"message_start","message":{"model":"claude","usage":{"input_tokens":12,"cache_read_input_tokens":2048,"cache_creation_input_tokens":0,"output_tokens":1}}}),
        );
        assert_eq!((d.input_tokens, d.cached_tokens), (Some(12), Some(2048)));
    }

    #[test]
    fn deltas_of_each_kind() {
        let d = AnthropicMessages.event(
            "content_block_delta",
            &json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris"}}),
        );
        assert_eq!(d.text, "Paris");
        let d = AnthropicMessages.event(
            "content_block_delta",
            &json!({"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"let me"}}),
        );
        assert_eq!((d.text.as_str(), d.reasoning_chars), ("", 6));
        let d = AnthropicMessages.event(
            "content_block_delta",
            &json!({"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{\"city\""}}),
        );
        assert_eq!(d.text, "{\"city\"");
        let d = AnthropicMessages.event(
            "content_block_start",
            &json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}),
        );
        assert_eq!(
            (d.text.as_str(), d.tool_calls[0].slot),
            ("get_weather", Some(1))
        );
        let d = AnthropicMessages.event("ping", &json!({"type":"ping"}));
        assert!(!d.is_generated() && !d.done);
    }

    #[test]
    fn stop_usage_and_errors() {
        let d = AnthropicMessages.event(
            "message_delta",
            &json!({"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":64}}),
        );
        assert_eq!(
            (d.finish_reason.as_deref(), d.output_tokens),
            (Some("length"), Some(64))
        );
        assert!(
            AnthropicMessages
                .event("message_stop", &json!({"type":"message_stop"}))
                .done
        );
        let d = AnthropicMessages.event(
            "message_delta",
            &json!({"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}),
        );
        assert_eq!(d.finish_reason.as_deref(), Some("content_filter"));
        let d = AnthropicMessages.event(
            "error",
            &json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        );
        assert_eq!(d.error.as_deref(), Some("Overloaded"));
    }

    #[test]
    fn system_prompts_go_to_system() {
        let m = messages(&[(Role::System, "Be brief."), (Role::User, "Hi")]);
        let b = AnthropicMessages.body(&ask_of(&m), None);
        assert_eq!(b["system"], "Be brief.");
        assert_eq!(b["messages"], json!([{"role":"user","content":"Hi"}]));
        assert_eq!(b["max_tokens"], 64);
    }

    #[test]
    fn cache_reads_are_counted_apart_from_input() {
        use crate::probe::cache_check::{compare, tests::run};
        use crate::probe::flavor::Api;
        let cold = run(Some(400.0), Some(1000), Some(0));
        // Anthropic counts cache reads apart from input_tokens.
        let warm = run(Some(100.0), Some(10), Some(990));
        assert_eq!(
            compare(Api::AnthropicMessages, &cold, &warm).hit_ratio,
            Some(0.99)
        );
    }

    /// Anthropic's error bodies, and its own rate-limit headers kept.
    #[test]
    fn refusals_in_anthropics_words() {
        use crate::outcome::HttpReason::*;
        use crate::probe::flavor::Api;
        use crate::probe::http_reason::{rate_limit_headers, reason_of};
        use reqwest::header::HeaderMap;
        let cases = [
            (
                529,
                json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
                Overloaded,
            ),
            (
                500,
                json!({"type":"error","error":{"type":"overloaded_error"}}),
                Overloaded,
            ),
            (
                400,
                json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}),
                ContextLength,
            ),
            (
                400,
                json!({"type":"error","error":{"type":"not_found_error","message":"model: x"}}),
                NotFound,
            ),
        ];
        for (status, body, want) in cases {
            let got = reason_of(Api::AnthropicMessages, status, &body, &HeaderMap::new());
            assert_eq!(got, want, "{status} {body}");
        }
        let mut h = HeaderMap::new();
        h.insert(
            "anthropic-ratelimit-requests-remaining",
            "0".parse().unwrap(),
        );
        let kept = rate_limit_headers(&h).unwrap();
        assert_eq!(kept["anthropic-ratelimit-requests-remaining"], "0");
    }

    #[test]
    fn anthropics_own_server_takes_its_key_in_its_header_with_the_version() {
        let auth = AnthropicMessages.provider_auth().unwrap();
        assert_eq!(crate::probe::flavor::server_auth("anthropic"), Some(auth));
        assert_eq!(auth.headers, [("anthropic-version", ANTHROPIC_VERSION)]);
        assert_eq!(auth.describe(), "key in x-api-key, with anthropic-version");
    }
}
