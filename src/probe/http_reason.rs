//! Why a server refused a run: an error status, its body's error type or code, and the headers
//! that say when to come back, read into an [`HttpReason`] and the rate-limit headers kept in
//! the record. Each provider words the same refusal its own way; the words are listed here once.

use std::collections::BTreeMap;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::outcome::HttpReason;

/// Error types and codes that mean the service is overloaded, whatever the status
/// (Anthropic's `overloaded_error` comes with a 529, Bedrock's `ModelNotReadyException` with a
/// 429: the model is being loaded, not the caller's quota spent).
const OVERLOADED: &[&str] = &[
    "overloaded_error",
    "overloaded",
    "ServiceUnavailableException",
    "ServiceUnavailable",
    "ModelNotReadyException",
    "UNAVAILABLE",
];

/// Error types, statuses and reasons of a caller whose credentials were refused, whatever the
/// status: Bedrock's, and Gemini's (which answers a key it does not know with a 400
/// `INVALID_ARGUMENT` whose reason is `API_KEY_INVALID`).
const AUTH: &[&str] = &[
    "AccessDeniedException",
    "UnrecognizedClientException",
    "ExpiredTokenException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "API_KEY_INVALID",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
];

/// Bedrock's error types of a spent quota.
const RATE_LIMITED: &[&str] = &["ThrottlingException", "ServiceQuotaExceededException"];

/// Error codes and types of an unknown model or deployment.
const NOT_FOUND: &[&str] = &[
    "model_not_found",
    "DeploymentNotFound",
    "not_found_error",
    "ResourceNotFoundException",
    "NOT_FOUND",
];

/// Error codes of a prompt over the context window, and the phrases of those that send none:
/// OpenAI and Azure, vLLM, Anthropic, Gemini, Bedrock.
const CONTEXT_CODES: &[&str] = &["context_length_exceeded", "string_above_max_length"];
const CONTEXT_PHRASES: &[&str] = &[
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "exceeds the maximum number of tokens",
    "too many tokens",
];

/// The reason of an error status, from the status, the body (JSON when it parses) and the
/// headers (AWS names the error's type in `x-amzn-ErrorType`).
pub fn classify(status: u16, body: Option<&Value>, headers: &HeaderMap) -> HttpReason {
    let mut words = body.map(error_words).unwrap_or_default();
    words.extend(amzn_error_type(headers));
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if has(OVERLOADED) {
        return HttpReason::Overloaded;
    }
    if status == 429 || has(RATE_LIMITED) {
        return HttpReason::RateLimited;
    }
    if matches!(status, 503 | 529) {
        return HttpReason::Overloaded;
    }
    if matches!(status, 401 | 403) || (status < 500 && has(AUTH)) {
        return HttpReason::Auth;
    }
    if status == 404 || (status < 500 && has(NOT_FOUND)) {
        return HttpReason::NotFound;
    }
    if matches!(status, 400 | 413 | 422) {
        let message = body.map(message_of).unwrap_or_default().to_lowercase();
        if has(CONTEXT_CODES) || CONTEXT_PHRASES.iter().any(|p| message.contains(p)) {
            return HttpReason::ContextLength;
        }
        if status == 400 && message.contains("priority") {
            return HttpReason::PriorityUnsupported;
        }
    }
    if status >= 500 {
        HttpReason::ServerError
    } else {
        HttpReason::BadRequest
    }
}

