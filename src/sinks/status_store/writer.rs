//! The store's writer: a thread of its own, fed by a bounded channel the runtime never waits
//! on, writing the changes queued together in one transaction and sweeping old rows every few minutes. A
//! write that fails (a full disk, a file made read-only) is counted and logged with the path;
//! probing goes on, and so does the writer with the next change.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::db::{Change, Db, StoreError};

/// What the writer is handed: a run's change, or a new retention.
pub(super) enum Message {
    Change(Box<Change>),
    Retention(Duration),
}

/// How long the writer gathers changes after the first of a batch.
const GATHER: Duration = Duration::from_millis(500);
/// Changes written in one transaction at most.
const BATCH: usize = 256;
/// How often old rows are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(600);
/// A failing store is logged at most this often (each failure is counted).
pub(super) const COMPLAINT_EVERY: Duration = Duration::from_secs(60);

/// Whether to log now: at the first failure, then at most every `COMPLAINT_EVERY`.
#[derive(Debug, Default)]
pub(super) struct Complaints {
    last: Option<Instant>,
    /// Failures since the last one logged.
    pub(super) unlogged: u64,
}

impl Complaints {
    pub(super) fn due(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < COMPLAINT_EVERY)
        {
            self.unlogged += 1;
            return false;
        }
        self.last = Some(now);
        true
    }
}

pub(super) type Failed = Arc<dyn Fn() + Send + Sync>;

/// Writes what arrives until every sender is gone.
pub(super) fn run(mut db: Db, rx: Receiver<Message>, mut retention: Duration, failed: Failed) {
    let mut complaints = Complaints::default();
    let mut failing = false;
    let mut next_sweep = Instant::now();
    let mut fail = |e: StoreError, what: &str, failing: &mut bool| {
        failed();
        *failing = true;
        if complaints.due() {
            let more = std::mem::take(&mut complaints.unlogged);
            tracing::error!(path = %e.path.display(), error = %e.why, failures_since_last_logged = more, "cannot {what} the status store; the page's history lives on in memory and in the results log");
        }
    };
    loop {
        let wait = next_sweep.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Message::Change(c)) => {
                // What arrives within `GATHER` goes in the same transaction: a firing of every
                // pair is a burst of runs ending within a second or so, and their rows share
                // pages, each of which a transaction writes once.
                let mut batch = vec![*c];
                let until = Instant::now() + GATHER;
                while batch.len() < BATCH {
                    let left = until.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(Message::Change(c)) => batch.push(*c),
                        Ok(Message::Retention(r)) => retention = r,
                        Err(_) => break,
                    }
                }
                match db.write(&batch) {
                    Ok(()) if failing => {
                        failing = false;
                        tracing::info!(path = %db.path().display(), "the status store takes writes again");
                    }
                    Ok(()) => {}
                    Err(e) => fail(e, "write to", &mut failing),
                }
            }
            Ok(Message::Retention(r)) => retention = r,
            Err(RecvTimeoutError::Timeout) => {
                next_sweep = Instant::now() + SWEEP_EVERY;
                match db.sweep(Timestamp::now(), retention) {
                    Ok(n) if n > 0 => {
                        tracing::debug!(rows = n, "old rows swept from the status store")
                    }
                    Ok(_) => {}
                    Err(e) => fail(e, "sweep", &mut failing),
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
