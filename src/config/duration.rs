//! Durations as written in config files: `500ms`, `5s`, `2m`, `1h`, `1m30s`, `1.5s`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("a duration must not be empty (write e.g. 500ms, 5s, 2m)".into());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("invalid duration {text:?} (write e.g. 500ms, 5s, 2m)"))?;
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("duration {text:?} needs a unit: ms, s, m or h")),
            _ => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m or h)"
                ))
            }
        };
        total += value * scale;
        rest = tail;
    }
    if !total.is_finite() || total > 365.0 * 86400.0 {
        return Err(format!("duration {text:?} is too long"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// A config duration, checked while the file is parsed so the error carries its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

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
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("5"),
            Err("duration \"5\" needs a unit: ms, s, m or h".into())
        );
        assert!(parse_duration("5x")
            .unwrap_err()
            .contains("unknown unit \"x\""));
        assert!(parse_duration("-1s").is_err());
    }
}
