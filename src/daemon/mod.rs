//! The daemon (`llm-canary run`): every (probe, target) pair fires on its schedule (cron or
//! interval), with a global concurrency limit, an optional stable jitter and no overlap (a pair still in flight when its next
//! fire time comes is skipped and counted). Results go to the metrics registry (served on
//! /metrics, pushed to the Pushgateway, written to a remote-write receiver with `remote_write:`),
//! the results log and the status page's history. Runs in a maintenance window are flagged, and
//! `llm_canary_maintenance` follows the windows. SIGHUP or `POST /-/reload` reloads the config;
//! SIGTERM/SIGINT stops scheduling, lets in-flight runs finish within the grace period, pushes
//! once more and exits.

mod admin;
mod changes;
mod confirm;
mod endpoints;
pub(crate) mod feed;
mod firing;
pub(crate) mod history;
mod on_demand;
mod otlp_exporter;
mod outbox;
mod phase;
mod pusher;
mod remote_writer;
mod schedules;
mod state;
pub(crate) mod status;
pub(crate) mod status_page;

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::config::{self, Config, Pair, Selection};
use crate::listener::{descriptor_budget, DescriptorBudget, Door, Limits};
use crate::runner::Runner;
use crate::sinks::metrics::{now_seconds, Metrics};
use crate::sinks::status_store::Db;
use crate::web_config::Web;
use admin::{ReloadError, ReloadReply};
use firing::Runs;
use otlp_exporter::OtlpExporter;
use phase::Stop;
use pusher::Pusher;
use remote_writer::RemoteWriter;
use schedules::Schedules;
use state::Shared;

/// The endpoints' connection cap when descriptors are plenty: Prometheus keeps one connection
/// per scraper, people a few more; the rest of 256 is room for whoever misbehaves.
const MAX_ENDPOINT_CONNECTIONS: usize = 256;

/// Descriptors kept from the endpoints: 32 for the process's own (standard streams, the runtime's
/// poller and wakers, signal pipes, the listener, the results log, the pusher's connection,
/// config files read on reload), and two per probe run in flight (its socket, and a DNS lookup's).
fn descriptor_reserve(concurrency: usize) -> u64 {
    32 + 2 * concurrency as u64
}

/// The pairs this agent schedules: every probe's targets, within its shard.
pub(crate) fn scheduled_pairs(cfg: &Config) -> Vec<Pair> {
    cfg.pairs(&Selection::SCHEDULED)
        .expect("a selection that names nothing names nothing unknown")
}

/// Why results of this config would reach no Prometheus: no `agent.listen` to scrape and no
/// `push:` to push to. A daemon like that probes and keeps what it learns to itself, which
/// nobody notices until an outage goes unseen, so `check` and `run` both say so.
pub(crate) fn unexported(cfg: &Config) -> Option<String> {
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

/// Where results go, for the start line: the Pushgateway, remote-write, OTLP and the results
/// log, URLs without a user name or password; `none` when nowhere (the log on stderr aside).
fn destinations(cfg: &Config) -> String {
    let shown = |url: &str| match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_string(),
    };
    let mut to = Vec::new();
    if let Some(p) = &cfg.push {
        to.push(format!("push {}", shown(&p.url)));
    }
    if let Some(w) = &cfg.remote_write {
        to.push(format!("remote-write {}", shown(&w.url)));
    }
    if let Some(o) = &cfg.otlp {
        to.push(format!("otlp {}", shown(&o.endpoint)));
    }
    if let Some(log) = &cfg.agent.results_log {
        to.push(format!("results log {}", log.path.display()));
    }
    if to.is_empty() {
        "none".to_string()
    } else {
        to.join(", ")
    }
}

/// Runs the daemon until `shutdown` completes: start, serve until then, drain within the
/// grace period. `web_config` (`--web.config.file`) wins over `agent.web_config_file`.
pub(crate) async fn run(
    path: PathBuf,
    web_config: Option<PathBuf>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut daemon = Daemon::start(path, web_config).await?;
    daemon.serve_until(shutdown).await;
    let grace = daemon.shared.cfg().agent.shutdown_grace;
    daemon.drain(grace).await;
    Ok(())
}

