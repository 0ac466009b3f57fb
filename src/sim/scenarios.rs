//! The scenarios of the simulated replica: one for every outcome, healthy English and Chinese
//! answers, and the stream quirks real servers have. A scenario is chosen per request by the
//! path prefix `/s/<scenario>[,ttft=..,itl=..,stall=..]/v1` or by a model name equal to its name.
//! `slots=N` makes a scenario a busy server: N requests served at once, the others queued in
//! vLLM's priority order (`super::queue`).

use std::time::Duration;

use crate::config::duration::parse_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Healthy,
    HealthyZh,
    SlowFirstToken,
    SlowDecode,
    Stall,
    Reset,
    MidStreamError,
    Malformed,
    HtmlSplice,
    Garbage,
    Http(u16),
    Empty,
    ContentFilter,
    Repetition,
    RepetitionZh,
    Truncated,
    TooShort,
    TooLong,
    Mismatch,
    Forbidden,
    NoDone,
    Endless,
    HugeLine,
    NoHeaders,
    RoleOnly,
    Crawl,
    Crlf,
    Comments,
    Split,
    NoUsage,
    Reasoning,
    NonStream,
    NoSpace,
    LlamaCpp,
    EchoAuth,
    RepetitionList,
    JsonBroken,
    ToolCall,
    ToolCallNone,
    ToolCallWrong,
    ToolCallBadArgs,
    PrefixCacheBroken,
    VllmDefault,
    SglangDefault,
    SameAnswer,
    WordSalad,
}

