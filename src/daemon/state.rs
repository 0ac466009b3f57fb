//! The daemon's shared state, one thing with methods (mini-redis's `Shared`): the running
//! config and its registry, the pairs in flight, what finished runs leave behind (metrics,
//! status history, incidents, results log), the announced maintenance windows and the push
//! line. Callers never lock anything themselves; each lock guards one thing and is named for
//! it. The bottom of the daemon: it imports none of its siblings.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::config::{Config, Pair, ResultsLogSettings, Target};
use crate::maintenance::{self, Announced, Window};
use crate::result::ProbeResult;
use crate::sinks::incidents::{Incident, Incidents};
use crate::sinks::metrics::Metrics;
use crate::sinks::outbound::OutputClient;
use crate::sinks::results_log::ResultsLog;
use crate::sinks::status_history::{self, PairDays, PairSnapshot, Run, StatusHistory};
use crate::sinks::status_store::{Change, Db, StatusStore, StoreError};

/// A (probe, target) pair by name.
pub(super) type PairKey = (String, String);

/// What a reload swaps at once: the config, the registry its series live in, and the pairs it
/// schedules.
struct Generation {
    cfg: Arc<Config>,
    metrics: Arc<Metrics>,
    scheduled: HashSet<PairKey>,
}

/// The running config and its registry, for the loops that follow reloads (the pusher, the
/// samplers, the senders); only [`Shared::swap_config`] changes them.
#[derive(Clone)]
pub(super) struct Running(Arc<RwLock<Generation>>);

impl Running {
    fn read(&self) -> RwLockReadGuard<'_, Generation> {
        self.0.read().expect("config lock")
    }

    pub(super) fn cfg(&self) -> Arc<Config> {
        self.read().cfg.clone()
    }

    pub(super) fn metrics(&self) -> Arc<Metrics> {
        self.read().metrics.clone()
    }
}

/// The pairs with a run in flight (at most one run per pair), and whoever waits for one to end.
#[derive(Default)]
struct InFlight {
    pairs: Mutex<HashSet<PairKey>>,
    ended: Notify,
}

impl InFlight {
    fn pairs(&self) -> std::sync::MutexGuard<'_, HashSet<PairKey>> {
        self.pairs.lock().expect("in-flight lock")
    }

    fn claim(&self, key: &PairKey) -> bool {
        self.pairs().insert(key.clone())
    }

    fn release(&self, key: &PairKey) {
        self.pairs().remove(key);
        self.ended.notify_waiters();
    }

    async fn until_idle(&self, deadline: Instant) -> bool {
        loop {
            // Registered before the look, so a release in between is not missed.
            let ended = self.ended.notified();
            if self.pairs().is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline.into(), ended)
                .await
                .is_err()
            {
                return self.pairs().is_empty();
            }
        }
    }
}

/// A pair's place in flight: at most one claim per pair exists. Dropping it, when its run is
/// recorded or when the future holding it is cancelled, frees the pair, wakes whoever waits
/// for runs to end, and wakes the pusher.
pub(super) struct Claim {
    shared: Arc<Shared>,
    key: PairKey,
}

impl Claim {
    /// The (probe, target) claimed.
    pub(super) fn key(&self) -> &PairKey {
        &self.key
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.shared.in_flight.release(&self.key);
        self.shared.push.wake();
    }
}

/// The announced maintenance windows, and the wake-up of the loop that follows the windows.
#[derive(Default)]
pub(super) struct Maintenance {
    announced: Announced,
    changed: Notify,
}

impl Maintenance {
    /// The window `target` is in at `at`, configured in `cfg` or announced.
    pub(super) fn active(&self, cfg: &Config, target: &str, at: Timestamp) -> Option<Window> {
        maintenance::active(cfg, &self.announced, target, at)
    }

    /// The first instant after `at` when some target may enter or leave a window.
    pub(super) fn next_change(&self, cfg: &Config, at: Timestamp) -> Option<Timestamp> {
        maintenance::next_change(cfg, &self.announced, at)
    }

    /// Opens (or with a zero duration, closes) `target`'s announced window from `now`.
    pub(super) fn announce(
        &self,
        target: &str,
        duration: Duration,
        reason: Option<String>,
        now: Timestamp,
    ) -> Option<Window> {
        let window = self.announced.announce(target, duration, reason, now);
        self.changed.notify_one();
        window
    }

