//! The `bedrock` flavor: Amazon Bedrock's ConverseStream,
//! `POST {base_url}/model/{modelId}/converse-stream`, signed with SigV4 by AWS's `aws-sigv4`
//! (or sent with a Bedrock API key as a bearer token). The body has `messages` of text blocks,
//! `system`, `inferenceConfig` and, when the probe offers tools, `toolConfig`. The answer is
//! AWS's binary event stream (read in [`crate::stream::eventstream`]): `messageStart`,
//! `contentBlockStart` (a tool call's name), `contentBlockDelta` (text, a tool call's input, or
//! reasoning), `contentBlockStop`, `messageStop` (the stop reason) and, last, `metadata` (usage
//! and the server's own latency). An exception frame inside the 200 is an error in the stream.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use super::errors::{self, Words};
use super::sigv4::SignError;
use super::{chat_messages, text_of, Ask, AwsKeys, Delta, Flavor, Framing, PrefixCache, Signer};

/// The service Bedrock's requests are signed for.
const SERVICE: &str = "bedrock";

/// Signs a Bedrock request with SigV4 at `time` (the flavor's [`Signer`]).
pub(crate) fn sign_request(
    headers: &mut HeaderMap,
    url: &str,
    body: &[u8],
    region: &str,
    keys: &AwsKeys,
    time: std::time::SystemTime,
) -> Result<(), SignError> {
    super::sigv4::sign_for(SERVICE, headers, url, body, region, keys, time)
}

/// The header AWS names an error's type in.
const ERROR_TYPE: &str = "x-amzn-errortype";

/// Bedrock's error types: a model being loaded is an overload, not the caller's quota spent.
const WORDS: Words = Words {
    overloaded: &["ServiceUnavailableException", "ModelNotReadyException"],
    rate_limited: &["ThrottlingException", "ServiceQuotaExceededException"],
    auth: &[
        "AccessDeniedException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
        "InvalidSignatureException",
        "IncompleteSignatureException",
        "MissingAuthenticationTokenException",
    ],
    not_found: &["ResourceNotFoundException"],
    context_codes: &[],
    context_phrases: &["input is too long"],
};

pub(crate) struct Bedrock;

impl Flavor for Bedrock {
    /// The path after `base_url` (the runtime endpoint,
    /// `https://bedrock-runtime.REGION.amazonaws.com`).
    fn path(&self, model: &str) -> String {
        format!(
            "/model/{}/converse-stream",
            utf8_percent_encode(model, SEGMENT)
        )
    }

