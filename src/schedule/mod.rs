//! When a probe fires: a [`Schedule`], either a cron expression or a fixed interval
//! ([`Every`]: `every: 5m`, or `@every 5m` in `schedule:`). Everything that needs fire times
//! (the daemon's loops, `check`'s cadence and next fires, its P0-clock warning and cost
//! estimate, maintenance windows) asks that one type, and a pair's jitter shifts either kind
//! by the same stable offset ([`pair_offset`]).
//!
//! Cron expressions are evaluated by the `croner` crate in a time zone (UTC by default). What
//! users write is standard crontab:
//!
//! - 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first; lists,
//!   ranges, `*/n` and `a-b/n` steps; `jan`-`dec` and `sun`-`sat` names; 0 and 7 are Sunday;
//!   `?` is `*` in the two day fields; the macros `@yearly` `@annually` `@monthly` `@weekly`
//!   `@daily` `@midnight` `@hourly`.
//! - Day-of-month and day-of-week combine as in Vixie cron: when both are restricted (anything
//!   but `*` or `?`), either matching is enough. (The Vixie daemon also counts a field that only
//!   starts with `*`, like `*/2`, as unrestricted — the "cron bug"; croner and croniter do not,
//!   nor do we.)
//! - Daylight saving time as in Vixie cron, which tells two kinds of job apart. A fixed-time
//!   expression (no `*` leading the second, minute or hour field: `30 2 * * *`, `0,30 2 * * *`)
//!   runs once for each day it is due: a time the clock skips runs at the first instant after
//!   the jump, and a repeated time runs on its first pass only. Any other expression
//!   (`*/15 * * * *`, `30 * * * *`) runs at every wall-clock time that exists: none in a skipped
//!   hour, twice in a repeated one. croner draws the line elsewhere (it counts only single
//!   values as fixed, so `0,30 2 * * *` would skip a gap and repeat an overlap), so fixed-time
//!   expressions are searched on the civil clock and placed in the zone here.
//!
//! Why croner and not the `cron` crate: `cron` reads day-of-week Quartz-style (1 = Sunday, 0
//! rejected, so `1-5` would fire Sunday to Thursday), wants 6-7 fields and runs on chrono; croner
//! follows POSIX/Vixie and runs on jiff. croner also accepts extensions (`L`, `W`, `#`, a `+`
//! day-of-week prefix, a year field, single-value steps like `5/15`): [`Spec`] reads the
//! expression once and rejects them, so a schedule means the same in any cron; croner reads the
//! spec written back in numbers, so its name handling (which replaces names anywhere in the
//! text) never sees a name.

mod every;
mod spec;

use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, Zoned};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    expr: String,
    inner: croner::Cron,
    spec: Spec,
}

pub(crate) use every::Every;
pub(crate) use spec::{CronError, Item, Spec};

/// When a probe (or a maintenance window) fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Boxed: a compiled expression is large beside an interval.
    Cron(Box<Cron>),
    /// A fixed interval, with the text the user wrote: `@every 5m` in `schedule:`, or the
    /// duration of `every:`.
    Every { every: Every, text: String },
}

impl Schedule {
    /// What the user wrote: the cron expression (or macro), `@every 5m`, or `every:`'s `5m`.
    pub fn as_str(&self) -> &str {
        match self {
            Schedule::Cron(c) => c.as_str(),
            Schedule::Every { text, .. } => text,
        }
    }

    /// The first fire time strictly after `after`, in `after`'s time zone.
    pub fn next_after(&self, after: &Zoned) -> Option<Zoned> {
        match self {
            Schedule::Cron(c) => c.next_after(after),
            Schedule::Every { every, .. } => every.next_after(after),
        }
    }

