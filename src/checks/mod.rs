//! Content checks over what a run generated: pure functions from (the answer, the probe's check
//! spec) to the list of failed checks. Every check runs, so the result lists each failure, not
//! only the first; the outcome is the failure of highest precedence.
//!
//! - [`repetition`]: the degeneration detectors, over [`units`] and list [`lists`] items;
//! - [`json`] and [`schema`]: the answer as JSON, and JSON Schemas compiled at load;
//! - [`tool_call`]: the tools a probe offers and the call it requires;
//! - [`needle`]: the fact a context ladder's rung hid in its prompt, to be given back.

pub(crate) mod json;
pub(crate) mod lists;
pub(crate) mod needle;
pub mod repetition;
pub(crate) mod schema;
pub mod similarity;
pub(crate) mod tool_call;
pub(crate) mod units;

use std::sync::Arc;

use regex::Regex;

use crate::outcome::Outcome;

/// A probe's `checks:` block, compiled.
#[derive(Debug, Clone, Default)]
pub struct CheckSpec {
    pub min_chars: Option<usize>,
    pub max_chars: Option<usize>,
    /// Most non-blank lines: an answer that runs on (a count past where it was asked to stop)
    /// is `too_long`.
    pub max_lines: Option<usize>,
    pub expect: Option<Regex>,
    pub forbid: Option<Regex>,
    /// `None` when the probe says `repetition: off`.
    pub repetition: Option<repetition::Thresholds>,
    /// Stop reading once the output certainly loops (needs `repetition` on).
    pub stop_on_repetition: bool,
    pub allow_truncation: bool,
    /// The answer must be JSON (`checks.json`, or implied by `json_schema`)...
    pub json: bool,
    /// ...and match this schema.
    pub json_schema: Option<Arc<schema::Schema>>,
    /// The run must end in a valid call to this tool.
    pub tool_call: Option<tool_call::Required>,
    /// The answer must give back this fact (a ladder rung's; drawn afresh each firing).
    pub needle: Option<needle::Needle>,
    /// The answer must stay this close to a known-good one (`checks.reference`).
    pub reference: Option<Reference>,
}

/// `checks.reference`: a known-good answer, and how close (chrF, see [`similarity`]) an
/// answer must stay to it.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Where the known-good answer is kept, as the probe names it.
    pub file: std::path::PathBuf,
    /// The known-good answer; `None` while the file is not written yet (`record` writes it).
    pub text: Option<Arc<str>>,
    pub min_similarity: f64,
}

/// `checks.reference.min_similarity` when the probe does not say.
pub(crate) const DEFAULT_MIN_SIMILARITY: f64 = 0.6;

/// The finish reason, in OpenAI's words, of a refusal or a content-filter stop; the flavors map
/// their own (Anthropic's `refusal`, Gemini's `SAFETY`) to it.
pub(crate) const CONTENT_FILTER: &str = "content_filter";

/// What a run generated, as the checks see it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Answer<'a> {
    /// The generated text: answer text and tool-call text.
    pub text: &'a str,
    pub finish_reason: Option<&'a str>,
    pub tool_calls: &'a [tool_call::ToolCall],
    /// Reading stopped because the output certainly looped.
    pub stopped_early: bool,
    /// The generated text may be quoted in the explanations (`--show-output`): docs/design.md keeps it
    /// out of results otherwise.
    pub show_text: bool,
}

/// One failed content check: its outcome and the sentence that says why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub outcome: Outcome,
    pub why: String,
}

