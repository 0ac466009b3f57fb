//! The `openai-chat` flavor: every default of the [`Flavor`] trait, which speaks OpenAI's chat
//! wire format ([`super::openai`]).

// Reached from outside through `testing`.
pub use super::openai::delta;
pub(crate) use super::openai::openai_generation;
use super::Flavor;

/// OpenAI chat: every default of [`Flavor`].
pub(crate) struct OpenaiChat;

impl Flavor for OpenaiChat {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::probe::flavor::{ask_of, messages, Api, Role};

    #[test]
    fn role_only_chunk_is_not_content() {
        let d = delta(
            &json!({"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}),
        );
        assert!(!d.is_generated());
    }

    #[test]
    fn reasoning_and_tool_calls_are_generated_content() {
        let d = delta(&json!({"delta":{"reasoning_content":"hmm"}}));
        assert!(d.is_generated());
        assert_eq!(d.text, "");
        // vLLM's newer field name.
        let d = delta(&json!({"delta":{"reasoning":"hmm, well"}}));
        assert_eq!((d.is_generated(), d.reasoning_chars), (true, 9));
        let d =
            delta(&json!({"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}));
        assert_eq!(d.text, "{\"a\"");
        assert_eq!(
            d.tool_calls,
            vec![crate::probe::flavor::delta::ToolCallPiece {
                slot: Some(0),
                name: None,
                arguments: "{\"a\"".into()
            }]
        );
        let d = delta(
            &json!({"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}),
        );
        assert_eq!(
            (
                d.text.as_str(),
                d.tool_calls[0].slot,
                d.tool_calls[0].name.as_deref()
            ),
            ("get_weather", Some(1), Some("get_weather"))
        );
        assert!(d.is_generated());
        let d = delta(
            &json!({"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}),
        );
        assert_eq!(
            (d.text.as_str(), d.finish_reason.as_deref()),
            ("Paris.", Some("stop"))
        );
    }

    #[test]
    fn usage_reasoning_tokens_timings_and_errors() {
        let d = Api::OpenaiChat.flavor().event("message",
            &json!({"choices":[],"usage":{"completion_tokens":12,"completion_tokens_details":{"reasoning_tokens":5}},"timings":{"prompt_ms":3.5}}),
        );
        assert_eq!((d.output_tokens, d.reasoning_tokens), (Some(12), Some(5)));
        assert_eq!(d.server_timings, Some(json!({"prompt_ms":3.5})));
        assert_eq!(d.cached_tokens, None);
        // The cached prompt tokens: OpenAI's and vLLM's usage, else llama.cpp's timings.
        let d = Api::OpenaiChat.flavor().event("message",
            &json!({"choices":[],"usage":{"prompt_tokens":837,"prompt_tokens_details":{"cached_tokens":836}},"timings":{"cache_n":800}}),
        );
        assert_eq!((d.input_tokens, d.cached_tokens), (Some(837), Some(836)));
        let d = Api::OpenaiChat.flavor().event(
            "message",
            &json!({"choices":[],"timings":{"cache_n":836,"prompt_n":1}}),
        );
        assert_eq!(d.cached_tokens, Some(836));
        let d = Api::OpenaiChat.flavor().event(
            "message",
            &json!({"error":{"message":"overloaded","type":"server_error"}}),
        );
        assert_eq!(d.error.as_deref(), Some("overloaded"));
    }

    #[test]
    fn nonce_goes_first() {
        let m = messages(&[(Role::User, "What is the capital of France?")]);
        let b = OpenaiChat.body(&ask_of(&m), Some("[canary 1234]"));
        assert_eq!(
            b["messages"][0]["content"],
            "[canary 1234]\nWhat is the capital of France?"
        );
        assert_eq!(b["messages"][0]["role"], "user");
        assert_eq!(b["stream_options"]["include_usage"], true);
    }
}
