//! What a server says it serves, asked apart from the probes: the entry for the target's model
//! in the OpenAI-compatible `GET /v1/models` list (vLLM's `root` and `max_model_len`,
//! llama.cpp's `meta` with the file's size and quantization, SGLang's and Anthropic's ids), or
//! in Ollama's `GET /api/tags` (the weights' `digest`). A weight or quantization swap behind an
//! unchanged model name changes that entry while the streamed answers still echo the same name,
//! so this is how a swap is seen from outside. The entry's identifying fields ([`STABLE`]) are
//! reduced to a short hash; bookkeeping that changes on every request (`created`, vLLM's
//! `permission` objects) is left out.
//!
//! One GET per target at most every [`EVERY`], in the background, never on a run's timing path;
//! a run's fingerprint carries the last answer.

use std::time::Duration;

use serde_json::Value;

use crate::config::{Api, Target};

/// The fields of an OpenAI-style model entry that identify the model and its weights: the
/// served name, the weights' path (vLLM's `root`, its base model's `parent`), the context
/// length, llama.cpp's `meta` (file size, quantization, parameter count) and the owner.
const STABLE: [&str; 6] = ["id", "root", "parent", "max_model_len", "meta", "owned_by"];

/// How often a target's description is asked for.
pub const EVERY: Duration = Duration::from_secs(300);
/// The whole GET, connect to last byte.
const TIMEOUT: Duration = Duration::from_secs(5);
/// A model list larger than this is not read.
const MAX_BODY: usize = 1 << 20;

/// The path, after the base URL, that lists what `api`'s servers serve (OpenAI-style base URLs
/// end in `/v1`; Ollama's is the server's root).
fn path(api: Api) -> &'static str {
    match api {
        Api::Ollama => "/api/tags",
        _ => "/models",
    }
}

/// Asks the target what it serves: a short hash of its entry for the target's model, or `None`
/// when the server has no such list, does not name the model, or does not answer in time.
pub async fn ask(client: &reqwest::Client, target: &Target) -> Option<String> {
    // Bedrock's runtime endpoint lists nothing (its model list is the control plane's, another
    // host and a signed call): an unsigned GET would only be refused, every few minutes.
    if target.api == Api::Bedrock {
        return None;
    }
    let url = target.endpoint(path(target.api));
    let mut resp = client
        .get(url)
        .headers(target.headers.clone())
        .timeout(TIMEOUT)
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_BODY {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    describe(
        target.api,
        &target.model,
        &serde_json::from_slice(&body).ok()?,
    )
}

/// The hash of `model`'s entry in a model list: the entry whose id or name is the model, or the
/// only entry of a server that serves one (llama.cpp lists its file path whatever the request
/// names).
pub fn describe(api: Api, model: &str, list: &Value) -> Option<String> {
    let (entries, key) = match api {
        Api::Ollama => (list["models"].as_array()?, "name"),
        _ => (list["data"].as_array()?, "id"),
    };
    let named = |e: &&Value| {
        e[key]
            .as_str()
            .is_some_and(|n| n == model || n.strip_suffix(":latest") == Some(model))
    };
    let entry = match entries.iter().find(named) {
        Some(e) => e,
        None if entries.len() == 1 => &entries[0],
        None => return None,
    };
    let kept = match api {
        // The digest names the weights; the rest is the listing's own bookkeeping.
        Api::Ollama => entry.get("digest").cloned()?,
        // What names the model and its weights. Not the rest: vLLM's `permission` objects get a
        // new id and time on every request, `created` is the listing's time.
        _ => {
            let map = entry.as_object()?;
            let stable: serde_json::Map<String, Value> = STABLE
                .iter()
                .filter_map(|k| Some((k.to_string(), map.get(*k)?.clone())))
                .collect();
            Value::Object(stable)
        }
    };
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
        let a = describe(Api::OpenaiChat, "qwen", &vllm("/m/qwen-v1", 1)).unwrap();
        assert_eq!(a.len(), 12);
        // A new listing time is no change; new weights behind the same name are.
        assert_eq!(
            describe(Api::OpenaiChat, "qwen", &vllm("/m/qwen-v1", 99)),
            Some(a.clone())
        );
        assert_ne!(
            describe(Api::OpenaiChat, "qwen", &vllm("/m/qwen-v2", 1)),
            Some(a)
        );
        // Several models and none named: no guess.
        assert_eq!(describe(Api::OpenaiChat, "absent", &vllm("/m", 1)), None);
    }

    #[test]
    fn a_server_of_one_model_and_ollamas_digest() {
        // llama.cpp lists its file whatever the request calls the model.
        let llama = |ftype: &str| json!({"data": [{"id": "/models/smol.gguf", "meta": {"ftype": ftype, "size": 96576768}}]});
        let q4 = describe(Api::OpenaiChat, "smol", &llama("Q4_1"));
        assert!(q4.is_some());
        assert_ne!(q4, describe(Api::OpenaiChat, "smol", &llama("Q8_0")));

        let tags = |digest: &str| json!({"models": [{"name": "llama3:latest", "digest": digest, "modified_at": "x"}]});
        let a = describe(Api::Ollama, "llama3", &tags("sha256:aa"));
        assert!(a.is_some());
        assert_ne!(a, describe(Api::Ollama, "llama3", &tags("sha256:bb")));
        assert_eq!(
            describe(Api::Ollama, "llama3", &json!({"models": []})),
            None
        );
        assert_eq!(
            describe(Api::OpenaiChat, "x", &json!({"error": "no"})),
            None
        );
    }
}
