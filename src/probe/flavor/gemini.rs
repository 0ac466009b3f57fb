//! The `gemini` flavor: Google's Gemini API,
//! `POST {base_url}/models/{model}:streamGenerateContent?alt=sse` with the key in the
//! `x-goog-api-key` header. The body carries `contents` (role `user` or `model`, each with
//! `parts`), `systemInstruction` for system prompts, `generationConfig` and the tools as
//! `functionDeclarations`. Every event is a whole `GenerateContentResponse`: the first
//! candidate's parts carry answer text, thoughts (`thought: true`, reasoning) or whole
//! `functionCall`s; `usageMetadata` carries the running counts; `finishReason` ends it, and
//! there is no end marker after it. A prompt refused before any candidate comes back as
//! `promptFeedback.blockReason`.

use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use super::errors::{self, stream_error, Words};
use super::helpers::path_segment;
use super::{
    chat_messages, non_empty, text_of, Ask, Delta, Flavor, PrefixCache, TargetError, TargetField,
};
use crate::checks::CONTENT_FILTER;

/// Gemini's statuses and reasons (`{"error": {"status", "details": [{"reason"}]}}`): a key
/// it does not know comes as a 400 `INVALID_ARGUMENT` whose reason is `API_KEY_INVALID`.
const WORDS: Words = Words {
    overloaded: &["UNAVAILABLE"],
    rate_limited: &[],
    auth: &["API_KEY_INVALID", "PERMISSION_DENIED", "UNAUTHENTICATED"],
    not_found: &["NOT_FOUND"],
    context_codes: &[],
    context_phrases: &["exceeds the maximum number of tokens"],
};

pub struct Gemini;

impl Flavor for Gemini {
    /// The path after `base_url` (which ends in the API version:
    /// `https://generativelanguage.googleapis.com/v1beta`).
    fn path(&self, model: &str) -> String {
        format!("/models/{model}:streamGenerateContent?alt=sse")
    }

    /// The path names the model; the request has no `model` field.
    fn model_in_body(&self) -> bool {
        false
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        // The nonce goes first in what the model reads first: the system instruction when there is
        // one (it heads the prefix Gemini caches), else the first user part.
        let mut system = Vec::new();
        let mut contents = Vec::new();
        for m in chat_messages(ask, nonce) {
            let text = text_of(&m["content"]).to_string();
            match m["role"].as_str() {
                Some("system") => system.push(text),
                Some("assistant") => {
                    contents.push(json!({"role": "model", "parts": [{"text": text}]}))
                }
                _ => contents.push(json!({"role": "user", "parts": [{"text": text}]})),
            }
        }
        let mut body = Map::new();
        body.insert("contents".into(), Value::Array(contents));
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        if let Some(tools) = ask.tools {
            // The definitions' JSON Schema as written: `parametersJsonSchema` takes JSON Schema
            // itself, where `parameters` takes only Google's OpenAPI subset.
            let declarations: Vec<Value> = tools
                .iter()
                .map(|t| Value::Object(super::tool_fields(t, "parametersJsonSchema")))
                .collect();
            body.insert(
                "tools".into(),
                json!([{ "functionDeclarations": declarations }]),
            );
        }
        let mut generation = Map::new();
        generation.insert("maxOutputTokens".into(), json!(ask.max_tokens));
        if let Some(t) = ask.temperature {
            generation.insert("temperature".into(), json!(t));
        }
        body.insert("generationConfig".into(), Value::Object(generation));
        body
    }

