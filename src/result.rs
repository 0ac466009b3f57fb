//! The result of one probe run: plain data, serialized as docs/design.md's result record (one JSON
//! object per line for `once --format json`, the results log and the gate). Absent figures are
//! `null`; the generated text only when asked for; never the API key.
//!
//! A run yields a [`Measurement`] (what was seen and judged); the runner knows the
//! [`RunContext`] (how the run stands beside the ones before it, and the window it fell in).
//! [`ProbeResult::new`] makes the record from the two, and nothing sets a field of it afterwards.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::checks::repetition;
use crate::outcome::{HttpReason, Outcome};
pub use crate::timeline::TokensSource;
use crate::timeline::{Figures, Timeline};

/// What one run saw and judged, before it is set beside the runs before it.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub probe: String,
    pub target: String,
    pub model: String,
    pub labels: BTreeMap<String, String>,
    pub request_id: String,
    pub started_at: jiff::Timestamp,
    pub outcome: Outcome,
    pub failed_checks: Vec<Outcome>,
    pub http_status: Option<u16>,
    pub reason: Option<HttpReason>,
    pub rate_limit: Option<BTreeMap<String, String>>,
    pub figures: Figures,
    pub output_tokens: Option<u64>,
    pub tokens_source: Option<TokensSource>,
    pub reasoning_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    pub output_chars: Option<usize>,
    pub repetition_score: Option<f64>,
    pub error: Option<String>,
    pub server_timings: Option<serde_json::Value>,
    pub server_ttft_ms: Option<f64>,
    pub reported_model: Option<String>,
    /// What the answer said identifies the serving build: `system_fingerprint`, else the
    /// echoed model name.
    pub build: Option<String>,
    pub output_sha256: Option<String>,
    pub trace_id: String,
    pub content_chunks: usize,
    pub response_bytes: usize,
    pub repetition: Option<repetition::Report>,
    pub stopped_early: bool,
    /// The server's count of prompt tokens, when it reports one.
    pub input_tokens: Option<u64>,
    /// The server's count of prompt tokens it served from its prefix cache, when it reports one.
    pub cached_tokens: Option<u64>,
    /// The context-ladder rung this run climbed, when its probe has a ladder.
    pub rung: Option<Rung>,
    /// The answer's chrF against the probe's `checks.reference`, when it has one.
    pub similarity: Option<f64>,
    /// The generated text, for comparisons across runs (`prompt_ignored`, the gate's
    /// `answer_similarity`); `None` when the run failed in transport. Not part of the record.
    pub answer: Option<Arc<str>>,
    pub output: Option<String>,
    pub timeline: Option<Timeline>,
}

/// A context-ladder rung's run: its size, and its prompt's tokens as estimated from characters
/// (the server's count, when it reports one, is `input_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rung {
    pub size: u32,
    pub prompt_tokens_estimate: u64,
}

/// A rung's prefill speed beside the ladder's smallest rung (see [`crate::probe::ladder::prefill`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefill {
    pub tokens_per_second: f64,
    /// Whose prompt token counts it divides: the server's, or the estimates.
    pub source: PromptTokens,
}

/// Where a prompt token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptTokens {
    /// The server's usage report.
    Usage,
    /// Characters at [`crate::config::ladder::CHARS_PER_TOKEN`] a token.
    Estimate,
}

impl Measurement {
    pub fn success(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// How a run stands beside the runs before it, and the window it fell in: what the runner and
/// its caller know, and the run itself cannot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunContext {
    /// The pair's first success since start or since its target was unreachable.
    pub warmup: bool,
    /// The target's build differs from the one it showed before.
    pub target_changed: bool,
    /// A deterministic probe's output differs from its previous one on this target.
    pub output_changed: bool,
    /// The run fell in a maintenance window of its target.
    pub maintenance: bool,
    /// The run confirms a failure: the daemon re-ran the pair after a failed run, before its
    /// next scheduled run (the probe's `confirm:`).
    pub confirm: bool,
    /// The target's model-list entry, as last asked (see [`crate::probe::identity`]).
    pub models: Option<String>,
    /// A cache check's run, and what it showed beside the cold one (`cache_check:`).
    pub cache_check: Option<CacheRun>,
    /// A ladder rung's prefill speed beside the smallest rung of its firing.
    pub prefill: Option<Prefill>,
}

/// Which run of a cache check a run is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePhase {
    /// The first request: its prefix is new to the server.
    Cold,
    /// The same request again, beside the cold run it repeats.
    Warm,
}

