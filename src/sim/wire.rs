//! How the simulated replica speaks each API flavor: the same scripted answer framed as OpenAI
//! chat or completions chunks, OpenAI Responses events, Anthropic Messages events, Gemini's
//! responses (their shapes in `super::gemini`), or Ollama's NDJSON lines — each with its own
//! opening, deltas (answer, reasoning and tool-call arguments), finish, usage, end marker and
//! in-stream error, as the real servers send them.

use serde_json::{json, Value};

pub use super::piece::{Call, Ending, PieceKind, Usage};

/// The flavor a request spoke, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Chat,
    Completions,
    Responses,
    Messages,
    Ollama,
    Gemini,
    /// Bedrock's ConverseStream, in AWS's binary event stream.
    Bedrock,
}

/// One event to write: its SSE name (none for OpenAI chunks and NDJSON) and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Out {
    pub name: Option<&'static str>,
    pub data: Value,
}

fn out(name: &'static str, data: Value) -> Out {
    Out {
        name: Some(name),
        data,
    }
}

fn plain(data: Value) -> Out {
    Out { name: None, data }
}

impl Wire {
    /// What comes before the first token: vLLM's role-only chunk, the Responses `created`
    /// event, Anthropic's `message_start` (output_tokens counted from 1, as Anthropic does)
    /// and a `ping`.
    pub fn opening(self, model: &str, role_chunk: bool) -> Vec<Out> {
        match self {
            Wire::Chat if role_chunk => vec![plain(
                json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                       "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]}),
            )],
            Wire::Responses => vec![out(
                "response.created",
                json!({"type": "response.created", "response": {"id": "resp-sim", "status": "in_progress", "model": model}}),
            )],
            Wire::Messages => vec![
                out(
                    "message_start",
                    json!({"type": "message_start", "message": {"id": "msg-sim", "type": "message", "role": "assistant", "model": model,
                           "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
                ),
                out("ping", json!({"type": "ping"})),
            ],
            Wire::Bedrock => vec![out("messageStart", json!({"role": "assistant"}))],
            _ => vec![],
        }
    }

    /// Anthropic opens a content block before its first delta, and closes it when the kind
    /// of content changes. A tool call's block is opened by [`Wire::tool_call_start`].
    pub fn block_change(self, from: Option<PieceKind>, to: PieceKind, index: usize) -> Vec<Out> {
        // Bedrock closes a block when the kind changes, and opens only a tool call's.
        if self == Wire::Bedrock && from.is_some_and(|f| f != to) {
            return vec![out(
                "contentBlockStop",
                json!({"contentBlockIndex": index - 1}),
            )];
        }
        if self != Wire::Messages || from == Some(to) {
            return vec![];
        }
        let mut v = Vec::new();
        if from.is_some() {
            v.push(out(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index - 1}),
            ));
        }
        let block = match to {
            PieceKind::Answer => json!({"type": "text", "text": ""}),
            PieceKind::Reasoning => json!({"type": "thinking", "thinking": ""}),
            PieceKind::Tool => return v,
        };
        v.push(out(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        v
    }

    /// What opens a tool call, before its arguments stream: OpenAI chat's first `tool_calls`
    /// delta (id, name, empty arguments), the Responses `function_call` item, Anthropic's
    /// `tool_use` block. Ollama's whole call is [`Wire::whole_call`].
    pub fn tool_call_start(self, model: &str, name: &str, block: usize) -> Vec<Out> {
        match self {
            Wire::Chat => vec![plain(
                json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                       "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_sim", "type": "function", "function": {"name": name, "arguments": ""}}]},
                                    "logprobs": null, "finish_reason": null}]}),
            )],
            Wire::Responses => vec![out(
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": block,
                       "item": {"type": "function_call", "id": "fc-sim", "call_id": "call_sim", "name": name, "arguments": "", "status": "in_progress"}}),
            )],
            Wire::Messages => vec![out(
                "content_block_start",
                json!({"type": "content_block_start", "index": block,
                       "content_block": {"type": "tool_use", "id": "toolu_sim", "name": name, "input": {}}}),
            )],
            Wire::Bedrock => vec![out(
                "contentBlockStart",
                json!({"contentBlockIndex": block, "start": {"toolUse": {"toolUseId": "tooluse_sim", "name": name}}}),
            )],
            Wire::Completions | Wire::Ollama | Wire::Gemini => vec![],
        }
    }

    /// A whole tool call in one event, for the flavors that do not stream arguments.
    pub fn whole_call(self, model: &str, call: &Call) -> Out {
        if self == Wire::Gemini {
            return plain(super::gemini::whole_call(model, call));
        }
        plain(json!({"model": model, "created_at": "2026-01-01T00:00:00Z",
                   "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": call.name, "arguments": call.arguments_value()}}]},
                   "done": false}))
    }

    /// One token of the answer or of the reasoning, or a stretch of tool-call arguments.
    pub fn piece(self, model: &str, kind: PieceKind, text: &str, block: usize) -> Out {
        let answer = kind == PieceKind::Answer;
        match (self, kind) {
            (Wire::Chat, PieceKind::Tool) => {
                return plain(
                    json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                           "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}, "logprobs": null, "finish_reason": null}]}),
                )
            }
            (Wire::Responses, PieceKind::Tool) => {
                return out(
                    "response.function_call_arguments.delta",
                    json!({"type": "response.function_call_arguments.delta", "item_id": "fc-sim", "output_index": block, "delta": text}),
                )
            }
            (Wire::Messages, PieceKind::Tool) => {
                return out(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": text}}),
                )
            }
            (Wire::Bedrock, PieceKind::Tool) => {
                return out(
                    "contentBlockDelta",
                    json!({"contentBlockIndex": block, "delta": {"toolUse": {"input": text}}}),
                )
            }
            // Completions has no tool calls, and Ollama's come whole: plain text there.
            (_, PieceKind::Tool) => return self.piece(model, PieceKind::Answer, text, block),
            _ => {}
        }
        match self {
            Wire::Chat => {
                let field = if answer {
                    "content"
                } else {
                    "reasoning_content"
                };
                plain(
                    json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                           "choices": [{"index": 0, "delta": {field: text}, "logprobs": null, "finish_reason": null}]}),
                )
            }
            Wire::Completions => plain(
                json!({"id": "cmpl-sim", "object": "text_completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "text": if answer { text } else { "" }, "logprobs": null, "finish_reason": null}]}),
            ),
            Wire::Responses if answer => out(
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "item_id": "msg-sim", "output_index": 0, "content_index": 0, "delta": text}),
            ),
            Wire::Responses => out(
                "response.reasoning_text.delta",
                json!({"type": "response.reasoning_text.delta", "item_id": "rs-sim", "output_index": 0, "content_index": 0, "delta": text}),
            ),
            Wire::Messages => {
                let delta = if answer {
                    json!({"type": "text_delta", "text": text})
                } else {
                    json!({"type": "thinking_delta", "thinking": text})
                };
                out(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": block, "delta": delta}),
                )
            }
            Wire::Gemini => plain(super::gemini::piece(model, kind, text)),
            Wire::Ollama => {
                let field = if answer { "content" } else { "thinking" };
                plain(
                    json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": {"role": "assistant", field: text}, "done": false}),
                )
            }
            Wire::Bedrock => {
                let delta = if answer {
                    json!({"text": text})
                } else {
                    json!({"reasoningContent": {"text": text}})
                };
                out(
                    "contentBlockDelta",
                    json!({"contentBlockIndex": block, "delta": delta}),
                )
            }
        }
    }

    /// The events after the last token: the finish reason (OpenAI's `stop`/`length` in each
    /// flavor's own words), usage when sent, the server's timings (`timings`, llama.cpp's, on
    /// the chunk flavors) and the end marker. `None` data with no name is OpenAI's `[DONE]`.
    pub fn closing(self, model: &str, end: Ending) -> Vec<Option<Out>> {
        let Ending {
            finish,
            usage,
            timings,
            block,
            call,
        } = end;
        let length = finish == "length";
        match self {
            Wire::Chat | Wire::Completions => {
                let mut last = match self {
                    Wire::Chat => {
                        json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk", "created": 0, "model": model, "system_fingerprint": FINGERPRINT,
                                         "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]})
                    }
                    _ => {
                        json!({"id": "cmpl-sim", "object": "text_completion", "created": 0, "model": model,
                                "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": finish}]})
                    }
                };
                if let Some(t) = timings {
                    last["timings"] = t;
                }
                let mut v = vec![Some(plain(last))];
                if let Some(u) = usage {
                    v.push(Some(plain(
                        json!({"id": "sim", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
                               "usage": {"prompt_tokens": u.prompt, "completion_tokens": u.completion, "total_tokens": u.prompt + u.completion,
                                         "prompt_tokens_details": {"cached_tokens": u.cached},
                                         "completion_tokens_details": {"reasoning_tokens": u.reasoning}}}),
                    )));
                }
                v.push(None);
                v
            }
            Wire::Responses => {
                let usage = usage.map(|u| json!({"input_tokens": u.prompt, "output_tokens": u.completion, "total_tokens": u.prompt + u.completion,
                                                  "input_tokens_details": {"cached_tokens": u.cached},
                                                  "output_tokens_details": {"reasoning_tokens": u.reasoning}}));
                let (name, status, details) = if length {
                    (
                        "response.incomplete",
                        "incomplete",
                        json!({"reason": "max_output_tokens"}),
                    )
                } else if finish == crate::checks::CONTENT_FILTER {
                    (
                        "response.incomplete",
                        "incomplete",
                        json!({"reason": "content_filter"}),
                    )
                } else {
                    ("response.completed", "completed", Value::Null)
                };
                let mut v = Vec::new();
                let output: Vec<Value> = call.map(|c| json!({"type": "function_call", "id": "fc-sim", "call_id": "call_sim", "name": c.name, "arguments": c.arguments, "status": "completed"})).into_iter().collect();
                if let Some(item) = output.first() {
                    v.push(Some(out(
                        "response.output_item.done",
                        json!({"type": "response.output_item.done", "output_index": block, "item": item}),
                    )));
                }
                let mut last = json!({"type": name, "response": {"id": "resp-sim", "status": status, "model": model, "incomplete_details": details, "usage": usage, "output": output}});
                // llama.cpp's timings beside the response, as its /v1/responses sends them.
                if let Some(t) = timings {
                    last["timings"] = t;
                }
                v.push(Some(out(name, last)));
                v
            }
            Wire::Messages => {
                let stop = match finish {
                    "length" => "max_tokens",
                    "tool_calls" => "tool_use",
                    crate::checks::CONTENT_FILTER => "refusal",
                    _ => "end_turn",
                };
                let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}});
                if let Some(u) = usage {
                    // Cumulative, as Anthropic sends it: the whole count, not what came since
                    // message_start's 1.
                    delta["usage"] = json!({"output_tokens": u.completion});
                }
                vec![
                    Some(out(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": block}),
                    )),
                    Some(out("message_delta", delta)),
                    Some(out("message_stop", json!({"type": "message_stop"}))),
                ]
            }
            Wire::Bedrock => {
                let mut metadata = json!({"metrics": {"latencyMs": 0}});
                if let Some(u) = usage {
                    metadata["usage"] = json!({"inputTokens": u.prompt, "outputTokens": u.completion, "totalTokens": u.prompt + u.completion});
                }
                vec![
                    Some(out("contentBlockStop", json!({"contentBlockIndex": block}))),
                    Some(out(
                        "messageStop",
                        json!({"stopReason": bedrock_stop(finish)}),
                    )),
                    Some(out("metadata", metadata)),
                ]
            }
            Wire::Ollama => {
                let mut last = json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": {"role": "assistant", "content": ""},
                                      "done": true, "done_reason": if length { "length" } else { "stop" }});
                if let Some(u) = usage {
                    // Ollama counts only the prompt tokens it evaluated: not the cached ones.
                    last["prompt_eval_count"] = json!(u.prompt - u.cached);
                    last["eval_count"] = json!(u.completion);
                }
                if let Some(t) = timings {
                    for k in [
                        "total_duration",
                        "load_duration",
                        "prompt_eval_duration",
                        "eval_duration",
                    ] {
                        last[k] = t[k].clone();
                    }
                }
                vec![Some(plain(last))]
            }
            Wire::Gemini => vec![Some(plain(super::gemini::closing(model, finish, usage)))],
        }
    }

    /// A refused request's error body in the flavor's own shape, where the provider has one
    /// of its own; `None`: OpenAI's shape (or Anthropic's for 529).
    pub fn refusal(self, status: u16, model: &str) -> Option<Value> {
        match self {
            Wire::Gemini => super::gemini::refusal(status, model),
            _ => None,
        }
    }

    /// An error reported inside a stream that already started with a 200.
    pub fn error(self, message: &str) -> Out {
        match self {
            Wire::Chat | Wire::Completions => {
                plain(json!({"error": {"message": message, "type": "server_error", "code": 500}}))
            }
            Wire::Responses => out(
                "error",
                json!({"type": "error", "code": "server_error", "message": message}),
            ),
            Wire::Messages => out(
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
            ),
            Wire::Ollama => plain(json!({"error": message})),
            Wire::Gemini => plain(super::gemini::error(message)),
            Wire::Bedrock => out(
                "exception:modelStreamErrorException",
                json!({"message": message, "originalStatusCode": 500}),
            ),
        }
    }

    /// A whole answer, for a request that did not ask to stream: its text and tool call.
    pub fn whole(self, model: &str, text: &str, end: &Ending) -> Value {
        let (finish, length) = (end.finish, end.finish == "length");
        let (prompt, completion) = end.usage.map_or((0, 0), |u| (u.prompt, u.completion));
        let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
        let mut v = match self {
            Wire::Chat => {
                json!({"id": "sim", "object": "chat.completion", "model": model, "system_fingerprint": FINGERPRINT,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}], "usage": usage})
            }
            Wire::Completions => json!({"id": "sim", "object": "text_completion", "model": model,
                                        "choices": [{"index": 0, "text": text, "finish_reason": finish}], "usage": usage}),
            Wire::Responses => {
                json!({"id": "resp-sim", "object": "response", "status": if length { "incomplete" } else { "completed" }, "model": model,
                                      "incomplete_details": if length { json!({"reason": "max_output_tokens"}) } else { Value::Null },
                                      "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
                                      "usage": {"input_tokens": prompt, "output_tokens": completion}})
            }
            Wire::Messages => {
                json!({"id": "msg-sim", "type": "message", "role": "assistant", "model": model,
                                     "content": [{"type": "text", "text": text}],
                                     "stop_reason": match finish { "length" => "max_tokens", "tool_calls" => "tool_use", crate::checks::CONTENT_FILTER => "refusal", _ => "end_turn" },
                                     "usage": {"input_tokens": prompt, "output_tokens": completion}})
            }
            Wire::Ollama => {
                json!({"model": model, "message": {"role": "assistant", "content": text}, "done": true,
                                   "done_reason": if length { "length" } else { "stop" }, "eval_count": completion})
            }
            // With its tool call, if any.
            Wire::Gemini => super::gemini::whole(model, text, end),
            // Converse's answer.
            Wire::Bedrock => {
                json!({"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                       "stopReason": bedrock_stop(finish),
                       "usage": {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion},
                       "metrics": {"latencyMs": 0}})
            }
        };
        if let Some(c) = end.call {
            match self {
                Wire::Chat => {
                    v["choices"][0]["message"]["tool_calls"] = json!([{"id": "call_sim", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}])
                }
                Wire::Responses => {
                    v["output"] = json!([{"type": "function_call", "id": "fc-sim", "call_id": "call_sim", "name": c.name, "arguments": c.arguments, "status": "completed"}])
                }
                Wire::Messages => {
                    v["content"] = json!([{"type": "tool_use", "id": "toolu_sim", "name": c.name, "input": c.arguments_value()}])
                }
                Wire::Ollama => {
                    v["message"]["tool_calls"] =
                        json!([{"function": {"name": c.name, "arguments": c.arguments_value()}}])
                }
                Wire::Bedrock => {
                    v["output"]["message"]["content"] = json!([{"toolUse": {"toolUseId": "tooluse_sim", "name": c.name, "input": c.arguments_value()}}])
                }
                Wire::Completions | Wire::Gemini => {}
            }
        }
        v
    }
}

/// A finish reason in OpenAI's words as Bedrock's `stopReason`.
fn bedrock_stop(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        crate::checks::CONTENT_FILTER => "content_filtered",
        _ => "end_turn",
    }
}

/// The build the sim reports as its `system_fingerprint`.
pub const FINGERPRINT: &str = concat!("llm-canary-sim-", env!("CARGO_PKG_VERSION"));
