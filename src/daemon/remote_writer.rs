//! The remote-write loops: every `remote_write.interval` the registry is sampled into the
//! queue (like a scrape: one timestamp for every series, whatever number of runs happened), and
//! a sender drains the queue oldest first, retrying with backoff while the receiver is away.
//! Sampling never waits for the sender, so an outage costs queue space, not schedule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Agent;
use crate::config::RemoteWriteSettings;
use crate::sinks::metrics::{now_seconds, DROPPED_QUEUE_FULL, DROPPED_REJECTED};
use crate::sinks::push;
use crate::sinks::remote_write::{self, Queue, Sampler, SendError};

/// Metrics (a histogram is ~23 series) sampled between two chances for other tasks to run.
const METRICS_PER_STEP: usize = 100;
/// How often an agent without `remote_write:` looks again (a reload may add it).
const UNCONFIGURED_RECHECK: Duration = Duration::from_secs(15);

/// The queue the two loops share.
pub struct RemoteWriter {
    queue: Mutex<Queue>,
    wake: Notify,
    /// Whether the queue was found too small for the registry (said once).
    warned_small: AtomicBool,
}

impl RemoteWriter {
    pub fn new() -> Arc<RemoteWriter> {
        Arc::new(RemoteWriter {
            queue: Mutex::new(Queue::new(0)),
            wake: Notify::new(),
            warned_small: AtomicBool::new(false),
        })
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().expect("remote-write queue lock")
    }

    /// Samples the registry into the queue now, giving way to other tasks every
    /// [`METRICS_PER_STEP`] metrics (the daemon's one thread also stamps probe runs in
    /// flight) and locking the queue one batch at a time, so the sender drains it meanwhile.
    async fn sample(&self, agent: &Agent, settings: &RemoteWriteSettings) {
        let metrics = agent.metrics();
        let mut extra = metrics.static_labels().to_vec();
        extra.push(("job".into(), settings.job.clone()));
        extra.push(("instance".into(), agent.cfg().agent.name.clone()));
        let timestamp_ms = jiff::Timestamp::now().as_millisecond();
        let mut dropped = self.queue().set_max(settings.max_samples);
        let mut total = 0;
        let mut sampler = Sampler::new(
            &extra,
            timestamp_ms,
            settings.max_samples_per_send,
            |body, n| {
                total += n;
                dropped += self.queue().push(body, n);
                self.wake.notify_one();
            },
        );
        for c in metrics.collectors() {
            for mut mf in c.collect() {
                let mut rest = mf.take_metric();
                while !rest.is_empty() {
                    let mut part = mf.clone();
                    part.set_metric(rest.drain(..rest.len().min(METRICS_PER_STEP)).collect());
                    sampler.family(&part);
                    tokio::task::yield_now().await;
                }
            }
        }
        sampler.finish();
        let rw = &metrics.remote_write;
        if dropped > 0 {
            rw.samples_dropped
                .with_label_values(&[DROPPED_QUEUE_FULL])
                .inc_by(dropped as u64);
            tracing::warn!(
                dropped,
                samples = total,
                max_samples = settings.max_samples,
                "remote-write queue full: the oldest samples were dropped"
            );
        }
        if total > settings.max_samples / 2 && !self.warned_small.swap(true, Ordering::Relaxed) {
            tracing::warn!(samples = total, max_samples = settings.max_samples, "remote_write.queue.max_samples holds fewer than two samplings of the registry: the shortest outage loses data; raise it");
        }
        rw.queue_samples.set(self.queue().samples() as i64);
    }