    /// The path names the model, and the body refuses unknown keys.
    fn model_in_body(&self) -> bool {
        false
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let (system, messages): (Vec<Value>, Vec<Value>) = chat_messages(ask, nonce)
            .into_iter()
            .partition(|m| m["role"] == "system");
        let text_block = |m: &Value| json!([{"text": text_of(&m["content"])}]);
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m["role"], "content": text_block(m)}))
            .collect();
        let mut body = Map::new();
        body.insert("messages".into(), Value::Array(messages));
        if !system.is_empty() {
            let system: Vec<Value> = system
                .iter()
                .map(|m| json!({"text": text_of(&m["content"])}))
                .collect();
            body.insert("system".into(), Value::Array(system));
        }
        let mut inference = Map::new();
        inference.insert("maxTokens".into(), json!(ask.max_tokens));
        if let Some(t) = ask.temperature {
            inference.insert("temperature".into(), json!(t));
        }
        body.insert("inferenceConfig".into(), Value::Object(inference));
        if let Some(tools) = ask.tools {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let mut spec = super::tool_fields(t, "inputSchema");
                    spec.insert("inputSchema".into(), json!({"json": t.parameters}));
                    json!({"toolSpec": spec})
                })
                .collect();
            body.insert("toolConfig".into(), json!({"tools": tools}));
        }
        body
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    /// What one frame carried; `kind` is its event type (`exception:<type>` for an exception).
    fn event(&self, kind: &str, v: &Value) -> Delta {
        let mut d = Delta::default();
        let slot = v["contentBlockIndex"].as_u64();
        match kind {
            "contentBlockStart" => {
                if let Some(tool) = v["start"]["toolUse"].as_object() {
                    d.push_call(slot, tool.get("name").and_then(Value::as_str), "");
                }
            }
            "contentBlockDelta" => {
                let delta = &v["delta"];
                if let Some(text) = delta["text"].as_str() {
                    d.text = text.to_string();
                } else if let Some(input) = delta["toolUse"]["input"].as_str() {
                    d.push_call(slot, None, input);
                } else if let Some(r) = delta["reasoningContent"].as_object() {
                    let text = r.get("text").and_then(Value::as_str).unwrap_or_default();
                    d.reasoning_chars = text.chars().count();
                }
            }
            "messageStop" => d.finish_reason = v["stopReason"].as_str().map(finish_reason),
            // The last event: usage, and the server's own end-to-end figure.
            "metadata" => {
                d.output_tokens = v["usage"]["outputTokens"].as_u64();
                d.input_tokens = v["usage"]["inputTokens"].as_u64();
                d.server_timings = v["metrics"]["latencyMs"]
                    .as_f64()
                    .map(|ms| json!({"latencyMs": ms}));
                d.done = true;
            }
            _ => {
                if let Some(kind) = kind
                    .strip_prefix("exception:")
                    .or(kind.strip_prefix("error:"))
                {
                    let message = self.error_message(v).unwrap_or_default();
                    d.error = Some(format!("{kind}: {message}"));
                }
            }
        }
        d
    }

    /// A whole Converse answer (a server that answered with JSON): its content blocks, stop
    /// reason and usage.
    fn whole(&self, v: &Value) -> Delta {
        let mut d = Delta {
            finish_reason: v["stopReason"].as_str().map(finish_reason),
            output_tokens: v["usage"]["outputTokens"].as_u64(),
            input_tokens: v["usage"]["inputTokens"].as_u64(),
            done: true,
            ..Delta::default()
        };
        let blocks = v["output"]["message"]["content"].as_array();
        for (i, block) in blocks.into_iter().flatten().enumerate() {
            if let Some(text) = block["text"].as_str() {
                d.text.push_str(text);
            } else if let Some(tool) = block["toolUse"].as_object() {
                let input = tool.get("input").map(Value::to_string).unwrap_or_default();
                d.push_call(
                    Some(i as u64),
                    tool.get("name").and_then(Value::as_str),
                    &input,
                );
            } else if let Some(r) = block["reasoningContent"]["reasoningText"]["text"].as_str() {
                d.reasoning_chars += r.chars().count();
            }
        }
        d
    }

    fn aws_signer(&self) -> Option<Signer> {
        Some(sign_request)
    }

    fn hosted(&self) -> bool {
        true
    }

    /// Bedrock caches a prompt only up to a `cachePoint` the request marks, and the probe marks
    /// none.
    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Marked
    }

    /// The runtime endpoint lists nothing (its model list is the control plane's, another host
    /// and a signed call): an unsigned GET would only be refused, every few minutes.
    fn models_path(&self) -> Option<&'static str> {
        None
    }

    /// AWS's `{"message"}`, or `{"Message"}`.
    fn error_message<'v>(&self, v: &'v Value) -> Option<&'v str> {
        errors::error_message(v).or(v["Message"].as_str())
    }

    fn error_words(&self) -> &'static Words {
        &WORDS
    }

    /// AWS names the error's type in `x-amzn-ErrorType` (and some bodies in `__type`).
    fn error_fields(&self, body: &Value, headers: &HeaderMap) -> Vec<String> {
        errors::word(&body["__type"])
            .into_iter()
            .chain(amzn_error_type(headers))
            .collect()
    }
}

/// AWS's `x-amzn-ErrorType` header: the error's type, before any `:` and the namespace URL
/// after it (`ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/`).
fn amzn_error_type(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(ERROR_TYPE)?.to_str().ok()?;
    let ty = v.split(':').next().unwrap_or(v).trim();
    (!ty.is_empty()).then(|| ty.to_string())
}