/// A cache check's run: which one it is, and what it showed (a warm run, beside its cold
/// run; nothing for a cold run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheRun {
    pub phase: CachePhase,
    pub figures: CacheFigures,
}

/// What a warm run shows beside its cold run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CacheFigures {
    /// Cached prompt tokens / prompt tokens of the warm run, 0..1; absent when the server
    /// reports no cached count.
    pub hit_ratio: Option<f64>,
    /// Cold TTFT / warm TTFT: above 1 when the cache made the warm run's first token sooner.
    pub ttft_speedup: Option<f64>,
}

/// What identifies the serving build: what the answer said, and the target's model-list entry
/// when one is known. Serialized as one string, `"{build}; models {models}"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub build: String,
    pub models: Option<String>,
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.build)?;
        match &self.models {
            Some(m) => write!(f, "; models {m}"),
            None => Ok(()),
        }
    }
}

impl From<&str> for Fingerprint {
    fn from(build: &str) -> Fingerprint {
        Fingerprint {
            build: build.to_string(),
            models: None,
        }
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    pub probe: String,
    pub target: String,
    pub model: String,
    /// The target's labels (`model_version`, `env` ...), so a record says what it measured.
    pub labels: BTreeMap<String, String>,
    pub request_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub started_at: jiff::Timestamp,
    /// Serialized with `success` (derived from it) beside it.
    #[serde(flatten, serialize_with = "outcome_and_success")]
    pub outcome: Outcome,
    pub failed_checks: Vec<Outcome>,
    pub http_status: Option<u16>,
    /// Why an `http_error` was refused (`rate_limited`, `overloaded`, `auth` ...); `null` for
    /// every other outcome.
    pub reason: Option<HttpReason>,
    /// A refused run's `Retry-After` and `x-ratelimit-*` headers, by name; `null` when it had
    /// none.
    pub rate_limit: Option<BTreeMap<String, String>>,
    #[serde(flatten, serialize_with = "figures")]
    pub figures: Figures,
    pub output_tokens: Option<u64>,
    pub tokens_source: Option<TokensSource>,
    /// The server's count of reasoning tokens, when it reports one.
    pub reasoning_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    pub output_chars: Option<usize>,
    pub repetition_score: Option<f64>,
    pub warmup: bool,
    pub error: Option<String>,
    pub server_timings: Option<serde_json::Value>,
    /// The server's own time to first token, from its timings (llama.cpp's `prompt_ms`, Ollama's
    /// load + prompt evaluation), when it sent them.
    pub server_ttft_ms: Option<f64>,
    /// The model name the server echoed.
    pub reported_model: Option<String>,
    /// What identifies the serving build.
    pub fingerprint: Option<Fingerprint>,
    /// The fingerprint differs from the one this target showed before (not on the first run).
    pub target_changed: bool,
    /// SHA-256 of the generated text (hex).
    pub output_sha256: Option<String>,
    /// A temperature-0 probe's output differs from its previous one on this target.
    pub output_changed: bool,
    /// The trace id of the W3C `traceparent` the request carried.
    pub trace_id: String,
    /// The run fell in a maintenance window of its target (configured or announced): it is
    /// measured and recorded as usual, and alerts hold.
    pub maintenance: bool,
    /// A confirmation run: the daemon re-ran the pair after a failed run, before its next
    /// scheduled one (`once`, `gate` and `/probe` never confirm).
    pub confirm: bool,
    /// Chunks that carried generated content, and response body bytes read.
    pub content_chunks: usize,
    pub response_bytes: usize,
    /// What the degeneration detectors measured (null when the check is off or did not run).
    pub repetition: Option<repetition::Report>,
    /// Reading stopped once the output certainly looped (`checks.stop_on_repetition`): the
    /// figures are those measured until then.
    pub stopped_early: bool,
    /// The server's count of prompt tokens, when it reports one.
    pub input_tokens: Option<u64>,
    /// The server's count of prompt tokens it served from its prefix cache, when it reports one.
    pub cached_tokens: Option<u64>,
    /// A cache check's run: `cold` (its prefix new to the server) or `warm` (the same request
    /// again); `null` for any other run.
    pub cache_phase: Option<CachePhase>,
    /// A warm run's cached prompt tokens / prompt tokens; `null` when the server reports no
    /// cached count.
    #[serde(serialize_with = "thousandths")]
    pub prefix_cache_hit_ratio: Option<f64>,
    /// A warm run's cold TTFT / warm TTFT.
    #[serde(serialize_with = "thousandths")]
    pub prefix_cache_ttft_speedup: Option<f64>,
    /// The context-ladder rung, by its size in tokens (`"2048"`); null without a ladder.
    #[serde(serialize_with = "rung")]
    pub rung: Option<u32>,
    /// A rung's prompt tokens as estimated from its characters (4 a token).
    pub prompt_tokens_estimate: Option<u64>,
    /// A rung's prefill speed beside the smallest rung of its firing, with
    /// `prefill_tokens_source`: whose token counts it divides.
    #[serde(flatten, serialize_with = "prefill")]
    pub prefill: Option<Prefill>,
    /// The answer's chrF (0 to 1) against the probe's `checks.reference`; null without one.
    #[serde(serialize_with = "thousandths")]
    pub similarity: Option<f64>,
    /// The generated text, for comparisons across runs; not part of the record.
    #[serde(skip)]
    pub answer: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The raw arrival instants, for benchmarks and the gate; not part of the record.
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

fn rfc3339<S: serde::Serializer>(t: &jiff::Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.round(jiff::Unit::Millisecond).unwrap_or(*t))
}

fn thousandths<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    v.map(|x| (x * 1000.0).round() / 1000.0).serialize(s)
}

