//! Runs (probe, target) pairs with a concurrency limit, a probe with a context ladder as one run
//! per rung ([`Runner::fire`]), and makes each run's record from what it measured and what the
//! runner remembers of the runs before it:
//! - [`Warm`]: the first successful run of a pair after start, or after its target was
//!   unreachable (to any probe), is flagged `warmup` (a cold start, reported apart from the
//!   latency figures);
//! - [`Changes`]: a target whose build differs from the one it showed before (what its answers
//!   say, and what its model list says), and a temperature-0 probe whose output differs from its
//!   previous one;
//! - [`echo::Echoes`]: each pair's latest answer, to tell a target whose answers no longer
//!   depend on the prompt (`prompt_ignored`);
//! - [`ModelLists`]: each target's model list, asked in the background at most every five
//!   minutes ([`probe::identity`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Semaphore;

pub mod echo;

use crate::config::{Probe, Target};
use crate::outcome::Outcome;
use crate::probe::cache_check::{CachePhase, CacheRun};
use crate::probe::{self, identity, ladder, Clients};
use crate::result::{Fingerprint, Measurement, ProbeResult, RunContext};

pub(crate) use crate::config::Pair;

/// Whether a target is in a maintenance window at an instant.
pub(crate) type Windows = Arc<dyn Fn(&str, jiff::Timestamp) -> bool + Send + Sync>;

pub struct Runner {
    clients: Clients,
    limit: Arc<Semaphore>,
    warm: Mutex<Warm>,
    changes: Mutex<Changes>,
    echoes: Mutex<echo::Echoes>,
    models: ModelLists,
    pub show_output: bool,
    /// The maintenance windows runs of [`Runner::run_one`] and [`Runner::run_all`] are
    /// flagged in (none when unset).
    pub windows: Option<Windows>,
}

/// Each target's last model-list answer, by name and address, and when it was asked.
#[derive(Default, Clone)]
struct ModelLists(Arc<Mutex<Answers>>);

type Answers = HashMap<(String, String), (Instant, Option<String>)>;

fn model_list_key(target: &Target) -> (String, String) {
    (target.name.clone(), target.base_url.to_string())
}

impl ModelLists {
    fn lock(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.0.lock().expect("the model-list map is never poisoned")
    }

    /// The target's last answer, as the next run will use it.
    #[cfg(test)]
    fn last(&self, target: &Target) -> Option<String> {
        self.lock()
            .get(&model_list_key(target))
            .and_then(|(_, id)| id.clone())
    }

    /// Asks `target` for its model list and keeps the answer as asked at `asked`; a server
    /// that does not answer this time keeps its last one.
    async fn ask(&self, client: &probe::Client, target: &Target, asked: Instant) -> Option<String> {
        let answer = identity::ask(client, target).await;
        let mut map = self.lock();
        let kept = answer.or_else(|| map.get(&model_list_key(target))?.1.clone());
        map.insert(model_list_key(target), (asked, kept.clone()));
        kept
    }

    /// The target's last answer; asks again in the background when it is older than
    /// [`identity::EVERY`] (or was never asked), so no run waits for it.
    fn last_or_ask(&self, client: &probe::Client, target: &Target) -> Option<String> {
        let now = Instant::now();
        let mut map = self.lock();
        let last = match map.get(&model_list_key(target)) {
            Some((asked, last)) if now < *asked + identity::EVERY => return last.clone(),
            Some((_, last)) => last.clone(),
            None => None,
        };
        // Marked asked now, so runs meanwhile do not ask again; the answer replaces it.
        map.insert(model_list_key(target), (now, last.clone()));
        let (me, client, target) = (self.clone(), client.clone(), target.clone());
        tokio::spawn(async move { me.ask(&client, &target, now).await });
        last
    }
}

/// How a run's build and output compare with what came before.
#[derive(Debug, Default, PartialEq, Eq)]
struct Change {
    target_changed: bool,
    output_changed: bool,
    /// What identifies the build the run showed, with the model-list entry it carries; none
    /// when the run never reached the model.
    fingerprint: Option<Fingerprint>,
}

/// The last build and model-list entry each target showed, and the last output of each
/// deterministic pair.
#[derive(Default)]
struct Changes {
    builds: HashMap<String, String>,
    models_seen: HashMap<String, String>,
    outputs: HashMap<(String, String), String>,
}

