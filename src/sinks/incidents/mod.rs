//! Incidents: a target's spells of `down` or `degraded`, decided by the status page's own rule
//! (a pair's last runs, a target's pairs). One opens on the run that turns the target down or
//! degraded (its first failed run) and closes on the run that makes it up again (the first good
//! one), so its length is the outage's, whatever the cadence. A run in a maintenance window counts
//! among the pair's last runs but neither opens nor closes one.
//!
//! [`Incidents`] is a pure fold over runs in the order they started: the daemon feeds it each
//! result and, at start, the results log; [`detect`] does the same for any sequence of runs.
//!
//! Kept: incidents that ended within the retention (`status.history`, 90 days by default),
//! and at most [`MAX_INCIDENTS`] in all (the oldest go first): each is about 0.5 KiB with its
//! sentence clipped to 200 characters, so the list stays under 0.5 MiB.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::sinks::state::{pair_state, target_state, Recent, State};
use crate::sinks::status_history::{sentence, Run};

/// Incidents kept at most, open ones included.
pub(crate) const MAX_INCIDENTS: usize = 1000;

/// One spell of a target being down or degraded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Incident {
    /// `<target>-<start in Unix milliseconds>`: the same after a restart, since the start is
    /// the opening run's.
    pub id: String,
    pub target: String,
    /// The worst state it reached: `down` or `degraded`.
    pub state: State,
    /// When the run that opened it started.
    pub started_at: Timestamp,
    /// When the run that closed it started; `None` while it is open.
    pub ended_at: Option<Timestamp>,
    /// To its end, or while it is open to the latest run of the target.
    pub duration_seconds: i64,
    /// Failed runs seen in it (outside maintenance), counted by outcome.
    pub outcomes: BTreeMap<String, u32>,
    /// The sentence of the first failed run.
    pub first_error: String,
}

impl Incident {
    pub(crate) fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }

    /// The last time it changed: its end, or its start while open.
    pub(crate) fn updated_at(&self) -> Timestamp {
        self.ended_at.unwrap_or(self.started_at)
    }
}

/// The incident detector's state as the status store keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SavedIncidents {
    /// (probe, target, the pair's last runs).
    pub recent: Vec<(String, String, Recent)>,
    pub list: Vec<Incident>,
}

/// The incident detector's running state.
#[derive(Debug)]
pub(crate) struct Incidents {
    retention: SignedDuration,
    /// The pairs that count (the configured ones); `None`: every pair seen.
    pairs_kept: Option<HashSet<(String, String)>>,
    /// Per target, its pairs' last runs.
    recent: HashMap<String, BTreeMap<String, Recent>>,
    /// Oldest first; at most one open per target.
    list: VecDeque<Incident>,
}

impl Incidents {
    pub(crate) fn new(retention: std::time::Duration) -> Incidents {
        Incidents {
            retention: SignedDuration::try_from(retention).unwrap_or(SignedDuration::MAX),
            pairs_kept: None,
            recent: HashMap::new(),
            list: VecDeque::new(),
        }
    }

    /// Keeps incidents that ended within `retention` from now on.
    pub(crate) fn set_retention(&mut self, retention: std::time::Duration) {
        self.retention = SignedDuration::try_from(retention).unwrap_or(SignedDuration::MAX);
    }

    /// Counts only these (probe, target) pairs from now on, and forgets the others' runs, as
    /// the status page does.
    pub(crate) fn retain_pairs(&mut self, pairs: &[(String, String)]) {
        let keep: HashSet<(String, String)> = pairs.iter().cloned().collect();
        for (target, probes) in self.recent.iter_mut() {
            probes.retain(|p, _| keep.contains(&(p.clone(), target.clone())));
        }
        self.recent.retain(|_, probes| !probes.is_empty());
        self.pairs_kept = Some(keep);
    }

    /// Takes in one run (runs in the order they started).
    pub(crate) fn record(&mut self, run: &Run) {
        self.fold(run);
    }

    /// Takes in one run and answers what it changed, for the status store: the pair's last
    /// runs and the incident the run opened, extended or closed. `None` for a pair not kept.
    pub(crate) fn record_saved(&mut self, run: &Run) -> Option<(Recent, Option<Incident>)> {
        let id = self.fold(run)?;
        let recent = self
            .recent
            .get(&run.target)
            .and_then(|p| p.get(&run.probe))
            .copied()
            .unwrap_or_default();
        let touched = id.and_then(|id| self.list.iter().rev().find(|i| i.id == id).cloned());
        Some((recent, touched))
    }

