//! Durations as written in config files: `500ms`, `5s`, `2m`, `1h`, `1m30s`, `1.5s`, `90d`.
//!
//! The grammar is jiff's "friendly" format, so it also takes the long spellings jiff reads
//! (`5 seconds`, `1h 30m`, `1 hour, 30 minutes`, `01:30:00`) with days (of 24 hours) as the largest unit.
//! What we add: a unit is required, a duration is not negative, and at most a year long.

use std::time::Duration;

use jiff::fmt::friendly::SpanParser;
use serde::{Deserialize, Deserializer};

/// Longer than any timeout, interval or grace period makes sense: a typo, not a wish.
const LONGEST: Duration = Duration::from_secs(365 * 86_400);

const PARSER: SpanParser = SpanParser::new();

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("a duration must not be empty (write e.g. 500ms, 5s, 2m)".into());
    }
    // jiff's own message for a bare number talks about its grammar: name the fix instead.
    if s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("duration {text:?} needs a unit: ms, s, m or h"));
    }
    // A span, so days may be written (`90d`); a day is 24 hours here, as people mean it.
    let signed = PARSER
        .parse_span(s)
        .and_then(|span| span.to_duration(jiff::SpanRelativeTo::days_are_24_hours()))
        .map_err(|_| format!("invalid duration {text:?} (write e.g. 500ms, 5s, 2m)"))?;
    let d = Duration::try_from(signed)
        .map_err(|_| format!("duration {text:?} must not be negative"))?;
    if d > LONGEST {
        return Err(format!("duration {text:?} is too long (at most a year)"));
    }
    Ok(d)
}

/// A config duration, checked while the file is parsed so the error carries its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_design_forms() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn takes_jiffs_long_forms() {
        assert_eq!(parse_duration("5 seconds"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("01:00:30"), Ok(Duration::from_secs(3630)));
    }

    #[test]
    fn mistakes_are_explained() {
        for (text, message) in [
            ("5", "duration \"5\" needs a unit: ms, s, m or h"),
            ("5x", "invalid duration \"5x\" (write e.g. 500ms, 5s, 2m)"),
            ("-1s", "duration \"-1s\" must not be negative"),
            ("9000h", "duration \"9000h\" is too long (at most a year)"),
        ] {
            assert_eq!(parse_duration(text), Err(message.to_string()));
        }
        assert_eq!(parse_duration("8760h"), Ok(LONGEST));
        // A day is 24 hours, daylight saving or not.
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("").is_err());
    }
}
