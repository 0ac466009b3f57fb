//! Confirmation runs: a pair whose run failed is run again `confirm.after` later, before its next
//! scheduled run, until `confirm.runs` more runs have failed in a row or one succeeds. A
//! scheduled run that comes first takes the confirmation's place: what counts is the row of
//! failed runs, whatever started them. When the row reaches 1 + `runs`, the failure is
//! confirmed: `llm_canary_confirmed_failure_timestamp_seconds` says since when, and the down
//! rules page on it at once, whatever the probe's cadence.

use std::time::Duration;

use crate::config::Confirm;

/// One pair's failed runs in a row.
#[derive(Debug, Default)]
pub(super) struct Row {
    failed: u32,
    /// When the first failed run of the row started.
    since: Option<jiff::Timestamp>,
}

/// What a run's outcome calls for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Note {
    /// This run confirmed the row's failure, which began then.
    pub confirmed: Option<jiff::Timestamp>,
    /// Run a confirmation this long after this run.
    pub confirm_after: Option<Duration>,
}

impl Row {
    /// Takes in one run of the pair (scheduled or confirming, in the order they ended).
    pub(super) fn note(
        &mut self,
        confirm: Confirm,
        success: bool,
        started: jiff::Timestamp,
    ) -> Note {
        if success {
            *self = Row::default();
            return Note::default();
        }
        self.failed += 1;
        let since = *self.since.get_or_insert(started);
        if !confirm.is_on() {
            return Note::default();
        }
        if self.failed <= confirm.runs {
            Note {
                confirmed: None,
                confirm_after: Some(confirm.after),
            }
        } else if self.failed == confirm.runs + 1 {
            Note {
                confirmed: Some(since),
                confirm_after: None,
            }
        } else {
            // Confirmed already: the gauge holds, and the schedule goes on alone.
            Note::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn a_failure_is_confirmed_by_runs_more_failures_and_a_success_ends_the_row() {
        let c = Confirm {
            runs: 2,
            after: Duration::from_secs(20),
        };
        let mut row = Row::default();
        let again = Note {
            confirmed: None,
            confirm_after: Some(Duration::from_secs(20)),
        };
        assert_eq!(row.note(c, true, at(0)), Note::default());
        assert_eq!(row.note(c, false, at(60)), again);
        assert_eq!(row.note(c, false, at(80)), again);
        let confirmed = Note {
            confirmed: Some(at(60)),
            confirm_after: None,
        };
        assert_eq!(row.note(c, false, at(100)), confirmed);
        // Still down: nothing more to confirm or re-run.
        assert_eq!(row.note(c, false, at(120)), Note::default());
        // A success ends the row; one blip (a failure, then a successful confirmation) is
        // never confirmed.
        assert_eq!(row.note(c, true, at(180)), Note::default());
        assert_eq!(row.note(c, false, at(240)), again);
        assert_eq!(row.note(c, true, at(260)), Note::default());
        assert_eq!(row.note(c, false, at(300)), again);
        assert_eq!(row.note(c, false, at(320)).confirmed, None);
        assert_eq!(row.note(c, false, at(340)).confirmed, Some(at(300)));
    }

    #[test]
    fn with_confirmation_off_nothing_is_confirmed_or_re_run() {
        let mut row = Row::default();
        for s in 0..5 {
            assert_eq!(row.note(Confirm::OFF, false, at(s)), Note::default());
        }
    }
}
