//! `maintenance:` in `llm-canary.yaml`: recurring windows (a cron start in a time zone, or
//! `@every`, and a duration) during which runs of the named targets go on but are flagged, so
//! alerts can hold.

use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;

use super::raw::RawMaintenance;
use super::{target_names, time_zone, ConfigError, FieldPath, Source, Target};
use crate::schedule::Schedule;

/// One recurring window, validated: its targets exist, its duration is more than nothing.
#[derive(Debug, Clone)]
pub struct MaintenanceWindow {
    pub targets: Vec<String>,
    pub schedule: Schedule,
    pub timezone: TimeZone,
    pub duration: Duration,
    pub reason: Option<String>,
}

pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    raw: Vec<RawMaintenance>,
    targets: &[Arc<Target>],
) -> Result<Vec<MaintenanceWindow>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, w) in raw.into_iter().enumerate() {
        let at = at.index(i);
        let list = &w.targets;
        if list.value.is_empty() {
            return Err(src.err(
                &at.key("targets"),
                list.referenced,
                "a maintenance window needs at least one target",
            ));
        }
        let names = target_names(src, &at.key("targets"), &list.value, targets)?;
        if w.duration.value.0.is_zero() {
            return Err(src.err(
                &at.key("duration"),
                w.duration.referenced,
                "a maintenance window must last more than 0s",
            ));
        }
        out.push(MaintenanceWindow {
            targets: names,
            schedule: w.schedule.0,
            timezone: time_zone(src, &at.key("timezone"), w.timezone.as_ref())?,
            duration: w.duration.value.0,
            reason: w.reason,
        });
    }
    Ok(out)
}
