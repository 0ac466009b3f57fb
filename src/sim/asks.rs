//! What a request asks of the simulated replica, read the way its flavor writes it: the flavor
//! from the route, the prompt, the token limit, streaming, the tool offered and whether usage
//! was asked for.

use serde_json::Value;

use super::wire::Wire;

impl Wire {
    /// The flavor served at `route` (after any `/s/<scenario>` prefix).
    pub fn from_route(route: &str) -> Option<Wire> {
        Some(match route {
            "/v1/chat/completions" => Wire::Chat,
            "/v1/completions" => Wire::Completions,
            "/v1/responses" => Wire::Responses,
            "/v1/messages" => Wire::Messages,
            "/api/chat" => Wire::Ollama,
            // Azure OpenAI: chat under the deployment's own path (base URL `.../v1` here).
            r if r.starts_with("/v1/openai/deployments/") && r.ends_with("/chat/completions") => {
                Wire::Chat
            }
            r if super::gemini::model_of(r).is_some() => Wire::Gemini,
            // Bedrock: the model id in the path (base URL `.../v1` here, or the server root).
            r if (r.starts_with("/v1/model/") || r.starts_with("/model/"))
                && r.ends_with("/converse-stream") =>
            {
                Wire::Bedrock
            }
            _ => return None,
        })
    }

    pub fn ndjson(self) -> bool {
        self == Wire::Ollama
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Wire::Ollama => "application/x-ndjson",
            Wire::Bedrock => crate::probe::flavor::EVENT_STREAM,
            _ => "text/event-stream",
        }
    }

    /// The prompt's text, from the body this flavor takes.
    pub fn prompt(self, body: &Value) -> String {
        // A string, or Anthropic's text blocks.
        let text = |v: &Value| -> String {
            match v.as_array() {
                Some(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                None => v.as_str().unwrap_or_default().to_string(),
            }
        };
        let joined = |v: &Value| {
            v.as_array()
                .map(|m| {
                    m.iter()
                        .map(|x| text(&x["content"]))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        };
        match self {
            Wire::Completions => body["prompt"].as_str().unwrap_or_default().to_string(),
            Wire::Responses => match &body["input"] {
                Value::String(s) => s.clone(),
                v => joined(v),
            },
            Wire::Messages => {
                let system = text(&body["system"]);
                let messages = joined(&body["messages"]);
                if system.is_empty() {
                    messages
                } else {
                    format!("{system}\n{messages}")
                }
            }
            Wire::Chat | Wire::Ollama => joined(&body["messages"]),
            Wire::Gemini => super::gemini::prompt(body),
            Wire::Bedrock => {
                let texts = |v: &Value| -> Vec<String> {
                    let blocks = v.as_array().into_iter().flatten();
                    let nested = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
                    blocks
                        .flat_map(|m| match m["text"].as_str() {
                            Some(t) => vec![t.to_string()],
                            None => nested(m)
                                .iter()
                                .filter_map(|b| b["text"].as_str().map(str::to_string))
                                .collect(),
                        })
                        .collect()
                };
                let mut all = texts(&body["system"]);
                all.extend(texts(&body["messages"]));
                all.join("\n")
            }
        }
    }

    /// The token limit the body asks for.
    pub fn max_tokens(self, body: &Value) -> Option<u64> {
        match self {
            Wire::Responses => body["max_output_tokens"].as_u64(),
            Wire::Ollama => body["options"]["num_predict"].as_u64(),
            Wire::Gemini => super::gemini::max_tokens(body),
            Wire::Bedrock => body["inferenceConfig"]["maxTokens"].as_u64(),
            _ => body["max_tokens"].as_u64(),
        }
    }

    /// Whether the body asks for a stream (Ollama streams unless told not to; Gemini's
    /// route is its streaming method).
    pub fn stream(self, body: &Value) -> bool {
        // Ollama streams unless told not to; Gemini's route and ConverseStream always do.
        let default = matches!(self, Wire::Ollama | Wire::Gemini | Wire::Bedrock);
        body["stream"].as_bool().unwrap_or(default)
    }

    /// The first tool the request offers, in this flavor's shape.
    pub fn tool_name(self, body: &Value) -> Option<String> {
        if self == Wire::Gemini {
            return super::gemini::tool_name(body);
        }
        let first = &body["tools"][0];
        let name = match self {
            Wire::Chat | Wire::Ollama => &first["function"]["name"],
            Wire::Bedrock => &body["toolConfig"]["tools"][0]["toolSpec"]["name"],
            _ => &first["name"],
        };
        name.as_str().map(str::to_string)
    }

    /// Whether a tool call's arguments stream in pieces; Ollama and Gemini send each call
    /// whole.
    pub fn streams_tool_arguments(self) -> bool {
        !matches!(self, Wire::Ollama | Wire::Gemini)
    }

    /// Whether the closing events carry usage: OpenAI's chunk flavors only when asked.
    pub fn sends_usage(self, body: &Value) -> bool {
        match self {
            Wire::Chat | Wire::Completions => body["stream_options"]["include_usage"]
                .as_bool()
                .unwrap_or(false),
            _ => true,
        }
    }
}
