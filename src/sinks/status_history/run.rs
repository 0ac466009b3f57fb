//! One run as the history keeps it, from a result or a line of the results log, and the
//! figures of it that count; the leaf the history's other parts build on.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::result::CachePhase;
use crate::result::ProbeResult;
use crate::util::clip;

/// Daily rollups kept, today included.
pub(crate) const DAYS: usize = 90;
pub(crate) const DAY_SECONDS: i64 = 86_400;
/// Today's TTFT and decode-speed samples: exact up to a run every 5 minutes.
pub(super) const DAY_SAMPLES: usize = 288;

/// What the history needs of one run, from a result or from a line of the results log.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Run {
    pub probe: String,
    pub target: String,
    pub started_at: Timestamp,
    pub outcome: String,
    pub success: bool,
    #[serde(default)]
    pub maintenance: bool,
    #[serde(default)]
    pub warmup: bool,
    /// A cache check's run: the warm one is served from the cache on purpose.
    #[serde(default)]
    pub cache_phase: Option<CachePhase>,
    pub ttft_ms: Option<f64>,
    pub tokens_per_second: Option<f64>,
    #[serde(default)]
    pub http_status: Option<u16>,
    #[serde(default)]
    pub request_id: String,
    #[serde(default)]
    pub trace_id: String,
    #[serde(default)]
    pub error: Option<String>,
    /// Every check that failed, in precedence order.
    #[serde(default)]
    pub failed_checks: Vec<String>,
    /// What the degeneration detectors found (the record's `repetition`): its `detector`.
    #[serde(default)]
    pub repetition: Option<Detected>,
}

/// The part of the record's `repetition` the history keeps: the detector that decided.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Detected {
    #[serde(default)]
    pub detector: Option<String>,
}

impl From<&ProbeResult> for Run {
    fn from(r: &ProbeResult) -> Run {
        Run {
            probe: r.id.probe.clone(),
            target: r.id.target.clone(),
            // As the record has it, so the page says the same before and after a restart.
            started_at: r
                .id
                .started_at
                .round(jiff::Unit::Millisecond)
                .unwrap_or(r.id.started_at),
            outcome: r.judged.outcome.as_str().to_string(),
            success: r.success(),
            maintenance: r.context.maintenance,
            warmup: r.context.warmup,
            cache_phase: r.context.cache_phase(),
            ttft_ms: r.measured.figures.ttft_ms,
            tokens_per_second: r.measured.figures.tokens_per_second,
            http_status: r.measured.reading.http_status,
            request_id: r.id.request_id.clone(),
            trace_id: r.id.trace_id.clone(),
            error: r.judged.error.clone(),
            failed_checks: r
                .judged
                .failed_checks
                .iter()
                .map(|o| o.as_str().to_string())
                .collect(),
            repetition: r.judged.repetition.as_ref().map(|rep| Detected {
                detector: rep.decided().map(|f| f.detector().as_str().to_string()),
            }),
        }
    }
}

/// TTFT counts unless the run was a warm-up or a cache check's warm run; decode speed when
/// finite.
pub(super) fn figures_of(run: &Run) -> (Option<f64>, Option<f64>) {
    (
        run.ttft_ms
            .filter(|_| !run.warmup && run.cache_phase != Some(CachePhase::Warm)),
        run.tokens_per_second.filter(|v| v.is_finite()),
    )
}

/// A failed run's sentence: its error, clipped; or, for a record written before content
/// failures carried one, the outcome and the detector that fired.
pub(crate) fn sentence(run: &Run) -> String {
    let detector = run.repetition.as_ref().and_then(|r| r.detector.as_deref());
    match (&run.error, detector) {
        (Some(e), _) => clip(e),
        (None, Some(d)) => format!("{}, detector {d}", run.outcome),
        (None, None) => format!("{} failed", run.outcome),
    }
}

/// A failed run, as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub started_at: Timestamp,
    pub outcome: String,
    pub http_status: Option<u16>,
    pub request_id: String,
    pub trace_id: String,
    /// The run's sentence: the transport error, or why its content failed.
    pub error: String,
    /// Every check that failed (the transport outcome alone for a transport failure).
    pub failed_checks: Vec<String>,
    /// The degeneration detector that decided, for `repetition`.
    pub detector: Option<String>,
    pub maintenance: bool,
}

impl Failure {
    pub(crate) fn of(run: &Run) -> Failure {
        let detector = run.repetition.as_ref().and_then(|r| r.detector.clone());
        let error = sentence(run);
        Failure {
            started_at: run.started_at,
            outcome: run.outcome.clone(),
            http_status: run.http_status,
            request_id: clip(&run.request_id),
            trace_id: clip(&run.trace_id),
            error,
            failed_checks: run.failed_checks.clone(),
            detector,
            maintenance: run.maintenance,
        }
    }
}
