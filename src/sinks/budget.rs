//! What probing spent today and this month (UTC), against `agent.budget`: counted from the
//! agent's start, as runs are recorded.

use crate::config::Budget;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Daily,
    Monthly,
}

impl Period {
    pub(crate) const ALL: [Period; 2] = [Period::Daily, Period::Monthly];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Monthly => "monthly",
        }
    }
}

/// The spend of the current day and month, and whether each is over its budget.
#[derive(Debug, Default)]
pub(crate) struct Spend {
    day: Option<jiff::civil::Date>,
    month: Option<(i16, i8)>,
    spent: [f64; 2],
    over: [bool; 2],
}

/// A period's spend crossed its budget, or a new period began with the budget whole again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Exceeded {
        period: Period,
        spent: f64,
        budget: f64,
    },
    Reset(Period),
}

impl Spend {
    /// Adds `cost` spent at `at`; what changed.
    pub(crate) fn add(&mut self, cost: f64, at: jiff::Timestamp, budget: &Budget) -> Vec<Change> {
        let date = at.to_zoned(jiff::tz::TimeZone::UTC).date();
        let mut changes = Vec::new();
        let keys = [
            self.day != Some(date),
            self.month != Some((date.year(), date.month())),
        ];
        for (i, fresh) in keys.into_iter().enumerate() {
            if fresh {
                self.spent[i] = 0.0;
                if std::mem::take(&mut self.over[i]) {
                    changes.push(Change::Reset(Period::ALL[i]));
                }
            }
        }
        (self.day, self.month) = (Some(date), Some((date.year(), date.month())));
        let limits = [budget.daily, budget.monthly];
        for (i, limit) in limits.into_iter().enumerate() {
            self.spent[i] += cost;
            if let Some(limit) = limit {
                if !self.over[i] && self.spent[i] > limit {
                    self.over[i] = true;
                    changes.push(Change::Exceeded {
                        period: Period::ALL[i],
                        spent: self.spent[i],
                        budget: limit,
                    });
                }
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> jiff::Timestamp {
        s.parse().expect("a time")
    }

    #[test]
    fn over_once_a_period_and_whole_again_the_next_day() {
        let b = Budget {
            daily: Some(1.0),
            monthly: Some(1.5),
            currency: "USD".into(),
        };
        let mut s = Spend::default();
        assert!(s.add(0.6, at("2026-01-31T10:00:00Z"), &b).is_empty());
        let over = s.add(0.6, at("2026-01-31T11:00:00Z"), &b);
        assert!(
            matches!(
                over.as_slice(),
                [Change::Exceeded {
                    period: Period::Daily,
                    ..
                }]
            ),
            "{over:?}"
        );
        // Said once, not on every run after.
        assert!(s.add(0.1, at("2026-01-31T12:00:00Z"), &b).is_empty());
        // A new day (and a new month): both budgets whole again; the day spends 0.2.
        let next = s.add(0.2, at("2026-02-01T00:00:01Z"), &b);
        assert_eq!(next, vec![Change::Reset(Period::Daily)]);
        let next = s.add(1.2, at("2026-02-01T01:00:00Z"), &b);
        assert!(
            matches!(next.as_slice(), [Change::Exceeded { period: Period::Daily, spent, .. }] if (spent - 1.4).abs() < 1e-9),
            "{next:?}"
        );
        let month = s.add(0.2, at("2026-02-02T01:00:00Z"), &b);
        assert!(
            matches!(
                month.as_slice(),
                [
                    Change::Reset(Period::Daily),
                    Change::Exceeded {
                        period: Period::Monthly,
                        ..
                    }
                ]
            ),
            "{month:?}"
        );
    }
}
