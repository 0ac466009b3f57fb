//! When a pair goes down or comes back: the one log line a person watching the daemon needs
//! per change, rather than one per run. Down and back are the status page's (`sinks::state`):
//! a pair is down at its second failed run in a row (a run and its confirmation, or two
//! scheduled runs), and back at its first success after that.

use std::collections::HashMap;
use std::sync::Mutex;

use super::state::PairKey;
use crate::sinks::state::DOWN_IN_A_ROW;

/// What a run changed about its pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Down,
    /// Back after this many failed runs in a row.
    Back {
        failed: u32,
    },
}

/// Each pair's failed runs in a row (0: its last run succeeded), by pair.
#[derive(Debug, Default)]
pub(super) struct Health(Mutex<HashMap<PairKey, u32>>);

impl Health {
    /// Takes in one firing of `pair` (one run, or a cache check's or ladder's runs judged as
    /// one), in the order firings end.
    pub(super) fn note(&self, pair: &PairKey, success: bool) -> Option<Change> {
        let mut pairs = self.0.lock().expect("health lock");
        // The pair's key is copied once, at its first failure, not on every run.
        let failed = match pairs.get_mut(pair) {
            Some(f) => f,
            None if success => return None,
            None => pairs.entry(pair.clone()).or_insert(0),
        };
        let down = u32::from(DOWN_IN_A_ROW);
        if success {
            let was = std::mem::take(failed);
            (was >= down).then_some(Change::Back { failed: was })
        } else {
            *failed = failed.saturating_add(1);
            (*failed == down).then_some(Change::Down)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_change_per_turn_not_per_run_as_the_page_judges() {
        let h = Health::default();
        let p = ("p".to_string(), "t".to_string());
        let seen: Vec<_> = [true, false, false, false, true, true, false, false]
            .into_iter()
            .map(|ok| h.note(&p, ok))
            .collect();
        assert_eq!(
            seen,
            [
                None,
                // One failure: degraded on the page, no line.
                None,
                Some(Change::Down),
                None,
                Some(Change::Back { failed: 3 }),
                None,
                None,
                Some(Change::Down),
            ]
        );
    }

    #[test]
    fn a_single_failure_says_nothing_and_neither_does_its_recovery() {
        let h = Health::default();
        let (a, b) = (
            ("p".to_string(), "a".to_string()),
            ("p".to_string(), "b".to_string()),
        );
        assert_eq!(h.note(&a, false), None);
        assert_eq!(h.note(&b, true), None);
        assert_eq!(h.note(&a, true), None);
        assert_eq!(h.note(&a, false), None);
        assert_eq!(h.note(&a, false), Some(Change::Down));
        assert_eq!(h.note(&a, true), Some(Change::Back { failed: 2 }));
    }
}