    /// What one `GenerateContentResponse` carried (a streamed chunk, or a whole answer).
    fn event(&self, _kind: &str, v: &Value) -> Delta {
        if let Some(err) = v.get("error").filter(|e| e.is_object()) {
            return Delta {
                error: Some(stream_error(err)),
                ..Delta::default()
            };
        }
        let mut d = Delta::default();
        let candidate = &v["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(call) = part.get("functionCall") {
                // Gemini sends each call whole, its arguments an object.
                let args = call
                    .get("args")
                    .map_or_else(|| "{}".into(), Value::to_string);
                d.push_call(None, call["name"].as_str(), &args);
            } else if part["thought"] == true {
                d.reasoning_chars += text_of(&part["text"]).chars().count();
            } else {
                d.text.push_str(text_of(&part["text"]));
            }
        }
        d.finish_reason = candidate["finishReason"].as_str().map(finish_reason);
        if d.finish_reason.is_none() && v["promptFeedback"]["blockReason"].is_string() {
            d.finish_reason = Some(CONTENT_FILTER.into());
        }
        // Running totals; the answer's count leaves out the thoughts, which are output too.
        let usage = &v["usageMetadata"];
        let (answer, thoughts) = (
            usage["candidatesTokenCount"].as_u64(),
            usage["thoughtsTokenCount"].as_u64(),
        );
        if answer.is_some() || thoughts.is_some() {
            d.output_tokens = Some(answer.unwrap_or(0).saturating_add(thoughts.unwrap_or(0)));
        }
        d.reasoning_tokens = thoughts;
        d.input_tokens = usage["promptTokenCount"].as_u64();
        d.model = non_empty(&v["modelVersion"]);
        d
    }

    /// The key goes in a header, never in the URL's `?key=`, which logs would keep.
    fn key_header(&self) -> Option<&'static str> {
        Some("x-goog-api-key")
    }

    /// The model is one path segment, and the base URL names the API version the
    /// `/models/...` path hangs under.
    fn check_target(&self, model: &str, base_url: &reqwest::Url) -> Result<(), TargetError> {
        if !path_segment(model) {
            return Err(TargetError {
                field: TargetField::Model,
                message: format!("model {model:?} is not a Gemini model id: api gemini takes the id alone (letters, digits, -, _ and .), such as gemini-2.5-flash, without models/"),
            });
        }
        if base_url.path().trim_end_matches('/').is_empty() {
            return Err(TargetError {
                field: TargetField::BaseUrl,
                message: format!("base_url {:?} names no API version: api gemini appends /models/MODEL:streamGenerateContent to it, so end it in the version, such as https://generativelanguage.googleapis.com/v1beta", base_url.as_str().trim_end_matches('/')),
            });
        }
        Ok(())
    }

    fn hosted(&self) -> bool {
        true
    }

    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Provider
    }

    /// Gemini's `RetryInfo.retryDelay` (`"38s"`) from a refused run's body: Google says when to
    /// come back there, and in no header.
    fn retry_delay(&self, body: &Value) -> Option<String> {
        body["error"]["details"]
            .as_array()?
            .iter()
            .find_map(|d| d["retryDelay"].as_str())
            .map(|d| crate::util::one_line(d, 80))
    }

    fn error_words(&self) -> &'static Words {
        &WORDS
    }

    /// Gemini's `{"error": {"status", "details": [{"reason"}]}}`.
    fn error_fields(&self, body: &Value, _headers: &HeaderMap) -> Vec<String> {
        let err = errors::error_object(body);
        let details = err["details"].as_array().into_iter().flatten();
        std::iter::once(&err["status"])
            .chain(details.map(|d| &d["reason"]))
            .filter_map(errors::word)
            .collect()
    }
}