    /// What it holds, for the status store: each pair's last runs and every incident kept.
    pub(crate) fn saved(&self) -> SavedIncidents {
        SavedIncidents {
            recent: (self.recent.iter())
                .flat_map(|(t, probes)| probes.iter().map(move |(p, r)| (p.clone(), t.clone(), *r)))
                .collect(),
            list: self.list.iter().cloned().collect(),
        }
    }

    /// Puts back what was saved (for the pairs kept), then drops what the retention and the
    /// cap leave out as of `now`.
    pub(crate) fn restore(&mut self, saved: SavedIncidents, now: Timestamp) {
        for (probe, target, r) in saved.recent {
            let kept = (self.pairs_kept.as_ref())
                .is_none_or(|k| k.contains(&(probe.clone(), target.clone())));
            if kept {
                self.recent.entry(target).or_default().insert(probe, r);
            }
        }
        let mut list = saved.list;
        list.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
        self.list = list.into();
        self.prune(now);
    }

    /// The fold's step: `None` for a pair not kept, else the id of the incident the run opened,
    /// extended or closed, if any.
    fn fold(&mut self, run: &Run) -> Option<Option<String>> {
        if let Some(keep) = &self.pairs_kept {
            if !keep.contains(&(run.probe.clone(), run.target.clone())) {
                return None;
            }
        }
        let probes = self.recent.entry(run.target.clone()).or_default();
        probes
            .entry(run.probe.clone())
            .or_default()
            .push(run.success);
        let states: Vec<State> = probes
            .values()
            .map(|r| pair_state(r.runs(), r.failed_in_a_row(), false))
            .collect();
        let state = target_state(&states, false);
        let open = self
            .list
            .iter_mut()
            .rev()
            .find(|i| i.target == run.target && i.is_open());
        let touched = match (open, state) {
            _ if run.maintenance => None,
            (Some(i), State::Up) => {
                i.ended_at = Some(run.started_at);
                i.duration_seconds = seconds(run.started_at.duration_since(i.started_at));
                Some(i.id.clone())
            }
            (Some(i), s) => {
                if s == State::Down {
                    i.state = State::Down;
                }
                i.duration_seconds = seconds(run.started_at.duration_since(i.started_at));
                if !run.success {
                    *i.outcomes.entry(run.outcome.clone()).or_default() += 1;
                }
                Some(i.id.clone())
            }
            (None, s @ (State::Down | State::Degraded)) => {
                let id = format!("{}-{}", run.target, run.started_at.as_millisecond());
                self.list.push_back(Incident {
                    id: id.clone(),
                    target: run.target.clone(),
                    state: s,
                    started_at: run.started_at,
                    ended_at: None,
                    duration_seconds: 0,
                    outcomes: BTreeMap::from([(run.outcome.clone(), 1)]),
                    first_error: sentence(run),
                });
                Some(id)
            }
            (None, _) => None,
        };
        self.prune(run.started_at);
        Some(touched)
    }

    /// Drops incidents that ended before the retention, then the oldest past the cap.
    fn prune(&mut self, now: Timestamp) {
        let horizon = now.checked_sub(self.retention).unwrap_or(Timestamp::MIN);
        self.list
            .retain(|i| i.ended_at.is_none_or(|end| end >= horizon));
        while self.list.len() > MAX_INCIDENTS {
            self.list.pop_front();
        }
    }

    /// The incidents, the latest started first (then by id); only `target`'s when given.
    pub(crate) fn list(&self, target: Option<&str>) -> Vec<Incident> {
        let mut out: Vec<Incident> = self
            .list
            .iter()
            .filter(|i| target.is_none_or(|t| i.target == t))
            .cloned()
            .collect();
        // The log holds runs as they finished: of two targets, the later start may come first.
        out.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.id.cmp(&b.id)));
        out
    }
}

fn seconds(d: SignedDuration) -> i64 {
    d.as_secs().max(0)
}

/// Every incident in `runs` (in the order they started), oldest first, however old.
pub(crate) fn detect<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Vec<Incident> {
    let mut inc = Incidents::new(std::time::Duration::MAX);
    for r in runs {
        inc.record(r);
    }
    inc.list.into_iter().collect()
}

#[cfg(test)]
mod tests;
