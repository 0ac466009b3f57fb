//! One firing of a claimed pair, recorded everywhere: the metrics, OTLP, the status history,
//! the incidents, the confirmation row and the results log.

use super::*;

/// Why a pair runs: `/probe` asked, or its schedule, or a failed run to confirm (these two
/// keep the pair's row of failed runs).
pub(super) enum Occasion {
    OnDemand,
    Scheduled(Arc<Mutex<confirm::Row>>),
    Confirmation(Arc<Mutex<confirm::Row>>),
}

/// One firing of a claimed pair (a run, a cache check's two, or a ladder's runs), recorded
/// everywhere; the claim ends when its lines are written. Returns when to confirm it, if it
/// failed and the probe asks for that.
pub(super) async fn fire(
    agent: Arc<Agent>,
    probe: Arc<Probe>,
    target: Arc<Target>,
    key: PairKey,
    occasion: Occasion,
) -> Option<Duration> {
    let gauge = agent.metrics().runs_in_flight.clone();
    gauge.inc();
    let confirming = matches!(occasion, Occasion::Confirmation(_));
    let results = agent
        .runner
        .fire(&probe, &target, confirming, |at| {
            maintenance::active(&agent.cfg(), &agent.announced, &target.name, at).is_some()
        })
        .await;
    gauge.dec();
    // A firing (a cache check's two runs, a ladder's rungs) fails when one of its runs does,
    // and started with its first.
    let success = results.iter().all(ProbeResult::success);
    let started_at = results
        .first()
        .map_or_else(jiff::Timestamp::now, |r| r.started_at);
    let note = match &occasion {
        Occasion::OnDemand => confirm::Note::default(),
        Occasion::Scheduled(row) | Occasion::Confirmation(row) => row
            .lock()
            .expect("row lock")
            .note(probe.confirm, success, started_at),
    };
    for r in &results {
        tracing::info!(probe = %r.probe, target = %r.target, rung = r.rung, outcome = %r.outcome, ttft_ms = r.figures.ttft_ms.map(|ms| (ms * 10.0).round() / 10.0), request_id = %r.request_id, maintenance = r.maintenance, confirm = r.confirm, error = r.error.as_deref(), "probe run finished");
    }
    // A pair that left the config while it ran is not recorded: its series were retired.
    if agent.is_scheduled(&key) {
        let metrics = agent.metrics();
        for r in &results {
            metrics.record(r, &target);
            agent.otlp.record(&agent, r, &target);
            let run = Run::from(r);
            agent.history.record(&run);
            agent.incidents.lock().expect("incidents lock").record(&run);
        }
        if let Some(since) = note.confirmed {
            tracing::warn!(probe = %probe.name, target = %target.name, since = %since, failed_runs = probe.confirm.runs + 1, "failure confirmed: every run since failed");
            metrics.confirmed_failure(&probe.name, &target, since);
        }
    }
    // Disk writes leave the (single) runtime thread, so a slow disk never delays a probe's
    // timestamps; the run counts as finished once its lines are written.
    let writer = agent.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(log) = writer
            .results_log
            .lock()
            .expect("results log lock")
            .as_mut()
        {
            for r in &results {
                if let Err(e) = log.append(r) {
                    tracing::error!(error = %e, "cannot append to the results log");
                }
            }
        }
    })
    .await;
    agent.in_flight.lock().expect("in-flight lock").remove(&key);
    agent.idle.notify_waiters();
    agent.push_wake.notify_one();
    note.confirm_after
}
