//! One firing of a claimed pair, recorded everywhere: the metrics, OTLP, the status history,
//! the incidents, the confirmation row and the results log. [`Runs`] is what a firing needs:
//! the runner (and its concurrency limit), the shared state it lands in, and the OTLP exporter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::confirm;
use super::otlp_exporter::OtlpExporter;
use super::state::{PairKey, Shared};
use crate::config::{Probe, Target};
use crate::result::ProbeResult;
use crate::runner::Runner;

/// Why a pair runs: `/probe` asked, or its schedule, or a failed run to confirm (these two
/// keep the pair's row of failed runs).
pub(super) enum Occasion {
    OnDemand,
    Scheduled(Arc<Mutex<confirm::Row>>),
    Confirmation(Arc<Mutex<confirm::Row>>),
}

/// What starts runs and records them: shared by the scheduling loops and `/probe`.
pub(super) struct Runs {
    shared: Arc<Shared>,
    runner: Runner,
    otlp: Arc<OtlpExporter>,
}

impl Runs {
    pub(super) fn new(shared: Arc<Shared>, runner: Runner, otlp: Arc<OtlpExporter>) -> Runs {
        Runs {
            shared,
            runner,
            otlp,
        }
    }

    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// One firing of a claimed pair (a run, a cache check's two, or a ladder's runs), recorded
    /// everywhere; the claim ends when its lines are written. Returns when to confirm it, if it
    /// failed and the probe asks for that.
    pub(super) async fn fire(
        self: Arc<Self>,
        probe: Arc<Probe>,
        target: Arc<Target>,
        key: PairKey,
        occasion: Occasion,
    ) -> Option<Duration> {
        let shared = &self.shared;
        let gauge = shared.metrics().runs_in_flight.clone();
        gauge.inc();
        let confirming = matches!(occasion, Occasion::Confirmation(_));
        let results = self
            .runner
            .fire(&probe, &target, confirming, |at| {
                shared.in_maintenance(&target.name, at)
            })
            .await;
        gauge.dec();
        // A firing (a cache check's two runs, a ladder's rungs) fails when one of its runs does,
        // and started with its first.
        let success = results.iter().all(ProbeResult::success);
        let started_at = results
            .first()
            .map_or_else(jiff::Timestamp::now, |r| r.id.started_at);
        let note = match &occasion {
            Occasion::OnDemand => confirm::Note::default(),
            Occasion::Scheduled(row) | Occasion::Confirmation(row) => row
                .lock()
                .expect("row lock")
                .note(probe.confirm, success, started_at),
        };
        for r in &results {
            tracing::info!(probe = %r.id.probe, target = %r.id.target, rung = r.id.rung.map(|r| r.size), outcome = %r.judged.outcome, ttft_ms = r.measured.figures.ttft_ms.map(|ms| (ms * 10.0).round() / 10.0), request_id = %r.id.request_id, maintenance = r.context.maintenance, confirm = r.context.confirm, error = r.judged.error.as_deref(), "probe run finished");
        }
        if shared.record(&key, &results, &target) {
            for r in &results {
                self.otlp.record(r, &target);
            }
            if let Some(since) = note.confirmed {
                tracing::warn!(probe = %probe.name, target = %target.name, since = %since, failed_runs = probe.confirm.runs + 1, "failure confirmed: every run since failed");
                shared
                    .metrics()
                    .confirmed_failure(&probe.name, &target, since);
            }
        }
        // The run counts as finished once its lines are written.
        shared.log(results).await;
        shared.release(&key);
        note.confirm_after
    }
}