/// Every scenario: its name, kind and what it does (the list `sim` prints).
pub const CATALOG: &[(&str, Kind, &str)] = &[
    (
        "healthy",
        Kind::Healthy,
        "the canned answer (above), first token 50ms, 10ms a token; vLLM-style role chunk first, usage last; a ladder's needle question answered from its document -> ok",
    ),
    ("healthy-zh", Kind::HealthyZh, "the Chinese answer whatever the prompt -> ok (an English expect: fails)"),
    (
        "slow-first-token",
        Kind::SlowFirstToken,
        "first token after 3s (ttft=...): ok under the default ttft 10s; timeout_ttft with timeouts.ttft below 3s",
    ),
    (
        "slow-decode",
        Kind::SlowDecode,
        "250ms between tokens (itl=...), the answer in about 7s -> ok, at 4 tokens/s",
    ),
    (
        "stall",
        Kind::Stall,
        "a 3s pause after the third token (stall=...): ok under the default stall 5s; stall with timeouts.stall below 3s",
    ),
    (
        "reset",
        Kind::Reset,
        "TCP reset after the third token -> stream_interrupted",
    ),
    (
        "mid-stream-error",
        Kind::MidStreamError,
        "an error object after the third token -> stream_error",
    ),
    (
        "malformed",
        Kind::Malformed,
        "an event that is not JSON -> malformed_stream",
    ),
    (
        "html-splice",
        Kind::HtmlSplice,
        "an HTML error line spliced into the stream after the third token, as a broken proxy does -> malformed_stream",
    ),
    (
        "garbage",
        Kind::Garbage,
        "an HTML page with status 200 -> malformed_stream",
    ),
    (
        "http-429",
        Kind::Http(429),
        "429 rate limited, with Retry-After and x-ratelimit-* headers -> http_error, reason rate_limited",
    ),
    (
        "http-500",
        Kind::Http(500),
        "500 internal error -> http_error, reason server_error",
    ),
    ("http-503", Kind::Http(503), "503 overloaded -> http_error, reason overloaded"),
    (
        "http-529",
        Kind::Http(529),
        "529 with Anthropic's overloaded_error -> http_error, reason overloaded",
    ),
    (
        "http-404",
        Kind::Http(404),
        "404 model_not_found -> http_error, reason not_found",
    ),
    (
        "http-400",
        Kind::Http(400),
        "400 context_length_exceeded -> http_error, reason context_length",
    ),
    (
        "vllm-default",
        Kind::VllmDefault,
        "as vLLM without --scheduling-policy priority: a non-zero priority is refused with its 400 \"Got priority N but Priority scheduling is not enabled.\", else healthy -> http_error, reason priority_unsupported",
    ),
    (
        "sglang-default",
        Kind::SglangDefault,
        "as SGLang without --enable-priority-scheduling: any priority is taken and ignored (the request as received is kept for tests) -> ok",
    ),
    (
        "content-filter",
        Kind::ContentFilter,
        "four tokens, then the provider's content-filter stop (finish_reason content_filter, stop_reason refusal, incomplete for content_filter) -> content_filtered",
    ),
    (
        "empty",
        Kind::Empty,
        "only whitespace and zero-width characters -> empty_output",
    ),
    (
        "repetition",
        Kind::Repetition,
        "an English loop until max_tokens -> repetition",
    ),
    (
        "repetition-zh",
        Kind::RepetitionZh,
        "a Chinese loop until max_tokens -> repetition",
    ),
    (
        "truncated",
        Kind::Truncated,
        "finish_reason length mid-sentence -> truncated",
    ),
    (
        "too-short",
        Kind::TooShort,
        "\"Paris.\" -> too_short with checks.min_chars above 6, else ok",
    ),
    (
        "too-long",
        Kind::TooLong,
        "a rambling answer up to max_tokens -> too_long with checks.max_chars below it, else ok",
    ),
    (
        "mismatch",
        Kind::Mismatch,
        "an answer without the fact -> pattern_mismatch with checks.expect (e.g. paris), else ok",
    ),
    (
        "forbidden",
        Kind::Forbidden,
        "'As an AI language model...' -> forbidden_pattern with checks.forbid \"(?i)as an ai\", else ok",
    ),
    (
        "no-done",
        Kind::NoDone,
        "closes cleanly without finish reason or [DONE] -> stream_interrupted",
    ),
    (
        "endless",
        Kind::Endless,
        "ignores max_tokens and never stops -> oversized",
    ),
    ("huge-line", Kind::HugeLine, "one endless line -> oversized"),
    (
        "no-headers",
        Kind::NoHeaders,
        "accepts the request, never answers -> timeout_ttft after timeouts.ttft (10s)",
    ),
    (
        "role-only",
        Kind::RoleOnly,
        "headers, a role chunk and keep-alives, no token -> timeout_ttft after timeouts.ttft (10s)",
    ),
    (
        "crawl",
        Kind::Crawl,
        "a token every 400ms up to max_tokens: truncated after 51s at 128; timeout_total past timeouts.total (1m: max_tokens over 150)",
    ),
    ("crlf", Kind::Crlf, "healthy, with CRLF line endings"),
    (
        "comments",
        Kind::Comments,
        "healthy, with keep-alive comments between events",
    ),
    (
        "split",
        Kind::Split,
        "healthy, written in pieces of 1-7 bytes, splitting UTF-8 characters",
    ),
    ("no-usage", Kind::NoUsage, "healthy, without a usage chunk"),
    (
        "reasoning",
        Kind::Reasoning,
        "reasoning_content tokens first, then the answer",
    ),
    (
        "non-stream",
        Kind::NonStream,
        "one JSON answer even though a stream was asked for",
    ),
    (
        "nospace",
        Kind::NoSpace,
        "healthy, with `data:` and no space",
    ),
    (
        "llama-cpp",
        Kind::LlamaCpp,
        "healthy, llama.cpp style: no role chunk, `timings` in the last chunk",
    ),
    (
        "echo-auth",
        Kind::EchoAuth,
        "401 whose body echoes the Authorization (or Gemini's x-goog-api-key) header, as a leaky proxy does -> http_error",
    ),
    (
        "repetition-list",
        Kind::RepetitionList,
        "a numbered list whose items cycle while the counter climbs, until max_tokens -> repetition",
    ),
    (
        "json-broken",
        Kind::JsonBroken,
        "almost JSON (a trailing comma) -> format_error with checks.json",
    ),
    (
        "tool-call",
        Kind::ToolCall,
        "calls the request's first tool with {\"city\": \"Paris\"}, arguments streamed in pieces",
    ),
    (
        "tool-call-none",
        Kind::ToolCallNone,
        "answers in text instead of calling a tool -> tool_call_error",
    ),
    (
        "tool-call-wrong",
        Kind::ToolCallWrong,
        "calls get_time, a tool the request did not offer -> tool_call_error",
    ),
    (
        "tool-call-bad-args",
        Kind::ToolCallBadArgs,
        "calls the right tool with {\"city\": 42} -> tool_call_error",
    ),
    (
        "same-answer",
        Kind::SameAnswer,
        "the same text whatever the prompt, as a server with a wrong chat template answers -> prompt_ignored on the second probe of a target",
    ),
    (
        "word-salad",
        Kind::WordSalad,
        "fragments of words and code that never make a sentence, to max_tokens, as a wrong RoPE setting answers -> answer_drift with checks.reference",
    ),
    (
        "prefix-cache-broken",
        Kind::PrefixCacheBroken,
        "healthy, but its prefix cache never hits: a repeated prompt reports 0 cached tokens and comes no sooner -> prefix_cache_hit_ratio 0, prefix_cache_ttft_speedup about 1",
    ),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub kind: Kind,
    pub ttft: Duration,
    pub itl: Duration,
    pub stall: Duration,
    /// Random extra first-token delay, up to this much (drawn from a per-scenario seed).
    pub jitter: Duration,
    /// The scenario applies to every Nth request only; the others are healthy.
    pub every: u64,
    /// A replica still loading: 503 until this long after its first request.
    pub warm: Duration,
    /// Scales the timings the sim reports about itself (its /metrics and llama.cpp-style
    /// `timings`): 1 is honest.
    pub skew: f64,
    /// The weights its model list names (`/v1/models`' `root`): a new build behind the same
    /// model names.
    pub build: String,
    /// Whose names `/s/<scenario>/metrics` reports what was served in.
    pub metrics: Exposition,
    /// Answers to prompts longer than this many tokens (4 characters each, as the sim counts
    /// them) are corrupted: every digit shifted, so a fact given back is a wrong one.
    pub corrupt_above: Option<usize>,
    /// Prompt tokens the replica reads a second before its first token: the first token waits
    /// that much longer for a long prompt (none: the prompt takes no time).
    pub prefill: Option<f64>,
    /// Requests served at once (`slots=N`); the rest wait in vLLM's priority order
    /// (`super::queue`). None: no limit.
    pub slots: Option<usize>,
}

