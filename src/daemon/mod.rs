//! The daemon (`llm-canary run`): every (probe, target) pair fires on its schedule (cron or
//! interval), with a global concurrency limit, an optional stable jitter and no overlap (a pair still in flight when its next
//! fire time comes is skipped and counted). Results go to the metrics registry (served on
//! /metrics, pushed to the Pushgateway, written to a remote-write receiver with `remote_write:`),
//! the results log and the status page's history. Runs in a maintenance window are flagged, and
//! `llm_canary_maintenance` follows the windows. SIGHUP or `POST /-/reload` reloads the config;
//! SIGTERM/SIGINT stops scheduling, lets in-flight runs finish within the grace period, pushes
//! once more and exits.

mod admin;
mod confirm;
mod endpoints;
mod firing;
use firing::{fire, Occasion};
pub mod feed;
pub mod history;
mod on_demand;
mod otlp_exporter;
mod outbox;
mod pusher;
mod remote_writer;
mod schedules;
pub mod status;
pub mod status_page;

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Notify};

use crate::config::{self, Config, Pair, Probe, Selection, Target};
use crate::listener::{descriptor_budget, DescriptorBudget, Door, Limits};
use crate::maintenance::{self, Announced};
use crate::result::ProbeResult;
use crate::runner::Runner;
use crate::sinks::incidents::Incidents;
use crate::sinks::metrics::{now_seconds, Metrics};
use crate::sinks::push;
use crate::sinks::results_log::ResultsLog;
use crate::sinks::status_history::{self, Run, StatusHistory};
use schedules::{Schedules, Stop};

type PairKey = (String, String);

/// The endpoints' connection cap when descriptors are plenty: Prometheus keeps one connection
/// per scraper, people a few more; the rest of 256 is room for whoever misbehaves.
const MAX_ENDPOINT_CONNECTIONS: usize = 256;

/// Descriptors kept from the endpoints: 32 for the process's own (standard streams, the runtime's
/// poller and wakers, signal pipes, the listener, the results log, the pusher's connection,
/// config files read on reload), and two per probe run in flight (its socket, and a DNS lookup's).
fn descriptor_reserve(concurrency: usize) -> u64 {
    32 + 2 * concurrency as u64
}
pub type ReloadReply = oneshot::Sender<Result<(), ReloadError>>;

/// Why a reload did not happen; the running config stays either way.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("the agent is shutting down")]
    ShuttingDown,
}

/// State shared by the scheduler, the pusher and the endpoints.
pub struct Agent {
    path: PathBuf,
    cfg: RwLock<Arc<Config>>,
    metrics: RwLock<Arc<Metrics>>,
    runner: Arc<Runner>,
    /// The pairs the running config schedules.
    scheduled: RwLock<HashSet<PairKey>>,
    in_flight: Mutex<HashSet<PairKey>>,
    idle: Notify,
    push_wake: Notify,
    push_status: Mutex<PushStatus>,
    results_log: Mutex<Option<ResultsLog>>,
    history: StatusHistory,
    incidents: Mutex<Incidents>,
    announced: Announced,
    /// Wakes the maintenance loop when a window is announced or the config changed.
    maintenance_wake: Notify,
    /// The listener accepts only loopback connections: admin requests need no token.
    loopback_only: bool,
    /// One client for the Pushgateway and the remote-write receiver, built on first use: its
    /// TLS root store is about 200 KB, which a daemon that sends to neither never holds.
    sink_client: OnceLock<reqwest::Client>,
    /// OpenTelemetry: the GenAI histograms and the client spans, and their outboxes.
    otlp: otlp_exporter::OtlpExporter,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct PushStatus {
    pub last_success: Option<String>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
}

impl Agent {
    fn new(path: PathBuf, cfg: Arc<Config>) -> Agent {
        Agent {
            path,
            runner: Arc::new(Runner::new(cfg.agent.concurrency)),
            results_log: Mutex::new(open_log(&cfg)),
            metrics: RwLock::new(Metrics::new(&cfg)),
            scheduled: RwLock::new(HashSet::new()),
            in_flight: Mutex::new(HashSet::new()),
            idle: Notify::new(),
            push_wake: Notify::new(),
            push_status: Mutex::new(PushStatus::default()),
            history: StatusHistory::default(),
            incidents: Mutex::new(Incidents::new(cfg.status_history)),
            announced: Announced::default(),
            maintenance_wake: Notify::new(),
            loopback_only: cfg.agent.listen.is_some_and(|a| a.ip().is_loopback()),
            sink_client: OnceLock::new(),
            otlp: otlp_exporter::OtlpExporter::new(),
            cfg: RwLock::new(cfg),
        }
    }

