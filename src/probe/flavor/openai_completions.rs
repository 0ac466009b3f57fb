//! The `openai-completions` flavor: `POST {base_url}/completions` with a `prompt` string (the
//! prompt's messages joined); streamed choices carry `text`.

use serde_json::{Map, Value};

use super::openai_chat::openai_generation;
use super::{as_text, openai_chunk, Ask, Delta, Flavor};

pub(crate) const PATH: &str = "/completions";

pub(crate) struct OpenaiCompletions;

impl Flavor for OpenaiCompletions {
    fn path(&self, _model: &str) -> String {
        PATH.into()
    }

    fn body(&self, ask: &Ask, nonce: Option<&str>) -> Map<String, Value> {
        let text = as_text(ask);
        let text = match nonce {
            Some(n) => format!("{n}\n{text}"),
            None => text,
        };
        let mut body = Map::new();
        body.insert("prompt".into(), Value::String(text));
        openai_generation(&mut body, ask);
        body
    }

    fn event(&self, _kind: &str, v: &Value) -> Delta {
        openai_chunk(v, delta)
    }

    fn takes_tools(&self) -> bool {
        false
    }

    fn otel_operation(&self) -> &'static str {
        "text_completion"
    }
}

pub fn delta(choice: &Value) -> Delta {
    Delta {
        text: choice["text"].as_str().unwrap_or_default().to_string(),
        finish_reason: choice["finish_reason"].as_str().map(str::to_string),
        ..Delta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_finish() {
        let d = delta(&json!({"index":0,"text":" Paris","finish_reason":null}));
        assert_eq!(d.text, " Paris");
        assert!(d.is_generated());
        let d = delta(&json!({"index":0,"text":"","finish_reason":"length"}));
        assert!(!d.is_generated());
        assert_eq!(d.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn prompt_is_joined_with_the_nonce_first() {
        let m = crate::probe::flavor::messages(&[(crate::probe::flavor::Role::User, "Say hi.")]);
        let p = crate::probe::flavor::ask_of(&m);
        assert_eq!(
            OpenaiCompletions.body(&p, Some("[canary ab]"))["prompt"],
            "[canary ab]\nSay hi."
        );
        assert_eq!(OpenaiCompletions.body(&p, None)["prompt"], "Say hi.");
    }
}
