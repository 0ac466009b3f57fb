//! The `azure-openai` flavor: OpenAI chat on Azure's path,
//! `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=...`, where the
//! deployment is the target's `model`, the version the target's `api_version` ([`API_VERSION`]
//! unless given), and the key goes in the `api-key` header (or an Entra ID token as a bearer
//! token, `entra:`). The stream is
//! OpenAI chat's, with Azure's own chunks beside it: a first one with `choices: []` and the
//! prompt's `prompt_filter_results`, and `content_filter_results` on each choice; a stop by the
//! content filter is `finish_reason: content_filter`, read as every flavor reads it.

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::errors::{self, Words};
use super::helpers::path_segment;
use super::{Flavor, PrefixCache, TargetError, TargetField};

/// Azure's error codes (`{"error": {"code"}}`).
const WORDS: Words = Words {
    overloaded: &["ServiceUnavailable"],
    rate_limited: &[],
    auth: &[],
    not_found: &["DeploymentNotFound"],
    context_codes: &[],
    context_phrases: &[],
};

/// OpenAI chat on Azure's path, with Azure's key header.
pub(crate) struct AzureOpenai;

impl Flavor for AzureOpenai {
    /// The path after `base_url` (the resource's endpoint, `https://NAME.openai.azure.com`); the
    /// request adds `?api-version=` with the target's version.
    fn path(&self, deployment: &str) -> String {
        format!("/openai/deployments/{deployment}/chat/completions")
    }

    fn key_header(&self) -> Option<&'static str> {
        Some("api-key")
    }

    fn api_version(&self) -> Option<&'static str> {
        Some(API_VERSION)
    }

    fn takes_entra(&self) -> bool {
        true
    }

    /// The deployment is the path's own segment.
    fn check_target(&self, model: &str, _base_url: &reqwest::Url) -> Result<(), TargetError> {
        if path_segment(model) {
            return Ok(());
        }
        Err(TargetError {
            field: TargetField::Model,
            message: format!("model {model:?} is not an Azure OpenAI deployment name: api azure-openai takes the deployment's name (letters, digits, -, _ and .) as model"),
        })
    }

    fn hosted(&self) -> bool {
        true
    }

    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Provider
    }

    fn error_words(&self) -> &'static Words {
        &WORDS
    }

    /// Azure's `{"error": {"code"}}`, and the `innererror` its content filter names.
    fn error_fields(&self, body: &Value, _headers: &HeaderMap) -> Vec<String> {
        let err = errors::error_object(body);
        [&err["code"], &err["innererror"]["code"]]
            .into_iter()
            .filter_map(errors::word)
            .collect()
    }
}

/// The GA API version a target names unless its `api_version` says otherwise: it has
/// `stream_options.include_usage`.
pub(crate) const API_VERSION: &str = "2024-10-21";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::flavor::Api;
    use serde_json::json;

    /// A stream recorded from Azure OpenAI (provenance in the fixture's folder), replayed through
    /// the SSE reader and this flavor.
    #[test]
    fn replays_a_recorded_azure_stream() {
        let bytes = include_bytes!("../../../tests/fixtures/streams/azure-openai/chat-stream.sse");
        let caps = crate::stream::StreamCaps {
            max_line: 1 << 16,
            max_body: 1 << 20,
        };
        let events = crate::stream::sse::decode([&bytes[..]], caps).unwrap();
        assert_eq!(events.len(), 7);
        let (mut text, mut finish, mut generated, mut fingerprint) = (String::new(), None, 0, None);
        for data in events.iter().filter(|d| *d != "[DONE]") {
            let d = Api::AzureOpenai
                .flavor()
                .event("message", &serde_json::from_str(data).unwrap());
            assert_eq!(d.error, None);
            generated += usize::from(d.is_generated());
            text.push_str(&d.text);
            finish = d.finish_reason.or(finish);
            fingerprint = d.fingerprint.or(fingerprint);
        }
        assert_eq!(text, "Hallo Welt!");
        assert_eq!(generated, 3, "the filter and role chunks are no content");
        assert_eq!(finish.as_deref(), Some("stop"));
        assert_eq!(fingerprint.as_deref(), Some("fp_ee1d74bde0"));
    }

    #[test]
    fn path_and_deployment_names() {
        assert_eq!(
            AzureOpenai.path("gpt-4o"),
            "/openai/deployments/gpt-4o/chat/completions"
        );
        let url = reqwest::Url::parse("https://x.openai.azure.com").unwrap();
        assert!(AzureOpenai.check_target("gpt-4o_mini.2", &url).is_ok());
        for bad in ["", "a/b", "a b", "a?x", "ü"] {
            let e = AzureOpenai.check_target(bad, &url).unwrap_err();
            assert_eq!(e.field, TargetField::Model, "{bad}");
        }
    }

    #[test]
    fn filter_chunks_are_no_content_and_a_filter_stop_is_content_filter() {
        let d = Api::AzureOpenai.flavor().event("message",
            &json!({"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}),
        );
        assert!(!d.is_generated() && d.finish_reason.is_none());
        let d = Api::AzureOpenai.flavor().event("message",
            &json!({"choices":[{"content_filter_results":{"violence":{"filtered":true,"severity":"high"}},"delta":{},"finish_reason":"content_filter","index":0}]}),
        );
        assert_eq!(
            d.finish_reason.as_deref(),
            Some(crate::checks::CONTENT_FILTER)
        );
    }

    #[test]
    fn an_unknown_deployment_is_not_found() {
        use crate::outcome::HttpReason::NotFound;
        use crate::probe::http_reason::reason_of;
        use reqwest::header::HeaderMap;
        for status in [400, 404] {
            let body = json!({"error":{"code":"DeploymentNotFound"}});
            let got = reason_of(Api::AzureOpenai, status, &body, &HeaderMap::new());
            assert_eq!(got, NotFound, "{status}");
        }
    }
}
