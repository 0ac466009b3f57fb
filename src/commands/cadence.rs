//! A schedule's cadence in words ("every 30 minutes", "at 03:00 on Sunday"), for `check` to
//! print beside the fire times: `*/30 * * * *` written to mean every 30 seconds reads as
//! "every 30 minutes" at once. An interval always has words; of cron expressions only the
//! common shapes are described, anything else gets `None` and the expression speaks for
//! itself. The words come from the expression's parsed [`Spec`].

use std::time::Duration;

use crate::schedule::{Item, Schedule, Spec};

/// The cadence of `schedule` in words, or `None` for cron shapes [`describe`] leaves alone.
pub(super) fn of(schedule: &Schedule) -> Option<String> {
    match schedule {
        Schedule::Cron(c) => describe(c.spec()),
        Schedule::Every { every, .. } => Some(interval(every.interval())),
    }
}

/// "every 5 minutes"; an interval that does not divide a day fires at other times each day.
fn interval(d: Duration) -> String {
    const DAY: u64 = 86_400;
    let s = d.as_secs();
    let (n, unit) = [(DAY, "day"), (3600, "hour"), (60, "minute"), (1, "second")]
        .into_iter()
        .find(|(size, _)| s.is_multiple_of(*size))
        .map_or((s, "second"), |(size, unit)| (s / size, unit));
    let mut words = match n {
        1 => format!("every {unit}"),
        n => format!("every {n} {unit}s"),
    };
    if !DAY.is_multiple_of(s) && !s.is_multiple_of(DAY) {
        words.push_str(", at times of day that move from one day to the next");
    }
    words
}

/// What one field holds, as far as words go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `*` (or `?`): every value.
    Any,
    /// `*/n`.
    Step(u32),
    /// One value.
    At(u32),
    /// Anything else (lists, ranges, stepped ranges): the day-of-week field reads its own.
    Other,
}

fn shape(field: &[Item]) -> Shape {
    match field {
        [Item::Every(None | Some(1))] => Shape::Any,
        [Item::Every(Some(n))] => Shape::Step(*n),
        [Item::Value(v)] => Shape::At(*v),
        _ => Shape::Other,
    }
}

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A day-of-week value (0 and 7 are Sunday).
fn day(n: u32) -> &'static str {
    DAYS[n as usize % 7]
}

/// "Sunday", "Monday to Friday", "Monday, Wednesday and Friday".
fn days(field: &[Item]) -> Option<String> {
    if let [Item::Range(a, b, None)] = field {
        return Some(format!("{} to {}", day(*a), day(*b)));
    }
    let names: Vec<&str> = field
        .iter()
        .map(|item| match item {
            Item::Value(v) => Some(day(*v)),
            _ => None,
        })
        .collect::<Option<_>>()?;
    Some(match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => return None,
    })
}

/// "every 30 minutes"; a step that does not divide the range restarts with it.
fn every(n: u32, unit: &str, range: u32, restart: &str) -> String {
    let mut s = format!("every {n} {unit}s");
    if !range.is_multiple_of(n) {
        s.push_str(&format!(", restarting at {restart}"));
    }
    s
}

/// The cadence of `spec` in words, or `None` for shapes it does not describe.
pub(super) fn describe(spec: &Spec) -> Option<String> {
    let [sec, min, hour, dom, month, dow] = spec.fields();
    if shape(month) != Shape::Any {
        return None;
    }
    let when = match (shape(sec), shape(min), shape(hour)) {
        (Shape::Any, Shape::Any, Shape::Any) => "every second".to_string(),
        (Shape::Step(n), Shape::Any, Shape::Any) => {
            every(n, "second", 60, "second 0 of each minute")
        }
        (Shape::At(s), m, h) => {
            let at_second = if s == 0 {
                String::new()
            } else {
                format!(", at second {s}")
            };
            match (m, h) {
                (Shape::Any, Shape::Any) => format!("every minute{at_second}"),
                (Shape::Step(n), Shape::Any) => {
                    every(n, "minute", 60, "minute 0 of each hour") + &at_second
                }
                (Shape::At(m), Shape::Any) if s == 0 => format!("every hour at minute {m}"),
                (Shape::At(m), Shape::Step(n)) if s == 0 => {
                    every(n, "hour", 24, "midnight") + &format!(", at minute {m}")
                }
                (Shape::At(m), Shape::At(h)) if s == 0 => format!("at {h:02}:{m:02}"),
                (Shape::At(m), Shape::At(h)) => format!("at {h:02}:{m:02}:{s:02}"),
                _ => return None,
            }
        }
        _ => return None,
    };
    let on = match (shape(dom), shape(dow)) {
        (Shape::Any, Shape::Any) if when.starts_with("at ") => Some("every day".to_string()),
        (Shape::Any, Shape::Any) => None,
        (Shape::Any, _) => Some(format!("on {}", days(dow)?)),
        (Shape::At(d), Shape::Any) => Some(format!("on day {d} of the month")),
        _ => return None,
    };
    Some(match on {
        // "every day at 03:00" reads better than "at 03:00 every day".
        Some(on) if on == "every day" => format!("{on} {when}"),
        Some(on) => format!("{when} {on}"),
        None => when,
    })
}