    pub fn cfg(&self) -> Arc<Config> {
        self.cfg.read().expect("config lock").clone()
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.read().expect("metrics lock").clone()
    }

    fn sink_client(&self) -> &reqwest::Client {
        self.sink_client.get_or_init(push::client)
    }

    fn push_status(&self) -> PushStatus {
        self.push_status.lock().expect("push status lock").clone()
    }

    /// Takes `pairs` as the ones scheduled now; the status history keeps only theirs.
    fn schedule(&self, pairs: &[Pair]) {
        let keys: Vec<PairKey> = pairs
            .iter()
            .map(|(p, t)| (p.name.clone(), t.name.clone()))
            .collect();
        self.history.retain_pairs(&keys);
        self.incidents
            .lock()
            .expect("incidents lock")
            .retain_pairs(&keys);
        *self.scheduled.write().expect("scheduled lock") = keys.into_iter().collect();
    }

    fn is_scheduled(&self, key: &PairKey) -> bool {
        self.scheduled.read().expect("scheduled lock").contains(key)
    }

    /// Marks the pair in flight; false when a run of it already is.
    fn claim(&self, key: &PairKey) -> bool {
        self.in_flight
            .lock()
            .expect("in-flight lock")
            .insert(key.clone())
    }
}

/// The pairs this agent schedules: every probe's targets, within its shard.
pub fn scheduled_pairs(cfg: &Config) -> Vec<Pair> {
    cfg.pairs(&Selection::SCHEDULED)
        .expect("a selection that names nothing names nothing unknown")
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

/// Why results of this config would reach no Prometheus: no `agent.listen` to scrape and no
/// `push:` to push to. A daemon like that probes and keeps what it learns to itself, which
/// nobody notices until an outage goes unseen, so `check` and `run` both say so.
pub fn unexported(cfg: &Config) -> Option<String> {
    if cfg.agent.listen.is_some()
        || cfg.push.is_some()
        || cfg.remote_write.is_some()
        || cfg.otlp.is_some()
    {
        return None;
    }
    let kept = match &cfg.agent.results_log {
        Some(log) => format!("the results log ({})", log.path.display()),
        None => "the log on stderr".to_string(),
    };
    Some(format!(
        "results go nowhere but {kept}: set agent.listen (e.g. 0.0.0.0:9464, for Prometheus to scrape /metrics) or push.url (a Pushgateway)"
    ))
}

/// Runs the daemon until `shutdown` completes: start, serve until then, drain within the
/// grace period.
pub async fn run(path: PathBuf, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let mut daemon = Daemon::start(path).await?;
    daemon.serve_until(shutdown).await;
    let grace = daemon.agent.cfg().agent.shutdown_grace;
    daemon.drain(grace).await;
    Ok(())
}

/// A started daemon: its shared state, its scheduling loops and its background loops.
struct Daemon {
    agent: Arc<Agent>,
    schedules: Schedules,
    reloads: mpsc::Receiver<ReloadReply>,
    background: Vec<tokio::task::JoinHandle<()>>,
    writer: Arc<remote_writer::RemoteWriter>,
}

impl Daemon {
    /// Loads the config, opens the endpoints and starts every loop.
    async fn start(path: PathBuf) -> anyhow::Result<Daemon> {
        let cfg = Arc::new(config::load(&path)?);
        if let Some(why) = unexported(&cfg) {
            tracing::warn!(config = %path.display(), "{why}");
        }
        Daemon::start_with(path, cfg).await
    }

    /// Opens the endpoints `cfg` asks for and starts every loop.
    async fn start_with(path: PathBuf, cfg: Arc<Config>) -> anyhow::Result<Daemon> {
        let agent = Arc::new(Agent::new(path, cfg.clone()));
        let pairs = scheduled_pairs(&cfg);
        agent.schedule(&pairs);
        if let Some(settings) = &cfg.agent.results_log {
            // Before the first run, so the page shows the past at once. On the runtime's own
            // thread: nothing else runs yet, and a blocking-pool thread would leave its own
            // allocator arena behind in the daemon's resident set.
            let started = Instant::now();
            let now = jiff::Timestamp::now();
            let oldest = now
                .checked_sub(jiff::SignedDuration::try_from(cfg.status_history)?)
                .unwrap_or(now);
            let mut incidents = agent.incidents.lock().expect("incidents lock");
            let (taken, bad) = status_history::replay(settings, oldest, |run| {
                agent.history.record(run);
                incidents.record(run);
            });
            drop(incidents);
            tracing::info!(runs = taken, unreadable_lines = bad, took = ?started.elapsed(), "status history rebuilt from the results log");
        }
        let (reload_tx, reloads) = mpsc::channel::<ReloadReply>(4);
        let budget = budget(&cfg);
        if let Some(addr) = cfg.agent.listen {
            let door = open_door(&agent, addr, &budget).await?;
            tokio::spawn(endpoints::serve(door, agent.clone(), reload_tx));
        }
        let mut schedules = Schedules::new();
        let writer = remote_writer::RemoteWriter::new();
        let mut background = vec![
            tokio::spawn(pusher::run(agent.clone(), schedules.stop_signal())),
            tokio::spawn(maintenance_loop(agent.clone(), schedules.stop_signal())),
            tokio::spawn(remote_writer::sample_loop(
                agent.clone(),
                writer.clone(),
                schedules.stop_signal(),
            )),
            tokio::spawn(outbox::send_loop(
                agent.clone(),
                writer.outbox.clone(),
                remote_writer::routing,
                schedules.stop_signal(),
            )),
        ];
        background.extend(agent.otlp.start(&agent, &schedules));
        let count = pairs.len();
        schedules.start(&agent, pairs);
        release_freed_memory();
        tracing::info!(agent = %cfg.agent.name, pairs = count, "daemon started");
        Ok(Daemon {
            agent,
            schedules,
            reloads,
            background,
            writer,
        })
    }

    /// Reloads on SIGHUP and on `POST /-/reload` until `shutdown` completes.
    async fn serve_until(&mut self, shutdown: impl Future<Output = ()>) {
        let mut hup = hangup();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    if reload(&self.agent, &mut self.schedules).is_ok() {
                        self.agent.push_wake.notify_one();
                    }
                }
                Some(reply) = self.reloads.recv() => {
                    let r = reload(&self.agent, &mut self.schedules);
                    let _ = reply.send(r);
                }
            }
        }
    }

    /// Stops scheduling, lets runs in flight finish within `grace` (those that do not are
    /// counted as aborted), then stops the background loops, pushes and flushes once more.
    async fn drain(self, grace: Duration) {
        tracing::info!("shutting down: no new runs");
        self.schedules.drain();
        let agent = &self.agent;
        let deadline = Instant::now() + grace;
        loop {
            let idle = agent.idle.notified();
            if agent.in_flight.lock().expect("in-flight lock").is_empty() {
                break;
            }
            if tokio::time::timeout_at(deadline.into(), idle)
                .await
                .is_err()
            {
                break;
            }
        }
        let cfg = agent.cfg();
        let left: Vec<PairKey> = agent
            .in_flight
            .lock()
            .expect("in-flight lock")
            .iter()
            .cloned()
            .collect();
        for (p, t) in &left {
            tracing::warn!(probe = %p, target = %t, grace = ?grace, "run aborted at shutdown");
            if let Some(target) = cfg.target(t) {
                agent.metrics().aborted(p, target);
            }
        }
        self.schedules.stop();
        for task in self.background {
            let _ = task.await;
        }
        tokio::join!(
            pusher::final_push(agent),
            remote_writer::final_flush(agent, &self.writer),
            agent.otlp.final_flush(agent),
        );
    }
}

