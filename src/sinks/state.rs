//! The status vocabulary (up, degraded, down, maintenance, pending) and the rule that decides
//! it from a pair's last runs and a target's pairs: shared by the status page, which shows it,
//! and the incident detector, which opens and closes incidents on it.
//!
//! The rule is the paging alert's (`LLMCanaryTargetDown`): that alert fires on a confirmed
//! failure (a run and its confirmation runs all failed) or, without confirmation runs, on two
//! failed runs in a row held for 3 minutes, and resolves at the first success. A pair is *down*
//! once its last two runs failed (so no later than the alert fires), *degraded* while only its
//! last run failed, and *up* again at its first success (when the alert resolves).

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

    /// How many of the latest runs failed in a row (at most `RECENT_RUNS`).
    pub(crate) fn failed_in_a_row(&self) -> u8 {
        (self.bits.trailing_ones() as u8).min(self.n)
    }
}

/// Failed runs in a row that make a pair down: a run and its first confirmation run, or two
/// scheduled runs.
pub(crate) const DOWN_IN_A_ROW: u8 = 2;

/// A pair's state from how many `runs` it has had (up to `RECENT_RUNS`) and how many of the
/// latest failed in a row.
pub(crate) fn pair_state(runs: u8, failed_in_a_row: u8, in_maintenance: bool) -> State {
    if in_maintenance {
        State::Maintenance
    } else if runs == 0 {
        State::Pending
    } else if failed_in_a_row >= DOWN_IN_A_ROW {
        State::Down
    } else if failed_in_a_row == 1 {
        State::Degraded
    } else {
        State::Up
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
