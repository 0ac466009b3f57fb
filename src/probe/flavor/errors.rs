//! What an error body says, read the OpenAI-compatible way every flavor starts from: its
//! message (the one extraction, for a refused run's body and an error inside a stream alike),
//! its type and code fields, and the signs of why the server refused, by a flavor's own words.
//! A provider's flavor adds the words and shapes of its own API ([`Words`]) to these.

use serde_json::Value;

/// What an error body (and its headers) showed of why a run was refused; the status decides
/// with them (`probe::http_reason`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorSigns {
    /// The service is overloaded, whatever the status (Anthropic's `overloaded_error` comes
    /// with a 529, Bedrock's `ModelNotReadyException` with a 429).
    pub overloaded: bool,
    /// The caller's quota is spent.
    pub rate_limited: bool,
    /// The caller's credentials were refused.
    pub auth: bool,
    /// The model or deployment is unknown.
    pub not_found: bool,
    /// The prompt is over the context window: an error code, or a phrase of the message.
    pub context_length: bool,
    /// The message names the request's priority (vLLM without priority scheduling).
    pub priority: bool,
}

impl std::ops::BitOr for ErrorSigns {
    type Output = ErrorSigns;

    fn bitor(self, o: ErrorSigns) -> ErrorSigns {
        ErrorSigns {
            overloaded: self.overloaded || o.overloaded,
            rate_limited: self.rate_limited || o.rate_limited,
            auth: self.auth || o.auth,
            not_found: self.not_found || o.not_found,
            context_length: self.context_length || o.context_length,
            priority: self.priority || o.priority,
        }
    }
}

/// An API's error words: the types and codes (and, for the context window, the phrases of a
/// message) that say why it refused.
#[derive(Debug)]
pub struct Words {
    pub overloaded: &'static [&'static str],
    pub rate_limited: &'static [&'static str],
    pub auth: &'static [&'static str],
    pub not_found: &'static [&'static str],
    pub context_codes: &'static [&'static str],
    pub context_phrases: &'static [&'static str],
}

impl Words {
    /// No words of the API's own: OpenAI's alone.
    pub const NONE: Words = Words {
        overloaded: &[],
        rate_limited: &[],
        auth: &[],
        not_found: &[],
        context_codes: &[],
        context_phrases: &[],
    };

    /// The signs `fields` (an error's type and code fields) and `message` show by these words.
    pub fn signs(&self, fields: &[String], message: &str) -> ErrorSigns {
        let has = |list: &[&str]| fields.iter().any(|w| list.contains(&w.as_str()));
        let message = message.to_lowercase();
        ErrorSigns {
            overloaded: has(self.overloaded),
            rate_limited: has(self.rate_limited),
            auth: has(self.auth),
            not_found: has(self.not_found),
            context_length: has(self.context_codes)
                || self.context_phrases.iter().any(|p| message.contains(p)),
            priority: false,
        }
    }

    /// Every word, for the layout test to look for outside the flavor's file.
    #[cfg(test)]
    pub fn all(&self) -> impl Iterator<Item = &'static str> {
        [
            self.overloaded,
            self.rate_limited,
            self.auth,
            self.not_found,
            self.context_codes,
        ]
        .into_iter()
        .flatten()
        .copied()
    }
}

/// The words of OpenAI's API and of the servers that speak it (vLLM, SGLang, llama.cpp,
/// Ollama): every flavor's, since every API is served by some of them too.
pub(super) const OPENAI_WORDS: Words = Words {
    overloaded: &["overloaded"],
    rate_limited: &[],
    auth: &[],
    not_found: &["model_not_found"],
    context_codes: &["context_length_exceeded", "string_above_max_length"],
    context_phrases: &[
        "maximum context length",
        "context length",
        "context window",
        "too many tokens",
    ],
};

/// The message of an error: a body, an event or an error object, in the shapes OpenAI and the
/// servers that speak it use (`{"error": {"message"}}`, vLLM's `{"message"}`, Ollama's
/// `{"error": "..."}`, a bare string). `None` when it has none.
pub(super) fn error_message(v: &Value) -> Option<&str> {
    v["error"]["message"]
        .as_str()
        .or(v["message"].as_str())
        .or(v["error"].as_str())
        .or(v.as_str())
}

/// An error object's message inside a stream, or the object itself as text.
pub(super) fn stream_error(err: &Value) -> String {
    error_message(err).map_or_else(|| err.to_string(), str::to_string)
}

/// The error object of a body: its `error` when that is an object, else the body itself
/// (vLLM's `{"object": "error", "type", "code"}`).
pub(super) fn error_object(v: &Value) -> &Value {
    v.get("error").filter(|e| e.is_object()).unwrap_or(v)
}

/// A type or code field as a word: a string after its last `#` or `:` (a namespace before
/// it), or a number.
pub(super) fn word(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.rsplit(['#', ':']).next().unwrap_or(s).to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// OpenAI's type and code fields (`{"error": {"type", "code"}}`).
pub(super) fn openai_fields(v: &Value) -> Vec<String> {
    let err = error_object(v);
    [&err["type"], &err["code"]]
        .into_iter()
        .filter_map(word)
        .collect()
}

/// The signs of an OpenAI-compatible error body, with its message as the flavor reads it.
pub(super) fn openai_signs(body: &Value, message: &str) -> ErrorSigns {
    let mut signs = OPENAI_WORDS.signs(&openai_fields(body), message);
    signs.priority = message.to_lowercase().contains("priority");
    signs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The one extraction gives each shape's message: a refused run's body and an error inside
    /// a stream alike.
    #[test]
    fn the_message_of_each_shape() {
        let cases = [
            (json!({"error": {"message": "a", "type": "x"}}), Some("a")),
            (
                json!({"object": "error", "message": "b", "code": 400}),
                Some("b"),
            ),
            (json!({"error": "c"}), Some("c")),
            (json!("d"), Some("d")),
            (
                json!({"type": "error", "error": {"message": "e"}}),
                Some("e"),
            ),
            (
                json!({"type": "error", "code": "server_error", "message": "f"}),
                Some("f"),
            ),
            (json!({"error": {"code": 500}}), None),
            (Value::Null, None),
        ];
        for (v, want) in cases {
            assert_eq!(error_message(&v), want, "{v}");
        }
        assert_eq!(stream_error(&json!({"code": 1})), "{\"code\":1}");
        assert_eq!(stream_error(&Value::Null), "null");
    }
}
