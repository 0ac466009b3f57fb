//! Runs (probe, target) pairs with a concurrency limit and keeps the warm-up state: the first
//! successful run of a pair after start, or after its target was unreachable (to any probe), is
//! flagged `warmup` (a cold start, reported apart from the latency figures). It also notices
//! change from outside: a target whose build fingerprint differs from the one it showed
//! before (what its answers say, and what its model list says, asked in the background at most
//! every five minutes: [`probe::identity`]), and a temperature-0 probe whose output differs from
//! its previous one.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Semaphore;

use crate::config::{Probe, Target};
use crate::outcome::Outcome;
use crate::probe::{self, identity, Clients};
use crate::result::ProbeResult;

pub type Pair = (Arc<Probe>, Arc<Target>);

pub struct Runner {
    clients: Clients,
    limit: Arc<Semaphore>,
    warm: Mutex<Warm>,
    changes: Mutex<Changes>,
    identities: Arc<Mutex<Identities>>,
    pub show_output: bool,
}

/// Each target's last model-list answer, by name and address, and when it was asked.
type Identities = HashMap<(String, String), (Instant, Option<String>)>;

fn identity_key(target: &Target) -> (String, String) {
    (target.name.clone(), target.base_url.clone())
}

/// Asks `target` for its model list and keeps the answer as asked at `asked`; a server that
/// does not answer this time keeps its last one.
async fn refresh(
    map: &Mutex<Identities>,
    client: &reqwest::Client,
    target: &Target,
    asked: Instant,
) -> Option<String> {
    let answer = identity::ask(client, target).await;
    let mut map = map.lock().expect("the identity map is never poisoned");
    let kept = answer.or_else(|| map.get(&identity_key(target))?.1.clone());
    map.insert(identity_key(target), (asked, kept.clone()));
    kept
}

/// The last fingerprint and model-list entry each target showed, and the last output of each
/// deterministic pair.
#[derive(Default)]
struct Changes {
    fingerprints: HashMap<String, String>,
    identities: HashMap<String, String>,
    outputs: HashMap<(String, String), String>,
}

impl Changes {
    /// Flags `r.target_changed` and `r.output_changed`, and adds the target's model-list entry
    /// (when known) to its fingerprint. The first sighting of each is no change: a model list
    /// answered after the first runs adds to the fingerprint without counting as a new build.
    fn note(&mut self, deterministic: bool, identity: Option<String>, r: &mut ProbeResult) {
        let mut changed = false;
        if let Some(fp) = &r.fingerprint {
            let before = self.fingerprints.insert(r.target.clone(), fp.clone());
            changed |= before.is_some_and(|b| &b != fp);
        }
        // Not asked yet at this address: the target's last answer stands. Only a run that
        // reached the model has a build to name.
        let identity = identity.or_else(|| self.identities.get(&r.target).cloned());
        if let (Some(id), true) = (identity, r.fingerprint.is_some()) {
            let before = self.identities.insert(r.target.clone(), id.clone());
            changed |= before.is_some_and(|b| b != id);
            if let Some(fp) = &mut r.fingerprint {
                fp.push_str(&format!("; models {id}"));
            }
        }
        r.target_changed = changed;
        if let (true, Some(hash)) = (deterministic, &r.output_sha256) {
            let key = (r.probe.clone(), r.target.clone());
            let before = self.outputs.insert(key, hash.clone());
            r.output_changed = before.is_some_and(|b| &b != hash);
        }
    }
}

/// The (probe, target) pairs that have had a successful run since start or since their target
/// was last unreachable.
#[derive(Default)]
struct Warm(HashMap<String, HashSet<String>>);

