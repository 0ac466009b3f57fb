//! Runs (probe, target) pairs with a concurrency limit and keeps the warm-up state: the first
//! successful run of a pair after start, or after its target was unreachable (to any probe), is
//! flagged `warmup` (a cold start, reported apart from the latency figures). It also notices
//! change from outside: a target whose build fingerprint differs from the one it showed
//! before, and a temperature-0 probe whose output differs from its previous one.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use crate::config::{Probe, Target};
use crate::outcome::Outcome;
use crate::probe::{self, Clients};
use crate::result::ProbeResult;

pub type Pair = (Arc<Probe>, Arc<Target>);

pub struct Runner {
    clients: Clients,
    limit: Arc<Semaphore>,
    warm: Mutex<Warm>,
    changes: Mutex<Changes>,
    pub show_output: bool,
}

/// The last fingerprint each target showed, and the last output of each deterministic pair.
#[derive(Default)]
struct Changes {
    fingerprints: HashMap<String, String>,
    outputs: HashMap<(String, String), String>,
}

impl Changes {
    /// Flags `r.target_changed` and `r.output_changed`; the first sighting is no change.
    fn note(&mut self, deterministic: bool, r: &mut ProbeResult) {
        if let Some(fp) = &r.fingerprint {
            let before = self.fingerprints.insert(r.target.clone(), fp.clone());
            r.target_changed = before.is_some_and(|b| &b != fp);
        }
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
        self.changes
            .lock()
            .expect("the change map is never poisoned")
            .note(probe.temperature == Some(0.0), &mut result);
        result
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
            c.note(det, &mut r);
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
}