#[cfg(test)]
mod tests {
    use super::describe;
    use crate::schedule::{Cron, Schedule};
    use std::time::Duration;

    fn words(expr: &str) -> Option<String> {
        describe(Cron::parse(expr).unwrap().spec())
    }

    #[test]
    fn common_shapes_in_words() {
        for (expr, text) in [
            ("*/30 * * * *", "every 30 minutes"),
            ("*/30 * * * * *", "every 30 seconds"),
            ("* * * * * *", "every second"),
            ("* * * * *", "every minute"),
            ("*/1 * * * *", "every minute"),
            ("15 * * * * *", "every minute, at second 15"),
            (
                "*/7 * * * *",
                "every 7 minutes, restarting at minute 0 of each hour",
            ),
            ("5 * * * *", "every hour at minute 5"),
            ("0 */6 * * *", "every 6 hours, at minute 0"),
            ("0 3 * * 0", "at 03:00 on Sunday"),
            ("0 3 * * sun", "at 03:00 on Sunday"),
            ("30 9 * * 1-5", "at 09:30 on Monday to Friday"),
            (
                "0 8 * * mon,wed,fri",
                "at 08:00 on Monday, Wednesday and Friday",
            ),
            ("0 0 * * *", "every day at 00:00"),
            ("30 0 3 * * *", "every day at 03:00:30"),
            ("0 12 1 * *", "at 12:00 on day 1 of the month"),
            ("*/10 * * * 1-5", "every 10 minutes on Monday to Friday"),
            ("@hourly", "every hour at minute 0"),
            ("@weekly", "at 00:00 on Sunday"),
        ] {
            assert_eq!(words(expr).as_deref(), Some(text), "{expr}");
        }
    }

    #[test]
    fn intervals_in_words() {
        use crate::schedule::Every;
        let words = |secs: u64| {
            let every = Every::new(Duration::from_secs(secs)).unwrap();
            super::of(&Schedule::Every {
                every,
                text: String::new(),
            })
            .unwrap()
        };
        for (secs, text) in [
            (1, "every second"),
            (30, "every 30 seconds"),
            (60, "every minute"),
            (90, "every 90 seconds"),
            (
                7,
                "every 7 seconds, at times of day that move from one day to the next",
            ),
            (300, "every 5 minutes"),
            (
                420,
                "every 7 minutes, at times of day that move from one day to the next",
            ),
            (3600, "every hour"),
            (5400, "every 90 minutes"),
            (8 * 3600, "every 8 hours"),
            (86_400, "every day"),
            (2 * 86_400, "every 2 days"),
            (
                25 * 3600,
                "every 25 hours, at times of day that move from one day to the next",
            ),
        ] {
            assert_eq!(words(secs), text, "{secs}s");
        }
    }

    #[test]
    fn other_shapes_are_left_to_the_expression() {
        for expr in [
            "0 0 1,15 * *",
            "0 0 1 1 *",
            "@yearly",
            "0,30 * * * *",
            "0 9-17 * * *",
            "*/5 3 * * *",
            "0 0 1 * 1",
        ] {
            assert_eq!(words(expr), None, "{expr}");
        }
    }
}