/// A started daemon: its shared state, what starts runs, its scheduling loops and its
/// background loops with what they flush at the end.
struct Daemon {
    /// The config file, read again on reload.
    path: PathBuf,
    shared: Arc<Shared>,
    runs: Arc<Runs>,
    schedules: Schedules,
    reloads: mpsc::Receiver<ReloadReply>,
    background: Vec<tokio::task::JoinHandle<()>>,
    pusher: Pusher,
    writer: Arc<RemoteWriter>,
    otlp: Arc<OtlpExporter>,
}

impl Daemon {
    /// Loads the config and the web config, opens the endpoints and starts every loop.
    async fn start(path: PathBuf, web_config: Option<PathBuf>) -> anyhow::Result<Daemon> {
        let cfg = Arc::new(config::load(&path)?);
        if let Some(why) = unexported(&cfg) {
            tracing::warn!(config = %path.display(), "{why}");
        }
        warn_insecure(&cfg);
        // Read once at start, so a bad file stops the start; the file itself is re-read as it
        // changes, but another file named on reload takes a restart.
        let web = web_config
            .or_else(|| cfg.agent.web_config_file.clone())
            .map(|p| Web::load(&p).map(Arc::new))
            .transpose()?;
        Daemon::start_with(path, cfg, web).await
    }