impl Changes {
    /// Compares `m` with what its target and pair showed before, given the target's model-list
    /// entry (when known). The first sighting of each is no change: a model list answered after
    /// the first runs joins the fingerprint without counting as a new build.
    fn note(&mut self, deterministic: bool, models: Option<String>, m: &Measurement) -> Change {
        let mut change = Change::default();
        // Only a run that reached the model has a build to name.
        let target = &m.id.target;
        if let Some(build) = m.measured.reading.build() {
            let before = self.builds.insert(target.clone(), build.to_string());
            change.target_changed |= before.is_some_and(|b| b != build);
            // Not asked yet at this address: the target's last answer stands.
            let models = models.or_else(|| self.models_seen.get(target).cloned());
            if let Some(id) = &models {
                let before = self.models_seen.insert(target.clone(), id.clone());
                change.target_changed |= before.is_some_and(|b| &b != id);
            }
            change.fingerprint = Some(Fingerprint {
                build: build.to_string(),
                models,
            });
        }
        if let (true, Some(hash)) = (deterministic, &m.measured.output_sha256) {
            let key = (m.id.probe.clone(), target.clone());
            let before = self.outputs.insert(key, hash.clone());
            change.output_changed = before.is_some_and(|b| &b != hash);
        }
        change
    }
}

/// The (probe, target) pairs that have had a successful run since start or since their target
/// was last unreachable.
#[derive(Default)]
struct Warm(HashMap<String, HashSet<String>>);

impl Warm {
    /// Takes in one run's outcome; true when that run is a warm-up (a cold start).
    fn note(&mut self, probe: &str, target: &str, outcome: Outcome) -> bool {
        if outcome == Outcome::ConnectError {
            // The target itself was unreachable: every probe of it starts cold again.
            self.0.remove(target);
            return false;
        }
        outcome == Outcome::Ok
            && self
                .0
                .entry(target.to_string())
                .or_default()
                .insert(probe.to_string())
    }
}

impl Runner {
    pub fn new(concurrency: usize) -> Self {
        crate::checks::lists::compile_now();
        Runner {
            clients: Clients::default(),
            limit: Arc::new(Semaphore::new(concurrency.max(1))),
            warm: Mutex::new(Warm::default()),
            changes: Mutex::new(Changes::default()),
            echoes: Mutex::new(echo::Echoes::default()),
            models: ModelLists::default(),
            show_output: false,
            windows: None,
        }
    }

    /// One run, waiting for a concurrency slot first; flagged in [`Runner::windows`]. For a
    /// probe without a ladder (the gate and calibration take no other); a ladder's firing is
    /// [`Runner::fire`].
    pub async fn run_one(&self, probe: &Probe, target: &Target) -> ProbeResult {
        let windows = self.windows.clone();
        self.run_in(probe, target, false, |at| {
            windows
                .as_ref()
                .is_some_and(|in_window| in_window(&target.name, at))
        })
        .await
    }

    /// One run, waiting for a concurrency slot first; `confirm` when it confirms a failed run
    /// of the pair; `in_window` says whether the run, by the instant it started, fell in a
    /// maintenance window of its target. A cache check's probe runs as any other here: once,
    /// with its cache busting (see [`Runner::fire`]).
    pub async fn run_in(
        &self,
        probe: &Probe,
        target: &Target,
        confirm: bool,
        in_window: impl Fn(jiff::Timestamp) -> bool,
    ) -> ProbeResult {
        let client = self.clients.get(probe.timeouts.connect);
        let m = {
            let _permit = self.permit().await;
            probe::run(&client, probe, target, self.show_output).await
        };
        self.record(probe, target, m, confirm, RunContext::default(), in_window)
            .await
    }

    /// One firing of a pair, as [`Runner::run_in`]: one run; for a cache check its two, cold
    /// then warm, in one slot; for a probe with a ladder one run per rung, smallest first and
    /// one after another (so no rung's time to first token waits behind another's prompt), each
    /// with a slot of its own.
    pub async fn fire(
        &self,
        probe: &Probe,
        target: &Target,
        confirm: bool,
        in_window: impl Fn(jiff::Timestamp) -> bool,
    ) -> Vec<ProbeResult> {
        if let Some(check) = probe.cache_check {
            let client = self.clients.get(probe.timeouts.connect);
            let [cold, warm] = {
                let _permit = self.permit().await;
                probe::cache_check::run(&client, probe, target, check, self.show_output).await
            };
            let figures = probe::cache_check::compare(target.api, &cold, &warm);
            let ctx = |phase, figures| RunContext {
                cache_check: Some(CacheRun { phase, figures }),
                ..RunContext::default()
            };
            return vec![
                self.record(
                    probe,
                    target,
                    cold,
                    confirm,
                    ctx(CachePhase::Cold, Default::default()),
                    &in_window,
                )
                .await,
                self.record(
                    probe,
                    target,
                    warm,
                    confirm,
                    ctx(CachePhase::Warm, figures),
                    &in_window,
                )
                .await,
            ];
        }
        let Some(l) = &probe.ladder else {
            return vec![self.run_in(probe, target, confirm, in_window).await];
        };
        let client = self.clients.get(probe.timeouts.connect);
        let mut out: Vec<ProbeResult> = Vec::with_capacity(l.sizes.len());
        for plan in ladder::rungs(probe, l) {
            let m = {
                let _permit = self.permit().await;
                probe::run_rung(&client, &plan, target, self.show_output).await
            };
            let ctx = RunContext {
                prefill: out.first().and_then(|base| ladder::prefill(base, &m)),
                ..RunContext::default()
            };
            out.push(
                self.record(probe, target, m, confirm, ctx, &in_window)
                    .await,
            );
        }
        out
    }