/// The `/metrics` of which server the sim plays (`metrics=vllm|sglang|llama-cpp|none`): vLLM's
/// by default, llama.cpp's for the `llama-cpp` scenario; `none` is a llama.cpp server started
/// without `--metrics` (HTTP 501).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    Vllm,
    Sglang,
    LlamaCpp,
    None,
}

impl Scenario {
    /// `healthy`, or `slow-decode,itl=100ms,ttft=20ms`.
    pub fn parse(spec: &str) -> Result<Scenario, String> {
        let mut parts = spec.split(',');
        let mut s = Scenario::named(parts.next().unwrap_or_default())?;
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("scenario parameter {p:?} is not key=value"))?;
            s.set(k, v)?;
        }
        Ok(s)
    }

    /// The scenario `name` with its kind's own timings and exposition, before any parameter.
    fn named(name: &str) -> Result<Scenario, String> {
        let kind = CATALOG
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, k, _)| *k)
            .ok_or_else(|| format!("unknown scenario {name:?}"))?;
        Ok(Scenario {
            name: name.to_string(),
            kind,
            ttft: Duration::from_millis(match kind {
                Kind::SlowFirstToken => 3000,
                _ => 50,
            }),
            itl: Duration::from_millis(match kind {
                Kind::SlowDecode => 250,
                Kind::Crawl => 400,
                Kind::Endless => 1,
                _ => 10,
            }),
            stall: Duration::from_secs(3),
            jitter: Duration::ZERO,
            every: 1,
            warm: Duration::ZERO,
            skew: 1.0,
            build: "base".into(),
            metrics: if kind == Kind::LlamaCpp {
                Exposition::LlamaCpp
            } else {
                Exposition::Vllm
            },
            corrupt_above: None,
            prefill: None,
            slots: None,
        })
    }

    /// One `key=value` parameter: a number, a word, or else a duration.
    fn set(&mut self, k: &str, v: &str) -> Result<(), String> {
        match k {
            "skew" => {
                self.skew = positive(v).ok_or_else(|| format!("skew={v}: a positive number"))?;
            }
            "build" => self.build = v.to_string(),
            "metrics" => self.metrics = Exposition::parse(v)?,
            "corrupt_above" => {
                self.corrupt_above = Some(
                    v.parse()
                        .map_err(|_| format!("corrupt_above={v}: a whole number of tokens"))?,
                );
            }
            "prefill" => {
                self.prefill = Some(
                    positive(v).ok_or_else(|| format!("prefill={v}: tokens a second, above 0"))?,
                );
            }
            "slots" => {
                self.slots = Some(
                    v.parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("slots={v}: a positive whole number"))?,
                );
            }
            "every" => {
                self.every = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("every={v}: a positive whole number"))?;
            }
            _ => self.set_duration(k, parse_duration(v)?)?,
        }
        Ok(())
    }

    /// One duration parameter; any other key is unknown.
    fn set_duration(&mut self, k: &str, d: Duration) -> Result<(), String> {
        match k {
            "ttft" => self.ttft = d,
            "itl" => self.itl = d,
            "stall" => self.stall = d,
            "jitter" => self.jitter = d,
            "warm" => self.warm = d,
            _ => {
                return Err(format!(
                    "unknown scenario parameter {k:?} (ttft, itl, stall, jitter, every, warm, skew, build, metrics, corrupt_above, prefill, slots)"
                ))
            }
        }
        Ok(())
    }
}

