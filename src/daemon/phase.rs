//! Where the daemon stands (serving a config generation, draining, stopped), and the signal
//! every loop watches to know when to end. Below the loops: it imports none of them.

use tokio::sync::watch;

/// Where the daemon stands: what every loop watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The pairs of this config generation fire.
    Serving(u64),
    /// No new runs: runs in flight finish, pushes and remote writes go on.
    Draining,
    /// Everything stops.
    Stopped,
}

/// What a background loop (push, remote write, OTLP, maintenance) watches to know when to end.
#[derive(Clone)]
pub(super) struct Stop(watch::Receiver<Phase>);

impl Stop {
    pub(super) fn new(phase: watch::Receiver<Phase>) -> Stop {
        Stop(phase)
    }

    /// Completes once the daemon stops.
    pub(super) async fn stopped(&mut self) {
        let _ = self.0.wait_for(|p| *p == Phase::Stopped).await;
    }
}