    /// Completes when a window was announced or the config changed.
    pub(super) fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }
}

/// What `/healthz` says of the pushes.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(super) struct PushStatus {
    pub last_success: Option<String>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
}

/// The pusher's wake-up (runs ended, a window opened or closed, a reload) and what its pushes
/// came to.
#[derive(Default)]
pub(super) struct PushLine {
    wake: Notify,
    status: Mutex<PushStatus>,
}

impl PushLine {
    /// Asks for a push (the pusher coalesces).
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    pub(super) fn woken(&self) -> Notified<'_> {
        self.wake.notified()
    }

    pub(super) fn status(&self) -> PushStatus {
        self.status.lock().expect("push status lock").clone()
    }

    pub(super) fn succeeded(&self, at: Timestamp) {
        let mut s = self.status.lock().expect("push status lock");
        s.last_success = Some(at.to_string());
        s.last_error = None;
        s.consecutive_failures = 0;
    }

    /// Returns the failures in a row, this one included.
    pub(super) fn failed(&self, error: String) -> u32 {
        let mut s = self.status.lock().expect("push status lock");
        s.last_error = Some(error);
        s.consecutive_failures += 1;
        s.consecutive_failures
    }
}

/// One output's client (the Pushgateway, the remote-write receiver, the OTLP receiver), each
/// made from that output's `tls:` block and proxy and following its changes.
pub(super) type SinkClient = Arc<OutputClient>;

/// The outputs' clients, one each: their `tls:` blocks and proxies differ.
#[derive(Default)]
pub(super) struct SinkClients {
    pub push: SinkClient,
    pub remote_write: SinkClient,
    /// OTLP metrics and traces go to one receiver.
    pub otlp: SinkClient,
}

/// The daemon's state, shared by the scheduling loops, the runs and the endpoints.
pub(crate) struct Shared {
    running: Running,
    in_flight: InFlight,
    /// The page's memory of runs (it locks itself).
    history: StatusHistory,
    incidents: Mutex<Incidents>,
    /// Where the history is kept across restarts (`status.store`), once it is read.
    store: OnceLock<StatusStore>,
    /// Behind its own `Arc`: a run's lines are written from a blocking-pool thread.
    results_log: Arc<Mutex<Option<ResultsLog>>>,
    maintenance: Maintenance,
    push: Arc<PushLine>,
    sink_clients: SinkClients,
    /// The listener accepts only loopback connections: admin requests need no token.
    loopback_only: bool,
}

impl Shared {
    /// The state of a daemon that starts with `cfg`, scheduling `pairs`.
    pub(super) fn new(cfg: Arc<Config>, pairs: &[Pair]) -> Shared {
        let keys = keys(pairs);
        let history = StatusHistory::default();
        history.retain_pairs(&keys);
        let mut incidents = Incidents::new(cfg.status_history);
        incidents.retain_pairs(&keys);
        Shared {
            in_flight: InFlight::default(),
            history,
            incidents: Mutex::new(incidents),
            store: OnceLock::new(),
            results_log: Arc::new(Mutex::new(open_log(&cfg))),
            maintenance: Maintenance::default(),
            push: Arc::default(),
            sink_clients: SinkClients::default(),
            loopback_only: cfg.agent.listen.is_some_and(|a| a.ip().is_loopback()),
            running: Running(Arc::new(RwLock::new(Generation {
                metrics: Metrics::new(&cfg),
                cfg,
                scheduled: keys.into_iter().collect(),
            }))),
        }
    }

    /// A handle on the running config and registry that follows reloads.
    pub(super) fn running(&self) -> Running {
        self.running.clone()
    }

    pub(super) fn cfg(&self) -> Arc<Config> {
        self.running.cfg()
    }

    pub(super) fn metrics(&self) -> Arc<Metrics> {
        self.running.metrics()
    }

    /// The pairs the running config schedules.
    pub(super) fn scheduled_count(&self) -> usize {
        self.running.read().scheduled.len()
    }

    /// Puts back what the store kept (the configured pairs' part), before the first run;
    /// answers how many pairs it held.
    pub(super) fn restore(&self, db: &Db, now: Timestamp) -> Result<usize, StoreError> {
        let (pairs, incidents) = db.load()?;
        for p in &pairs {
            self.history.restore(p);
        }
        (self.incidents.lock().expect("incidents lock")).restore(incidents, now);
        Ok(pairs.len())
    }