/// A finite number above 0.
fn positive(v: &str) -> Option<f64> {
    v.parse().ok().filter(|x: &f64| x.is_finite() && *x > 0.0)
}

impl Exposition {
    /// `metrics=`'s word.
    fn parse(v: &str) -> Result<Exposition, String> {
        Ok(match v {
            "vllm" => Exposition::Vllm,
            "sglang" => Exposition::Sglang,
            "llama-cpp" => Exposition::LlamaCpp,
            "none" => Exposition::None,
            _ => return Err(format!("metrics={v}: vllm, sglang, llama-cpp or none")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_parameters() {
        let s = Scenario::parse("slow-decode,itl=100ms,ttft=20ms").unwrap();
        assert_eq!(
            (s.kind, s.itl, s.ttft),
            (
                Kind::SlowDecode,
                Duration::from_millis(100),
                Duration::from_millis(20)
            )
        );
        assert_eq!(Scenario::parse("http-503").unwrap().kind, Kind::Http(503));
        assert!(Scenario::parse("nope").is_err());
        assert!(Scenario::parse("healthy,foo=1s").is_err());
        assert_eq!(
            Scenario::parse("healthy").unwrap().metrics,
            Exposition::Vllm
        );
        assert_eq!(
            Scenario::parse("llama-cpp").unwrap().metrics,
            Exposition::LlamaCpp
        );
        assert_eq!(
            Scenario::parse("healthy,metrics=sglang").unwrap().metrics,
            Exposition::Sglang
        );
        assert!(Scenario::parse("healthy,metrics=tgi").is_err());
        let s = Scenario::parse("healthy,corrupt_above=4000,prefill=20000").unwrap();
        assert_eq!((s.corrupt_above, s.prefill), (Some(4000), Some(20000.0)));
        assert!(Scenario::parse("healthy,prefill=0").is_err());
        assert!(Scenario::parse("healthy,corrupt_above=many").is_err());
        assert_eq!(Scenario::parse("healthy,slots=2").unwrap().slots, Some(2));
        assert!(Scenario::parse("healthy,slots=0").is_err());
        let mut names: Vec<&str> = CATALOG.iter().map(|c| c.0).collect();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len());
    }
}
