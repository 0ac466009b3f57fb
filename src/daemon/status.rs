//! What the status page, `/api/v1/status` and the badges show: each target and probe's state,
//! judged from the history and the maintenance windows by the rule written out below (and on
//! the page), as plain data. Rendering lives in `status_page`.

use jiff::Timestamp;
use serde::Serialize;

use super::Agent;
use crate::maintenance::{self, Window};
use crate::sinks::status_history::{PairSnapshot, RECENT_RUNS};

/// A pair's or a target's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Up,
    Degraded,
    Down,
    Maintenance,
    /// No run yet.
    Pending,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Up => "up",
            State::Degraded => "degraded",
            State::Down => "down",
            State::Maintenance => "maintenance",
            State::Pending => "pending",
        }
    }
}

/// The rule, as the page states it. `pair_state` and `target_state` are its code.
pub const RULES: [(&str, &str); 5] = [
    ("up", "none of the last 5 runs failed"),
    ("degraded", "some, but not all, of the last 5 runs failed (for a target: some of its probes are degraded or down)"),
    ("down", "every one of the last 5 runs failed (a target: all its probes are down)"),
    ("maintenance", "the target is in a maintenance window now: runs go on, are flagged, and are left out of uptime"),
    ("pending", "no run yet"),
];

/// Uptime is successful runs over runs outside maintenance windows, in whole slots: 1 h is
/// the last twelve 5-minute slots, 24 h the last 288, 7 d the last 168 hourly slots.
pub const UPTIME_RULE: &str = "Uptime: successful runs over runs outside maintenance windows, counted in whole slots (1 h and 24 h: 5-minute slots; 7 d: hourly slots). TTFT leaves warm-up runs out.";

/// A pair's state from its last runs (at most `RECENT_RUNS`).
pub fn pair_state(s: &PairSnapshot, in_maintenance: bool) -> State {
    if in_maintenance {
        State::Maintenance
    } else if s.recent_runs == 0 {
        State::Pending
    } else if s.recent_failed == 0 {
        State::Up
    } else if s.recent_failed == s.recent_runs {
        State::Down
    } else {
        State::Degraded
    }
}

/// A target's state from its probes' states.
pub fn target_state(probes: &[State], in_maintenance: bool) -> State {
    let judged: Vec<State> = probes
        .iter()
        .copied()
        .filter(|s| *s != State::Pending)
        .collect();
    if in_maintenance {
        State::Maintenance
    } else if judged.is_empty() {
        State::Pending
    } else if judged.iter().all(|s| *s == State::Down) {
        State::Down
    } else if judged.iter().all(|s| *s == State::Up) {
        State::Up
    } else {
        State::Degraded
    }
}

#[derive(Debug, Serialize)]
pub struct ProbeStatus {
    pub state: State,
    pub uptime_1h: Option<f64>,
    pub uptime_24h: Option<f64>,
    pub uptime_7d: Option<f64>,
    #[serde(flatten)]
    pub history: PairSnapshot,
}

#[derive(Debug, Serialize)]
pub struct TargetStatus {
    pub target: String,
    pub model: String,
    pub state: State,
    pub maintenance: Option<Window>,
    pub probes: Vec<ProbeStatus>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub agent: String,
    pub generated_at: Timestamp,
    pub recent_runs: u8,
    pub targets: Vec<TargetStatus>,
}

/// The report as of `now`: every configured target (in config order) with its pairs.
pub fn report(agent: &Agent, now: Timestamp) -> Report {
    let cfg = agent.cfg();
    let mut pairs = agent.history.snapshot(now);
    let targets = cfg
        .targets
        .iter()
        .map(|t| {
            let window = maintenance::active(&cfg, &agent.announced, &t.name, now);
            let mut probes: Vec<ProbeStatus> = Vec::new();
            pairs.retain(|s| {
                if s.target != t.name {
                    return true;
                }
                probes.push(ProbeStatus {
                    state: pair_state(s, window.is_some()),
                    uptime_1h: s.last_1h.uptime(),
                    uptime_24h: s.last_24h.uptime(),
                    uptime_7d: s.last_7d.uptime(),
                    history: s.clone(),
                });
                false
            });
            let states: Vec<State> = probes.iter().map(|p| p.state).collect();
            TargetStatus {
                target: t.name.clone(),
                model: t.model.clone(),
                state: target_state(&states, window.is_some()),
                maintenance: window,
                probes,
            }
        })
        .collect();
    Report {
        agent: cfg.agent.name.clone(),
        generated_at: now,
        recent_runs: RECENT_RUNS,
        targets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_written_rule() {
        let h = crate::sinks::status_history::StatusHistory::default();
        h.retain_pairs(&[("p".into(), "t".into())]);
        let mut s = h.snapshot(Timestamp::UNIX_EPOCH).remove(0);
        assert_eq!(pair_state(&s, false), State::Pending);
        assert_eq!(pair_state(&s, true), State::Maintenance);
        for (runs, failed, want) in [
            (5, 0, State::Up),
            (5, 1, State::Degraded),
            (5, 4, State::Degraded),
            (5, 5, State::Down),
            (2, 2, State::Down),
        ] {
            (s.recent_runs, s.recent_failed) = (runs, failed);
            assert_eq!(pair_state(&s, false), want, "{failed} of {runs}");
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
