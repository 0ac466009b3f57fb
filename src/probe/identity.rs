//! What a server says it serves, asked apart from the probes: the entry for the target's model
//! in the OpenAI-compatible `GET /v1/models` list (vLLM's `root` and `max_model_len`,
//! llama.cpp's `meta` with the file's size and quantization, SGLang's and Anthropic's ids), or
//! in Ollama's `GET /api/tags` (the weights' `digest`). A weight or quantization swap behind an
//! unchanged model name changes that entry while the streamed answers still echo the same name,
//! so this is how a swap is seen from outside. The entry's identifying fields (as the API's
//! flavor picks them) are reduced to a short hash; bookkeeping that changes on every request
//! (`created`, vLLM's `permission` objects) is left out.
//!
//! One GET per target at most every [`EVERY`], in the background, never on a run's timing path;
//! a run's fingerprint carries the last answer.

use std::time::Duration;

use serde_json::Value;

use crate::config::{Api, Target};

/// How often a target's description is asked for.
pub(crate) const EVERY: Duration = Duration::from_secs(300);
/// The whole GET, connect to last byte.
const TIMEOUT: Duration = Duration::from_secs(5);
/// A model list larger than this is not read.
const MAX_BODY: usize = 1 << 20;

/// Asks the target what it serves: a short hash of its entry for the target's model, or `None`
/// when the server has no such list, does not name the model, or does not answer in time.
pub(crate) async fn ask(client: &super::Client, target: &Target) -> Option<String> {
    let url = target.endpoint(target.api.flavor().models_path()?);
    // Over the runs' own kind of connection: the target's TLS settings and proxy apply.
    let way = client.way(&target.outbound);
    let get = super::connect::get(&way, &url, target.headers.clone(), MAX_BODY);
    let body = tokio::time::timeout(TIMEOUT, get).await.ok()?.ok()?;
    describe(
        target.api,
        &target.model,
        &serde_json::from_slice(&body).ok()?,
    )
}

/// The hash of what identifies `model` in a model list, as the API's flavor reads the list.
pub(crate) fn describe(api: Api, model: &str, list: &Value) -> Option<String> {
    let kept = api.flavor().model_identity(model, list)?;
    // serde_json's map is ordered by key: the same entry always hashes the same.
    let text = serde_json::to_string(&kept).ok()?;
    Some(super::sha256_hex(&text)[..12].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_models_entry_without_its_timestamp() {
        // As vLLM lists its models: every request gives new permission ids and times.
        let vllm = |root: &str, created: u64| {
            json!({"object": "list", "data": [
                {"id": "other", "root": "/m/other", "created": created},
                {"id": "qwen", "object": "model", "created": created, "owned_by": "vllm",
                 "root": root, "parent": null, "max_model_len": 32768,
                 "permission": [{"id": format!("modelperm-{created:032x}"), "object": "model_permission",
                                 "created": created, "allow_sampling": true, "organization": "*"}]},
            ]})
        };
        let a = describe(Api::default(), "qwen", &vllm("/m/qwen-v1", 1)).unwrap();
        assert_eq!(a.len(), 12);
        // A new listing time is no change; new weights behind the same name are.
        assert_eq!(
            describe(Api::default(), "qwen", &vllm("/m/qwen-v1", 99)),
            Some(a.clone())
        );
        assert_ne!(
            describe(Api::default(), "qwen", &vllm("/m/qwen-v2", 1)),
            Some(a)
        );
        // Several models and none named: no guess.
        assert_eq!(describe(Api::default(), "absent", &vllm("/m", 1)), None);
    }

    #[test]
    fn a_server_of_one_model() {
        // llama.cpp lists its file whatever the request calls the model.
        let llama = |ftype: &str| json!({"data": [{"id": "/models/smol.gguf", "meta": {"ftype": ftype, "size": 96576768}}]});
        let q4 = describe(Api::default(), "smol", &llama("Q4_1"));
        assert!(q4.is_some());
        assert_ne!(q4, describe(Api::default(), "smol", &llama("Q8_0")));

        assert_eq!(describe(Api::default(), "x", &json!({"error": "no"})), None);
    }
}