    async fn permit(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.limit
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }

    /// The record of a run: what it measured, beside what the runner remembers.
    async fn record(
        &self,
        probe: &Probe,
        target: &Target,
        m: Measurement,
        confirm: bool,
        ctx: RunContext,
        in_window: impl FnOnce(jiff::Timestamp) -> bool,
    ) -> ProbeResult {
        let m = self.echo(probe, m).await;
        let warmup = self
            .warm
            .lock()
            .expect("the warm-up map is never poisoned")
            .note(&m.id.probe, &m.id.target, m.judged.outcome);
        let client = self.clients.get(probe.timeouts.connect);
        let models = self.models.last_or_ask(&client, target);
        // A prompt with a fresh prefix each run is not the same question twice, nor is a
        // ladder's, drawn afresh each firing.
        let deterministic = probe.temperature == Some(0.0)
            && probe.cache_bust != crate::config::CacheBust::Prefix
            && probe.cache_check.is_none()
            && probe.ladder.is_none();
        let change = self
            .changes
            .lock()
            .expect("the change map is never poisoned")
            .note(deterministic, models, &m);
        let ctx = RunContext {
            warmup,
            fingerprint: change.fingerprint,
            target_changed: change.target_changed,
            output_changed: change.output_changed,
            maintenance: in_window(m.id.started_at),
            confirm,
            ..ctx
        };
        ProbeResult::new(m, ctx)
    }

    /// A run whose answer repeats another probe's recent answer on its target, to another
    /// prompt, failed `prompt_ignored` too (see [`echo`]). A ladder's rungs are drawn afresh
    /// each firing and not compared. The comparing runs on a blocking thread, outside the lock:
    /// chrF against every other probe of a busy target takes milliseconds, which neither the
    /// runtime's workers (reading other runs' streams) nor other runs' records should wait on.
    async fn echo(&self, probe: &Probe, mut m: Measurement) -> Measurement {
        let Some(answer) = m.measured.answer.clone().filter(|_| probe.ladder.is_none()) else {
            return m;
        };
        let others = self
            .echoes
            .lock()
            .expect("the answers map is never poisoned")
            .keep(echo::Said {
                target: &m.id.target,
                probe: &m.id.probe,
                prompt: echo::prompt_key(probe.prompt.messages.iter().map(|m| m.content.as_str())),
                answer: &answer,
                at: Instant::now(),
            });
        if others.is_empty() {
            return m;
        }
        let echo = tokio::task::spawn_blocking(move || echo::closest(&answer, &others))
            .await
            .expect("comparing answers does not panic");
        if let Some(e) = echo {
            m.judged
                .also_failed(Outcome::PromptIgnored, || e.sentence());
        }
        m
    }

    /// The target's last model-list answer, as the next run will use it.
    #[cfg(test)]
    fn last_identity(&self, target: &Target) -> Option<String> {
        self.models.last(target)
    }

    /// Asks `target` for its model list now and keeps the answer, as the background ask does.
    #[cfg(test)]
    async fn identify(&self, target: &Target) -> Option<String> {
        let client = self.clients.get(std::time::Duration::from_secs(3));
        self.models.ask(&client, target, Instant::now()).await
    }

    /// Every pair fired once, concurrently within the limit; results in the order of `pairs`
    /// (a cache check's two runs in the order they ran, a ladder's rungs smallest first).
    pub async fn run_all(self: &Arc<Self>, pairs: Vec<Pair>) -> Vec<ProbeResult> {
        let handles: Vec<_> = pairs
            .into_iter()
            .map(|(p, t)| {
                let me = self.clone();
                tokio::spawn(async move {
                    let windows = me.windows.clone();
                    me.fire(&p, &t, false, |at| {
                        windows.as_ref().is_some_and(|w| w(&t.name, at))
                    })
                    .await
                })
            })
            .collect();
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.extend(h.await.expect("a probe run never panics"));
        }
        out
    }
}

#[cfg(test)]
mod tests;