impl Failure {
    fn new(outcome: Outcome, why: impl Into<String>) -> Failure {
        Failure {
            outcome,
            why: why.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Judgement {
    /// Failed content checks, in precedence order, each with its sentence.
    pub failures: Vec<Failure>,
    pub output_chars: usize,
    pub repetition: Option<repetition::Report>,
    /// The answer's chrF against the probe's reference, when it has one.
    pub similarity: Option<f64>,
}

impl Judgement {
    /// The failed checks' outcomes, in precedence order.
    pub fn failed(&self) -> Vec<Outcome> {
        self.failures.iter().map(|f| f.outcome).collect()
    }

    /// The run's content outcome: the failed check of highest precedence, or `ok`.
    pub fn outcome(&self) -> Outcome {
        Outcome::first_content_failure(&self.failed())
    }

    /// Why `outcome` failed, when it did.
    pub fn why(&self, outcome: Outcome) -> Option<&str> {
        self.failures
            .iter()
            .find(|f| f.outcome == outcome)
            .map(|f| f.why.as_str())
    }

    /// The sentence that explains a failed run: why its outcome (the first failed check)
    /// failed, with the detector for `repetition` (the record lists every failed check beside
    /// it). An answer cut by `max_tokens` is `truncated`, and says what the cut broke: the check
    /// after it (its JSON, its tool call, a missing fact). `None` when every check passed.
    pub fn explanation(&self) -> Option<String> {
        let first = match self.failures.as_slice() {
            [f, next, ..] if f.outcome == Outcome::Truncated => next,
            [first, ..] => first,
            [] => return None,
        };
        Some(first.why.clone())
    }
}

/// Whitespace and characters that render as nothing (zero-width spaces and joiners, the BOM,
/// soft hyphens, control characters): an answer made only of these is empty to its reader.
pub(crate) fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// Runs every check on the answer; the failures come out in precedence order, since each check
/// below runs in that order (`Outcome::first_content_failure` states the order itself).
pub fn judge(spec: &CheckSpec, answer: &Answer) -> Judgement {
    let output_chars = answer.text.chars().count();
    let repetition = spec
        .repetition
        .as_ref()
        .map(|t| repetition::analyze(answer.text, t));
    let similarity = spec
        .reference
        .as_ref()
        .and_then(|r| Some(similarity::chrf(answer.text, r.text.as_deref()?)));
    let failures = [
        empty(answer, output_chars),
        content_filtered(answer, output_chars),
        drift(spec, similarity),
        looping(answer, repetition.as_ref()),
        truncated(spec, answer),
        format(spec, answer),
        tool_call(spec, answer),
        too_short(spec, output_chars),
        too_long(spec, answer, output_chars),
        pattern_mismatch(spec, answer, output_chars),
        forbidden_pattern(spec, answer),
    ]
    .into_iter()
    .flatten()
    .collect();
    Judgement {
        failures,
        output_chars,
        repetition,
        similarity,
    }
}

/// Far from the known-good answer: below the reference's `min_similarity`.
fn drift(spec: &CheckSpec, similarity: Option<f64>) -> Option<Failure> {
    let (r, s) = (spec.reference.as_ref()?, similarity?);
    (s < r.min_similarity).then(|| {
        Failure::new(
            Outcome::AnswerDrift,
            format!(
                "the answer drifted from the reference {}: similarity {:.3}, under min_similarity {}",
                r.file.display(),
                similarity::rounded(s),
                r.min_similarity
            ),
        )
    })
}

/// No answer is no answer: nothing a reader sees, or marks alone (dots, dashes, symbols) with
/// no letter, digit or CJK character among them, of any length, as corrupted weights answer
/// (`......` to max_tokens). A tool call is an answer.
fn empty(answer: &Answer, output_chars: usize) -> Option<Failure> {
    if !answer.tool_calls.is_empty() || answer.text.chars().any(char::is_alphanumeric) {
        return None;
    }
    let why = match answer.text.chars().all(is_invisible) {
        true => {
            format!("the answer is empty: {output_chars} characters, all whitespace or invisible")
        }
        false => format!(
            "the answer has no letter or digit: {output_chars} characters of punctuation, symbols \
             or whitespace{}",
            match answer.show_text {
                true => format!(", {}", quoted(answer.text.trim(), 20)),
                false => String::new(),
            }
        ),
    };
    Some(Failure::new(Outcome::EmptyOutput, why))
}

/// Every flavor names a refusal or a content-filter stop so: the answer is the provider's
/// policy, not the model's, whatever the other checks make of what was left.
fn content_filtered(answer: &Answer, output_chars: usize) -> Option<Failure> {
    (answer.finish_reason == Some(CONTENT_FILTER)).then(|| {
        Failure::new(
            Outcome::ContentFiltered,
            format!(
                "the provider stopped the answer by its content policy (finish reason \
                 {CONTENT_FILTER}) after {output_chars} characters"
            ),
        )
    })
}

/// A run stopped on a certain loop is degenerate even if the detectors, at their own
/// thresholds, were to see it otherwise.
fn looping(answer: &Answer, report: Option<&repetition::Report>) -> Option<Failure> {
    if !answer.stopped_early && !report.is_some_and(|r| r.degenerate()) {
        return None;
    }
    let found = report.and_then(|r| Some((r.decided()?.detector(), r.describe()?)));
    let why = match found {
        Some((d, words)) => format!("repetition, detector {}: {words}", d.as_str()),
        None => "repetition: reading stopped once the output certainly looped".to_string(),
    };
    Some(Failure::new(Outcome::Repetition, why))
}

fn truncated(spec: &CheckSpec, answer: &Answer) -> Option<Failure> {
    (answer.finish_reason == Some("length") && !spec.allow_truncation).then(|| {
        Failure::new(
            Outcome::Truncated,
            "the answer was cut at max_tokens (finish reason length)",
        )
    })
}

fn format(spec: &CheckSpec, answer: &Answer) -> Option<Failure> {
    let why = spec
        .json
        .then(|| json::check(answer.text, spec.json_schema.as_deref()))
        .flatten()?;
    Some(Failure::new(Outcome::FormatError, why))
}

fn tool_call(spec: &CheckSpec, answer: &Answer) -> Option<Failure> {
    let want = spec.tool_call.as_ref()?;
    let why = tool_call::check(answer.tool_calls, want)?;
    Some(Failure::new(Outcome::ToolCallError, why))
}

fn too_short(spec: &CheckSpec, output_chars: usize) -> Option<Failure> {
    let min = spec.min_chars.filter(|min| output_chars < *min)?;
    Some(Failure::new(
        Outcome::TooShort,
        format!("the answer has {output_chars} characters, under min_chars {min}"),
    ))
}

fn too_long(spec: &CheckSpec, answer: &Answer, output_chars: usize) -> Option<Failure> {
    let too_many_chars = spec
        .max_chars
        .filter(|max| output_chars > *max)
        .map(|max| format!("the answer has {output_chars} characters, over max_chars {max}"));
    let too_many_lines = || {
        let max = spec.max_lines?;
        let lines = answer
            .text
            .lines()
            .filter(|l| !l.chars().all(is_invisible))
            .count();
        (lines > max).then(|| format!("the answer has {lines} lines, more than max_lines ({max})"))
    };
    let why = too_many_chars.or_else(too_many_lines)?;
    Some(Failure::new(Outcome::TooLong, why))
}

fn quoted(t: &str, n: usize) -> String {
    format!("{:?}", crate::util::one_line(t, n))
}

/// A missing fact says which, before what a pattern missed.
fn pattern_mismatch(spec: &CheckSpec, answer: &Answer, output_chars: usize) -> Option<Failure> {
    let text = answer.text;
    let needle = spec
        .needle
        .as_ref()
        .filter(|n| !n.found_in(text))
        .map(|n| n.sentence(text, answer.show_text));
    let expect = || {
        let re = spec.expect.as_ref().filter(|re| !re.is_match(text))?;
        Some(match answer.show_text {
            true => format!("expect /{re}/ did not match {}", quoted(text, 80)),
            false => format!("expect /{re}/ did not match the answer ({output_chars} characters; --show-output quotes it)"),
        })
    };
    let why = needle.or_else(expect)?;
    Some(Failure::new(Outcome::PatternMismatch, why))
}

fn forbidden_pattern(spec: &CheckSpec, answer: &Answer) -> Option<Failure> {
    let text = answer.text;
    let re = spec.forbid.as_ref()?;
    let m = re.find(text)?;
    if !answer.show_text {
        let at = text[..m.start()].chars().count();
        return Some(Failure::new(
            Outcome::ForbiddenPattern,
            format!("forbid /{re}/ matched at character {at} (--show-output quotes it)"),
        ));
    }
    // A little of what comes before the match, from a word's start.
    let mut from = m.start().saturating_sub(30);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    if from > 0 && !text[..from].ends_with(char::is_whitespace) {
        from = text[from..m.start()]
            .find(char::is_whitespace)
            .map_or(m.start(), |i| from + i);
    }
    Some(Failure::new(
        Outcome::ForbiddenPattern,
        format!(
            "forbid /{re}/ matched {} in {}",
            quoted(m.as_str(), 40),
            quoted(&text[from..], 80)
        ),
    ))
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
            ..CheckSpec::default()
        }
    }

    fn text<'a>(text: &'a str, finish: &'a str) -> Answer<'a> {
        Answer {
            text,
            finish_reason: Some(finish),
            show_text: true,
            ..Answer::default()
        }
    }

    #[test]
    fn a_content_filter_stop_is_content_filtered() {
        let v = judge(&spec(), &text("I can't help with", CONTENT_FILTER));
        assert_eq!(v.failed()[0], Outcome::ContentFiltered);
        assert_eq!(
            Outcome::first_content_failure(&v.failed()),
            Outcome::ContentFiltered
        );
        assert!(
            v.explanation().unwrap().contains("content policy"),
            "{:?}",
            v.explanation()
        );
        // Cut with nothing said: empty_output ranks first, content_filtered is listed.
        let v = judge(&spec(), &text("", CONTENT_FILTER));
        assert_eq!(
            &v.failed()[..2],
            [Outcome::EmptyOutput, Outcome::ContentFiltered]
        );
        let v = judge(&spec(), &text("The capital of France is Paris.", "stop"));
        assert!(!v.failed().contains(&Outcome::ContentFiltered));
    }

    #[test]
    fn healthy_passes() {
        let v = judge(&spec(), &text("The capital of France is Paris.", "stop"));
        assert!(v.failed().is_empty(), "{:?}", v.failed());
        assert_eq!(v.output_chars, 31);
    }

    #[test]
    fn pattern_failures_name_the_pattern_and_show_the_text() {
        let v = judge(
            &spec(),
            &text("As an AI model, I say\nthe capital is Berlin.", "stop"),
        );
        assert_eq!(
            v.explanation().as_deref(),
            Some(
                r#"expect /(?i)paris/ did not match "As an AI model, I say the capital is Berlin.""#
            )
        );
        assert_eq!(
            v.why(Outcome::ForbiddenPattern),
            Some(
                r#"forbid /(?i)as an ai/ matched "As an AI" in "As an AI model, I say the capital is Berlin.""#
            )
        );
        // Without --show-output the generated text stays out of the result.
        let quiet = Answer {
            show_text: false,
            ..text("As an AI model, I say the capital is Berlin.", "stop")
        };
        let v = judge(&spec(), &quiet);
        assert_eq!(
            v.explanation().as_deref(),
            Some("expect /(?i)paris/ did not match the answer (44 characters; --show-output quotes it)")
        );
        assert_eq!(
            v.why(Outcome::ForbiddenPattern),
            Some("forbid /(?i)as an ai/ matched at character 0 (--show-output quotes it)")
        );
        // The outcome is what is explained: too short comes before the pattern.
        let v = judge(&spec(), &text("Berlin", "stop"));
        assert_eq!(
            v.failed(),
            vec![Outcome::TooShort, Outcome::PatternMismatch]
        );
        assert_eq!(
            v.explanation().as_deref(),
            Some("the answer has 6 characters, under min_chars 10")
        );
        // Long texts are cut; the forbidden match is shown with what comes just before it.
        let long = format!("{} as an AI I cannot.", "word ".repeat(40));
        let forbid = judge(&spec(), &text(&long, "stop"))
            .why(Outcome::ForbiddenPattern)
            .unwrap()
            .to_string();
        assert!(
            forbid.ends_with(r#"in "word word word word word as an AI I cannot.""#),
            "{forbid}"
        );
        let expect = judge(&spec(), &text(&"x ".repeat(100), "stop"))
            .why(Outcome::PatternMismatch)
            .map(str::to_string)
            .unwrap();
        assert!(expect.ends_with("…\""), "{expect}");
        // Cut by max_tokens: the outcome is truncated, and the sentence still says why the JSON
        // broke.
        let json = CheckSpec {
            json: true,
            ..CheckSpec::default()
        };
        let v = judge(&json, &text("{\"city\": \"Par", "length"));
        assert_eq!(v.failed(), vec![Outcome::Truncated, Outcome::FormatError]);
        assert_eq!(v.explanation().as_deref(), v.why(Outcome::FormatError));
        assert!(v.why(Outcome::FormatError).is_some());
    }

    #[test]
    fn every_content_failure_has_its_sentence() {
        let why = |spec: &CheckSpec, t: &str, finish: &str| {
            let v = judge(spec, &text(t, finish));
            (v.failed().clone(), v.explanation().unwrap_or_default())
        };
        let none = CheckSpec::default();
        assert_eq!(
            why(&none, " \u{200B}", "stop"),
            (
                vec![Outcome::EmptyOutput],
                "the answer is empty: 2 characters, all whitespace or invisible".into()
            )
        );
        assert_eq!(
            why(&none, "Paris is the capital", "length"),
            (
                vec![Outcome::Truncated],
                "the answer was cut at max_tokens (finish reason length)".into()
            )
        );
        let (failed, sentence) = why(&spec(), &"Paris! ".repeat(40), "stop");
        assert_eq!(failed, vec![Outcome::Repetition, Outcome::TooLong]);
        assert!(
            sentence.starts_with("repetition, detector tail_loop: the text ends in a loop of ")
                && sentence.ends_with(" times"),
            "{sentence}"
        );
        let words: Vec<String> = (0..30).map(|i| format!("w{i}")).collect();
        let long = format!("Paris. {}", words.join(" "));
        assert_eq!(
            why(&spec(), &long, "stop"),
            (
                vec![Outcome::TooLong],
                "the answer has 116 characters, over max_chars 100".into()
            )
        );
        let v = judge(&spec(), &text("The capital of France is Paris.", "stop"));
        assert_eq!(v.explanation(), None);
    }

    #[test]
    fn invisible_only_is_empty() {
        let v = judge(&spec(), &text(" \u{200B}\n\u{FEFF}\t", "stop"));
        assert_eq!(v.failed()[0], Outcome::EmptyOutput);
    }

    #[test]
    fn every_failure_is_listed_in_precedence_order() {
        let v = judge(&spec(), &text("As an AI, no.", "length"));
        assert_eq!(
            v.failed(),
            vec![
                Outcome::Truncated,
                Outcome::PatternMismatch,
                Outcome::ForbiddenPattern
            ]
        );
        let v = judge(&spec(), &text("Berlin", "stop"));
        assert_eq!(
            v.failed(),
            vec![Outcome::TooShort, Outcome::PatternMismatch]
        );
        let long = "Paris! ".repeat(40);
        let v = judge(&spec(), &text(&long, "stop"));
        assert_eq!(v.failed(), vec![Outcome::Repetition, Outcome::TooLong]);
    }

    #[test]
    fn truncation_can_be_allowed_and_chars_count_characters() {
        let s = CheckSpec {
            allow_truncation: true,
            min_chars: Some(5),
            ..CheckSpec::default()
        };
        let v = judge(&s, &text("巴黎是首都", "length"));
        assert!(v.failed().is_empty(), "{:?}", v.failed());
        assert_eq!(v.output_chars, 5);
    }

    #[test]
    fn json_checks_fail_as_format_error_with_the_reason() {
        let s = CheckSpec {
            json: true,
            ..CheckSpec::default()
        };
        let v = judge(&s, &text("```json\n{\"city\": \"Paris\"}\n```", "stop"));
        assert!(v.failed().is_empty(), "{:?}", v.failed());
        let v = judge(&s, &text("The city is Paris.", "stop"));
        assert_eq!(v.failed(), vec![Outcome::FormatError]);
        assert_eq!(
            v.explanation().as_deref(),
            Some("the answer is not JSON: expected value at line 1 column 1")
        );
        // Truncated JSON is truncated first: that is the cause; the sentence still says where
        // the JSON broke.
        let v = judge(&s, &text("{\"city\": \"Pa", "length"));
        assert_eq!(v.failed(), vec![Outcome::Truncated, Outcome::FormatError]);
        assert_eq!(
            v.explanation().as_deref(),
            Some("the answer is not JSON: EOF while parsing a string at line 1 column 12")
        );
    }

    #[test]
    fn a_tool_call_is_content_and_a_missing_one_is_a_tool_call_error() {
        use std::path::Path;
        let schema = serde_json::json!({"type": "object", "required": ["city"]});
        let s = CheckSpec {
            tool_call: Some(tool_call::Required {
                name: "get_weather".into(),
                schema: Arc::new(
                    schema::Schema::compile(Path::new("/nowhere/t.json"), schema, "").unwrap(),
                ),
            }),
            ..CheckSpec::default()
        };
        let calls = [tool_call::ToolCall {
            name: "get_weather".into(),
            arguments: "{\"city\": \"Paris\"}".into(),
        }];
        let called = Answer {
            text: "",
            finish_reason: Some("tool_calls"),
            tool_calls: &calls,
            ..Answer::default()
        };
        assert!(judge(&s, &called).failed().is_empty());
        let v = judge(&s, &text("It is sunny in Paris.", "stop"));
        assert_eq!(v.failed(), vec![Outcome::ToolCallError]);
        assert_eq!(
            v.explanation().as_deref(),
            Some("no tool call: get_weather was to be called")
        );
    }

    #[test]
    fn a_count_past_max_lines_is_too_long_and_says_so() {
        let s = CheckSpec {
            max_lines: Some(10),
            repetition: Some(Default::default()),
            ..CheckSpec::default()
        };
        // Count down from ten to one: ten lines pass, blank ones do not count.
        let right: String = (1..=10).rev().map(|n| format!("{n}\n\n")).collect();
        assert!(judge(&s, &text(&right, "stop")).failed().is_empty());
        // A counter that runs on is no loop to the detectors; the bound catches it.
        let runaway: String = (10..50).map(|n| format!("{n}\n")).collect();
        let v = judge(&s, &text(&runaway, "stop"));
        assert_eq!(v.failed(), vec![Outcome::TooLong]);
        assert_eq!(
            v.explanation().as_deref(),
            Some("the answer has 40 lines, more than max_lines (10)")
        );
        // max_chars alone says nothing of lines: its sentence counts characters.
        let chars = CheckSpec {
            max_chars: Some(10),
            ..CheckSpec::default()
        };
        let v = judge(&chars, &text(&runaway, "stop"));
        assert_eq!(v.failed(), vec![Outcome::TooLong]);
        assert_eq!(
            v.explanation().as_deref(),
            Some("the answer has 120 characters, over max_chars 10")
        );
    }

    #[test]
    fn a_run_stopped_on_a_loop_is_repetition() {
        let v = judge(
            &CheckSpec::default(),
            &Answer {
                text: "ha ha",
                stopped_early: true,
                ..Answer::default()
            },
        );
        assert_eq!(v.failed(), vec![Outcome::Repetition]);
    }

    #[test]
    fn marks_alone_are_no_answer_whatever_their_length() {
        for dots in [
            ".",
            "......",
            &".".repeat(400),
            "— — —\n***\n",
            "?!?! … ‽",
            "。。。、、",
        ] {
            let v = judge(&spec(), &text(dots, "length"));
            assert_eq!(
                v.outcome(),
                Outcome::EmptyOutput,
                "{dots:?}: {:?}",
                v.failed()
            );
            assert!(
                v.explanation().unwrap().contains("no letter or digit"),
                "{:?}",
                v.explanation()
            );
        }
        // A letter, a digit or a CJK character anywhere is an answer, to be judged as one.
        for some in ["...a...", "42", "……巴黎……", "- 1\n- 2"] {
            let v = judge(&spec(), &text(some, "stop"));
            assert!(!v.failed().contains(&Outcome::EmptyOutput), "{some:?}");
        }
    }
}
