//! Cron expressions → next fire times. Accepts the standard 5-field form, the 6-field form with
//! seconds first, and the `@hourly`-style macros; evaluates in a time zone (UTC by default).
//! Day-of-month and day-of-week combine as in Vixie cron: when both are restricted, either
//! matching is enough.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    expr: String,
    seconds: u64,
    minutes: u64,
    hours: u64,
    dom: u64,
    months: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(String);

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    names_from: u32,
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
    names_from: 0,
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    names_from: 0,
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    names_from: 0,
};
const DOM: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    names_from: 0,
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &MONTHS,
    names_from: 1,
};
// 7 is accepted as Sunday and folded onto 0.
const DOW: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &DAYS,
    names_from: 0,
};

impl Field {
    fn value(&self, s: &str) -> Result<u32, CronError> {
        let lower = s.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + self.names_from);
        }
        let v: u32 = s
            .parse()
            .map_err(|_| CronError(format!("{} field: {s:?} is not a number", self.name)))?;
        if v < self.min || v > self.max {
            return Err(CronError(format!(
                "{} field: {v} is out of range {}-{}",
                self.name, self.min, self.max
            )));
        }
        Ok(v)
    }

    /// Parses one field into a bit set; also says whether it was an unrestricted `*` or `?`.
    fn parse(&self, text: &str) -> Result<(u64, bool), CronError> {
        let mut bits = 0u64;
        for part in text.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        CronError(format!(
                            "{} field: step {s:?} must be a positive number",
                            self.name
                        ))
                    })?;
                    if step > self.max {
                        return Err(CronError(format!(
                            "{} field: step {step} is larger than the range {}-{}",
                            self.name, self.min, self.max
                        )));
                    }
                    (r, step)
                }
                None => (part, 1),
            };
            let (lo, hi) = if range == "*" || range == "?" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(CronError(format!(
                        "{} field: range {range:?} runs backwards",
                        self.name
                    )));
                }
                (a, b)
            } else {
                let a = self.value(range)?;
                // `5/15` means from 5 to the end in steps of 15.
                (a, if part.contains('/') { self.max } else { a })
            };
            let mut v = lo;
            while v <= hi {
                bits |= 1 << v;
                v += step;
            }
        }
        let star = text == "*" || text == "?";
        Ok((bits, star))
    }
}