/// The daemon's scheduling, runs and states with none of its outputs: what `watch` runs when
/// it probes by itself. Whatever the config says, nothing listens, pushes, writes remotely or
/// to the results log: a terminal view started with a production agent's file would otherwise
/// replace that agent's Pushgateway group (one PUT holds an agent's whole registry), take its
/// port and write into its log.
pub struct Quiet {
    daemon: Daemon,
}

impl Quiet {
    pub async fn start(mut cfg: Config) -> anyhow::Result<Quiet> {
        cfg.agent.listen = None;
        cfg.agent.results_log = None;
        cfg.push = None;
        cfg.remote_write = None;
        cfg.otlp = None;
        let path = cfg.path.clone();
        let daemon = Daemon::start_with(path, Arc::new(cfg)).await?;
        Ok(Quiet { daemon })
    }

    /// The running agent, for [`status`] to judge.
    pub fn agent(&self) -> &Agent {
        &self.daemon.agent
    }

    /// Completes when the next run finishes (and is recorded).
    pub fn run_finished(&self) -> tokio::sync::futures::Notified<'_> {
        self.daemon.agent.idle.notified()
    }

    /// Ends every loop; runs in flight are dropped with the runtime.
    pub fn stop(self) {
        self.daemon.schedules.stop();
    }
}

