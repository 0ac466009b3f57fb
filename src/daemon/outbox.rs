//! What every queued sender of the daemon shares (remote-write, OTLP metrics, OTLP spans): a
//! bounded queue of encoded requests, a loop that drains it oldest first and backs off while
//! the receiver fails, and the last flush at shutdown. Producers never wait for the sender, so
//! an outage costs queue space, not schedule.

use std::sync::{Arc, Mutex, MutexGuard};

use prometheus::{Gauge, IntCounter, IntGauge};
use prost::bytes::Bytes;
use tokio::sync::Notify;

use super::phase::Stop;
use super::state::{Running, SinkClient};
use crate::sinks::metrics::now_seconds;
use crate::sinks::outbound::{self, Route, SendError};
use crate::sinks::push;
use crate::sinks::remote_write::Queue;

/// What a sender counts, in the unit its queue is bounded in (samples, points, spans).
pub(super) struct Tally {
    pub sent: IntCounter,
    /// Dropped because the receiver refused them.
    pub rejected: IntCounter,
    /// Failed requests (each retry counts).
    pub failures: IntCounter,
    pub queued: IntGauge,
    pub last_success: Option<Gauge>,
}

/// Reads the running config: where the queue goes now and what it counts, or `None` while
/// the sender is not configured (a reload may add it).
pub(super) type Routing = fn(&Running) -> Option<(Route, Tally)>;

/// The queue one producer fills and one sender drains.
pub(super) struct Outbox {
    queue: Mutex<Queue>,
    wake: Notify,
}

impl Outbox {
    pub(super) fn new() -> Arc<Outbox> {
        Arc::new(Outbox {
            queue: Mutex::new(Queue::new(0)),
            wake: Notify::new(),
        })
    }

    pub(super) fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().expect("outbox queue lock")
    }

    /// Queues a body of `items`; returns the items dropped to make room.
    pub(super) fn put(&self, body: Bytes, items: usize) -> usize {
        let dropped = self.queue().push(body, items);
        self.wake.notify_one();
        dropped
    }

    /// Sends the oldest batch once. `None`: nothing to send.
    async fn send_one(
        &self,
        client: &SinkClient,
        route: &Route,
        tally: &Tally,
    ) -> Option<Result<(), SendError>> {
        let batch = self.queue().front()?;
        let result = outbound::post(client, route, batch.body).await;
        match &result {
            Ok(()) => {
                // Counted as sent even if an outage dropped it from the queue meanwhile: it
                // arrived (and was also counted as dropped, the one case counted twice).
                self.queue().remove(batch.seq);
                tally.sent.inc_by(batch.items as u64);
                if let Some(g) = &tally.last_success {
                    g.set(now_seconds());
                }
            }
            Err(e @ SendError::Rejected { .. }) => {
                tally.failures.inc();
                let n = self.queue().remove(batch.seq);
                tally.rejected.inc_by(n as u64);
                tracing::error!(error = %e, items = n, "receiver refused a batch; dropped");
            }
            Err(SendError::Retry { .. }) => tally.failures.inc(),
        }
        tally.queued.set(self.queue().items() as i64);
        Some(result)
    }
}

/// Drains `outbox` until `stop`, backing off while the receiver fails.
/// Starts `outbox`'s sender: the one task that sends what the outbox holds.
pub(super) fn spawn_sender(
    running: &Running,
    client: &SinkClient,
    outbox: &Arc<Outbox>,
    routing: Routing,
    stop: &Stop,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(send_loop(
        running.clone(),
        client.clone(),
        outbox.clone(),
        routing,
        stop.clone(),
    ))
}

async fn send_loop(
    running: Running,
    client: SinkClient,
    outbox: Arc<Outbox>,
    routing: Routing,
    mut stop: Stop,
) {
    let mut failures = 0u32;
    loop {
        let wake = outbox.wake.notified();
        let routed = routing(&running);
        let sent = match &routed {
            Some((route, tally)) => {
                tokio::select! {
                    r = outbox.send_one(&client, route, tally) => r,
                    _ = stop.stopped() => return,
                }
            }
            None => None,
        };
        let pause = match (sent, &routed) {
            (None, _) | (_, None) => {
                tokio::select! {
                    _ = wake => continue,
                    _ = stop.stopped() => return,
                }
            }
            (Some(Err(e @ SendError::Retry { .. })), Some((route, _))) => {
                failures = failures.saturating_add(1);
                let pause = push::backoff(failures - 1, route.max_backoff);
                tracing::warn!(error = %e, failures, retry_in = ?pause, queued = outbox.queue().items(), "send failed; the batch stays queued");
                pause
            }
            (Some(_), Some((route, _))) => {
                if failures > 0 {
                    tracing::info!(failures, what = route.what, "receiver recovered");
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

/// At shutdown: sends what the queue holds until it is empty, the receiver fails, or the
/// route's timeout has passed.
pub(super) async fn flush(
    running: &Running,
    client: &SinkClient,
    outbox: &Outbox,
    routing: Routing,
) {
    let Some((route, tally)) = routing(running) else {
        return;
    };
    let deadline = tokio::time::Instant::now() + route.timeout;
    loop {
        let step = tokio::time::timeout_at(deadline, outbox.send_one(client, &route, &tally));
        match step.await {
            Ok(Some(Ok(()))) | Ok(Some(Err(SendError::Rejected { .. }))) => continue,
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, left = outbox.queue().items(), "send failed at shutdown; queued items are lost");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    what = route.what,
                    left = outbox.queue().items(),
                    "the last send did not finish within its timeout at shutdown"
                );
                return;
            }
        }
    }
}
