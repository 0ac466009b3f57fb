//! The `ollama` flavor: Ollama's native `POST {base_url}/api/chat`, one JSON object per line:
//! `message.content` is answer, `message.thinking` reasoning; the last object (`done: true`)
//! carries `done_reason`, `eval_count` and the server's durations in nanoseconds.

use serde_json::{json, Map, Value};

use super::errors::stream_error;
use super::{
    chat_messages, model_entry, text_of, Ask, Delta, Flavor, Framing, PrefixCache, PromptCounts,
};

pub(crate) const PATH: &str = "/api/chat";

pub(crate) struct Ollama;

impl Flavor for Ollama {
    fn path(&self, _model: &str) -> String {
        PATH.into()
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let mut options = Map::new();
        options.insert("num_predict".into(), json!(ask.max_tokens));
        if let Some(t) = ask.temperature {
            options.insert("temperature".into(), json!(t));
        }
        let mut body = Map::new();
        body.insert("messages".into(), Value::Array(chat_messages(ask, nonce)));
        if let Some(tools) = ask.tools {
            body.insert("tools".into(), super::openai_tools(tools));
        }
        body.insert("stream".into(), json!(true));
        body.insert("options".into(), Value::Object(options));
        body
    }

    fn framing(&self) -> Framing {
        Framing::Ndjson
    }

    fn event(&self, _kind: &str, v: &Value) -> Delta {
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return Delta {
                error: Some(stream_error(e)),
                ..Delta::default()
            };
        }
        let mut d = Delta {
            text: text_of(&v["message"]["content"]).to_string(),
            reasoning_chars: text_of(&v["message"]["thinking"]).chars().count(),
            model: super::non_empty(&v["model"]),
            ..Delta::default()
        };
        // Ollama sends each call whole, its arguments an object.
        for c in v["message"]["tool_calls"].as_array().into_iter().flatten() {
            let args = &c["function"]["arguments"];
            let args = match args.as_str() {
                Some(s) => s.to_string(),
                None => args.to_string(),
            };
            d.push_call(None, c["function"]["name"].as_str(), &args);
        }
        if v["done"] == true {
            d.done = true;
            d.finish_reason =
                Some(text_of(&v["done_reason"]).to_string()).filter(|r| !r.is_empty());
            d.output_tokens = v["eval_count"].as_u64();
            d.input_tokens = v["prompt_eval_count"].as_u64();
            let timings: Map<String, Value> = TIMINGS
                .iter()
                .filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.clone())))
                .collect();
            d.server_timings = Some(Value::Object(timings)).filter(|t| t != &json!({}));
        }
        d
    }

    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Server {
            vllm_cache_salt: false,
            llama_cache_prompt: false,
        }
    }

    /// Ollama reports no cached count, but its `prompt_eval_count` counts only the tokens it
    /// evaluated: what the warm run did not evaluate of the cold run's count was cached.
    fn cached_share(&self, cold: PromptCounts, warm: PromptCounts) -> Option<(u64, u64)> {
        if let Some(cached) = warm.cached {
            return Some((cached, warm.input?));
        }
        let (c, w) = (cold.input?, warm.input?);
        Some((c.saturating_sub(w), c))
    }

    /// Its own list, at the server's root (where its base URL ends).
    fn models_path(&self) -> Option<&'static str> {
        Some("/api/tags")
    }

    /// The digest names the weights; the rest is the listing's own bookkeeping.
    fn model_identity(&self, model: &str, list: &Value) -> Option<Value> {
        model_entry(list["models"].as_array()?, "name", model)?
            .get("digest")
            .cloned()
    }

    fn otel_provider(&self) -> &'static str {
        "ollama"
    }
}

/// The server's own figures kept from the last object, under their own names.
const TIMINGS: [&str; 6] = [
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_a_chat() {
        let d = Ollama.event(
            "message",
            &json!({"model":"m","message":{"role":"assistant","content":"Par"},"done":false}),
        );
        assert_eq!((d.text.as_str(), d.done), ("Par", false));
        let d = Ollama.event(
            "message",
            &json!({"message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}),
        );
        assert!(d.is_generated());
        assert_eq!(d.reasoning_chars, 3);
        let d = Ollama.event("message", 
            &json!({"message":{"role":"assistant","content":""},"done":true,"done_reason":"length","eval_count":64,"eval_duration":1000000,"prompt_eval_count":12,"prompt_eval_duration":5000}),
        );
        assert!(d.done);
        assert_eq!(
            (d.finish_reason.as_deref(), d.output_tokens),
            (Some("length"), Some(64))
        );
        assert_eq!(
            d.server_timings,
            Some(
                json!({"eval_count":64,"eval_duration":1000000,"prompt_eval_count":12,"prompt_eval_duration":5000})
            )
        );
        let d = Ollama.event("message", 
            &json!({"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}),
        );
        assert_eq!(d.text, "get_weather{\"city\":\"Paris\"}");
        assert_eq!(d.tool_calls[0].slot, None);
        let d = Ollama.event("message", &json!({"error":"model not found"}));
        assert_eq!(d.error.as_deref(), Some("model not found"));
    }

    #[test]
    fn options_carry_the_limits() {
        let b = Ollama.body(
            &super::super::ask_of(&super::super::messages(&[(super::super::Role::User, "Hi")])),
            None,
        );
        assert_eq!(b["options"]["num_predict"], 64);
        assert_eq!(b["stream"], true);
    }

    #[test]
    fn the_digest_names_the_model() {
        use crate::probe::flavor::Api;
        use crate::probe::identity::describe;
        let tags = |digest: &str| json!({"models": [{"name": "llama3:latest", "digest": digest, "modified_at": "x"}]});
        let a = describe(Api::Ollama, "llama3", &tags("sha256:aa"));
        assert!(a.is_some());
        assert_ne!(a, describe(Api::Ollama, "llama3", &tags("sha256:bb")));
        assert_eq!(
            describe(Api::Ollama, "llama3", &json!({"models": []})),
            None
        );
    }

    #[test]
    fn cached_tokens_are_those_the_warm_run_did_not_evaluate() {
        use crate::probe::cache_check::{compare, tests::run};
        let silent_ollama = |evaluated| run(Some(100.0), Some(evaluated), None);
        // Ollama: the tokens the warm run did not evaluate.
        let (cold, warm) = (run(Some(400.0), Some(800), None), silent_ollama(200));
        assert_eq!(
            compare(crate::probe::flavor::Api::Ollama, &cold, &warm).hit_ratio,
            Some(0.75)
        );
    }
}
