//! The status vocabulary (up, degraded, down, maintenance, pending) and the rule that decides
//! it from a pair's last runs and a target's pairs: shared by the status page, which shows it,
//! and the incident detector, which opens and closes incidents on it.

use serde::{Deserialize, Serialize};

/// The runs a pair's state is judged on.
pub(crate) const RECENT_RUNS: u8 = 5;

/// A pair's or a target's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    Up,
    Degraded,
    Down,
    Maintenance,
    /// No run yet.
    Pending,
}

impl State {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Up => "up",
            State::Degraded => "degraded",
            State::Down => "down",
            State::Maintenance => "maintenance",
            State::Pending => "pending",
        }
    }
}

/// The outcomes of a pair's last runs (at most `RECENT_RUNS`): bit i set when the i-th most
/// recent run failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Recent {
    bits: u8,
    n: u8,
}

impl Recent {
    pub(crate) fn push(&mut self, success: bool) {
        self.bits = ((self.bits << 1) | u8::from(!success)) & ((1u8 << RECENT_RUNS) - 1);
        self.n = (self.n + 1).min(RECENT_RUNS);
    }

    /// Runs known, at most `RECENT_RUNS`.
    pub(crate) fn runs(&self) -> u8 {
        self.n
    }

    /// Of those, how many failed.
    pub(crate) fn failed(&self) -> u8 {
        self.bits.count_ones() as u8
    }
}

/// A pair's state from how many of its last `runs` runs `failed`.
pub(crate) fn pair_state(runs: u8, failed: u8, in_maintenance: bool) -> State {
    if in_maintenance {
        State::Maintenance
    } else if runs == 0 {
        State::Pending
    } else if failed == 0 {
        State::Up
    } else if failed == runs {
        State::Down
    } else {
        State::Degraded
    }
}

/// A target's state from its probes' states.
pub(crate) fn target_state(probes: &[State], in_maintenance: bool) -> State {
    let judged = || probes.iter().filter(|s| **s != State::Pending);
    if in_maintenance {
        State::Maintenance
    } else if judged().next().is_none() {
        State::Pending
    } else if judged().all(|s| *s == State::Down) {
        State::Down
    } else if judged().all(|s| *s == State::Up) {
        State::Up
    } else {
        State::Degraded
    }
}
