//! Runs (probe, target) pairs with a concurrency limit and keeps the warm-up state: the first
//! successful run of a pair after start, or after its target was unreachable, is flagged
//! `warmup` (a cold start, reported apart from the latency figures).

use std::collections::HashMap;
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
    /// Pairs that have had a successful run since start or since their target was unreachable.
    warm: Mutex<HashMap<(String, String), bool>>,
    pub show_output: bool,
}

impl Runner {
    pub fn new(concurrency: usize) -> Self {
        Runner {
            clients: Clients::default(),
            limit: Arc::new(Semaphore::new(concurrency.max(1))),
            warm: Mutex::new(HashMap::new()),
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
        result
    }

    fn mark_warmup(&self, r: &mut ProbeResult) {
        let mut warm = self.warm.lock().expect("the warm-up map is never poisoned");
        let key = (r.probe.clone(), r.target.clone());
        if r.outcome == Outcome::ConnectError {
            warm.insert(key, false);
        } else if r.success {
            let was_warm = warm.insert(key, true).unwrap_or(false);
            r.warmup = !was_warm;
        }
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