    /// Takes in the runs of the results log from `oldest` on that are newer than the history
    /// has for their pair (all of them without a store; with one, those the store lacks),
    /// before the first run, so the page shows the past at once; returns the runs taken in and
    /// the lines that did not parse.
    pub(super) fn replay(
        &self,
        settings: &ResultsLogSettings,
        oldest: Timestamp,
    ) -> (usize, usize) {
        let newest = self.history.last_runs();
        // When every pair has runs from the store, nothing before the oldest of their last runs
        // is new: whole rotated files are left unread.
        let scheduled = self.scheduled_count();
        let oldest = match newest.values().min() {
            Some(t) if newest.len() == scheduled => oldest.max(*t),
            _ => oldest,
        };
        let mut incidents = self.incidents.lock().expect("incidents lock");
        let mut taken = 0;
        let (_, bad) = status_history::replay(settings, oldest, |run| {
            let known = newest
                .get(&(run.probe.clone(), run.target.clone()))
                .is_some_and(|t| run.started_at <= *t);
            if !known {
                self.history.record(run);
                incidents.record(run);
                taken += 1;
            }
        });
        (taken, bad)
    }

    /// Writes the whole history and the incidents to `db` (after a replay filled what it
    /// lacked), then keeps it up to date as runs land, on a writer thread of its own.
    pub(super) fn attach_store(&self, mut db: Db, save_all: bool) -> anyhow::Result<()> {
        if save_all {
            let incidents = self.incidents.lock().expect("incidents lock").saved();
            db.save_all(&self.history.saved(), &incidents)?;
        }
        let running = self.running();
        let store = StatusStore::start(db, self.cfg().status_history, move || {
            running.metrics().status_store_errors.inc()
        })?;
        let _ = self.store.set(store);
        Ok(())
    }

    /// The store, if one is attached.
    pub(super) fn store(&self) -> Option<&StatusStore> {
        self.store.get()
    }

    /// Makes `cfg` (with `metrics`, its registry) the running config, scheduling `pairs`: the
    /// history and incidents keep only those pairs', the announcements only its targets', and
    /// the results log reopens if its settings changed.
    pub(super) fn swap_config(&self, cfg: Arc<Config>, metrics: Arc<Metrics>, pairs: &[Pair]) {
        let keys = keys(pairs);
        let old = self.cfg();
        if old.agent.results_log != cfg.agent.results_log {
            *self.results_log.lock().expect("results log lock") = open_log(&cfg);
        }
        self.history.retain_pairs(&keys);
        {
            let mut incidents = self.incidents.lock().expect("incidents lock");
            incidents.set_retention(cfg.status_history);
            incidents.retain_pairs(&keys);
        }
        if let Some(store) = self.store.get() {
            store.set_retention(cfg.status_history);
            if cfg.status_store.as_deref() != Some(store.path()) {
                tracing::warn!(running = %store.path().display(), configured = ?cfg.status_store, "status.store changed: the change takes effect at restart");
            }
        }
        if old.agent.web_config_file != cfg.agent.web_config_file {
            // The endpoints keep the file they started with; its contents are re-read as they change.
            tracing::warn!(running = ?old.agent.web_config_file, configured = ?cfg.agent.web_config_file, "agent.web_config_file changed: the change takes effect at restart");
        }
        self.maintenance.announced.prune(&cfg, Timestamp::now());
        *self.running.0.write().expect("config lock") = Generation {
            cfg,
            metrics,
            scheduled: keys.into_iter().collect(),
        };
        self.maintenance.changed.notify_one();
    }

    /// Marks the pair in flight until the returned claim drops; `None` when a run of it
    /// already is.
    pub(super) fn claim(self: &Arc<Self>, key: &PairKey) -> Option<Claim> {
        self.in_flight.claim(key).then(|| Claim {
            shared: self.clone(),
            key: key.clone(),
        })
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.pairs().len()
    }

    /// The pairs in flight now.
    pub(super) fn in_flight_pairs(&self) -> Vec<PairKey> {
        self.in_flight.pairs().iter().cloned().collect()
    }

