//! A cron expression's cadence in words ("every 30 minutes", "at 03:00 on Sunday"), for `check`
//! to print beside the fire times: `*/30 * * * *` written to mean every 30 seconds reads as
//! "every 30 minutes" at once. Only the common shapes are described; anything else gets `None`
//! and the expression speaks for itself. The expression has already passed `schedule::Cron`.

/// What one field holds, as far as words go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// `*` (or `?`): every value.
    Any,
    /// `*/n`.
    Step(u32),
    /// One value.
    At(u32),
    /// Anything else (lists, ranges, stepped ranges): the day-of-week field reads its own.
    Other(String),
}

fn shape(field: &str) -> Shape {
    if field == "*" || field == "?" {
        return Shape::Any;
    }
    if let Some(n) = field.strip_prefix("*/").and_then(|n| n.parse().ok()) {
        return if n == 1 { Shape::Any } else { Shape::Step(n) };
    }
    match field.parse() {
        Ok(v) => Shape::At(v),
        Err(_) => Shape::Other(field.to_string()),
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

/// A day-of-week value, by number (0 and 7 are Sunday) or by its three-letter name.
fn day(text: &str) -> Option<&'static str> {
    if let Ok(n) = text.parse::<usize>() {
        return DAYS.get(n % 7).copied();
    }
    DAYS.iter()
        .find(|d| d[..3].eq_ignore_ascii_case(text))
        .copied()
}

/// "Sunday", "Monday to Friday", "Monday, Wednesday and Friday".
fn days(field: &str) -> Option<String> {
    if let Some((a, b)) = field.split_once('-') {
        return Some(format!("{} to {}", day(a)?, day(b)?));
    }
    let names: Vec<&str> = field.split(',').map(day).collect::<Option<_>>()?;
    Some(match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => return None,
    })
}

/// "every 30 minutes"; a step that does not divide the range restarts with it.
fn every(n: u32, unit: &str, range: u32, restart: &str) -> String {
    let mut s = format!("every {n} {unit}s");
    if range % n != 0 {
        s.push_str(&format!(", restarting at {restart}"));
    }
    s
}

/// The cadence of `expr` in words, or `None` for shapes it does not describe.
pub fn describe(expr: &str) -> Option<String> {
    let expr = expr.trim();
    let text = match crate::schedule::MACROS
        .iter()
        .find(|(name, _)| *name == expr)
    {
        Some((_, text)) => text,
        None => expr,
    };
    let mut fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() == 5 {
        fields.insert(0, "0");
    }
    let [sec, min, hour, dom, month, dow] = fields[..] else {
        return None;
    };
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

    #[test]
    fn common_shapes_in_words() {
        for (expr, words) in [
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
            assert_eq!(describe(expr).as_deref(), Some(words), "{expr}");
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
            assert_eq!(describe(expr), None, "{expr}");
        }
    }
}
