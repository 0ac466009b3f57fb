//! The `openai-responses` flavor: `POST {base_url}/responses` with `input` messages; typed
//! events (`response.output_text.delta` answer, reasoning deltas, function-call arguments),
//! `response.completed` with usage, `response.incomplete` when the token limit cut it,
//! `response.failed` and `error` for errors. There is no `[DONE]`.

use serde_json::{json, Map, Value};

use super::errors::stream_error;
use super::{chat_messages, text_of, Ask, Delta, Flavor, PrefixCache};

pub(crate) const PATH: &str = "/responses";

pub(crate) struct OpenaiResponses;

impl Flavor for OpenaiResponses {
    fn path(&self, _model: &str) -> String {
        PATH.into()
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("input".into(), Value::Array(chat_messages(ask, nonce)));
        if let Some(tools) = ask.tools {
            // The Responses API takes a function's fields flat, beside its type.
            let flat: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let mut f = super::tool_fields(t, "parameters");
                    f.insert("type".into(), json!("function"));
                    Value::Object(f)
                })
                .collect();
            body.insert("tools".into(), Value::Array(flat));
        }
        body.insert("stream".into(), json!(true));
        body.insert("max_output_tokens".into(), json!(ask.max_tokens));
        if let Some(t) = ask.temperature {
            body.insert("temperature".into(), json!(t));
        }
        body
    }

    /// What one event carried; its type is the data's `type` (the SSE event name when absent).
    fn event(&self, kind: &str, v: &Value) -> Delta {
        let kind = v["type"].as_str().unwrap_or(kind);
        let mut d = Delta {
            model: super::non_empty(&v["response"]["model"]),
            ..Delta::default()
        };
        match kind {
            "response.output_text.delta" => d.text = text_of(&v["delta"]).to_string(),
            "response.function_call_arguments.delta" => {
                d.push_call(v["output_index"].as_u64(), None, text_of(&v["delta"]));
            }
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                d.reasoning_chars = text_of(&v["delta"]).chars().count();
            }
            // A function call starts with its name.
            "response.output_item.added" if v["item"]["type"] == "function_call" => {
                d.push_call(v["output_index"].as_u64(), v["item"]["name"].as_str(), "");
            }
            "response.completed" | "response.incomplete" => {
                let r = &v["response"];
                d.done = true;
                // llama.cpp puts its own timings beside the response, as in chat.
                d.server_timings = super::llama_timings(v);
                d.output_tokens = r["usage"]["output_tokens"].as_u64();
                d.input_tokens = r["usage"]["input_tokens"].as_u64();
                d.cached_tokens = r["usage"]["input_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .or_else(|| d.server_timings.as_ref()?["cache_n"].as_u64());
                d.reasoning_tokens =
                    r["usage"]["output_tokens_details"]["reasoning_tokens"].as_u64();
                let called = r["output"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|i| i["type"] == "function_call"));
                d.finish_reason = Some(match r["incomplete_details"]["reason"].as_str() {
                    Some("max_output_tokens") => "length".into(),
                    Some(other) => other.to_string(),
                    None if kind == "response.incomplete" => "incomplete".into(),
                    None if called => "tool_calls".into(),
                    None => "stop".into(),
                });
            }
            "response.failed" => {
                d.error = Some(stream_error(&v["response"]["error"]));
            }
            "error" => d.error = Some(stream_error(v)),
            _ => {}
        }
        d
    }

    /// A whole response object: its output items, status and usage.
    fn whole(&self, v: &Value) -> Delta {
        if v["status"] == "failed" {
            return Delta {
                error: Some(stream_error(&v["error"])),
                ..Delta::default()
            };
        }
        let mut d = self.event(
            "response.completed",
            &json!({"type": "response.completed", "response": v}),
        );
        for (i, item) in v["output"].as_array().into_iter().flatten().enumerate() {
            match item["type"].as_str() {
                Some("message") => {
                    for c in item["content"].as_array().into_iter().flatten() {
                        d.text.push_str(text_of(&c["text"]));
                    }
                }
                Some("function_call") => {
                    d.push_call(
                        Some(i as u64),
                        item["name"].as_str(),
                        text_of(&item["arguments"]),
                    );
                }
                Some("reasoning") => {
                    for part in item["summary"].as_array().into_iter().flatten() {
                        d.reasoning_chars += text_of(&part["text"]).chars().count();
                    }
                }
                _ => {}
            }
        }
        d
    }

    /// vLLM documents `cache_salt` on chat and completions only.
    fn prefix_cache(&self) -> PrefixCache {
        PrefixCache::Server {
            vllm_cache_salt: false,
            llama_cache_prompt: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_reasoning_and_calls() {
        let d = OpenaiResponses.event(
            "message",
            &json!({"type":"response.output_text.delta","delta":"Par"}),
        );
        assert_eq!(d.text, "Par");
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.reasoning_summary_text.delta","delta":"hmm"}),
        );
        assert_eq!((d.text.as_str(), d.reasoning_chars), ("", 3));
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.output_item.added","item":{"type":"function_call","name":"get_weather"}}),
        );
        assert_eq!(d.text, "get_weather");
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"city\""}),
        );
        assert_eq!(
            (d.text.as_str(), d.tool_calls[0].slot),
            ("{\"city\"", Some(1))
        );
        // The type may come only as the SSE event name.
        let d = OpenaiResponses.event("response.output_text.delta", &json!({"delta":"is"}));
        assert_eq!(d.text, "is");
    }

    #[test]
    fn completed_incomplete_failed() {
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.completed","response":{"status":"completed","usage":{"output_tokens":9,"output_tokens_details":{"reasoning_tokens":4}}},
            "timings":{"prompt_ms":41.5,"predicted_n":9}}),
        );
        assert!(d.done);
        assert_eq!(
            d.server_timings,
            Some(json!({"prompt_ms":41.5,"predicted_n":9}))
        );
        assert_eq!(
            (
                d.output_tokens,
                d.reasoning_tokens,
                d.finish_reason.as_deref()
            ),
            (Some(9), Some(4), Some("stop"))
        );
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"},"usage":{"output_tokens":8}}}),
        );
        assert_eq!(d.finish_reason.as_deref(), Some("length"));
        let d = OpenaiResponses.event(
            "x",
            &json!({"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}),
        );
        assert_eq!(d.error.as_deref(), Some("boom"));
        let d = OpenaiResponses.event("error", &json!({"type":"error","message":"rate limited"}));
        assert_eq!(d.error.as_deref(), Some("rate limited"));
    }

    #[test]
    fn a_whole_response() {
        let d = OpenaiResponses.whole(
            &json!({"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
            "output":[{"type":"message","content":[{"type":"output_text","text":"Paris"}]}],"usage":{"output_tokens":3}}),
        );
        assert_eq!(
            (d.text.as_str(), d.finish_reason.as_deref(), d.output_tokens),
            ("Paris", Some("length"), Some(3))
        );
    }
}
