//! The push loop: after completed runs, at most one PUT per `push.min_interval`; on failure,
//! retries with exponential backoff and jitter while probes keep running. Metrics are
//! cumulative, so the first push after an outage carries every run made during it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Agent;
use crate::sinks::metrics::now_seconds;
use crate::sinks::push;

const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What one push attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pushed {
    /// No `push:` in the config (it may have been reloaded away).
    NotConfigured,
    Ok,
    Failed,
}

async fn push_now(agent: &Agent, client: &reqwest::Client) -> Pushed {
    let cfg = agent.cfg();
    let Some(settings) = cfg.push.as_ref() else {
        return Pushed::NotConfigured;
    };
    let metrics = agent.metrics();
    let body = metrics.encode_yielding().await;
    let result = push::put(client, settings, &cfg.agent.name, body).await;
    let mut status = agent.push_status.lock().expect("push status lock");
    match result {
        Ok(()) => {
            metrics.last_push_success.set(now_seconds());
            status.last_success = Some(jiff::Timestamp::now().to_string());
            status.last_error = None;
            status.consecutive_failures = 0;
            tracing::debug!("pushed");
            Pushed::Ok
        }
        Err(e) => {
            metrics.push_failures.inc();
            metrics.last_push_failure.set(now_seconds());
            status.last_error = Some(e.to_string());
            status.consecutive_failures += 1;
            tracing::warn!(error = %e, failures = status.consecutive_failures, "push failed; will retry");
            Pushed::Failed
        }
    }
}

pub async fn run(agent: Arc<Agent>, mut stop: super::Stop) {
    let mut last: Option<Instant> = None;
    let mut failures = 0u32;
    loop {
        let wake = async {
            if failures == 0 {
                agent.push_wake.notified().await;
            } else {
                tokio::time::sleep(push::backoff(failures - 1, MAX_BACKOFF)).await;
            }
        };
        tokio::select! {
            _ = wake => {}
            _ = stop.stopped() => return,
        }
        let Some(min_interval) = agent.cfg().push.as_ref().map(|p| p.min_interval) else {
            continue;
        };
        // Coalesce: runs that finish meanwhile ride along with this push.
        if let Some(t) = last {
            tokio::select! {
                _ = tokio::time::sleep_until((t + min_interval).into()) => {}
                _ = stop.stopped() => return,
            }
        }
        last = Some(Instant::now());
        match push_now(&agent, agent.sink_client()).await {
            Pushed::Ok => failures = 0,
            Pushed::Failed => failures = failures.saturating_add(1),
            Pushed::NotConfigured => {}
        }
    }
}

/// At shutdown: one last push, then the group's deletion if configured.
pub async fn final_push(agent: &Agent) {
    let cfg = agent.cfg();
    let Some(settings) = cfg.push.as_ref() else {
        return;
    };
    let client = agent.sink_client();
    push_now(agent, client).await;
    if settings.delete_on_shutdown {
        match push::delete(client, settings, &cfg.agent.name).await {
            Ok(()) => tracing::info!("deleted this agent's group from the Pushgateway"),
            Err(e) => tracing::warn!(error = %e, "could not delete this agent's group"),
        }
    }
}
