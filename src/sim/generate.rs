//! What each scenario answers: the tokens and finish reason by scenario and `max_tokens`, the
//! tool call it makes, the usage and timings it reports, and what it tells the sim's /metrics.
//! How the answer is written is [`super::respond`]'s.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::answers;
use super::cache::Hit;
use super::metrics::Observation;
use super::scenarios::{Kind, Scenario};
use super::state::State;
use super::wire::{Call, PieceKind, Usage, Wire};

/// One completion request, decoded: what to answer, in which flavor, and how fast.
pub(super) struct Generation {
    pub(super) wire: &'static dyn Wire,
    pub(super) model: String,
    pub(super) prompt: String,
    /// The first tool the request offers, for the tool-call scenarios.
    pub(super) tool: Option<String>,
    pub(super) scenario: Scenario,
    pub(super) max_tokens: usize,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) request_id: Option<String>,
    pub(super) authorization: Option<String>,
    /// The body's `priority`, which the `vllm-default` scenario refuses when not 0.
    pub(super) priority: Option<i64>,
    pub(super) cache: Hit,
    pub(super) t0: Instant,
}

/// One token of the answer.
pub(super) struct Piece {
    pub kind: PieceKind,
    pub text: String,
}

/// How fast the answer comes: the first token and the gap between tokens, after the caches.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    pub ttft: Duration,
    pub itl: Duration,
}

impl Generation {
    /// The prompt's tokens as the sim counts them (and reports them in its usage).
    fn prompt_tokens(&self) -> usize {
        self.prompt.chars().count() / 4 + 1
    }

    /// A cached prefix answers four times sooner; a cached response at once. A long prompt
    /// waits for its prefill, at the scenario's `prefill` speed.
    pub(super) fn pace(&self) -> Pace {
        let prefill = self.scenario.prefill.map_or(Duration::ZERO, |per_second| {
            Duration::from_secs_f64(self.prompt_tokens() as f64 / per_second)
        });
        let (ttft, itl) = (self.scenario.ttft + prefill, self.scenario.itl);
        match self.cache {
            Hit::Http => Pace {
                ttft: Duration::ZERO,
                itl: Duration::ZERO,
            },
            Hit::Prefix => Pace {
                ttft: ttft / 4,
                itl,
            },
            Hit::Miss => Pace { ttft, itl },
        }
    }

