//! What one event (or a whole answer) carried, as a flavor reads it, and tool calls put
//! together from the pieces they stream in.

use serde_json::Value;

use crate::checks::tool_call::ToolCall;

/// A piece of a tool call as it streams: the call it belongs to (`slot`: the flavor's index of
/// it; `None` when every piece is a whole call of its own, as Ollama sends them), the tool's
/// name when this piece carries it, and the next stretch of its arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallPiece {
    pub slot: Option<u64>,
    pub name: Option<String>,
    pub arguments: String,
}

/// Tool calls put together from their pieces, in the order they began.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolCalls {
    calls: Vec<ToolCall>,
    /// Each call's slot, beside `calls`.
    slots: Vec<Option<u64>>,
}

impl ToolCalls {
    /// Adds a piece to the call it continues (the same slot), or starts a call with it.
    pub(crate) fn take(&mut self, piece: ToolCallPiece) {
        let open = piece
            .slot
            .and_then(|s| self.slots.iter().rposition(|&o| o == Some(s)));
        match open {
            Some(i) => {
                let call = &mut self.calls[i];
                if call.name.is_empty() {
                    call.name = piece.name.unwrap_or_default();
                }
                call.arguments.push_str(&piece.arguments);
            }
            None => {
                self.calls.push(ToolCall {
                    name: piece.name.unwrap_or_default(),
                    arguments: piece.arguments,
                });
                self.slots.push(piece.slot);
            }
        }
    }

    pub(crate) fn calls(&self) -> &[ToolCall] {
        &self.calls
    }
}

/// What one event (or a whole non-streamed answer) carried, as a flavor reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// Generated text the user sees: answer text and tool-call text.
    pub text: String,
    /// The same tool-call text, by call: names and arguments.
    pub tool_calls: Vec<ToolCallPiece>,
    pub reasoning_chars: usize,
    /// In OpenAI's words: `stop`, `length` (the token limit cut the answer), `tool_calls`...
    pub finish_reason: Option<String>,
    /// The server's count of output tokens so far (a total, never a piece to add up).
    pub output_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// The server's count of prompt (input) tokens.
    pub input_tokens: Option<u64>,
    /// The server's count of prompt tokens served from its prefix cache: OpenAI's and vLLM's
    /// `usage.prompt_tokens_details.cached_tokens` (the Responses API's
    /// `input_tokens_details`), llama.cpp's `timings.cache_n`, Anthropic's
    /// `cache_read_input_tokens` (which its `input_tokens` leaves out).
    pub cached_tokens: Option<u64>,
    /// An error the server reported inside a successful response.
    pub error: Option<String>,
    /// The flavor's last event: nothing more will come.
    pub done: bool,
    /// The server's own timings, under their own names.
    pub server_timings: Option<Value>,
    /// The model name the server echoes.
    pub model: Option<String>,
    /// What the server says identifies its build (`system_fingerprint`).
    pub fingerprint: Option<String>,
}

impl Delta {
    /// Text, reasoning or a tool call: a role-only or empty chunk is not a token.
    pub fn is_generated(&self) -> bool {
        !self.text.is_empty() || self.reasoning_chars > 0
    }

    /// A tool call's piece, whose text also counts as generated text.
    pub(super) fn push_call(&mut self, slot: Option<u64>, name: Option<&str>, arguments: &str) {
        let name = name.filter(|n| !n.is_empty());
        self.text.push_str(name.unwrap_or_default());
        self.text.push_str(arguments);
        self.tool_calls.push(ToolCallPiece {
            slot,
            name: name.map(str::to_string),
            arguments: arguments.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(slot: Option<u64>, name: Option<&str>, arguments: &str) -> ToolCallPiece {
        ToolCallPiece {
            slot,
            name: name.map(str::to_string),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn tool_call_pieces_join_by_slot() {
        let mut calls = ToolCalls::default();
        for p in [
            piece(Some(0), Some("get_weather"), ""),
            piece(Some(0), None, "{\"city\":"),
            piece(Some(1), Some("get_time"), "{}"),
            piece(Some(0), None, " \"Paris\"}"),
            // Whole calls without a slot (Ollama) each stand alone.
            piece(None, Some("a"), "{}"),
            piece(None, Some("b"), "{}"),
        ] {
            calls.take(p);
        }
        let got: Vec<(&str, &str)> = calls
            .calls()
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("get_weather", "{\"city\": \"Paris\"}"),
                ("get_time", "{}"),
                ("a", "{}"),
                ("b", "{}")
            ]
        );
    }
}
