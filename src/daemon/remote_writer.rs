//! The remote-write sampler: every `remote_write.interval` the registry is sampled into the
//! outbox (like a scrape: one timestamp for every series, whatever number of runs happened);
//! the outbox's sender drains it, retrying with backoff while the receiver is away.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::outbox::{self, Outbox, Tally};
use super::phase::Stop;
use super::state::{Running, SinkClient};
use crate::config::RemoteWriteSettings;
use crate::sinks::metrics::{DROPPED_QUEUE_FULL, DROPPED_REJECTED};
use crate::sinks::outbound::Route;
use crate::sinks::remote_write::{self, Sampler};

/// Metrics (a histogram is ~23 series) sampled between two chances for other tasks to run.
const METRICS_PER_STEP: usize = 100;
/// How often an agent without `remote_write:` looks again (a reload may add it).
const UNCONFIGURED_RECHECK: Duration = Duration::from_secs(15);

/// Where the remote-write outbox goes, from the running config.
fn routing(running: &Running) -> Option<(Route, Tally)> {
    let settings = running.cfg().remote_write.clone()?;
    let rw = &running.metrics().remote_write;
    let tally = Tally {
        sent: rw.samples_sent.clone(),
        rejected: rw.samples_dropped.with_label_values(&[DROPPED_REJECTED]),
        failures: rw.failures.clone(),
        queued: rw.queue_samples.clone(),
        last_success: Some(rw.last_success.clone()),
    };
    Some((remote_write::route(&settings), tally))
}

/// The remote-write outbox, its sampler and its sender, following the running config.
pub(super) struct RemoteWriter {
    running: Running,
    client: SinkClient,
    outbox: Arc<Outbox>,
    /// Whether the queue was found too small for the registry (said once).
    warned_small: AtomicBool,
}

impl RemoteWriter {
    pub(super) fn new(running: Running, client: SinkClient) -> Arc<RemoteWriter> {
        Arc::new(RemoteWriter {
            running,
            client,
            outbox: Outbox::new(),
            warned_small: AtomicBool::new(false),
        })
    }

    /// The sampling loop and the sender.
    pub(super) fn start(self: &Arc<Self>, stop: &Stop) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(sample_loop(self.clone(), stop.clone())),
            outbox::spawn_sender(&self.running, &self.client, &self.outbox, routing, stop),
        ]
    }

    /// At shutdown: one last sample, then send what the queue holds until it is empty, the
    /// receiver fails, or `remote_write.timeout` has passed.
    pub(super) async fn final_flush(&self) {
        let Some(settings) = self.running.cfg().remote_write.clone() else {
            return;
        };
        self.sample(&settings).await;
        outbox::flush(&self.running, &self.client, &self.outbox, routing).await;
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, crate::sinks::remote_write::Queue> {
        self.outbox.queue()
    }

    /// Samples the registry into the queue now, giving way to other tasks every
    /// [`METRICS_PER_STEP`] metrics (the daemon's one thread also stamps probe runs in
    /// flight) and locking the queue one batch at a time, so the sender drains it meanwhile.
    async fn sample(&self, settings: &RemoteWriteSettings) {
        let metrics = self.running.metrics();
        let mut extra = metrics.static_labels().to_vec();
        extra.push(("job".into(), settings.job.clone()));
        extra.push(("instance".into(), self.running.cfg().agent.name.clone()));
        let timestamp_ms = jiff::Timestamp::now().as_millisecond();
        let mut dropped = self.queue().set_max(settings.max_samples);
        let mut total = 0;
        let mut sampler = Sampler::new(
            &extra,
            timestamp_ms,
            settings.max_samples_per_send,
            |body, n| {
                total += n;
                dropped += self.outbox.put(body, n);
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
        rw.queue_samples.set(self.queue().items() as i64);
    }
}

/// Samples on the configured interval until `stop`.
async fn sample_loop(rw: Arc<RemoteWriter>, mut stop: Stop) {
    let mut next = Instant::now();
    loop {
        let settings = rw.running.cfg().remote_write.clone();
        let wait = match &settings {
            Some(s) => {
                rw.sample(s).await;
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
