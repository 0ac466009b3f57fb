//! A cron expression parsed into its fields: what the schedule's check rejects, what croner
//! evaluates (the fields written back in numbers), the fixed-time rule and `check`'s cadence in
//! words all come from this one reading of the text.

use std::fmt;

/// Why a cron expression was refused, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(pub(super) String);

/// The `@` macros and the 5-field expressions they stand for.
pub(super) const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// One field of the 6-field form: its range and the names it accepts, for checking what the
/// user wrote and saying what is wrong with it.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names for `min`, `min + 1`, ...
    names: &'static [&'static str],
    /// `?` means `*` here (the day fields only, as in croner and Quartz).
    question: bool,
}

const FIELDS: [Field; 6] = [
    Field::numeric("second", 0, 59),
    Field::numeric("minute", 0, 59),
    Field::numeric("hour", 0, 23),
    Field {
        question: true,
        ..Field::numeric("day-of-month", 1, 31)
    },
    Field {
        names: &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ],
        ..Field::numeric("month", 1, 12)
    },
    // 7 is Sunday too (croner folds it onto 0).
    Field {
        names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
        question: true,
        ..Field::numeric("day-of-week", 0, 7)
    },
];

impl Field {
    const fn numeric(name: &'static str, min: u32, max: u32) -> Field {
        Field {
            name,
            min,
            max,
            names: &[],
            question: false,
        }
    }

    fn err(&self, what: String) -> CronError {
        CronError(format!("{} field: {what}", self.name))
    }

    fn value(&self, s: &str) -> Result<u32, CronError> {
        if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(self.min + i as u32);
        }
        if s.is_empty() {
            return Err(self.err("a value is missing (around `,`, `-` or `/`)".into()));
        }
        let Some(v) = digits(s) else {
            let suffix = s.trim_start_matches(|c: char| c.is_ascii_digit());
            let quartz = s.contains('#')
                || ["l", "w", "lw"]
                    .iter()
                    .any(|q| q.eq_ignore_ascii_case(suffix));
            return Err(self.err(if quartz {
                format!("{s:?} uses L, W or #, Quartz extensions that standard cron does not have")
            } else if let [first, .., last] = self.names {
                format!("{s:?} is neither a number nor a name in {first}-{last}")
            } else {
                format!("{s:?} is not a number")
            }));
        };
        if v < self.min || v > self.max {
            return Err(self.err(format!("{v} is out of range {}-{}", self.min, self.max)));
        }
        Ok(v)
    }

    /// The items of `text`; rejects what standard cron rejects, with a message naming the
    /// field.
    fn parse(&self, text: &str) -> Result<Vec<Item>, CronError> {
        let mut items = Vec::new();
        for item in text.split(',') {
            let (base, step) = match item.split_once('/') {
                Some((base, s)) => {
                    let step = digits(s)
                        .filter(|&n| n > 0)
                        .ok_or_else(|| self.err(format!("step {s:?} must be a positive number")))?;
                    if step > self.max {
                        return Err(self.err(format!(
                            "step {step} is larger than the range {}-{}",
                            self.min, self.max
                        )));
                    }
                    (base, Some(step))
                }
                None => (item, None),
            };
            if base == "*" || (base == "?" && self.question) {
                if text.contains(',') {
                    return Err(self.err(format!(
                        "{base:?} stands for every value, so it cannot be one item of a list"
                    )));
                }
                items.push(Item::Every(step));
                continue;
            }
            match base.split_once('-') {
                Some((a, b_text)) => {
                    let (a, mut b) = (self.value(a)?, self.value(b_text)?);
                    // `fri-sun` ends on Sunday: read that name as 7, not 0 (as croner does).
                    if b == 0 && self.max == 7 && digits(b_text).is_none() {
                        b = 7;
                    }
                    if a > b {
                        return Err(self.err(format!("range {base:?} runs backwards")));
                    }
                    items.push(Item::Range(a, b, step));
                }
                None => {
                    let v = self.value(base)?;
                    if let Some(step) = step {
                        return Err(self.err(format!(
                            "{item:?} steps from a single value, which standard cron does not \
                             allow; write \"{base}-{}/{step}\"",
                            self.max
                        )));
                    }
                    items.push(Item::Value(v));
                }
            }
        }
        Ok(items)
    }
}

/// A number written with digits only: Rust's parser would also take `+5`, and croner reads a
/// leading `+` in day-of-week as "day-of-month AND day-of-week".
fn digits(s: &str) -> Option<u32> {
    s.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| s.parse().ok())
        .flatten()
}

/// One item of a field's list, names read as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// `*` (or `?` in the day fields), with the step of `*/n`.
    Every(Option<u32>),
    /// One value.
    Value(u32),
    /// `a-b`, with the step of `a-b/n`.
    Range(u32, u32, Option<u32>),
}

/// The six fields (second, minute, hour, day-of-month, month, day-of-week), each a list of
/// items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    fields: [Vec<Item>; 6],
}

impl Spec {
    /// Reads an expression: 5 or 6 fields, or a macro.
    pub fn parse(expr: &str) -> Result<Spec, CronError> {
        let text = if expr.starts_with('@') {
            MACROS
                .iter()
                .find(|(name, _)| *name == expr)
                .map(|(_, text)| *text)
                .ok_or_else(|| {
                    CronError(format!(
                        "unknown macro {expr:?}; the macros are {} and @every <interval>",
                        MACROS.map(|(name, _)| name).join(", ")
                    ))
                })?
        } else {
            expr
        };
        let mut texts: Vec<&str> = text.split_whitespace().collect();
        match texts.len() {
            5 => texts.insert(0, "0"),
            6 => {}
            n => {
                return Err(CronError(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (with seconds first), found {n}"
                )))
            }
        }
        let mut fields: [Vec<Item>; 6] = Default::default();
        for ((field, text), items) in FIELDS.iter().zip(&texts).zip(&mut fields) {
            *items = field.parse(text)?;
        }
        Ok(Spec { fields })
    }

    /// Second, minute, hour, day-of-month, month, day-of-week.
    pub fn fields(&self) -> &[Vec<Item>; 6] {
        &self.fields
    }

    /// Vixie cron's fixed-time job: no `*` leads the second, minute or hour field.
    pub fn fixed_time(&self) -> bool {
        self.fields[..3]
            .iter()
            .all(|f| !matches!(f.first(), Some(Item::Every(_))))
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (text, step) = match *self {
            Item::Every(step) => ("*".to_string(), step),
            Item::Value(v) => return write!(f, "{v}"),
            Item::Range(a, b, step) => (format!("{a}-{b}"), step),
        };
        f.write_str(&text)?;
        match step {
            Some(n) => write!(f, "/{n}"),
            None => Ok(()),
        }
    }
}

/// The 6-field form in numbers: what croner reads.
impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            for (j, item) in field.iter().enumerate() {
                if j > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{item}")?;
            }
        }
        Ok(())
    }
}