    /// Opens the endpoints `cfg` asks for (through `web`, if any) and starts every loop.
    async fn start_with(
        path: PathBuf,
        cfg: Arc<Config>,
        web: Option<Arc<Web>>,
    ) -> anyhow::Result<Daemon> {
        let pairs = scheduled_pairs(&cfg);
        let shared = Arc::new(Shared::new(cfg.clone(), &pairs));
        // Before the first run, so the page shows the past at once. On the runtime's own
        // thread: nothing else runs yet, and a blocking-pool thread would leave its own
        // allocator arena behind in the daemon's resident set.
        let now = jiff::Timestamp::now();
        let db = match &cfg.status_store {
            Some(path) => {
                let started = Instant::now();
                let db = Db::open(path)?;
                let kept = shared.restore(&db, now)?;
                tracing::debug!(path = %path.display(), pairs = kept, took = ?started.elapsed(), "status history read from the status store");
                Some(db)
            }
            None => None,
        };
        let mut replayed = 0;
        if let Some(settings) = &cfg.agent.results_log {
            let started = Instant::now();
            let oldest = now
                .checked_sub(jiff::SignedDuration::try_from(cfg.status_history)?)
                .unwrap_or(now);
            let (taken, bad) = shared.replay(settings, oldest);
            replayed = taken;
            tracing::debug!(runs = taken, unreadable_lines = bad, took = ?started.elapsed(), "status history rebuilt from the results log");
        }
        if let Some(db) = db {
            shared.attach_store(db, replayed > 0)?;
        }
        let otlp = OtlpExporter::new(shared.running(), shared.sink_clients().otlp.clone());
        let runs = Arc::new(Runs::new(
            shared.clone(),
            Runner::new(cfg.agent.concurrency),
            otlp.clone(),
        ));
        let (reload_tx, reloads) = mpsc::channel::<ReloadReply>(4);
        let budget = budget(&cfg);
        let mut listening = None;
        if let Some(addr) = cfg.agent.listen {
            let door = open_door(&shared, addr, &budget).await?;
            listening = Some(door.local_addr()?);
            tokio::spawn(endpoints::serve(door, web.clone(), runs.clone(), reload_tx));
        }
        let mut schedules = Schedules::new();
        let stop = schedules.stop_signal();
        let pusher = Pusher::new(
            shared.running(),
            shared.push().clone(),
            shared.sink_clients().push.clone(),
        );
        let writer =
            RemoteWriter::new(shared.running(), shared.sink_clients().remote_write.clone());
        let mut background = vec![
            tokio::spawn(pusher.clone().run(stop.clone())),
            tokio::spawn(maintenance_loop(shared.clone(), stop.clone())),
        ];
        background.extend(writer.start(&stop));
        background.extend(otlp.start(&stop));
        let count = pairs.len();
        schedules.start(&runs, pairs);
        release_freed_memory();
        tracing::info!(
            version = env!("LLM_CANARY_VERSION"),
            agent = %cfg.agent.name,
            listen = %listening.map_or_else(|| "none".to_string(), |a| format!("{}://{a}", scheme(web.as_deref()))),
            targets = cfg.targets.len(),
            pairs = count,
            results = destinations(&cfg).as_str(),
            "daemon started"
        );
        Ok(Daemon {
            path,
            shared,
            runs,
            schedules,
            reloads,
            background,
            pusher,
            writer,
            otlp,
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
                    if self.reload("SIGHUP").is_ok() {
                        self.shared.push().wake();
                    }
                }
                Some(reply) = self.reloads.recv() => {
                    let r = self.reload("POST /-/reload");
                    let _ = reply.send(r);
                }
            }
        }
    }

    /// Reads the config file again and, if it loads, runs it: series of pairs that left go,
    /// the others keep counting; old loops stop, runs in flight finish and are recorded. `by`
    /// says who asked, for the log.
    fn reload(&mut self, by: &str) -> Result<(), ReloadError> {
        let shared = &self.shared;
        let new = match config::load(&self.path) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                tracing::error!(%by, error = %e, "config reload refused; the running config stays");
                shared.metrics().reload_successful.set(0);
                return Err(e.into());
            }
        };
        warn_insecure(&new);
        let metrics = carried_metrics(&shared.cfg(), shared.metrics(), &new);
        let pairs = scheduled_pairs(&new);
        let (count, targets) = (pairs.len(), new.targets.len());
        shared.swap_config(new, metrics, &pairs);
        self.schedules.start(&self.runs, pairs);
        release_freed_memory();
        let m = shared.metrics();
        m.reload_successful.set(1);
        m.reload_success_time.set(now_seconds());
        tracing::info!(%by, targets, pairs = count, "config reloaded");
        Ok(())
    }

    /// Stops scheduling, lets runs in flight finish within `grace` (those that do not are
    /// counted as aborted), then stops the background loops, pushes and flushes once more.
    async fn drain(self, grace: Duration) {
        let shared = &self.shared;
        tracing::info!(runs_in_flight = shared.in_flight(), grace = %crate::util::human_duration(grace), "shutting down: no new runs; those in flight may finish within the grace period");
        self.schedules.drain();
        if !shared.until_idle(Instant::now() + grace).await {
            let cfg = shared.cfg();
            for (p, t) in shared.in_flight_pairs() {
                tracing::warn!(probe = %p, target = %t, grace = ?grace, "run aborted at shutdown");
                if let Some(target) = cfg.target(&t) {
                    shared.metrics().aborted(&p, target);
                }
            }
        }
        self.schedules.stop();
        for task in self.background {
            let _ = task.await;
        }
        tokio::join!(
            self.pusher.final_push(),
            self.writer.final_flush(),
            self.otlp.final_flush(),
        );
        if let Some(store) = shared.store() {
            // What is queued is a few milliseconds of writes.
            store.close();
        }
        tracing::info!("daemon stopped");
    }
}

/// At each load: a line for each target and output that does not verify its server.
fn warn_insecure(cfg: &Config) {
    for w in cfg.insecure_tls_warnings() {
        tracing::warn!(config = %cfg.path.display(), "{w}");
    }
}

