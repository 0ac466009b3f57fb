//! The status store (`status.store`): a SQLite database that keeps what the status page shows
//! (each pair's 5-minute, hourly and daily slots, its last runs and failures, the incidents)
//! as runs land, so a restart finds the page as it was. It keeps the page's rollups, not runs:
//! the results log stays the raw record.
//!
//! - `schema`: the tables and the file's marks (`application_id`, `user_version`);
//! - `db`: opening (corrupt and foreign files refused), reading at start, one transaction per
//!   change, the retention sweep;
//! - `writer`: the thread that writes, fed by a bounded channel that never blocks a run.

mod db;
mod schema;
mod writer;

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) use db::{Change, Db, StoreError};

use writer::{Complaints, Failed, Message};

/// Changes waiting for the writer at most; past that, a change is dropped and counted.
pub(crate) const QUEUE: usize = 1024;

/// The running store: where changes go, and the writer's thread.
pub(crate) struct StatusStore {
    tx: Mutex<Option<SyncSender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    path: std::path::PathBuf,
    failed: Failed,
    complaints: Mutex<Complaints>,
}

impl StatusStore {
    /// Starts the writer on `db`, keeping days and incidents for `retention`; `failed` is
    /// called on every change that does not reach the disk.
    pub(crate) fn start(
        db: Db,
        retention: Duration,
        failed: impl Fn() + Send + Sync + 'static,
    ) -> std::io::Result<StatusStore> {
        let failed: Failed = Arc::new(failed);
        let (tx, rx) = sync_channel(QUEUE);
        let path = db.path().to_path_buf();
        let f = failed.clone();
        let thread = std::thread::Builder::new()
            .name("status-store".into())
            .spawn(move || writer::run(db, rx, retention, f))?;
        Ok(StatusStore {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            path,
            failed,
            complaints: Mutex::default(),
        })
    }

    /// Hands a change to the writer without waiting; a full queue drops it, counted.
    pub(crate) fn send(&self, change: Change) {
        let tx = self.tx.lock().expect("store sender lock");
        let Some(tx) = tx.as_ref() else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(Message::Change(Box::new(change))) {
            (self.failed)();
            let mut c = self.complaints.lock().expect("store complaints lock");
            if c.due() {
                let more = std::mem::take(&mut c.unlogged);
                tracing::error!(path = %self.path.display(), queue = QUEUE, dropped_since_last_logged = more, "the status store's writer is behind: a change was dropped");
            }
        }
    }

    /// Keeps days and ended incidents for `retention` from now on.
    pub(crate) fn set_retention(&self, retention: Duration) {
        if let Some(tx) = self.tx.lock().expect("store sender lock").as_ref() {
            let _ = tx.try_send(Message::Retention(retention));
        }
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Lets the writer write what is queued, and waits for it to end.
    pub(crate) fn close(&self) {
        self.tx.lock().expect("store sender lock").take();
        if let Some(t) = self.thread.lock().expect("store thread lock").take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
