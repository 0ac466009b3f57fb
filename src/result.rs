//! The result of one probe run: plain data, serialized as DESIGN's result record (one JSON
//! object per line for `once --format json`, the results log and the gate). Absent figures are
//! `null`; the generated text only when asked for; never the API key.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checks::repetition;
use crate::outcome::Outcome;
pub use crate::timeline::TokensSource;
use crate::timeline::{Figures, Timeline};

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
    pub outcome: Outcome,
    pub success: bool,
    pub failed_checks: Vec<Outcome>,
    pub http_status: Option<u16>,
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
    /// What identifies the serving build: `system_fingerprint`, else the echoed model name.
    pub fingerprint: Option<String>,
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
    /// Chunks that carried generated content, and response body bytes read.
    pub content_chunks: usize,
    pub response_bytes: usize,
    /// What the degeneration detectors measured (null when the check is off or did not run).
    pub repetition: Option<repetition::Report>,
    /// Reading stopped once the output certainly looped (`checks.stop_on_repetition`): the
    /// figures are those measured until then.
    pub stopped_early: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The raw arrival instants, for benchmarks and the gate; not part of the record.
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

fn rfc3339<S: serde::Serializer>(t: &jiff::Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.round(jiff::Unit::Millisecond).unwrap_or(*t))
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
    /// A successful result with every figure absent, for tests to adjust.
    #[cfg(test)]
    pub fn example() -> ProbeResult {
        ProbeResult {
            probe: "p".into(),
            target: "t".into(),
            model: "m".into(),
            labels: BTreeMap::new(),
            request_id: "r".into(),
            started_at: jiff::Timestamp::UNIX_EPOCH,
            outcome: Outcome::Ok,
            success: true,
            failed_checks: vec![],
            http_status: Some(200),
            figures: Figures::default(),
            output_tokens: None,
            tokens_source: None,
            reasoning_tokens: None,
            server_ttft_ms: None,
            reported_model: None,
            fingerprint: None,
            target_changed: false,
            output_sha256: None,
            output_changed: false,
            trace_id: String::new(),
            maintenance: false,
            finish_reason: None,
            output_chars: None,
            repetition_score: None,
            warmup: false,
            error: None,
            server_timings: None,
            content_chunks: 0,
            response_bytes: 0,
            repetition: None,
            stopped_early: false,
            output: None,
            timeline: None,
        }
    }

    /// One JSON line.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a result always serializes")
    }
}
