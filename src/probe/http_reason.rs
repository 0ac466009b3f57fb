//! Why a server refused a run: an error status, what its flavor read in the body and headers
//! (the API's own error words, [`ErrorSigns`]), and the headers that say when to come back,
//! read into an [`HttpReason`] and the rate-limit headers kept in the record. What is common to
//! HTTP lives here: the statuses, their precedence over the words, `Retry-After`.

use std::collections::BTreeMap;

use reqwest::header::HeaderMap;

use super::flavor::{Api, ErrorSigns};
use crate::outcome::HttpReason;

/// The reason of an error status, from the status and what the flavor read in the body and
/// headers. An overloaded service is said so whatever the status; then the status decides,
/// and the words only where it leaves room (a 4xx that is not its own reason).
pub(crate) fn classify(status: u16, said: ErrorSigns) -> HttpReason {
    if said.overloaded {
        return HttpReason::Overloaded;
    }
    if status == 429 || said.rate_limited {
        return HttpReason::RateLimited;
    }
    if matches!(status, 503 | 529) {
        return HttpReason::Overloaded;
    }
    if matches!(status, 401 | 403) || (status < 500 && said.auth) {
        return HttpReason::Auth;
    }
    if status == 404 || (status < 500 && said.not_found) {
        return HttpReason::NotFound;
    }
    if matches!(status, 400 | 413 | 422) {
        if said.context_length {
            return HttpReason::ContextLength;
        }
        if status == 400 && said.priority {
            return HttpReason::PriorityUnsupported;
        }
    }
    if status >= 500 {
        HttpReason::ServerError
    } else {
        HttpReason::BadRequest
    }
}

/// `Retry-After` and the rate-limit headers every flavor's provider names
/// ([`Flavor::rate_limit_prefixes`](super::flavor::Flavor::rate_limit_prefixes)), kept in the
/// record of a rate-limited run: when the quota comes back is what its reader asks next. Any
/// provider's, whatever the target's API: a provider's gateway answers other APIs too.
pub(crate) fn rate_limit_headers(headers: &HeaderMap) -> Option<BTreeMap<String, String>> {
    let prefixes = Api::ALL
        .iter()
        .flat_map(|api| api.flavor().rate_limit_prefixes());
    let kept: BTreeMap<String, String> = headers
        .iter()
        .filter(|(name, _)| {
            let n = name.as_str();
            n == "retry-after"
                || n == "retry-after-ms"
                || prefixes.clone().any(|p| n.starts_with(p))
        })
        .filter_map(|(name, value)| {
            let v = value.to_str().ok()?;
            Some((name.as_str().to_string(), crate::util::one_line(v, 80)))
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// The reason `api`'s flavor and the status give a refused run, for the flavors' tests.
#[cfg(test)]
pub(crate) fn reason_of(
    api: Api,
    status: u16,
    body: &serde_json::Value,
    headers: &HeaderMap,
) -> HttpReason {
    classify(status, api.flavor().error_signs(body, headers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use HttpReason::*;

    /// OpenAI's bodies and those of the servers that speak it (vLLM, llama.cpp): every
    /// flavor's defaults. Each provider's own words are tested in its flavor's file.
    #[test]
    fn status_and_openai_compatible_bodies() {
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
            (401, json!({"error":{"code":"invalid_api_key"}}), Auth),
            (403, Value::Null, Auth),
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
            (422, Value::Null, BadRequest),
            (500, json!({"error":{"message":"Internal"}}), ServerError),
            (502, Value::Null, ServerError),
        ];
        for api in Api::ALL {
            for (status, body, want) in cases {
                let got = reason_of(*api, *status, body, &HeaderMap::new());
                assert_eq!(got, *want, "{api:?} {status} {body}");
            }
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
