//! The push loop: after completed runs, at most one PUT per `push.min_interval`; on failure,
//! retries with exponential backoff and jitter while probes keep running. Metrics are
//! cumulative, so the first push after an outage carries every run made during it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::phase::Stop;
use super::state::{PushLine, Running, SinkClient};
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

/// What the pusher uses: the running config (its `push:` settings) and registry, its line
/// (wake-up and status), and the sinks' client.
#[derive(Clone)]
pub(super) struct Pusher {
    running: Running,
    line: Arc<PushLine>,
    client: SinkClient,
}

impl Pusher {
    pub(super) fn new(running: Running, line: Arc<PushLine>, client: SinkClient) -> Pusher {
        Pusher {
            running,
            line,
            client,
        }
    }

    async fn push_now(&self) -> Pushed {
        let cfg = self.running.cfg();
        let Some(settings) = cfg.push.as_ref() else {
            return Pushed::NotConfigured;
        };
        let metrics = self.running.metrics();
        let body = metrics.encode_yielding().await;
        match push::put(&self.client, settings, &cfg.agent.name, body).await {
            Ok(()) => {
                metrics.last_push_success.set(now_seconds());
                self.line.succeeded(jiff::Timestamp::now());
                tracing::debug!("pushed");
                Pushed::Ok
            }
            Err(e) => {
                metrics.push_failures.inc();
                metrics.last_push_failure.set(now_seconds());
                let failures = self.line.failed(e.to_string());
                tracing::warn!(error = %e, failures, "push failed; will retry");
                Pushed::Failed
            }
        }
    }

    /// Pushes when woken, until `stop`.
    pub(super) async fn run(self, mut stop: Stop) {
        let mut last: Option<Instant> = None;
        let mut failures = 0u32;
        loop {
            let wake = async {
                if failures == 0 {
                    self.line.woken().await;
                } else {
                    tokio::time::sleep(push::backoff(failures - 1, MAX_BACKOFF)).await;
                }
            };
            tokio::select! {
                _ = wake => {}
                _ = stop.stopped() => return,
            }
            let Some(min_interval) = self.running.cfg().push.as_ref().map(|p| p.min_interval)
            else {
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
            match self.push_now().await {
                Pushed::Ok => failures = 0,
                Pushed::Failed => failures = failures.saturating_add(1),
                Pushed::NotConfigured => {}
            }
        }
    }

    /// At shutdown: one last push, then the group's deletion if configured.
    pub(super) async fn final_push(&self) {
        let cfg = self.running.cfg();
        let Some(settings) = cfg.push.as_ref() else {
            return;
        };
        self.push_now().await;
        if settings.delete_on_shutdown {
            match push::delete(&self.client, settings, &cfg.agent.name).await {
                Ok(()) => tracing::info!("deleted this agent's group from the Pushgateway"),
                Err(e) => tracing::warn!(error = %e, "could not delete this agent's group"),
            }
        }
    }
}