    /// Completes when the next run ends (and is recorded).
    pub(super) fn run_ended(&self) -> Notified<'_> {
        self.in_flight.ended.notified()
    }

    /// Waits until no run is in flight, or `deadline`; true when none is.
    pub(super) async fn until_idle(&self, deadline: Instant) -> bool {
        self.in_flight.until_idle(deadline).await
    }

    /// Whether `target` is in a maintenance window at `at`, under the running config.
    pub(super) fn in_maintenance(&self, target: &str, at: Timestamp) -> bool {
        self.maintenance.active(&self.cfg(), target, at).is_some()
    }

    /// Takes in a firing's results of `key`: its metrics, history and incidents. False (nothing
    /// recorded) when the pair left the config while it ran: its series were retired.
    pub(super) fn record(&self, key: &PairKey, results: &[ProbeResult], target: &Target) -> bool {
        let metrics = {
            let g = self.running.read();
            if !g.scheduled.contains(key) {
                return false;
            }
            g.metrics.clone()
        };
        for r in results {
            metrics.record(r, target);
            let run = Run::from(r);
            let Some(store) = self.store.get() else {
                self.history.record(&run);
                self.incidents.lock().expect("incidents lock").record(&run);
                continue;
            };
            let pair = self.history.record_saved(&run);
            let inc = (self.incidents.lock().expect("incidents lock")).record_saved(&run);
            if let Some(pair) = pair {
                let (recent, incident) = inc.unzip();
                store.send(Change {
                    pair,
                    recent,
                    incident: incident.flatten(),
                });
            }
        }
        true
    }

    /// Appends `results` to the results log, off the runtime's (single) thread, so a slow disk
    /// never delays a probe's timestamps.
    pub(super) async fn log(&self, results: Vec<ProbeResult>) {
        let log = self.results_log.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(log) = log.lock().expect("results log lock").as_mut() {
                for r in &results {
                    if let Err(e) = log.append(r) {
                        tracing::error!(error = %e, "cannot append to the results log");
                    }
                }
            }
        })
        .await;
    }

    /// The history of `target`'s pairs as of `now`, sorted by probe.
    pub(super) fn snapshot_target(&self, target: &str, now: Timestamp) -> Vec<PairSnapshot> {
        self.history.snapshot_target(target, now)
    }

    /// The last days of `target`'s pairs as of `now`, sorted by probe.
    pub(super) fn days_target(&self, target: &str, now: Timestamp) -> Vec<PairDays> {
        self.history.days_target(target, now)
    }

    /// The incidents kept, every target's or one's.
    pub(super) fn incidents(&self, target: Option<&str>) -> Vec<Incident> {
        self.incidents.lock().expect("incidents lock").list(target)
    }

    pub(super) fn maintenance(&self) -> &Maintenance {
        &self.maintenance
    }

    pub(super) fn push(&self) -> &Arc<PushLine> {
        &self.push
    }

    pub(super) fn sink_clients(&self) -> &SinkClients {
        &self.sink_clients
    }

    pub(super) fn loopback_only(&self) -> bool {
        self.loopback_only
    }
}

fn keys(pairs: &[Pair]) -> Vec<PairKey> {
    pairs
        .iter()
        .map(|(p, t)| (p.name.clone(), t.name.clone()))
        .collect()
}

fn open_log(cfg: &Config) -> Option<ResultsLog> {
    let settings = cfg.agent.results_log.as_ref()?;
    match ResultsLog::open(settings) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::error!(path = %settings.path.display(), error = %e, "cannot open the results log; results are not logged");
            None
        }
    }
}

