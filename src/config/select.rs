//! Which (probe, target) pairs a command runs, and names looked up with an error that lists
//! the ones there are: one way for `once`, the daemon, `/probe`, the gate and `calibrate`.

use std::sync::Arc;

use super::{Config, Probe, Target};
use crate::util::unknown_name;

/// A probe and one of its targets.
pub(crate) type Pair = (Arc<Probe>, Arc<Target>);

/// Named probes and targets (none named: all of them), within this agent's shard or not.
#[derive(Debug, Default, Clone, Copy)]
pub struct Selection<'a> {
    pub probes: &'a [String],
    pub targets: &'a [String],
    /// Only the pairs `agent.shard` gives this agent (what the daemon schedules).
    pub in_shard: bool,
}

impl Selection<'_> {
    /// Every pair this agent schedules.
    pub const SCHEDULED: Selection<'static> = Selection {
        probes: &[],
        targets: &[],
        in_shard: true,
    };
}

/// A name the config does not have; the sentence lists the ones it has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownName(String);

impl Config {
    pub fn target(&self, name: &str) -> Option<&Arc<Target>> {
        self.targets.iter().find(|t| t.name == name)
    }

    pub fn probe(&self, name: &str) -> Option<&Arc<Probe>> {
        self.probes.iter().find(|p| p.name == name)
    }

    /// The target named `name`; `what` says what the caller asked for ("target", "baseline
    /// target").
    pub fn known_target(&self, what: &str, name: &str) -> Result<&Arc<Target>, UnknownName> {
        self.target(name).ok_or_else(|| {
            UnknownName(unknown_name(
                what,
                name,
                self.targets.iter().map(|t| t.name.as_str()),
            ))
        })
    }

    pub fn known_probe(&self, name: &str) -> Result<&Arc<Probe>, UnknownName> {
        self.probe(name).ok_or_else(|| {
            UnknownName(unknown_name(
                "probe",
                name,
                self.probes.iter().map(|p| p.name.as_str()),
            ))
        })
    }

    /// The pairs `sel` names, in config order: each selected probe with those of its own
    /// targets that are selected. Every name must exist (probes are checked first).
    pub fn pairs(&self, sel: &Selection) -> Result<Vec<Pair>, UnknownName> {
        for p in sel.probes {
            self.known_probe(p)?;
        }
        for t in sel.targets {
            self.known_target("target", t)?;
        }
        let shard = self.agent.shard.filter(|_| sel.in_shard);
        let chosen = |names: &[String], name: &String| names.is_empty() || names.contains(name);
        let mut out = Vec::new();
        for p in self.probes.iter().filter(|p| chosen(sel.probes, &p.name)) {
            for t in p.targets.iter().filter(|t| chosen(sel.targets, t)) {
                if let Some(t) = self.target(t).filter(|t| in_shard(&p.name, &t.name, shard)) {
                    out.push((p.clone(), t.clone()));
                }
            }
        }
        Ok(out)
    }
}

/// Whether shard `i/n` owns the pair (`None`: one agent owns everything), by the pair's stable
/// hash, so every agent of a fleet agrees on the shards.
pub(super) fn in_shard(probe: &str, target: &str, shard: Option<(u32, u32)>) -> bool {
    match shard {
        Some((i, n)) => crate::util::pair_hash(probe, target) % u64::from(n) == u64::from(i - 1),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_pair_exactly_once() {
        let mut owners = std::collections::HashMap::new();
        for p in 0..40 {
            for t in 0..25 {
                let (p, t) = (format!("probe-{p}"), format!("target-{t}"));
                let o: Vec<u32> = (1..=3)
                    .filter(|&i| in_shard(&p, &t, Some((i, 3))))
                    .collect();
                assert_eq!(o.len(), 1, "{p} {t}: {o:?}");
                *owners.entry(o[0]).or_insert(0) += 1;
            }
        }
        // Roughly even: each shard holds a fair share of the 1000 pairs.
        assert!(
            owners.values().all(|&n| (250..420).contains(&n)),
            "{owners:?}"
        );
        assert!(in_shard("a", "b", None));
    }
}