/// The descriptor budget: the probes' descriptors come first, the endpoints get a share of what
/// the reserve leaves.
fn budget(cfg: &Config) -> DescriptorBudget {
    let budget = descriptor_budget(
        MAX_ENDPOINT_CONNECTIONS,
        descriptor_reserve(cfg.agent.concurrency),
    );
    tracing::info!(
        soft_limit = budget.soft,
        hard_limit = budget.hard,
        reserve = budget.reserve,
        endpoint_connections = budget.cap,
        concurrency = cfg.agent.concurrency,
        "descriptor budget"
    );
    if budget.soft < budget.reserve {
        tracing::warn!(soft_limit = budget.soft, reserve = budget.reserve, "the descriptor limit is below the probes' reserve: raise it (LimitNOFILE) or lower agent.concurrency");
    }
    budget
}

/// Binds `addr` (`agent.listen`) with the budget's connection cap.
async fn open_door(
    agent: &Agent,
    addr: SocketAddr,
    budget: &DescriptorBudget,
) -> anyhow::Result<Door> {
    let cfg = agent.cfg();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (agent.listen): {e}"))?;
    let door = Door::new(listener, Limits::with_cap(budget.cap));
    let limits = door.limits();
    tracing::info!(addr = %door.local_addr()?, max_connections = limits.max_connections, header_timeout = ?limits.header_timeout, idle_timeout = ?limits.idle_timeout, admin_token = cfg.agent.admin_token.is_some(), loopback_only = agent.loopback_only, "serving the status page, /metrics, /healthz, /probe and the admin endpoints");
    Ok(door)
}