/// The registry `new` runs with after `old`: the running one, pruned, when the static label
/// names stay (series of pairs that left, or whose labels or ladder changed, disappear; the
/// others keep counting), or a fresh one.
fn carried_metrics(old: &Config, metrics: Arc<Metrics>, new: &Config) -> Arc<Metrics> {
    if !metrics.fits(new, &old.agent.labels) {
        tracing::warn!("static label names changed: every series starts afresh");
        return Metrics::new(new);
    }
    metrics.set_budget(new.agent.budget.clone());
    metrics.set_tls(new);
    let keep: HashSet<(Vec<String>, Option<config::Ladder>)> = scheduled_pairs(new)
        .iter()
        .map(|(p, t)| (metrics.pair_values(&p.name, t), p.ladder.clone()))
        .collect();
    for (p, t) in scheduled_pairs(old) {
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
    metrics
}

/// The daemon's scheduling, runs and states with none of its outputs: what `watch` runs when
/// it probes by itself. Whatever the config says, nothing listens, pushes, writes remotely or
/// to the results log: a terminal view started with a production agent's file would otherwise
/// replace that agent's Pushgateway group (one PUT holds an agent's whole registry), take its
/// port and write into its log.
pub(crate) struct Quiet {
    daemon: Daemon,
}

impl Quiet {
    pub(crate) async fn start(mut cfg: Config) -> anyhow::Result<Quiet> {
        cfg.agent.listen = None;
        cfg.agent.results_log = None;
        cfg.status_store = None;
        cfg.push = None;
        cfg.remote_write = None;
        cfg.otlp = None;
        let path = cfg.path.clone();
        let daemon = Daemon::start_with(path, Arc::new(cfg), None).await?;
        Ok(Quiet { daemon })
    }

    /// The running agent's state, for [`status`] to judge.
    pub(crate) fn agent(&self) -> &Shared {
        &self.daemon.shared
    }

    /// Completes when the next run finishes (and is recorded).
    pub(crate) fn run_finished(&self) -> tokio::sync::futures::Notified<'_> {
        self.daemon.shared.run_ended()
    }

    /// Ends every loop; runs in flight are dropped with the runtime.
    pub(crate) fn stop(self) {
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
    tracing::debug!(
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

/// What the endpoints speak, for the start-up line.
fn scheme(web: Option<&Web>) -> &'static str {
    match web.is_some_and(Web::tls) {
        true => "https",
        false => "http",
    }
}

/// Binds `addr` (`agent.listen`) with the budget's connection cap.
async fn open_door(
    shared: &Shared,
    addr: SocketAddr,
    budget: &DescriptorBudget,
) -> anyhow::Result<Door> {
    let cfg = shared.cfg();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (agent.listen): {e}"))?;
    let door = Door::new(listener, Limits::with_cap(budget.cap));
    let limits = door.limits();
    tracing::debug!(addr = %door.local_addr()?, max_connections = limits.max_connections, header_timeout = ?limits.header_timeout, idle_timeout = ?limits.idle_timeout, admin_token = cfg.agent.admin_token.is_some(), loopback_only = shared.loopback_only(), "serving the status page, /metrics, /healthz, /probe and the admin endpoints");
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

/// Keeps `llm_canary_maintenance` in step with the windows: set for every target, then asleep
/// until the next window starts or ends, a window is announced, or the config changes.
async fn maintenance_loop(shared: Arc<Shared>, mut stop: Stop) {
    // A bound on the sleep, in case the wall clock jumps.
    const LONGEST: Duration = Duration::from_secs(300);
    let maintenance = shared.maintenance();
    loop {
        let cfg = shared.cfg();
        let now = jiff::Timestamp::now();
        let metrics = shared.metrics();
        for t in &cfg.targets {
            let on = maintenance.active(&cfg, &t.name, now).is_some();
            metrics.set_maintenance(t, on);
        }
        shared.push().wake();
        let wait = maintenance
            .next_change(&cfg, now)
            .and_then(|next| Duration::try_from(next.duration_since(now)).ok())
            .map_or(LONGEST, |d| d.min(LONGEST));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = maintenance.changed() => {}
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