impl Cron {
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        let expanded = match expr.trim() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let fields: Vec<&str> = match fields.len() {
            5 => std::iter::once("0").chain(fields).collect(),
            6 => fields,
            n => {
                return Err(CronError(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (with seconds first), found {n}"
                )))
            }
        };
        let (seconds, _) = SECOND.parse(fields[0])?;
        let (minutes, _) = MINUTE.parse(fields[1])?;
        let (hours, _) = HOUR.parse(fields[2])?;
        let (dom, dom_star) = DOM.parse(fields[3])?;
        let (months, _) = MONTH.parse(fields[4])?;
        let (mut dow, dow_star) = DOW.parse(fields[5])?;
        if dow & (1 << 7) != 0 {
            dow = (dow | 1) & !(1 << 7);
        }
        let cron = Cron {
            expr: expr.trim().to_string(),
            seconds,
            minutes,
            hours,
            dom,
            months,
            dow,
            dom_star,
            dow_star,
        };
        // An expression like `0 0 30 2 *` parses but never fires: say so at load.
        let probe = Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC);
        if cron.next_after(&probe).is_none() {
            return Err(CronError("the expression never fires".into()));
        }
        Ok(cron)
    }

    pub fn as_str(&self) -> &str {
        &self.expr
    }

    fn day_matches(&self, dt: &DateTime) -> bool {
        let dom = self.dom & (1 << dt.day()) != 0;
        let dow = self.dow & (1 << dt.weekday().to_sunday_zero_offset()) != 0;
        match (self.dom_star, self.dow_star) {
            (true, true) => true,
            (false, true) => dom,
            (true, false) => dow,
            (false, false) => dom || dow,
        }
    }

    /// The first fire time strictly after `after`, in `after`'s time zone; `None` if there is
    /// none within eight years.
    pub fn next_after(&self, after: &Zoned) -> Option<Zoned> {
        let tz = after.time_zone().clone();
        let limit = after.datetime().checked_add(8.years()).ok()?;
        let mut dt = after
            .datetime()
            .with()
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.second())
            .ok()?;
        while dt < limit {
            if self.months & (1 << dt.month()) == 0 {
                dt = dt
                    .first_of_month()
                    .start_of_day()
                    .checked_add(1.month())
                    .ok()?;
            } else if !self.day_matches(&dt) {
                dt = dt.start_of_day().checked_add(1.day()).ok()?;
            } else if self.hours & (1 << dt.hour()) == 0 {
                dt = dt
                    .with()
                    .minute(0)
                    .second(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
            } else if self.minutes & (1 << dt.minute()) == 0 {
                dt = dt
                    .with()
                    .second(0)
                    .build()
                    .ok()?
                    .checked_add(1.minute())
                    .ok()?;
            } else if self.seconds & (1 << dt.second()) == 0 {
                dt = dt.checked_add(1.second()).ok()?;
            } else {
                // A civil time in a DST gap resolves forward; one in a repeated hour may map
                // before `after`: keep searching until time really moves on.
                let z = tz.to_zoned(dt).ok()?;
                if z.timestamp() > after.timestamp() {
                    return Some(z);
                }
                dt = dt.checked_add(1.second()).ok()?;
            }
        }
        None
    }

    /// The next `n` fire times after `after`.
    pub fn upcoming(&self, after: &Zoned, n: usize) -> Vec<Zoned> {
        let mut out = Vec::with_capacity(n);
        let mut t = after.clone();
        while out.len() < n {
            match self.next_after(&t) {
                Some(z) => {
                    t = z.clone();
                    out.push(z);
                }
                None => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Zoned {
        s.parse().unwrap()
    }

    fn next(expr: &str, from: &str) -> String {
        Cron::parse(expr)
            .unwrap()
            .next_after(&at(from))
            .unwrap()
            .to_string()
    }

    #[test]
    fn five_and_six_fields() {
        assert_eq!(
            next("*/1 * * * *", "2026-01-01T10:00:30Z[UTC]"),
            "2026-01-01T10:01:00+00:00[UTC]"
        );
        assert_eq!(
            next("*/15 * * * * *", "2026-01-01T10:00:30Z[UTC]"),
            "2026-01-01T10:00:45+00:00[UTC]"
        );
        assert_eq!(
            next("30 9 * * 1-5", "2026-01-02T10:00:00Z[UTC]"),
            "2026-01-05T09:30:00+00:00[UTC]"
        );
        assert_eq!(
            next("0 0 1 jan *", "2026-03-01T00:00:00Z[UTC]"),
            "2027-01-01T00:00:00+00:00[UTC]"
        );
        assert_eq!(
            next("@hourly", "2026-01-01T10:59:59Z[UTC]"),
            "2026-01-01T11:00:00+00:00[UTC]"
        );
        assert_eq!(
            next("0 12 * * sun", "2026-11-29T12:00:00Z[UTC]"),
            "2026-12-06T12:00:00+00:00[UTC]"
        );
        assert_eq!(
            next("0 12 * * 7", "2026-11-29T12:00:00Z[UTC]"),
            "2026-12-06T12:00:00+00:00[UTC]"
        );
    }

    #[test]
    fn dom_or_dow_when_both_restricted() {
        // 2026-11-29 is a Sunday; the 1st of December is a Tuesday.
        assert_eq!(
            next("0 0 1 * mon", "2026-11-29T12:00:00Z[UTC]"),
            "2026-11-30T00:00:00+00:00[UTC]"
        );
        assert_eq!(
            next("0 0 1 * mon", "2026-11-30T12:00:00Z[UTC]"),
            "2026-12-01T00:00:00+00:00[UTC]"
        );
    }

    #[test]
    fn time_zone_and_dst() {
        let z = at("2026-03-29T00:30:00+01:00[Europe/Paris]");
        // 02:30 does not exist in Paris that night; it resolves forward to 03:30 CEST.
        let got = Cron::parse("30 2 * * *").unwrap().next_after(&z).unwrap();
        assert_eq!(got.to_string(), "2026-03-29T03:30:00+02:00[Europe/Paris]");
    }

    #[test]
    fn upcoming_is_strictly_increasing() {
        let c = Cron::parse("*/2 * * * * *").unwrap();
        let v = c.upcoming(&at("2026-01-01T00:00:00Z[UTC]"), 3);
        let s: Vec<String> = v.iter().map(|z| z.timestamp().to_string()).collect();
        assert_eq!(
            s,
            [
                "2026-01-01T00:00:02Z",
                "2026-01-01T00:00:04Z",
                "2026-01-01T00:00:06Z"
            ]
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = |s: &str| Cron::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("*/61 * * * *"),
            "minute field: step 61 is larger than the range 0-59"
        );
        assert_eq!(e("61 * * * *"), "minute field: 61 is out of range 0-59");
        assert!(e("* * * *").starts_with("expected 5 fields"));
        assert_eq!(e("0 0 30 2 *"), "the expression never fires");
        assert_eq!(
            e("*/0 * * * *"),
            "minute field: step \"0\" must be a positive number"
        );
        assert_eq!(e("0 25 * * *"), "hour field: 25 is out of range 0-23");
        assert_eq!(e("0 0 * foo *"), "month field: \"foo\" is not a number");
        assert_eq!(
            e("0 0 5-1 * *"),
            "day-of-month field: range \"5-1\" runs backwards"
        );
    }
}
