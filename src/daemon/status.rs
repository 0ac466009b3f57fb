//! What the status page, `/api/v1/status` and the badges show: each target and probe's state,
//! judged from the history and the maintenance windows by the rule written out below (and on
//! the page), as plain data. Rendering lives in `status_page`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::history::{self, TargetDays};
use super::state::Shared;
use crate::config::{Config, Target};
use crate::maintenance::Window;
use crate::sinks::state::RECENT_RUNS;
pub(crate) use crate::sinks::state::{target_state, State};
use crate::sinks::status_history::PairSnapshot;

/// The rule, as the page states it. `pair_state` and `target_state` are its code.
pub(crate) const RULES: [(&str, &str); 5] = [
    ("up", "the last run succeeded: a pair is up again at its first success, when the paging alert resolves"),
    ("degraded", "the last run failed, the one before it did not (for a target: some of its probes are degraded or down)"),
    ("down", "the last two runs failed, a run and its confirmation or two scheduled runs: no later than the paging alert fires (a target: all its probes are down)"),
    ("maintenance", "the target is in a maintenance window now: runs go on, are flagged, and are left out of uptime"),
    ("pending", "no run yet"),
];

/// Uptime is successful runs over runs outside maintenance windows, in whole slots: 1 h is
/// the last twelve 5-minute slots, 24 h the last 288, 7 d the last 168 hourly slots.
pub(crate) const UPTIME_RULE: &str = "Uptime: successful runs over runs outside maintenance windows, counted in whole slots (1 h and 24 h: 5-minute slots; 7 d: hourly slots). TTFT leaves warm-up runs out.";

/// A pair's state from its last runs (at most `RECENT_RUNS`).
pub(crate) fn pair_state(s: &PairSnapshot, in_maintenance: bool) -> State {
    crate::sinks::state::pair_state(s.recent_runs, s.recent_failed_in_a_row, in_maintenance)
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ProbeStatus {
    pub state: State,
    pub uptime_1h: Option<f64>,
    pub uptime_24h: Option<f64>,
    pub uptime_7d: Option<f64>,
    #[serde(flatten)]
    pub history: PairSnapshot,
}

/// A target as `/api/v1/status` has it; `watch --from` reads it back with the same type.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TargetStatus {
    pub target: String,
    pub model: String,
    pub state: State,
    pub maintenance: Option<Window>,
    pub probes: Vec<ProbeStatus>,
    /// The last 90 days, pooled over the probes: the page's bars (`/api/v1/history` serves them).
    #[serde(skip)]
    pub days: TargetDays,
}

/// One target as of `now`, with its pairs (in probe order).
fn target_status(shared: &Shared, cfg: &Config, t: &Target, now: Timestamp) -> TargetStatus {
    let window = shared.maintenance().active(cfg, &t.name, now);
    let probes: Vec<ProbeStatus> = shared
        .snapshot_target(&t.name, now)
        .into_iter()
        .map(|s| ProbeStatus {
            state: pair_state(&s, window.is_some()),
            uptime_1h: s.last_1h.uptime(),
            uptime_24h: s.last_24h.uptime(),
            uptime_7d: s.last_7d.uptime(),
            history: s,
        })
        .collect();
    let states: Vec<State> = probes.iter().map(|p| p.state).collect();
    TargetStatus {
        target: t.name.clone(),
        model: t.model.clone(),
        state: target_state(&states, window.is_some()),
        maintenance: window,
        probes,
        days: history::pool(&shared.days_target(&t.name, now)),
    }
}

/// Every configured target (in config order) as of `now`, built as it is taken: a renderer
/// holds one target's series at a time, not 100 pairs' worth.
pub(crate) fn targets(shared: &Shared, now: Timestamp) -> impl Iterator<Item = TargetStatus> + '_ {
    let cfg = shared.cfg();
    (0..cfg.targets.len()).map(move |i| target_status(shared, &cfg, &cfg.targets[i], now))
}