impl Warm {
    /// Takes in one run's outcome; true when that run is a warm-up (a cold start).
    fn note(&mut self, probe: &str, target: &str, outcome: Outcome, success: bool) -> bool {
        if outcome == Outcome::ConnectError {
            // The target itself was unreachable: every probe of it starts cold again.
            self.0.remove(target);
            return false;
        }
        success
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
            identities: Arc::default(),
            show_output: false,
        }
    }

    /// One run, waiting for a concurrency slot first.
    pub async fn run_one(&self, probe: &Probe, target: &Target) -> ProbeResult {
        let _permit = self
            .limit
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let client = self.clients.get(probe.timeouts.connect);
        let mut result = probe::run(&client, probe, target, self.show_output).await;
        self.mark_warmup(&mut result);
        let identity = self.identity(&client, target);
        // A prompt with a fresh prefix each run is not the same question twice.
        let deterministic =
            probe.temperature == Some(0.0) && probe.cache_bust != crate::config::CacheBust::Prefix;
        self.changes
            .lock()
            .expect("the change map is never poisoned")
            .note(deterministic, identity, &mut result);
        result
    }

    /// The target's last model-list answer; asks again in the background when it is older than
    /// [`identity::EVERY`] (or was never asked), so no run waits for it.
    fn identity(&self, client: &reqwest::Client, target: &Target) -> Option<String> {
        let now = Instant::now();
        let mut map = self
            .identities
            .lock()
            .expect("the identity map is never poisoned");
        let last = match map.get(&identity_key(target)) {
            Some((asked, last)) if now < *asked + identity::EVERY => return last.clone(),
            Some((_, last)) => last.clone(),
            None => None,
        };
        // Marked asked now, so runs meanwhile do not ask again; the answer replaces it.
        map.insert(identity_key(target), (now, last.clone()));
        let (client, target, map) = (client.clone(), target.clone(), self.identities.clone());
        tokio::spawn(async move { refresh(&map, &client, &target, now).await });
        last
    }

    /// The target's last model-list answer, as the next run will use it.
    pub fn last_identity(&self, target: &Target) -> Option<String> {
        let map = self
            .identities
            .lock()
            .expect("the identity map is never poisoned");
        map.get(&identity_key(target))
            .and_then(|(_, id)| id.clone())
    }

    /// Asks `target` for its model list now and keeps the answer, as the background ask does.
    pub async fn identify(&self, target: &Target) -> Option<String> {
        let client = self.clients.get(std::time::Duration::from_secs(3));
        refresh(&self.identities, &client, target, Instant::now()).await
    }

    fn mark_warmup(&self, r: &mut ProbeResult) {
        let mut warm = self.warm.lock().expect("the warm-up map is never poisoned");
        r.warmup = warm.note(&r.probe, &r.target, r.outcome, r.success);
    }

    /// Every pair once, concurrently within the limit; results in the order of `pairs`.
    pub async fn run_all(self: &Arc<Self>, pairs: Vec<Pair>) -> Vec<ProbeResult> {
        let handles: Vec<_> = pairs
            .into_iter()
            .map(|(p, t)| {
                let me = self.clone();
                tokio::spawn(async move { me.run_one(&p, &t).await })
            })
            .collect();
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.expect("a probe run never panics"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_cold_after_start_and_after_its_target_was_unreachable() {
        let mut w = Warm::default();
        let ok = Outcome::Ok;
        assert!(w.note("a", "t", ok, true), "first success after start");
        assert!(!w.note("a", "t", ok, true));
        assert!(
            w.note("b", "t", ok, true),
            "each probe has its own first success"
        );
        assert!(w.note("a", "u", ok, true), "and each target");
        // A failure that is not about reaching the target changes nothing.
        assert!(!w.note("a", "t", Outcome::HttpError, false));
        assert!(!w.note("a", "t", ok, true));
        // Probe b finds t unreachable: a and b are both cold on t, not on u.
        assert!(!w.note("b", "t", Outcome::ConnectError, false));
        assert!(
            !w.note("a", "t", Outcome::Repetition, false),
            "only successes warm up"
        );
        assert!(w.note("a", "t", ok, true));
        assert!(w.note("b", "t", ok, true));
        assert!(!w.note("a", "u", ok, true));
    }

    fn result(probe: &str, target: &str, fp: Option<&str>, out: Option<&str>) -> ProbeResult {
        let mut r = ProbeResult::example();
        (r.probe, r.target) = (probe.into(), target.into());
        r.fingerprint = fp.map(str::to_string);
        r.output_sha256 = out.map(str::to_string);
        r
    }

    #[test]
    fn a_new_fingerprint_or_a_new_deterministic_output_is_a_change() {
        let mut c = Changes::default();
        let mut note = |det, mut r: ProbeResult| {
            c.note(det, None, &mut r);
            (r.target_changed, r.output_changed)
        };
        assert_eq!(
            note(true, result("a", "t", Some("b1"), Some("x"))),
            (false, false)
        );
        assert_eq!(
            note(true, result("a", "t", Some("b1"), Some("x"))),
            (false, false)
        );
        // Another probe on the same target sees the build change too; its output is new to it.
        assert_eq!(
            note(true, result("b", "t", Some("b2"), Some("y"))),
            (true, false)
        );
        assert_eq!(
            note(true, result("a", "t", Some("b2"), Some("z"))),
            (false, true)
        );
        // No fingerprint sent (a failure): no change, and the last one is kept.
        assert_eq!(note(true, result("a", "t", None, None)), (false, false));
        assert_eq!(
            note(true, result("a", "t", Some("b2"), Some("z"))),
            (false, false)
        );
        // Outputs of sampled probes vary by design.
        assert_eq!(
            note(false, result("c", "t", Some("b2"), Some("1"))),
            (false, false)
        );
        assert_eq!(
            note(false, result("c", "t", Some("b2"), Some("2"))),
            (false, false)
        );
    }

    #[test]
    fn a_new_model_list_entry_is_a_change_and_joins_the_fingerprint() {
        let mut c = Changes::default();
        let mut note = |id: Option<&str>| {
            let mut r = result("a", "t", Some("b1"), Some("x"));
            c.note(true, id.map(str::to_string), &mut r);
            (r.fingerprint.unwrap(), r.target_changed)
        };
        // Not asked yet, then the first answer: no change, the entry joins the fingerprint.
        assert_eq!(note(None), ("b1".to_string(), false));
        assert_eq!(note(Some("m1")), ("b1; models m1".to_string(), false));
        assert_eq!(note(Some("m1")), ("b1; models m1".to_string(), false));
        // New weights behind the same name and build string.
        assert_eq!(note(Some("m2")), ("b1; models m2".to_string(), true));
        assert_eq!(note(Some("m2")), ("b1; models m2".to_string(), false));
        // A run that never reached the model (no fingerprint) names no build and changes
        // nothing; the next answer with a new list entry still does.
        let mut failed = result("a", "t", None, None);
        c.note(true, Some("m3".into()), &mut failed);
        assert_eq!((failed.fingerprint, failed.target_changed), (None, false));
        let mut r = result("a", "t", Some("b1"), Some("x"));
        c.note(true, Some("m3".into()), &mut r);
        assert_eq!(
            (r.fingerprint.as_deref(), r.target_changed),
            (Some("b1; models m3"), true)
        );
    }
}