    /// Sends the oldest batch once. `None`: nothing to send.
    async fn send_one(
        &self,
        agent: &Agent,
        client: &reqwest::Client,
        settings: &RemoteWriteSettings,
    ) -> Option<Result<(), SendError>> {
        let batch = self.queue().front()?;
        let result = remote_write::send(client, settings, batch.body).await;
        let metrics = agent.metrics();
        let rw = &metrics.remote_write;
        match &result {
            Ok(()) => {
                // Counted as sent even if an outage dropped it from the queue meanwhile: it
                // arrived (and was also counted as dropped, the one case counted twice).
                self.queue().remove(batch.seq);
                rw.samples_sent.inc_by(batch.samples as u64);
                rw.last_success.set(now_seconds());
            }
            Err(e @ SendError::Rejected { .. }) => {
                rw.failures.inc();
                let n = self.queue().remove(batch.seq);
                rw.samples_dropped
                    .with_label_values(&[DROPPED_REJECTED])
                    .inc_by(n as u64);
                tracing::error!(error = %e, samples = n, "remote-write receiver refused a batch; dropped");
            }
            Err(SendError::Retry { .. }) => rw.failures.inc(),
        }
        rw.queue_samples.set(self.queue().samples() as i64);
        Some(result)
    }
}

/// Samples on the configured interval until `stop`.
pub async fn sample_loop(agent: Arc<Agent>, rw: Arc<RemoteWriter>, mut stop: super::Stop) {
    let mut next = Instant::now();
    loop {
        let settings = agent.cfg().remote_write.clone();
        let wait = match &settings {
            Some(s) => {
                rw.sample(&agent, s).await;
                // The next tick keeps the grid; a tick missed by a slow sample is skipped.
                next += s.interval;
                let now = Instant::now();
                while next <= now {
                    next += s.interval;
                }
                next
            }
            None => {
                let dropped = rw.queue().clear();
                if dropped > 0 {
                    tracing::info!(
                        dropped,
                        "remote_write removed from the config: queue emptied"
                    );
                }
                Instant::now() + UNCONFIGURED_RECHECK
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wait.into()) => {}
            _ = stop.stopped() => return,
        }
    }
}

/// Drains the queue until `stop`, backing off while the receiver fails.
pub async fn send_loop(agent: Arc<Agent>, rw: Arc<RemoteWriter>, mut stop: super::Stop) {
    let mut failures = 0u32;
    loop {
        let wake = rw.wake.notified();
        let settings = agent.cfg().remote_write.clone();
        let sent = match &settings {
            Some(s) => {
                tokio::select! {
                    r = rw.send_one(&agent, agent.sink_client(), s) => r,
                    _ = stop.stopped() => return,
                }
            }
            None => None,
        };
        let pause = match (sent, &settings) {
            (None, _) | (_, None) => {
                tokio::select! {
                    _ = wake => continue,
                    _ = stop.stopped() => return,
                }
            }
            (Some(Err(e @ SendError::Retry { .. })), Some(s)) => {
                failures = failures.saturating_add(1);
                let pause = push::backoff(failures - 1, s.max_backoff);
                tracing::warn!(error = %e, failures, retry_in = ?pause, queued = rw.queue().samples(), "remote write failed; samples stay queued");
                pause
            }
            (Some(_), Some(_)) => {
                if failures > 0 {
                    tracing::info!(failures, "remote write recovered");
                }
                failures = 0;
                continue;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.stopped() => return,
        }
    }
}

/// At shutdown: one last sample, then send what the queue holds until it is empty, the
/// receiver fails, or `remote_write.timeout` has passed.
pub async fn final_flush(agent: &Agent, rw: &RemoteWriter) {
    let Some(settings) = agent.cfg().remote_write.clone() else {
        return;
    };
    rw.sample(agent, &settings).await;
    let client = agent.sink_client();
    let deadline = tokio::time::Instant::now() + settings.timeout;
    loop {
        let step = tokio::time::timeout_at(deadline, rw.send_one(agent, client, &settings));
        match step.await {
            Ok(Some(Ok(()))) | Ok(Some(Err(SendError::Rejected { .. }))) => continue,
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, left = rw.queue().samples(), "remote write failed at shutdown; queued samples are lost");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    left = rw.queue().samples(),
                    "remote write did not finish within remote_write.timeout at shutdown"
                );
                return;
            }
        }
    }
}