/// What stays as it is in a path segment: RFC 3986's unreserved characters, as AWS's SDKs
/// encode a model id (`anthropic.claude-3-haiku-20240307-v1:0` → `...v1%3A0`; an ARN's `/` too).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Bedrock's stop reasons in OpenAI's words, so `truncated` and `content_filtered` mean the
/// same everywhere.
fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "guardrail_intervened" | "content_filtered" => crate::checks::CONTENT_FILTER,
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;
    use crate::probe::flavor::AwsKeys;
    use crate::secret::Secret;

    /// The ConverseStream body recorded from Bedrock (provenance in the fixture's folder), read
    /// by the event-stream reader and this flavor, as a run reads it.
    #[test]
    fn replays_a_recorded_bedrock_stream() {
        let bytes = include_bytes!("../../../tests/fixtures/streams/bedrock/converse-stream.bin");
        let caps = crate::stream::StreamCaps {
            max_line: 1 << 16,
            max_body: 1 << 20,
        };
        // In pieces of 7 bytes, so frames span reads as they do on a socket.
        let reader = crate::stream::eventstream::EventStreamReader::new(
            crate::stream::reads(bytes.chunks(7)),
            caps,
            std::time::Instant::now(),
        );
        let events: Vec<_> = crate::stream::drain_ready(reader)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(events.len(), 16);
        let (mut text, mut generated) = (String::new(), 0);
        let (mut finish, mut tokens, mut input, mut timings, mut done) =
            (None, None, None, None, false);
        for ev in &events {
            assert!(!done, "nothing after the last event");
            let d = Bedrock.event(&ev.event, &serde_json::from_str(&ev.data).unwrap());
            assert_eq!(d.error, None);
            generated += usize::from(d.is_generated());
            text.push_str(&d.text);
            finish = d.finish_reason.or(finish);
            tokens = d.output_tokens.or(tokens);
            input = d.input_tokens.or(input);
            timings = d.server_timings.or(timings);
            done = d.done;
        }
        assert_eq!(
            text,
            "Hello! As an AI language model, I don't have feelings, but I'm functioning well and ready to assist you. How can I help you today?"
        );
        assert_eq!(
            generated, 12,
            "the start, stop and metadata frames are no content"
        );
        assert_eq!(finish.as_deref(), Some("stop"));
        assert_eq!((tokens, input), (Some(35), Some(13)));
        assert_eq!(timings, Some(json!({"latencyMs": 1118.0})));
        assert!(done);
    }

    #[test]
    fn model_ids_are_one_segment() {
        assert_eq!(
            Bedrock.path("anthropic.claude-3-haiku-20240307-v1:0"),
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
        );
        assert_eq!(
            Bedrock.path("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x"),
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.x/converse-stream"
        );
    }

    #[test]
    fn stops_tools_reasoning_and_exceptions() {
        for (stop, want) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("guardrail_intervened", "content_filter"),
            ("content_filtered", "content_filter"),
        ] {
            let d = Bedrock.event("messageStop", &json!({"stopReason": stop}));
            assert_eq!(d.finish_reason.as_deref(), Some(want), "{stop}");
            assert!(!d.done, "metadata comes after messageStop");
        }
        let d = Bedrock.event(
            "contentBlockStart",
            &json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}}),
        );
        assert_eq!(
            (d.text.as_str(), d.tool_calls[0].slot),
            ("get_weather", Some(1))
        );
        let d = Bedrock.event(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\""}}}),
        );
        assert_eq!(d.tool_calls[0].arguments, "{\"city\"");
        let d = Bedrock.event(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}}),
        );
        assert_eq!((d.text.as_str(), d.reasoning_chars), ("", 3));
        let d = Bedrock.event(
            "exception:throttlingException",
            &json!({"message": "Too many requests, please wait before trying again."}),
        );
        assert_eq!(
            d.error.as_deref(),
            Some("throttlingException: Too many requests, please wait before trying again.")
        );
    }

    #[test]
    fn body_shape() {
        use crate::probe::flavor::{ask_of, messages, Role};
        let m = messages(&[(Role::System, "Be brief."), (Role::User, "Hi")]);
        let b = Bedrock.body(&ask_of(&m), None);
        assert_eq!(
            Value::Object(b),
            json!({"messages": [{"role": "user", "content": [{"text": "Hi"}]}],
                   "system": [{"text": "Be brief."}],
                   "inferenceConfig": {"maxTokens": 64, "temperature": 0.0}})
        );
    }

    /// AWS's published SigV4 example key: the signature the crate computes for a fixed time
    /// names the key id, the date, the region and the service, and never the secret.
    #[test]
    fn signing_adds_date_token_and_authorization() {
        let auth = AwsKeys {
            access_key_id: Secret::new("AKIDEXAMPLE".into()),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
            session_token: Some(Secret::new("token-xyz".into())),
        };
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_600);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m%3A0/converse-stream";
        sign_request(&mut headers, url, b"{}", "us-east-1", &auth, time).unwrap();
        assert_eq!(headers["x-amz-date"], "20260101T000000Z");
        assert_eq!(headers["x-amz-security-token"], "token-xyz");
        let a = headers["authorization"].to_str().unwrap();
        assert!(
            a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="),
            "{a}"
        );
        assert!(headers["authorization"].is_sensitive());
        assert!(!a.contains("EXAMPLEKEY"));
        // The same request at the same time signs the same; another body does not.
        let mut again = HeaderMap::new();
        again.insert("content-type", HeaderValue::from_static("application/json"));
        sign_request(&mut again, url, b"{}", "us-east-1", &auth, time).unwrap();
        assert_eq!(again["authorization"], headers["authorization"]);
        let mut other = HeaderMap::new();
        other.insert("content-type", HeaderValue::from_static("application/json"));
        sign_request(&mut other, url, b"{\"x\":1}", "us-east-1", &auth, time).unwrap();
        assert_ne!(other["authorization"], headers["authorization"]);
    }

    /// Bedrock's error answers: a `{"message"}` body and the type in `x-amzn-ErrorType`.
    #[test]
    fn error_types_from_the_header() {
        use crate::outcome::HttpReason::{self, *};
        use crate::probe::flavor::Api;
        use crate::probe::http_reason::reason_of;
        let cases: &[(u16, &str, &str, HttpReason)] = &[
            (
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
                RateLimited,
            ),
            (
                429,
                "ModelNotReadyException",
                "Model is not ready for inference.",
                Overloaded,
            ),
            (
                503,
                "ServiceUnavailableException",
                "Service unavailable.",
                Overloaded,
            ),
            (
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
                Auth,
            ),
            (
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                Auth,
            ),
            (
                403,
                "ExpiredTokenException",
                "The security token included in the request is expired",
                Auth,
            ),
            (
                404,
                "ResourceNotFoundException",
                "Could not resolve the foundation model from the provided model identifier.",
                NotFound,
            ),
            (
                400,
                "ValidationException",
                "Input is too long for requested model.",
                ContextLength,
            ),
            (
                400,
                "ValidationException",
                "The provided model identifier is invalid.",
                BadRequest,
            ),
            (
                400,
                "ServiceQuotaExceededException",
                "Your request exceeds the service quota for your account.",
                RateLimited,
            ),
            (
                500,
                "InternalServerException",
                "The server encountered an internal error.",
                ServerError,
            ),
        ];
        for (status, ty, message, want) in cases {
            let mut h = HeaderMap::new();
            let header = format!("{ty}:http://internal.amazon.com/coral/com.amazon.bedrock/");
            h.insert(ERROR_TYPE, header.parse().unwrap());
            let body = json!({ "message": message });
            assert_eq!(
                reason_of(Api::Bedrock, *status, &body, &h),
                *want,
                "{status} {ty}"
            );
        }
        // Without the header, the message alone; AWS's capitalised `Message` too.
        let body = json!({"message": "Input is too long for requested model."});
        assert_eq!(
            reason_of(Api::Bedrock, 400, &body, &HeaderMap::new()),
            ContextLength
        );
        let body = json!({"Message": "Input is too long for requested model."});
        assert_eq!(
            reason_of(Api::Bedrock, 400, &body, &HeaderMap::new()),
            ContextLength
        );
        assert_eq!(
            Bedrock.error_message(&body),
            Some("Input is too long for requested model.")
        );
    }
}