    /// The tool call a tool-call scenario makes: to the request's first tool (or a tool it did
    /// not offer), with good or bad arguments.
    pub(super) fn call(&self) -> Option<Call> {
        let offered = self.tool.as_deref().unwrap_or("get_weather");
        let (name, arguments) = match self.scenario.kind {
            Kind::ToolCall => (offered, answers::CALL_ARGUMENTS),
            Kind::ToolCallWrong => ("get_time", "{}"),
            Kind::ToolCallBadArgs => (offered, answers::BAD_CALL_ARGUMENTS),
            _ => return None,
        };
        Some(Call {
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    /// The tokens to send and the finish reason, by scenario and `max_tokens`: the tool call's
    /// arguments, or the scenario's text.
    pub(super) fn script(&self) -> (Vec<Piece>, &'static str) {
        let max = self.max_tokens.max(1);
        match self.call() {
            Some(call) => call_script(&call, max),
            None => self.text_script(max),
        }
    }

    /// The scenario's text, cut where it ends, after the reasoning of a scenario that reasons.
    fn text_script(&self, max: usize) -> (Vec<Piece>, &'static str) {
        let text: String = match self.scenario.kind {
            Kind::HealthyZh => answers::CHINESE.into(),
            Kind::Repetition => answers::looping(false, max),
            Kind::RepetitionZh => answers::looping(true, max),
            Kind::TooShort => answers::SHORT.into(),
            Kind::TooLong => answers::rambling(max),
            Kind::Mismatch => answers::MISMATCH.into(),
            Kind::Forbidden => answers::FORBIDDEN.into(),
            Kind::Empty => " \u{200B}\n \u{FEFF} ".into(),
            Kind::Crawl => answers::rambling(200),
            Kind::RepetitionList => answers::looping_list(max),
            Kind::JsonBroken => answers::JSON_BROKEN.into(),
            Kind::ToolCallNone => answers::NO_CALL.into(),
            Kind::SameAnswer => answers::SAME_ANSWER.into(),
            Kind::WordSalad => answers::word_salad(max),
            _ => answers::recall(&self.prompt)
                .unwrap_or_else(|| answers::healthy(&self.prompt).to_string()),
        };
        let text = match self.scenario.corrupt_above {
            Some(n) if self.prompt_tokens() > n => answers::corrupt(&text),
            _ => text,
        };
        let mut tokens = answers::tokenize(&text);
        if self.scenario.kind == Kind::Empty {
            tokens = text.chars().map(String::from).collect();
        }
        let mut finish = "stop";
        if self.scenario.kind == Kind::ContentFilter {
            tokens.truncate(4);
            finish = crate::checks::CONTENT_FILTER;
        }
        let cut = if self.scenario.kind == Kind::Truncated {
            5.min(max)
        } else {
            max
        };
        if self.scenario.kind == Kind::TooLong {
            // Long, but finished on its own: only `too_long` should fire.
            tokens.truncate(max.saturating_sub(1).max(1));
        }
        if tokens.len() > cut {
            tokens.truncate(cut);
            finish = "length";
        }
        let mut pieces: Vec<Piece> = Vec::new();
        if self.scenario.kind == Kind::Reasoning {
            pieces.extend(
                answers::tokenize("Let me recall the capital of France.")
                    .into_iter()
                    .map(|text| Piece {
                        kind: PieceKind::Reasoning,
                        text,
                    }),
            );
        }
        pieces.extend(tokens.into_iter().map(|text| Piece {
            kind: PieceKind::Answer,
            text,
        }));
        (pieces, finish)
    }

    pub(super) fn usage(&self, pieces: &[Piece]) -> Usage {
        let prompt = self.prompt_tokens();
        Usage {
            prompt,
            // As llama.cpp reuses a cached prompt: all but its last token.
            cached: if self.cache == Hit::Prefix {
                prompt - 1
            } else {
                0
            },
            completion: pieces.len(),
            reasoning: pieces
                .iter()
                .filter(|p| p.kind == PieceKind::Reasoning)
                .count(),
        }
    }

    /// Reports a request on the sim's /metrics, as the server it plays would: `writes` are the
    /// instants its content left (the first is its first token). Called before the last bytes
    /// go out, so a client that scrapes as soon as its answer ends finds it counted.
    pub(super) fn report(&self, st: &State, writes: &[Instant], usage: &Usage) {
        let Some(first) = writes.first() else {
            return;
        };
        let secs = |at: Instant| at.saturating_duration_since(self.t0).as_secs_f64();
        let gaps: Vec<f64> = writes
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        st.served.observe(&Observation {
            model: &self.model,
            ttft: secs(*first),
            e2e: secs(Instant::now()),
            gaps: &gaps,
            prompt_tokens: usage.prompt,
            output_tokens: usage.completion,
            skew: self.scenario.skew,
        });
    }

    /// What the server says about itself (llama.cpp's `timings`, with Ollama's names for the
    /// same figures), scaled like its /metrics.
    pub(super) fn server_timings(&self, pace: Pace, pieces: usize, usage: &Usage) -> Value {
        let (ttft, itl) = (
            pace.ttft.mul_f64(self.scenario.skew),
            pace.itl.mul_f64(self.scenario.skew),
        );
        let decode_ms = itl.as_secs_f64() * 1000.0 * pieces.saturating_sub(1) as f64;
        let ns = |d: Duration| d.as_nanos() as u64;
        json!({
            "cache_n": usage.cached, "prompt_n": usage.prompt - usage.cached,
            "prompt_ms": ttft.as_secs_f64() * 1000.0,
            "predicted_n": pieces, "predicted_ms": decode_ms,
            "predicted_per_second": if decode_ms > 0.0 { (pieces as f64 - 1.0) * 1000.0 / decode_ms } else { 0.0 },
            // Ollama's names for the same figures, in nanoseconds: a quarter of the first
            // token's wait spent loading the model, the rest on the prompt.
            "load_duration": ns(ttft / 4), "prompt_eval_duration": ns(ttft - ttft / 4),
            "eval_duration": ns(itl * pieces.saturating_sub(1) as u32),
            "total_duration": ns(ttft + itl * pieces as u32),
        })
    }
}

/// A tool call's arguments in pieces, cut at `max` tokens.
fn call_script(call: &Call, max: usize) -> (Vec<Piece>, &'static str) {
    let mut pieces: Vec<Piece> = answers::tokenize(&call.arguments)
        .into_iter()
        .map(|text| Piece {
            kind: PieceKind::Tool,
            text,
        })
        .collect();
    let finish = if pieces.len() > max {
        pieces.truncate(max);
        "length"
    } else {
        "tool_calls"
    };
    (pieces, finish)
}
