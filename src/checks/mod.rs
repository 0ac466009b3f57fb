//! Content checks over the generated text: pure functions from (text, finish reason, the probe's
//! check spec) to the list of failed checks. Every check runs, so the result lists each failure,
//! not only the first; the outcome is the failure of highest precedence.

pub mod repetition;

use regex::Regex;

use crate::outcome::Outcome;

/// A probe's `checks:` block, compiled.
#[derive(Debug, Clone, Default)]
pub struct CheckSpec {
    pub min_chars: Option<usize>,
    pub max_chars: Option<usize>,
    pub expect: Option<Regex>,
    pub forbid: Option<Regex>,
    /// `None` when the probe says `repetition: off`.
    pub repetition: Option<repetition::Thresholds>,
    pub allow_truncation: bool,
}

#[derive(Debug, Clone)]
pub struct Judgement {
    /// Failed content checks, in precedence order.
    pub failed: Vec<Outcome>,
    pub output_chars: usize,
    pub repetition: Option<repetition::Report>,
}

/// Whitespace and characters that render as nothing (zero-width spaces and joiners, the BOM,
/// soft hyphens, control characters): an answer made only of these is empty to its reader.
pub fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

pub fn judge(spec: &CheckSpec, text: &str, finish_reason: Option<&str>) -> Judgement {
    let output_chars = text.chars().count();
    let mut failed = Vec::new();
    if text.chars().all(is_invisible) {
        failed.push(Outcome::EmptyOutput);
    }
    let repetition = spec
        .repetition
        .as_ref()
        .map(|t| repetition::analyze(text, t));
    if repetition.as_ref().is_some_and(|r| r.degenerate) {
        failed.push(Outcome::Repetition);
    }
    if finish_reason == Some("length") && !spec.allow_truncation {
        failed.push(Outcome::Truncated);
    }
    if spec.min_chars.is_some_and(|min| output_chars < min) {
        failed.push(Outcome::TooShort);
    }
    if spec.max_chars.is_some_and(|max| output_chars > max) {
        failed.push(Outcome::TooLong);
    }
    if spec.expect.as_ref().is_some_and(|re| !re.is_match(text)) {
        failed.push(Outcome::PatternMismatch);
    }
    if spec.forbid.as_ref().is_some_and(|re| re.is_match(text)) {
        failed.push(Outcome::ForbiddenPattern);
    }
    Judgement {
        failed,
        output_chars,
        repetition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CheckSpec {
        CheckSpec {
            min_chars: Some(10),
            max_chars: Some(100),
            expect: Some(Regex::new("(?i)paris").unwrap()),
            forbid: Some(Regex::new("(?i)as an ai").unwrap()),
            repetition: Some(Default::default()),
            allow_truncation: false,
        }
    }

    #[test]
    fn healthy_passes() {
        let v = judge(&spec(), "The capital of France is Paris.", Some("stop"));
        assert!(v.failed.is_empty(), "{:?}", v.failed);
        assert_eq!(v.output_chars, 31);
    }

    #[test]
    fn invisible_only_is_empty() {
        let v = judge(&spec(), " \u{200B}\n\u{FEFF}\t", Some("stop"));
        assert_eq!(v.failed[0], Outcome::EmptyOutput);
    }

    #[test]
    fn every_failure_is_listed_in_precedence_order() {
        let v = judge(&spec(), "As an AI, no.", Some("length"));
        assert_eq!(
            v.failed,
            vec![
                Outcome::Truncated,
                Outcome::PatternMismatch,
                Outcome::ForbiddenPattern
            ]
        );
        let v = judge(&spec(), "Berlin", Some("stop"));
        assert_eq!(v.failed, vec![Outcome::TooShort, Outcome::PatternMismatch]);
        let long = "Paris! ".repeat(40);
        let v = judge(&spec(), &long, Some("stop"));
        assert_eq!(v.failed, vec![Outcome::Repetition, Outcome::TooLong]);
    }

    #[test]
    fn truncation_can_be_allowed_and_chars_count_characters() {
        let s = CheckSpec {
            allow_truncation: true,
            min_chars: Some(5),
            ..CheckSpec::default()
        };
        let v = judge(&s, "巴黎是首都", Some("length"));
        assert!(v.failed.is_empty(), "{:?}", v.failed);
        assert_eq!(v.output_chars, 5);
    }
}