fn outcome_and_success<S: serde::Serializer>(o: &Outcome, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("outcome", o)?;
    m.serialize_entry("success", &(*o == Outcome::Ok))?;
    m.end()
}

fn rung<S: serde::Serializer>(r: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(size) => s.collect_str(size),
        None => s.serialize_none(),
    }
}

fn prefill<S: serde::Serializer>(p: &Option<Prefill>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("prefill_tokens_per_second", &p.map(|p| p.tokens_per_second))?;
    m.serialize_entry("prefill_tokens_source", &p.map(|p| p.source))?;
    m.end()
}

fn figures<S: serde::Serializer>(f: &Figures, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let round = |v: Option<f64>| v.map(|x| (x * 1000.0).round() / 1000.0);
    let mut m = s.serialize_map(Some(9))?;
    m.serialize_entry("ttfb_ms", &round(f.ttfb_ms))?;
    m.serialize_entry("ttft_ms", &round(f.ttft_ms))?;
    m.serialize_entry("answer_ttft_ms", &round(f.answer_ttft_ms))?;
    m.serialize_entry("e2e_ms", &round(f.e2e_ms))?;
    m.serialize_entry("tpot_ms", &round(f.tpot_ms))?;
    m.serialize_entry("tokens_per_second", &round(f.tokens_per_second))?;
    m.serialize_entry("itl_p50_ms", &round(f.itl_p50_ms))?;
    m.serialize_entry("itl_p99_ms", &round(f.itl_p99_ms))?;
    m.serialize_entry("itl_max_ms", &round(f.itl_max_ms))?;
    m.end()
}

impl ProbeResult {
    /// The record of a run: what it measured, in its context.
    pub fn new(m: Measurement, ctx: RunContext) -> ProbeResult {
        ProbeResult {
            probe: m.probe,
            target: m.target,
            model: m.model,
            labels: m.labels,
            request_id: m.request_id,
            started_at: m.started_at,
            outcome: m.outcome,
            failed_checks: m.failed_checks,
            http_status: m.http_status,
            reason: m.reason,
            rate_limit: m.rate_limit,
            figures: m.figures,
            output_tokens: m.output_tokens,
            tokens_source: m.tokens_source,
            reasoning_tokens: m.reasoning_tokens,
            finish_reason: m.finish_reason,
            output_chars: m.output_chars,
            repetition_score: m.repetition_score,
            warmup: ctx.warmup,
            error: m.error,
            server_timings: m.server_timings,
            server_ttft_ms: m.server_ttft_ms,
            reported_model: m.reported_model,
            // A run that never reached the model names no build.
            fingerprint: m.build.map(|build| Fingerprint {
                build,
                models: ctx.models,
            }),
            target_changed: ctx.target_changed,
            output_sha256: m.output_sha256,
            output_changed: ctx.output_changed,
            trace_id: m.trace_id,
            maintenance: ctx.maintenance,
            confirm: ctx.confirm,
            content_chunks: m.content_chunks,
            response_bytes: m.response_bytes,
            repetition: m.repetition,
            stopped_early: m.stopped_early,
            input_tokens: m.input_tokens,
            cached_tokens: m.cached_tokens,
            cache_phase: ctx.cache_check.map(|c| c.phase),
            prefix_cache_hit_ratio: ctx.cache_check.and_then(|c| c.figures.hit_ratio),
            prefix_cache_ttft_speedup: ctx.cache_check.and_then(|c| c.figures.ttft_speedup),
            rung: m.rung.map(|r| r.size),
            prompt_tokens_estimate: m.rung.map(|r| r.prompt_tokens_estimate),
            prefill: ctx.prefill,
            similarity: m.similarity,
            answer: m.answer,
            output: m.output,
            timeline: m.timeline,
        }
    }