/// The error's type and code fields, as each provider nests them: OpenAI's
/// `{"error": {"type", "code"}}`, Anthropic's `{"type": "error", "error": {"type"}}`, Gemini's
/// `{"error": {"status", "details": [{"reason"}]}}` and Bedrock's `__type` or `{"message"}`
/// with an `x-amzn-errortype`.
fn error_words(v: &Value) -> Vec<String> {
    let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let details = err["details"].as_array().into_iter().flatten();
    [
        &err["type"],
        &err["code"],
        &err["status"],
        &v["__type"],
        &err["innererror"]["code"],
    ]
    .into_iter()
    .chain(details.map(|d| &d["reason"]))
    .filter_map(|w| match w {
        Value::String(s) => Some(s.rsplit(['#', ':']).next().unwrap_or(s).to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
    .collect()
}

/// AWS's `x-amzn-ErrorType` header: the error's type, before any `:` and the namespace URL
/// after it (`ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/`).
fn amzn_error_type(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("x-amzn-errortype")?.to_str().ok()?;
    let ty = v.split(':').next().unwrap_or(v).trim();
    (!ty.is_empty()).then(|| ty.to_string())
}

fn message_of(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .or(v["message"].as_str())
        .or(v["Message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// `Retry-After` and the `x-ratelimit-*` / `anthropic-ratelimit-*` headers, kept in the record
/// of a rate-limited run: when the quota comes back is what its reader asks next.
pub fn rate_limit_headers(headers: &HeaderMap) -> Option<BTreeMap<String, String>> {
    let kept: BTreeMap<String, String> = headers
        .iter()
        .filter(|(name, _)| {
            let n = name.as_str();
            n == "retry-after"
                || n == "retry-after-ms"
                || n.starts_with("x-ratelimit-")
                || n.starts_with("anthropic-ratelimit-")
        })
        .filter_map(|(name, value)| {
            let v = value.to_str().ok()?;
            Some((name.as_str().to_string(), crate::util::one_line(v, 80)))
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use HttpReason::*;

    #[test]
    fn status_body_and_provider_words() {
        let cases: &[(u16, Value, HttpReason)] = &[
            (
                400,
                json!({"object":"error","message":"Got priority 100 but Priority scheduling is not enabled.","type":"BadRequestError","param":null,"code":400}),
                PriorityUnsupported,
            ),
            (
                400,
                json!({"error":{"message":"Got priority 1000000 but Priority scheduling is not enabled.","type":"BadRequestError","param":null,"code":400}}),
                PriorityUnsupported,
            ),
            (
                429,
                json!({"error":{"type":"rate_limit_error"}}),
                RateLimited,
            ),
            (503, json!({"error":{"message":"busy"}}), Overloaded),
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
            (401, json!({"error":{"code":"invalid_api_key"}}), Auth),
            (403, Value::Null, Auth),
            (
                404,
                json!({"error":{"code":"DeploymentNotFound"}}),
                NotFound,
            ),
            (
                400,
                json!({"error":{"code":"model_not_found","message":"The model `x` does not exist"}}),
                NotFound,
            ),
            (
                400,
                json!({"error":{"code":"context_length_exceeded","message":"..."}}),
                ContextLength,
            ),
            (
                400,
                json!({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","code":400}),
                ContextLength,
            ),
            (
                400,
                json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}),
                ContextLength,
            ),
            (
                400,
                json!({"message":"Input is too long for requested model."}),
                ContextLength,
            ),
            (
                400,
                json!({"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}),
                BadRequest,
            ),
            (422, Value::Null, BadRequest),
            // Gemini's bodies, as its API and SDK test data show them.
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
            (500, json!({"error":{"message":"Internal"}}), ServerError),
            (502, Value::Null, ServerError),
        ];
        for (status, body, want) in cases {
            let body = (!body.is_null()).then_some(body);
            assert_eq!(
                classify(*status, body, &HeaderMap::new()),
                *want,
                "{status} {body:?}"
            );
        }
    }

    /// Bedrock's error answers: a `{"message"}` body and the type in `x-amzn-ErrorType`.
    #[test]
    fn bedrock_error_types_from_the_header() {
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
            h.insert("x-amzn-errortype", header.parse().unwrap());
            let body = json!({ "message": message });
            assert_eq!(classify(*status, Some(&body), &h), *want, "{status} {ty}");
        }
    }

    #[test]
    fn only_rate_limit_headers_are_kept() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap());
        h.insert("x-ratelimit-remaining-requests", "0".parse().unwrap());
        h.insert("authorization", "Bearer secret".parse().unwrap());
        h.insert("content-type", "application/json".parse().unwrap());
        let kept = rate_limit_headers(&h).unwrap();
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            ["retry-after", "x-ratelimit-remaining-requests"]
        );
        assert_eq!(kept["retry-after"], "7");
        assert_eq!(rate_limit_headers(&HeaderMap::new()), None);
    }
}
