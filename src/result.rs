//! The result of one probe run: plain data, serialized as DESIGN's result record (one JSON
//! object per line for `once --format json`, the results log and the gate). Absent figures are
//! `null`; the generated text only when asked for; never the API key.

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
    /// Chunks that carried generated content, and response body bytes read.
    pub content_chunks: usize,
    pub response_bytes: usize,
    /// What the degeneration detectors measured (null when the check is off or did not run).
    pub repetition: Option<repetition::Report>,
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
    /// One JSON line.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a result always serializes")
    }
}