    /// The run passed every check (`outcome` is `ok`).
    pub fn success(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// A successful result with every figure absent, for tests to adjust.
    #[cfg(test)]
    pub fn example() -> ProbeResult {
        ProbeResult::new(Measurement::example(), RunContext::default())
    }

    /// One JSON line.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a result always serializes")
    }
}

#[cfg(test)]
impl Measurement {
    /// A successful run with every figure absent.
    pub fn example() -> Measurement {
        Measurement {
            probe: "p".into(),
            target: "t".into(),
            model: "m".into(),
            labels: BTreeMap::new(),
            request_id: "r".into(),
            started_at: jiff::Timestamp::UNIX_EPOCH,
            outcome: Outcome::Ok,
            failed_checks: vec![],
            http_status: Some(200),
            reason: None,
            rate_limit: None,
            figures: Figures::default(),
            output_tokens: None,
            tokens_source: None,
            reasoning_tokens: None,
            finish_reason: None,
            output_chars: None,
            repetition_score: None,
            error: None,
            server_timings: None,
            server_ttft_ms: None,
            reported_model: None,
            build: None,
            output_sha256: None,
            trace_id: String::new(),
            content_chunks: 0,
            response_bytes: 0,
            repetition: None,
            stopped_early: false,
            input_tokens: None,
            cached_tokens: None,
            rung: None,
            similarity: None,
            answer: None,
            output: None,
            timeline: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_the_fingerprint_serialize_as_the_record_has_them() {
        let mut m = Measurement::example();
        m.build = Some("b1".into());
        let ctx = RunContext {
            models: Some("m1".into()),
            confirm: true,
            ..RunContext::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&ProbeResult::new(m.clone(), ctx).to_json_line()).unwrap();
        assert_eq!((&v["outcome"], &v["success"]), (&"ok".into(), &true.into()));
        assert_eq!(v["fingerprint"], "b1; models m1");
        assert_eq!(v["confirm"], true);
        m.outcome = Outcome::Repetition;
        m.build = None;
        let line = ProbeResult::new(m, RunContext::default()).to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["success"], false);
        assert_eq!(v["fingerprint"], serde_json::Value::Null);
        assert_eq!(v["confirm"], false);
        // The record's keys and their order are part of what readers see.
        let keys = "probe target model labels request_id started_at outcome success failed_checks \
             http_status reason rate_limit ttfb_ms ttft_ms answer_ttft_ms e2e_ms tpot_ms tokens_per_second \
             itl_p50_ms itl_p99_ms itl_max_ms output_tokens tokens_source reasoning_tokens \
             finish_reason output_chars repetition_score warmup error server_timings \
             server_ttft_ms reported_model fingerprint target_changed output_sha256 \
             output_changed trace_id maintenance confirm content_chunks response_bytes repetition \
             stopped_early input_tokens cached_tokens cache_phase prefix_cache_hit_ratio \
             prefix_cache_ttft_speedup rung prompt_tokens_estimate prefill_tokens_per_second \
             prefill_tokens_source similarity";
        let at: Vec<Option<usize>> = keys
            .split_whitespace()
            .map(|k| line.find(&format!("\"{k}\":")))
            .collect();
        assert!(at.iter().all(Option::is_some), "{line}");
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        assert_eq!(
            line.matches("\":").count(),
            at.len(),
            "no other key: {line}"
        );
    }
}
