//! The `azure-openai` flavor: OpenAI chat on Azure's path,
//! `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=...`, where the
//! deployment is the target's `model`, the version the target's `api_version` ([`API_VERSION`]
//! unless given), and the key goes in the `api-key` header (or an Entra ID token as a bearer
//! token, `entra:`). The stream is
//! OpenAI chat's, with Azure's own chunks beside it: a first one with `choices: []` and the
//! prompt's `prompt_filter_results`, and `content_filter_results` on each choice; a stop by the
//! content filter is `finish_reason: content_filter`, read as every flavor reads it.

use super::{Flavor, PrefixCache, TargetError, TargetField};

/// OpenAI chat on Azure's path, with Azure's key header.
pub struct AzureOpenai;

impl Flavor for AzureOpenai {
    fn path(&self, model: &str) -> String {
        path(model)
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
        if valid_deployment(model) {
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
}

/// The GA API version a target names unless its `api_version` says otherwise: it has
/// `stream_options.include_usage`.
pub const API_VERSION: &str = "2024-10-21";

/// The path after `base_url` (the resource's endpoint, `https://NAME.openai.azure.com`); the
/// request adds `?api-version=` with the target's version.
pub fn path(deployment: &str) -> String {
    format!("/openai/deployments/{deployment}/chat/completions")
}

/// Azure's deployment names: letters, digits, `-`, `_` and `.`, so the name is its own path
/// segment.
pub fn valid_deployment(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

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
            path("gpt-4o"),
            "/openai/deployments/gpt-4o/chat/completions"
        );
        assert!(valid_deployment("gpt-4o_mini.2"));
        for bad in ["", "a/b", "a b", "a?x", "ü"] {
            assert!(!valid_deployment(bad), "{bad}");
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
}