/// The finish reasons Gemini documents for a stop by its safety, recitation, blocklist or
/// personal-data filters (images' own included).
const FILTERED: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// Gemini's finish reasons in OpenAI's words, so `truncated` and `content_filtered` mean the
/// same everywhere; the rest (`LANGUAGE`, `MALFORMED_FUNCTION_CALL`...) lower-cased.
fn finish_reason(reason: &str) -> String {
    match reason {
        "STOP" => "stop".into(),
        "MAX_TOKENS" => "length".into(),
        r if FILTERED.contains(&r) => CONTENT_FILTER.into(),
        other => other.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::flavor::{ask_of, messages, Role};

    #[test]
    fn path_and_model_ids() {
        assert_eq!(
            Gemini.path("gemini-2.5-flash"),
            "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        let url = reqwest::Url::parse("https://generativelanguage.googleapis.com/v1beta").unwrap();
        assert!(Gemini.check_target("gemini-2.0-flash-001", &url).is_ok());
        for bad in ["", "models/gemini-2.5-flash", "a:b", "a b", "a?x"] {
            let e = Gemini.check_target(bad, &url).unwrap_err();
            assert_eq!(e.field, TargetField::Model, "{bad}");
        }
    }

    #[test]
    fn body_roles_system_instruction_and_nonce() {
        let m = messages(&[
            (Role::System, "Be brief."),
            (Role::User, "Hi"),
            (Role::Assistant, "Hello."),
            (Role::User, "Capital of France?"),
        ]);
        let b = Gemini.body(&ask_of(&m), Some("[canary 1]"));
        assert_eq!(
            b["systemInstruction"],
            json!({"parts": [{"text": "[canary 1]\nBe brief."}]})
        );
        assert_eq!(
            b["contents"],
            json!([
                {"role": "user", "parts": [{"text": "Hi"}]},
                {"role": "model", "parts": [{"text": "Hello."}]},
                {"role": "user", "parts": [{"text": "Capital of France?"}]}
            ])
        );
        assert_eq!(
            b["generationConfig"],
            json!({"maxOutputTokens": 64, "temperature": 0.0})
        );
        assert!(b.get("stream").is_none() && b.get("tools").is_none());
        // Without a system prompt the nonce heads the first user part.
        let m = messages(&[(Role::User, "Capital of France?")]);
        let b = Gemini.body(&ask_of(&m), Some("[canary 2]"));
        assert_eq!(
            b["contents"][0]["parts"][0]["text"],
            "[canary 2]\nCapital of France?"
        );
        assert!(b.get("systemInstruction").is_none());
    }

    #[test]
    fn tools_are_function_declarations() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let m = messages(&[(Role::User, "Weather?")]);
        let compiled = crate::checks::schema::Schema::compile(
            std::path::Path::new("t.json"),
            schema.clone(),
            "",
        )
        .unwrap();
        let tools = [crate::checks::tool_call::Tool {
            name: "get_weather".into(),
            description: Some("The weather".into()),
            parameters: schema.clone(),
            schema: std::sync::Arc::new(compiled),
        }];
        let mut ask = ask_of(&m);
        ask.tools = Some(&tools);
        let b = Gemini.body(&ask, None);
        assert_eq!(
            b["tools"],
            json!([{"functionDeclarations": [{"name": "get_weather", "description": "The weather", "parametersJsonSchema": schema}]}])
        );
    }

    #[test]
    fn parts_of_each_kind() {
        let d = Gemini.event("message",
            &json!({"candidates":[{"content":{"parts":[{"text":"Paris"}],"role":"model"}}],"modelVersion":"gemini-2.5-flash"}),
        );
        assert_eq!(
            (d.text.as_str(), d.model.as_deref()),
            ("Paris", Some("gemini-2.5-flash"))
        );
        assert!(d.finish_reason.is_none() && !d.done);
        let d = Gemini.event("message",
            &json!({"candidates":[{"content":{"parts":[{"text":"**Thinking**","thought":true}],"role":"model"}}]}),
        );
        assert_eq!((d.text.as_str(), d.reasoning_chars), ("", 12));
        let d = Gemini.event("message",
            &json!({"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}]}),
        );
        assert_eq!(d.text, "get_weather{\"city\":\"Paris\"}");
        assert_eq!(
            d.tool_calls,
            vec![super::super::delta::ToolCallPiece {
                slot: None,
                name: Some("get_weather".into()),
                arguments: "{\"city\":\"Paris\"}".into()
            }]
        );
        // A call without arguments still has an object of them.
        let d = Gemini.event(
            "message",
            &json!({"candidates":[{"content":{"parts":[{"functionCall":{"name":"now"}}]}}]}),
        );
        assert_eq!(d.tool_calls[0].arguments, "{}");
        // A part with only a thought signature is no content.
        let d = Gemini.event(
            "message",
            &json!({"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"c2ln"}]}}]}),
        );
        assert!(!d.is_generated());
    }

    #[test]
    fn finish_reasons_in_openai_words() {
        let finish = |r: &str| {
            Gemini
                .event(
                    "message",
                    &json!({"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":r}]}),
                )
                .finish_reason
        };
        assert_eq!(finish("STOP").as_deref(), Some("stop"));
        assert_eq!(finish("MAX_TOKENS").as_deref(), Some("length"));
        for r in [
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
        ] {
            assert_eq!(finish(r).as_deref(), Some(CONTENT_FILTER), "{r}");
        }
        assert_eq!(
            finish("MALFORMED_FUNCTION_CALL").as_deref(),
            Some("malformed_function_call")
        );
        // A prompt blocked before any candidate.
        let d = Gemini.event("message",
            &json!({"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12559,"totalTokenCount":12559}}),
        );
        assert_eq!(d.finish_reason.as_deref(), Some(CONTENT_FILTER));
        assert_eq!((d.input_tokens, d.output_tokens), (Some(12559), None));
    }

    #[test]
    fn usage_counts_thoughts_as_output_and_reasoning() {
        let d = Gemini.event("message",
            &json!({"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":48,"totalTokenCount":598,"thoughtsTokenCount":540}}),
        );
        assert_eq!(
            (d.input_tokens, d.output_tokens, d.reasoning_tokens),
            (Some(10), Some(588), Some(540))
        );
        // A hostile server's counts do not overflow.
        let d = Gemini.event(
            "message",
            &json!({"usageMetadata":{"candidatesTokenCount":u64::MAX,"thoughtsTokenCount":1}}),
        );
        assert_eq!(d.output_tokens, Some(u64::MAX));
        // Before the first answer token, only the prompt is counted: no output count yet.
        let d = Gemini.event(
            "message",
            &json!({"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7}}),
        );
        assert_eq!((d.input_tokens, d.output_tokens), (Some(7), None));
    }

    #[test]
    fn an_error_in_the_stream() {
        let d = Gemini.event("message",
            &json!({"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}),
        );
        assert_eq!(d.error.as_deref(), Some("An internal error has occurred."));
    }

    #[test]
    fn geminis_retry_delay_from_the_body() {
        let body = json!({"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}});
        assert_eq!(Gemini.retry_delay(&body).as_deref(), Some("38s"));
        assert_eq!(Gemini.retry_delay(&json!({"error":{"code":429}})), None);
    }

    /// Gemini's error bodies, as its API and SDK test data show them.
    #[test]
    fn refusals_in_geminis_words() {
        use crate::outcome::HttpReason::*;
        use crate::probe::flavor::Api;
        use crate::probe::http_reason::reason_of;
        use reqwest::header::HeaderMap;
        let cases = [
            (
                400,
                json!({"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}),
                BadRequest,
            ),
            (
                429,
                json!({"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}),
                RateLimited,
            ),
            (
                503,
                json!({"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}),
                Overloaded,
            ),
            (
                400,
                json!({"error":{"code":400,"message":"The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}),
                ContextLength,
            ),
            (
                400,
                json!({"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}),
                Auth,
            ),
            (
                403,
                json!({"error":{"code":403,"message":"Method doesn't allow unregistered callers","status":"PERMISSION_DENIED"}}),
                Auth,
            ),
            (
                404,
                json!({"error":{"code":404,"message":"models/gemini-5.0-flash is not found for API version v1","status":"NOT_FOUND"}}),
                NotFound,
            ),
            (
                500,
                json!({"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}),
                ServerError,
            ),
        ];
        for (status, body, want) in cases {
            let got = reason_of(Api::Gemini, status, &body, &HeaderMap::new());
            assert_eq!(got, want, "{status} {body}");
        }
    }
}
