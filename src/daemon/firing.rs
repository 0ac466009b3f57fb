//! One firing of a claimed pair, recorded everywhere: the metrics, OTLP, the status history,
//! the incidents, the confirmation row and the results log. [`Runs`] is what a firing needs:
//! the runner (and its concurrency limit), the shared state it lands in, and the OTLP exporter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::changes::{Change, Health};
use super::confirm;
use super::otlp_exporter::OtlpExporter;
use super::state::{Claim, Shared};
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
    /// Which pairs are down, for the log's one line per change.
    health: Health,
}

impl Runs {
    pub(super) fn new(shared: Arc<Shared>, runner: Runner, otlp: Arc<OtlpExporter>) -> Runs {
        Runs {
            shared,
            runner,
            otlp,
            health: Health::default(),
        }
    }

    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// One firing of a claimed pair (a run, a cache check's two, or a ladder's runs), recorded
    /// everywhere; the claim ends when its lines are written. Returns when to confirm it, if it
    /// failed and the probe asks for that.
    ///
    /// Cancelling the returned future mid-run releases the claim and the in-flight count with
    /// it: both are values that let go when dropped.
    pub(super) async fn fire(
        self: Arc<Self>,
        probe: Arc<Probe>,
        target: Arc<Target>,
        claim: Claim,
        occasion: Occasion,
    ) -> Option<Duration> {
        let shared = &self.shared;
        let in_flight = shared.metrics().run_started();
        let confirming = matches!(occasion, Occasion::Confirmation(_));
        let results = self
            .runner
            .fire(&probe, &target, confirming, |at| {
                shared.in_maintenance(&target.name, at)
            })
            .await;
        drop(in_flight);
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
            tracing::debug!(probe = %r.id.probe, target = %r.id.target, rung = r.id.rung.map(|r| r.size), outcome = %r.judged.outcome, ttft_ms = r.measured.figures.ttft_ms.map(|ms| (ms * 10.0).round() / 10.0), request_id = %r.id.request_id, maintenance = r.context.maintenance, confirm = r.context.confirm, error = r.judged.error.as_deref(), "probe run finished");
        }
        if shared.record(claim.key(), &results, &target) {
            for r in &results {
                self.otlp.record(r, &target);
            }
            log_change(
                self.health.note(claim.key(), success),
                &results,
                claim.key(),
            );
            if let Some(since) = note.confirmed {
                tracing::warn!(probe = %probe.name, target = %target.name, since = %since, failed_runs = probe.confirm.runs + 1, "failure confirmed: every run since failed");
                shared
                    .metrics()
                    .confirmed_failure(&probe.name, &target, since);
            }
        }
        // The run counts as finished once its lines are written.
        shared.log(results).await;
        drop(claim);
        note.confirm_after
    }
}

/// The line for a pair that went down (with the first failed run's sentence) or came back.
fn log_change(change: Option<Change>, results: &[ProbeResult], (probe, target): &(String, String)) {
    match change {
        None => {}
        Some(Change::Down) => {
            let failed = results.iter().find(|r| !r.success());
            let outcome = failed
                .map(|r| r.judged.outcome.as_str())
                .unwrap_or_default();
            let error = failed
                .and_then(|r| r.judged.error.as_deref())
                .unwrap_or(outcome);
            tracing::warn!(%probe, %target, %outcome, "pair down: {error}");
        }
        Some(Change::Back { failed }) => {
            tracing::info!(%probe, %target, failed_runs = failed, "pair back: it answers well again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancelled_firing_releases_its_claim_and_its_in_flight_count() {
        // A server that takes the request and never answers: the run waits for its headers.
        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let addr = server.local_addr().unwrap().to_string();
        let cfg = super::super::state::test_config(dir.path(), &[("t", &addr)]);
        let pairs = cfg.pairs(&crate::config::Selection::SCHEDULED).unwrap();
        let shared = Arc::new(Shared::new(cfg.clone(), &pairs));
        let otlp = OtlpExporter::new(shared.running(), shared.sink_clients().otlp.clone());
        let runs = Arc::new(Runs::new(shared.clone(), Runner::new(1), otlp));
        let (probe, target) = pairs[0].clone();
        let key = (probe.name.clone(), target.name.clone());

        let claim = shared.claim(&key).expect("the pair is free");
        assert!(shared.claim(&key).is_none(), "one claim per pair");
        let firing = tokio::spawn(runs.clone().fire(probe, target, claim, Occasion::OnDemand));
        // The run is mid-flight once the server has its connection.
        let (_conn, _) = server.accept().await.unwrap();
        assert_eq!(shared.metrics().runs_in_flight(), 1);
        assert_eq!(shared.in_flight_pairs(), vec![key.clone()]);

        firing.abort();
        assert!(firing.await.unwrap_err().is_cancelled());
        assert_eq!(
            shared.metrics().runs_in_flight(),
            0,
            "the gauge is back at zero"
        );
        assert_eq!(shared.in_flight(), 0, "the claim is released");
        assert!(shared.claim(&key).is_some(), "the pair can run again");
    }
}
