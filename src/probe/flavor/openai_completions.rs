//! The `openai-completions` flavor: `POST {base_url}/completions` with a `prompt` string (the
//! prompt's messages joined); streamed choices carry `text`.

use serde_json::{Map, Value};

use super::openai_chat::openai_generation;
use super::Delta;
use crate::config::Probe;

pub const PATH: &str = "/completions";

pub fn body(probe: &Probe, nonce: Option<&str>) -> Map<String, Value> {
    let text = probe.prompt.as_text();
    let text = match nonce {
        Some(n) => format!("{n}\n{text}"),
        None => text,
    };
    let mut body = Map::new();
    body.insert("prompt".into(), Value::String(text));
    openai_generation(&mut body, probe);
    body
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
        let p = crate::probe::flavor::probe_for(crate::config::Prompt::user("x", "Say hi."));
        assert_eq!(
            body(&p, Some("[canary ab]"))["prompt"],
            "[canary ab]\nSay hi."
        );
        assert_eq!(body(&p, None)["prompt"], "Say hi.");
    }
}
