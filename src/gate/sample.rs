//! One gate sample (what the figures need of one run, kept in the gate's JSON so a previous
//! gate can serve as `--baseline FILE`) and a figure's values over a set of them.

use serde::{Deserialize, Serialize};

use crate::config::gate::{Figure, Metric};
use crate::result::ProbeResult;
use crate::timeline::{ms, nearest_rank};

/// One gate sample: what the figures need of one run (kept in the gate's JSON, so a previous
/// gate can serve as `--baseline FILE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub request_id: String,
    pub outcome: String,
    pub success: bool,
    pub ttft_ms: Option<f64>,
    /// Absent from gate files written before it existed.
    #[serde(default)]
    pub answer_ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub tokens_per_second: Option<f64>,
    #[serde(default)]
    pub itl_gaps_ms: Vec<f64>,
    pub error: Option<String>,
    /// Every check the run failed (absent from gate files written before it existed).
    #[serde(default)]
    pub failed_checks: Vec<String>,
    /// The answer, for `answer_similarity` (candidate and baseline paired); never written to
    /// the gate's JSON, so a baseline file has none.
    #[serde(skip)]
    pub answer: Option<std::sync::Arc<str>>,
}

impl Sample {
    /// What went wrong in this run, in one sentence: its error, else the checks it failed.
    pub fn sentence(&self) -> String {
        match &self.error {
            // A content failure's sentence names its outcome first ("repetition, detector …").
            Some(e) if e.starts_with(self.outcome.as_str()) => e.clone(),
            Some(e) if !e.is_empty() => format!("{}: {e}", self.outcome),
            _ if !self.failed_checks.is_empty() => {
                format!(
                    "{}: failed checks {}",
                    self.outcome,
                    self.failed_checks.join(", ")
                )
            }
            _ => self.outcome.clone(),
        }
    }
}

impl From<&ProbeResult> for Sample {
    fn from(r: &ProbeResult) -> Sample {
        Sample {
            request_id: r.id.request_id.clone(),
            outcome: r.judged.outcome.as_str().to_string(),
            success: r.success(),
            ttft_ms: r.measured.figures.ttft_ms,
            answer_ttft_ms: r.measured.figures.answer_ttft_ms,
            e2e_ms: if r.judged.outcome.is_transport() {
                None
            } else {
                r.measured.figures.e2e_ms
            },
            tpot_ms: r.measured.figures.tpot_ms,
            tokens_per_second: r.measured.figures.tokens_per_second,
            itl_gaps_ms: r
                .measured
                .reading
                .timeline
                .gaps()
                .into_iter()
                .map(ms)
                .collect(),
            error: r.judged.error.clone(),
            failed_checks: r
                .judged
                .failed_checks
                .iter()
                .map(|o| o.as_str().to_string())
                .collect(),
            answer: r.measured.answer.clone(),
        }
    }
}

/// The figure over `samples`, in base units (seconds for latencies); `None` when nothing was
/// measured.
pub fn value(figure: Figure, samples: &[&Sample]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    match figure {
        Figure::SuccessRate => {
            Some(samples.iter().filter(|s| s.success).count() as f64 / samples.len() as f64)
        }
        Figure::OutcomeCount(o) => {
            Some(samples.iter().filter(|s| s.outcome == o.as_str()).count() as f64)
        }
        Figure::Quantile(metric, q) => {
            let v = values(metric, samples);
            (!v.is_empty()).then(|| nearest_rank(&v, f64::from(q) / 100.0))
        }
        // A figure of pairs, not of one side's samples (see `similarities`).
        Figure::AnswerSimilarity(_) => None,
    }
}

/// Pair by pair (candidate and baseline sample i), the chrF of the candidate's answer against
/// the baseline's, with the candidate's sample: a candidate run that gave no answer is 0; a
/// pair whose baseline run gave none says nothing and is left out.
pub fn similarities<'a>(cand: &[&'a Sample], base: &[&Sample]) -> Vec<(f64, &'a Sample)> {
    cand.iter()
        .zip(base)
        .filter_map(|(c, b)| {
            let reference = b.answer.as_deref()?;
            let s = c
                .answer
                .as_deref()
                .map_or(0.0, |a| crate::checks::similarity::chrf(a, reference));
            Some((s, *c))
        })
        .collect()
}

/// One run's figure for `metric`, in base units: its latency in seconds, its decode speed, or
/// for inter-token latency its longest gap.
pub fn run_value(metric: Metric, s: &Sample) -> Option<f64> {
    let ms = match metric {
        Metric::Ttft => s.ttft_ms,
        Metric::AnswerTtft => s.answer_ttft_ms,
        Metric::E2e => s.e2e_ms,
        Metric::Tpot => s.tpot_ms,
        Metric::Itl => s.itl_gaps_ms.iter().copied().max_by(f64::total_cmp),
        Metric::TokensPerSecond => return s.tokens_per_second,
    };
    ms.map(|x| x / 1000.0)
}

/// A metric's measured values over `samples`, in base units (seconds for latencies), sorted.
/// Inter-token gaps are pooled over the runs.
pub fn values(metric: Metric, samples: &[&Sample]) -> Vec<f64> {
    let latency_ms: fn(&Sample) -> Option<f64> = match metric {
        Metric::Ttft => |s| s.ttft_ms,
        Metric::AnswerTtft => |s| s.answer_ttft_ms,
        Metric::E2e => |s| s.e2e_ms,
        Metric::Tpot => |s| s.tpot_ms,
        Metric::Itl | Metric::TokensPerSecond => |_| None,
    };
    let mut v: Vec<f64> = match metric {
        Metric::Itl => samples
            .iter()
            .flat_map(|s| s.itl_gaps_ms.iter())
            .map(|x| x / 1000.0)
            .collect(),
        Metric::TokensPerSecond => samples.iter().filter_map(|s| s.tokens_per_second).collect(),
        _ => samples
            .iter()
            .filter_map(|s| latency_ms(s))
            .map(|x| x / 1000.0)
            .collect(),
    };
    v.sort_by(f64::total_cmp);
    v
}