/// Gives the system back the memory that start-up (or a reload) used and freed: reading the
/// config, compiling its patterns, rebuilding the status history from a week of results log.
/// glibc's allocator keeps freed memory in its heap for reuse and returns only what lies at the
/// heap's top, so without this the daemon idles at its start-up peak: 0.25 MiB more with 100
/// pairs (`cargo bench --bench daemon`). Runs reuse what stays; no trim after them.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only walks the allocator's own free lists; glibc
    // locks each arena while it does.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn reload(agent: &Arc<Agent>, schedules: &mut Schedules) -> Result<(), ReloadError> {
    let new = match config::load(&agent.path) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            tracing::error!(error = %e, "config reload refused; the running config stays");
            agent.metrics().reload_successful.set(0);
            return Err(e.into());
        }
    };
    let old = agent.cfg();
    let metrics = agent.metrics();
    if metrics.fits(&new, &old.agent.labels) {
        metrics.set_budget(new.agent.budget.clone());
        // Series of pairs that left (or changed labels) disappear; the others keep counting.
        // A pair whose ladder changed loses its rungs' series too.
        let keep: HashSet<(Vec<String>, Option<config::Ladder>)> = scheduled_pairs(&new)
            .iter()
            .map(|(p, t)| (metrics.pair_values(&p.name, t), p.ladder.clone()))
            .collect();
        for (p, t) in scheduled_pairs(&old) {
            let v = metrics.pair_values(&p.name, &t);
            if !keep.contains(&(v.clone(), p.ladder.clone())) {
                metrics.remove_pair(&v);
            }
        }
        for t in &old.targets {
            let same = new
                .target(&t.name)
                .is_some_and(|n| metrics.target_values(n) == metrics.target_values(t));
            if !same {
                metrics.remove_target(t);
            }
        }
    } else {
        tracing::warn!("static label names changed: every series starts afresh");
        *agent.metrics.write().expect("metrics lock") = Metrics::new(&new);
    }
    if old.agent.results_log != new.agent.results_log {
        *agent.results_log.lock().expect("results log lock") = open_log(&new);
    }
    *agent.cfg.write().expect("config lock") = new.clone();
    agent
        .incidents
        .lock()
        .expect("incidents lock")
        .set_retention(new.status_history);
    agent.announced.prune(&new, jiff::Timestamp::now());
    agent.maintenance_wake.notify_one();
    // Old loops stop; runs in flight finish and are recorded.
    let pairs = scheduled_pairs(&new);
    let count = pairs.len();
    agent.schedule(&pairs);
    schedules.start(agent, pairs);
    release_freed_memory();
    let m = agent.metrics();
    m.reload_successful.set(1);
    m.reload_success_time.set(now_seconds());
    tracing::info!(pairs = count, "config reloaded");
    Ok(())
}

/// Keeps `llm_canary_maintenance` in step with the windows: set for every target, then asleep
/// until the next window starts or ends, a window is announced, or the config changes.
async fn maintenance_loop(agent: Arc<Agent>, mut stop: Stop) {
    // A bound on the sleep, in case the wall clock jumps.
    const LONGEST: Duration = Duration::from_secs(300);
    loop {
        let cfg = agent.cfg();
        let now = jiff::Timestamp::now();
        let metrics = agent.metrics();
        for t in &cfg.targets {
            let on = maintenance::active(&cfg, &agent.announced, &t.name, now).is_some();
            metrics.set_maintenance(t, on);
        }
        agent.push_wake.notify_one();
        let wait = maintenance::next_change(&cfg, &agent.announced, now)
            .and_then(|next| Duration::try_from(next.duration_since(now)).ok())
            .map_or(LONGEST, |d| d.min(LONGEST));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = agent.maintenance_wake.notified() => {}
            _ = stop.stopped() => return,
        }
    }
}

/// SIGHUP as a stream; on platforms without it, a stream that never yields.
struct Hangup(#[cfg(unix)] Option<tokio::signal::unix::Signal>);

impl Hangup {
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.0.as_mut() {
            s.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}

fn hangup() -> Hangup {
    #[cfg(unix)]
    {
        Hangup(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok())
    }
    #[cfg(not(unix))]
    Hangup()
}