/// One target as of `now` (for its badge).
pub(crate) fn target(shared: &Shared, name: &str, now: Timestamp) -> Option<TargetStatus> {
    let cfg = shared.cfg();
    let t = cfg.target(name)?;
    Some(target_status(shared, &cfg, t, now))
}

/// What the page and the JSON say above the targets.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub agent: String,
    pub generated_at: Timestamp,
    /// Pairs on the page, to size its buffer.
    pub pairs: usize,
}

pub(crate) fn head(shared: &Shared, now: Timestamp) -> Head {
    Head {
        agent: shared.cfg().agent.name.clone(),
        generated_at: now,
        pairs: shared.scheduled_count(),
    }
}

/// `/api/v1/status`: `{agent, generated_at, recent_runs, targets: [...]}`, written one target
/// at a time.
pub(crate) fn json(head: &Head, targets: impl Iterator<Item = TargetStatus>) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096 + head.pairs * 8 * 1024);
    let top = serde_json::json!({
        "agent": head.agent,
        "generated_at": head.generated_at,
        "recent_runs": RECENT_RUNS,
    })
    .to_string();
    // `{...}` with the targets appended before its closing brace.
    out.extend_from_slice(&top.as_bytes()[..top.len() - 1]);
    out.extend_from_slice(b",\"targets\":[");
    for (i, t) in targets.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Writing into memory fails only on a value serde cannot write, which these are not.
        let _ = serde_json::to_writer(&mut out, &t);
    }
    out.extend_from_slice(b"]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_is_one_object_with_every_target() {
        let head = Head {
            agent: "a\"b".into(),
            generated_at: Timestamp::UNIX_EPOCH,
            pairs: 0,
        };
        let t = |name: &str| TargetStatus {
            target: name.into(),
            model: "m".into(),
            state: State::Pending,
            maintenance: None,
            probes: vec![],
            days: TargetDays::default(),
        };
        let v: serde_json::Value =
            serde_json::from_slice(&json(&head, [t("x"), t("y")].into_iter())).unwrap();
        assert_eq!(v["agent"], "a\"b");
        assert_eq!(v["recent_runs"], 5);
        assert_eq!(v["targets"][1]["target"], "y");
        assert_eq!(v["targets"][0]["state"], "pending");
        let v: serde_json::Value =
            serde_json::from_slice(&json(&head, std::iter::empty())).unwrap();
        assert_eq!(v["targets"], serde_json::json!([]));
    }

    #[test]
    fn states_follow_the_written_rule() {
        let h = crate::sinks::status_history::StatusHistory::default();
        h.retain_pairs(&[("p".into(), "t".into())]);
        let mut s = h.snapshot(Timestamp::UNIX_EPOCH).remove(0);
        assert_eq!(pair_state(&s, false), State::Pending);
        assert_eq!(pair_state(&s, true), State::Maintenance);
        for (runs, in_a_row, want) in [
            (5, 0, State::Up),
            (1, 1, State::Degraded),
            (5, 1, State::Degraded),
            (2, 2, State::Down),
            (5, 5, State::Down),
        ] {
            (s.recent_runs, s.recent_failed_in_a_row) = (runs, in_a_row);
            assert_eq!(pair_state(&s, false), want, "{in_a_row} in a row of {runs}");
            assert_eq!(pair_state(&s, true), State::Maintenance);
        }
        use State::*;
        assert_eq!(target_state(&[Up, Up], false), Up);
        assert_eq!(target_state(&[Up, Pending], false), Up);
        assert_eq!(target_state(&[Up, Down], false), Degraded);
        assert_eq!(target_state(&[Degraded], false), Degraded);
        assert_eq!(target_state(&[Down, Down, Pending], false), Down);
        assert_eq!(target_state(&[Pending], false), Pending);
        assert_eq!(target_state(&[], false), Pending);
        assert_eq!(target_state(&[Down], true), Maintenance);
    }
}
