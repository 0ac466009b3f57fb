//! When a pair goes down or comes back: the one log line a person watching the daemon needs
//! per change, rather than one per run. A pair is down from a failed firing that follows a
//! success, or that is its first since the daemon started; it is back at its first success
//! after that.

use std::collections::HashMap;
use std::sync::Mutex;

use super::state::PairKey;

/// What a firing changed about its pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Down,
    /// Back after this many failed firings in a row.
    Back {
        failed: u32,
    },
}

/// Each pair's failed firings in a row since its last success (0: up), by pair; a pair not
/// seen yet has not fired since the start.
#[derive(Debug, Default)]
pub(super) struct Health(Mutex<HashMap<PairKey, u32>>);

impl Health {
    /// Takes in one firing of `pair`, in the order firings end.
    pub(super) fn note(&self, pair: &PairKey, success: bool) -> Option<Change> {
        let mut pairs = self.0.lock().expect("health lock");
        let failed = pairs.get(pair).copied();
        match (failed, success) {
            (Some(0), true) => None,
            (Some(n), true) => {
                pairs.insert(pair.clone(), 0);
                Some(Change::Back { failed: n })
            }
            (None, true) => {
                pairs.insert(pair.clone(), 0);
                None
            }
            (Some(0) | None, false) => {
                pairs.insert(pair.clone(), 1);
                Some(Change::Down)
            }
            (Some(n), false) => {
                pairs.insert(pair.clone(), n.saturating_add(1));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_change_per_turn_not_per_run() {
        let h = Health::default();
        let p = ("p".to_string(), "t".to_string());
        let seen: Vec<_> = [true, true, false, false, false, true, true, false]
            .into_iter()
            .map(|ok| h.note(&p, ok))
            .collect();
        assert_eq!(
            seen,
            [
                None,
                None,
                Some(Change::Down),
                None,
                None,
                Some(Change::Back { failed: 3 }),
                None,
                Some(Change::Down),
            ]
        );
    }

    #[test]
    fn a_first_firing_that_fails_is_down_and_one_that_succeeds_says_nothing() {
        let h = Health::default();
        let (a, b) = (
            ("p".to_string(), "a".to_string()),
            ("p".to_string(), "b".to_string()),
        );
        assert_eq!(h.note(&a, false), Some(Change::Down));
        assert_eq!(h.note(&b, true), None);
        assert_eq!(h.note(&a, true), Some(Change::Back { failed: 1 }));
    }
}