/// A config scheduling probe `p` (prompt "Hello?", every five minutes) on each (target name,
/// server address) given: what the daemon's unit tests run.
#[cfg(test)]
pub(super) fn test_config(dir: &std::path::Path, targets: &[(&str, &str)]) -> Arc<Config> {
    let mut yaml = String::from("agent: {name: test}\ntargets:\n");
    for (t, addr) in targets {
        yaml.push_str(&format!(
            "  - {{name: {t}, base_url: \"http://{addr}/v1\", model: m}}\n"
        ));
    }
    std::fs::create_dir_all(dir.join("probes")).unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    std::fs::write(dir.join("llm-canary.yaml"), yaml).unwrap();
    std::fs::write(
        dir.join("probes/p.yaml"),
        "name: p\nprompt: q.txt\nschedule: \"*/5 * * * *\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/q.txt"), "Hello?").unwrap();
    Arc::new(crate::config::load(&dir.join("llm-canary.yaml")).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: &str, t: &str) -> PairKey {
        (p.into(), t.into())
    }

    #[test]
    fn a_pair_in_flight_is_not_claimed_again_until_released() {
        let f = InFlight::default();
        assert!(f.claim(&key("p", "t")));
        assert!(!f.claim(&key("p", "t")), "one run per pair");
        assert!(f.claim(&key("p", "u")), "another pair is free");
        f.release(&key("p", "t"));
        assert!(f.claim(&key("p", "t")));
    }

    #[tokio::test]
    async fn the_idle_waiter_wakes_when_the_last_run_ends() {
        let f = Arc::new(InFlight::default());
        let far = Instant::now() + Duration::from_secs(60);
        assert!(f.until_idle(far).await, "nothing in flight: idle at once");
        f.claim(&key("p", "t"));
        f.claim(&key("p", "u"));
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.until_idle(far).await }
        });
        tokio::task::yield_now().await;
        f.release(&key("p", "t"));
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one run is still in flight");
        f.release(&key("p", "u"));
        let idle = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(idle.unwrap().unwrap());
    }

    #[tokio::test]
    async fn the_idle_waiter_gives_up_at_the_deadline() {
        let f = InFlight::default();
        f.claim(&key("p", "t"));
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!f.until_idle(soon).await);
    }

    #[tokio::test]
    async fn an_announcement_wakes_the_maintenance_loop_and_opens_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &["t"]);
        let m = Maintenance::default();
        let now = Timestamp::now();
        let changed = m.changed();
        let w = m.announce("t", Duration::from_secs(60), Some("deploy".into()), now);
        tokio::time::timeout(Duration::from_secs(5), changed)
            .await
            .expect("the loop wakes");
        assert_eq!(m.active(&cfg, "t", now), w);
        assert!(m.active(&cfg, "u", now).is_none());
        assert_eq!(m.next_change(&cfg, now), w.map(|w| w.until));
    }

    #[test]
    fn the_push_line_counts_failures_in_a_row_until_a_success() {
        let line = PushLine::default();
        assert_eq!(line.failed("HTTP 502".into()), 1);
        assert_eq!(line.failed("HTTP 502".into()), 2);
        assert_eq!(line.status().last_error.as_deref(), Some("HTTP 502"));
        line.succeeded(Timestamp::UNIX_EPOCH);
        let s = line.status();
        assert_eq!((s.consecutive_failures, s.last_error), (0, None));
        assert_eq!(s.last_success.as_deref(), Some("1970-01-01T00:00:00Z"));
    }

    /// A config scheduling probe `p` on the targets named (their server is never reached).
    fn config(dir: &std::path::Path, targets: &[&str]) -> Arc<Config> {
        let targets: Vec<(&str, &str)> = targets.iter().map(|t| (*t, "127.0.0.1:9")).collect();
        test_config(dir, &targets)
    }

    fn pairs(cfg: &Config) -> Vec<Pair> {
        cfg.pairs(&crate::config::Selection::SCHEDULED).unwrap()
    }

    #[test]
    fn runs_of_a_pair_that_left_the_config_are_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let both = config(dir.path(), &["t", "u"]);
        let shared = Shared::new(both.clone(), &pairs(&both));
        assert_eq!(shared.scheduled_count(), 2);
        let t = both.target("t").unwrap().clone();
        let mut failed = ProbeResult::example();
        failed.judged.outcome = crate::outcome::Outcome::HttpError;
        failed.judged.error = Some("HTTP 502".into());
        assert!(shared.record(&key("p", "t"), std::slice::from_ref(&failed), &t));
        assert_eq!(
            shared.snapshot_target("t", Timestamp::now())[0].recent_runs,
            1
        );

        let only_u = config(dir.path(), &["u"]);
        shared.swap_config(only_u.clone(), Metrics::new(&only_u), &pairs(&only_u));
        assert_eq!(shared.scheduled_count(), 1);
        assert!(shared.snapshot_target("t", Timestamp::now()).is_empty());
        let incidents = shared.incidents(Some("t")).len();
        assert!(!shared.record(&key("p", "t"), &[failed], &t));
        assert!(shared.snapshot_target("t", Timestamp::now()).is_empty());
        assert_eq!(shared.incidents(Some("t")).len(), incidents);
        assert!(Arc::ptr_eq(&shared.cfg(), &only_u));
    }
}