    /// The first fire time strictly after `after` of the schedule shifted later by `offset`
    /// (a pair's [`pair_offset`]): the same instants for a pair whenever it is asked, so a
    /// restart keeps the phase.
    pub fn next_after_offset(&self, after: &Zoned, offset: Duration) -> Option<Zoned> {
        let shift = jiff::SignedDuration::try_from(offset).ok()?;
        let base = after.timestamp().checked_sub(shift).ok()?;
        let next = self.next_after(&base.to_zoned(after.time_zone().clone()))?;
        Some(
            next.timestamp()
                .checked_add(shift)
                .ok()?
                .to_zoned(after.time_zone().clone()),
        )
    }

    /// The next `n` fire times after `after`.
    pub fn upcoming(&self, after: &Zoned, n: usize) -> Vec<Zoned> {
        let mut out: Vec<Zoned> = Vec::with_capacity(n);
        while out.len() < n {
            match self.next_after(out.last().unwrap_or(after)) {
                Some(z) => out.push(z),
                None => break,
            }
        }
        out
    }
}

/// A pair's stable share of its probe's `jitter:`: the same for the same probe and target on
/// every start and every agent, and spread evenly over `0..jitter` across pairs, so pairs on one
/// schedule do not all fire at the same instant.
pub fn pair_offset(jitter: Duration, probe: &str, target: &str) -> Duration {
    // FNV-1a's high bits hardly change with a name's last characters (`target-1`,
    // `target-2`): MurmurHash3's finalizer spreads every bit over all of them first.
    let mut h = crate::util::pair_hash(probe, target);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    // The top 53 bits: a uniform fraction in [0, 1) that an f64 holds exactly.
    let fraction = (h >> 11) as f64 / (1u64 << 53) as f64;
    jitter.mul_f64(fraction)
}

impl Cron {
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        let trimmed = expr.trim();
        let spec = Spec::parse(trimmed)?;
        let inner = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build()
            .parse(&spec.to_string())
            // Unreachable after the checks of the spec, but croner's word is final.
            .map_err(|e| CronError(format!("croner rejects it: {e}")))?;
        let cron = Cron {
            expr: trimmed.to_string(),
            inner,
            spec,
        };
        // An expression like `0 0 30 2 *` parses but never fires: say so at load.
        let probe = Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC);
        if cron.next_after(&probe).is_none() {
            return Err(CronError("the expression never fires".into()));
        }
        Ok(cron)
    }

    /// The expression's fields, as parsed.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub fn as_str(&self) -> &str {
        &self.expr
    }

    /// The first fire time strictly after `after`, in `after`'s time zone; `None` if there is
    /// none (croner stops searching at the year 5000).
    pub fn next_after(&self, after: &Zoned) -> Option<Zoned> {
        if !self.spec.fixed_time() {
            // Every existing wall-clock time: croner's own rule for such expressions.
            return self.inner.find_next_occurrence(after, false).ok();
        }
        let tz = after.time_zone();
        let mut civil = after.datetime();
        loop {
            civil = self.inner.find_next_occurrence(&civil, false).ok()?;
            let at = tz.to_ambiguous_zoned(civil);
            match at.offset() {
                AmbiguousOffset::Unambiguous { .. } => return at.unambiguous().ok(),
                // The clock skips it: run when the clock lands. Other due times in the same gap
                // are civil times before the landing, so they do not run again.
                AmbiguousOffset::Gap { .. } => {
                    let before_jump = at.earlier().ok()?.timestamp();
                    let landing = tz.following(before_jump).next()?.timestamp();
                    return Some(landing.to_zoned(tz.clone()));
                }
                // The clock repeats it: the first pass only. Starting inside the second pass,
                // the first one is already past, so the search moves on.
                AmbiguousOffset::Fold { .. } => {
                    let first = at.earlier().ok()?;
                    if first.timestamp() > after.timestamp() {
                        return Some(first);
                    }
                }
            }
        }
    }
}

impl From<Cron> for Schedule {
    fn from(c: Cron) -> Schedule {
        Schedule::Cron(Box::new(c))
    }
}

#[cfg(test)]
mod tests;
