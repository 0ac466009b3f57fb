//! Maintenance windows: whether a target is in one at a given instant, until when and why.
//! Two kinds: the config's recurring windows (`maintenance:`, a cron start and a duration) and
//! windows announced at run time (`POST /-/maintenance`, e.g. by a deploy job). Runs go on
//! during a window; they are flagged, so uptime leaves them out and alert rules hold.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::config::{Config, MaintenanceWindow};

/// How many fire times of one recurring window are walked back over at most, to find the
/// latest start before an instant: a per-second schedule with a day's duration would
/// otherwise cost 86,400 steps per question. Past this, the window counts as open for its
/// duration from the instant asked about.
const MAX_STARTS: usize = 4096;

/// A window a target is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    #[serde(serialize_with = "rfc3339")]
    pub until: Timestamp,
    pub reason: Option<String>,
    /// Announced through `POST /-/maintenance` rather than configured.
    pub announced: bool,
}

fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.round(jiff::Unit::Second).unwrap_or(*t))
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

impl MaintenanceWindow {
    /// The occurrence covering `at`, if any: the latest start at or before `at` whose end is
    /// after it.
    pub fn covering(&self, at: Timestamp) -> Option<Window> {
        let len = signed(self.duration);
        let from = at.checked_sub(len).ok()?;
        // Strictly after `from`: a window that ended exactly at `at` is over.
        let mut cursor = from.to_zoned(self.timezone.clone());
        let mut latest = None;
        for _ in 0..MAX_STARTS {
            match self.schedule.next_after(&cursor) {
                Some(start) if start.timestamp() <= at => {
                    latest = Some(start.timestamp());
                    cursor = start;
                }
                _ => break,
            }
        }
        let start = latest?;
        Some(Window {
            until: start.checked_add(len).unwrap_or(Timestamp::MAX),
            reason: self.reason.clone(),
            announced: false,
        })
    }

    /// The next start strictly after `at`.
    fn next_start(&self, at: Timestamp) -> Option<Timestamp> {
        let z = at.to_zoned(self.timezone.clone());
        self.schedule.next_after(&z).map(|s| s.timestamp())
    }
}

/// The windows announced at run time, one per target (a new announcement replaces the old;
/// a zero duration ends it). Kept in memory: a restart forgets them.
#[derive(Debug, Default)]
pub(crate) struct Announced(Mutex<HashMap<String, Window>>);

impl Announced {
    /// Opens (or with a zero duration, closes) `target`'s announced window from `now`.
    pub(crate) fn announce(
        &self,
        target: &str,
        duration: Duration,
        reason: Option<String>,
        now: Timestamp,
    ) -> Option<Window> {
        let mut map = self.0.lock().expect("maintenance lock");
        if duration.is_zero() {
            map.remove(target);
            return None;
        }
        let w = Window {
            until: now.checked_add(signed(duration)).unwrap_or(Timestamp::MAX),
            reason,
            announced: true,
        };
        map.insert(target.to_string(), w.clone());
        Some(w)
    }

    fn get(&self, target: &str, at: Timestamp) -> Option<Window> {
        let map = self.0.lock().expect("maintenance lock");
        map.get(target).filter(|w| w.until > at).cloned()
    }

    /// Forgets windows that ended, and those of targets that left the config.
    pub(crate) fn prune(&self, cfg: &Config, at: Timestamp) {
        let mut map = self.0.lock().expect("maintenance lock");
        map.retain(|t, w| w.until > at && cfg.target(t).is_some());
    }

    fn ends(&self) -> Vec<Timestamp> {
        let map = self.0.lock().expect("maintenance lock");
        map.values().map(|w| w.until).collect()
    }
}

/// The window `target` is in at `at`: of the configured and announced ones covering it, the
/// one that ends last.
pub(crate) fn active(
    cfg: &Config,
    announced: &Announced,
    target: &str,
    at: Timestamp,
) -> Option<Window> {
    cfg.maintenance
        .iter()
        .filter(|w| w.targets.iter().any(|t| t == target))
        .filter_map(|w| w.covering(at))
        .chain(announced.get(target, at))
        .max_by_key(|w| w.until)
}

/// The first instant after `at` when some target may enter or leave a window.
pub(crate) fn next_change(cfg: &Config, announced: &Announced, at: Timestamp) -> Option<Timestamp> {
    let configured = cfg.maintenance.iter().flat_map(|w| {
        let end = w.covering(at).map(|c| c.until);
        end.into_iter().chain(w.next_start(at))
    });
    configured.chain(announced.ends()).filter(|t| *t > at).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Cron;

    fn window(cron: &str, tz: &str, minutes: u64) -> MaintenanceWindow {
        MaintenanceWindow {
            targets: vec!["t".into()],
            schedule: Cron::parse(cron).unwrap().into(),
            timezone: jiff::tz::TimeZone::get(tz).unwrap(),
            duration: Duration::from_secs(minutes * 60),
            reason: Some("weekly restart".into()),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_window_covers_its_start_and_not_its_end() {
        // Sundays 03:00 in Paris (UTC+1 in January) for 30 minutes.
        let w = window("0 3 * * 0", "Europe/Paris", 30);
        assert_eq!(w.covering(ts("2025-01-05T01:59:59Z")), None);
        let open = w.covering(ts("2025-01-05T02:00:00Z")).unwrap();
        assert_eq!(open.until, ts("2025-01-05T02:30:00Z"));
        assert_eq!(open.reason.as_deref(), Some("weekly restart"));
        assert!(w.covering(ts("2025-01-05T02:29:59Z")).is_some());
        assert_eq!(w.covering(ts("2025-01-05T02:30:00Z")), None);
        assert_eq!(w.covering(ts("2025-01-06T02:10:00Z")), None, "a Monday");
        assert_eq!(
            w.next_start(ts("2025-01-05T02:30:00Z")),
            Some(ts("2025-01-12T02:00:00Z"))
        );
    }

    #[test]
    fn overlapping_starts_end_with_the_latest() {
        // Every 10 minutes for 25: always open, ending 25 minutes after the latest start.
        let w = window("*/10 * * * *", "UTC", 25);
        let open = w.covering(ts("2025-01-05T10:17:00Z")).unwrap();
        assert_eq!(open.until, ts("2025-01-05T10:35:00Z"));
    }

    #[test]
    fn announced_windows_end_replace_and_close() {
        let a = Announced::default();
        let now = ts("2025-01-05T10:00:00Z");
        let w = a
            .announce("t", Duration::from_secs(600), Some("deploy".into()), now)
            .unwrap();
        assert_eq!(w.until, ts("2025-01-05T10:10:00Z"));
        assert!(a.get("t", ts("2025-01-05T10:09:59Z")).is_some());
        assert!(a.get("t", ts("2025-01-05T10:10:00Z")).is_none());
        assert!(a.get("u", now).is_none());
        a.announce("t", Duration::from_secs(60), None, now);
        assert_eq!(a.get("t", now).unwrap().until, ts("2025-01-05T10:01:00Z"));
        assert_eq!(a.announce("t", Duration::ZERO, None, now), None);
        assert!(a.get("t", now).is_none(), "a zero duration ends it");
    }
}
