//! Config errors as one sentence naming file, line, column and field, e.g.
//! `probes/capital.yaml:4:11: field timeouts.ttft: invalid duration "5x" ...`.
//! The field comes from where the error arose: a parser error's position, walked to in the
//! file's YAML structure (`locate`), and our validation after parsing names the field it
//! checks ([`FieldPath`]).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::field::FieldPath;
use super::locate::{field_at, About, Kind};
use serde_saphyr::{Localizer, Location, MessageFormatter, SnippetMode, UserMessageFormatter};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{}:{line}:{column}: field {field}: {message}", file.display())]
    At {
        file: PathBuf,
        line: u64,
        column: u64,
        field: String,
        message: String,
    },
    #[error("{}: {message}", file.display())]
    File { file: PathBuf, message: String },
}

/// The field a parser error at `loc` of `text` is about.
fn field_of_error(text: &str, loc: Location, err: &serde_saphyr::Error) -> FieldPath {
    use serde_saphyr::Error as E;
    let about = match err {
        E::SerdeMissingField { .. } | E::SerdeUnknownVariant { .. } => About::Mapping,
        E::SerdeUnknownField { .. }
        | E::DuplicateMappingKey { .. }
        | E::SerdeInvalidType { .. }
        | E::SerdeInvalidValue { .. }
        | E::SerdeInvalidLength { .. } => About::Key,
        _ => About::Value {
            len: usize::try_from(loc.span().len()).unwrap_or(usize::MAX),
            // What the parser expected instead of the node the error is about.
            expected: match err {
                E::Unexpected { expected, .. } => match *expected {
                    "mapping start" => Some(Kind::Mapping),
                    "sequence start" => Some(Kind::Sequence),
                    e if e.ends_with("scalar") => Some(Kind::Scalar),
                    _ => None,
                },
                _ => None,
            },
        },
    };
    let field = field_at(text, (loc.line(), loc.column()), about);
    // A missing field is reported on its mapping: name the field itself.
    match err {
        E::SerdeMissingField { field: missing, .. } => field.key(missing),
        _ => field,
    }
}

impl ConfigError {
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError::File {
            file: file.to_path_buf(),
            message: message.into(),
        }
    }

    /// An error at a known position of `file`, about the value at `field`.
    pub fn at(file: &Path, field: &FieldPath, loc: Location, message: impl Into<String>) -> Self {
        let (line, column) = (loc.line(), loc.column());
        if line == 0 {
            return Self::file(file, message);
        }
        ConfigError::At {
            file: file.to_path_buf(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// Turns the YAML parser's error into ours. `text` is the file's, to find the field at
    /// the error's position and see what stands there.
    pub fn from_yaml(file: &Path, text: &str, err: &serde_saphyr::Error) -> Self {
        let inner = err.without_snippet();
        // serde-saphyr's own rendering keeps a message on one line (control characters in a
        // key are escaped), which the fuzzer holds us to.
        let message = inner.render_with_options(serde_saphyr::render_options! {
            formatter: &Wording,
            snippets: SnippetMode::Off,
        });
        match inner.location() {
            Some(loc) => {
                let mut field = field_of_error(text, loc, inner);
                // An alias to no anchor, or a `*` with no anchor name after it (`* * * * *`).
                // Or a value starting with `@`, which YAML reserves (`@every 5m`, `@hourly`).
                let indicator = matches!(inner, serde_saphyr::Error::UnknownAnchor { .. })
                    || message.contains("alias")
                    || message.contains("unexpected character");
                match indicator.then(|| indicator_hint(text, loc)).flatten() {
                    Some((key, hint)) => {
                        // The alias fails before serde reaches the key: name it from the text.
                        if !field.as_str().ends_with(&key) {
                            field = field.key(&key);
                        }
                        Self::at(file, &field, loc, hint)
                    }
                    None => Self::at(file, &field, loc, message),
                }
            }
            None => Self::file(file, message),
        }
    }
}

/// An unquoted value that starts with `*` is a YAML alias (`*/5 * * * *` refers to an anchor
/// named `/5`), and one that starts with `@` is refused (YAML reserves the character), so a
/// cron expression or a descriptor written plainly fails with the parser's words. When the
/// error points at such a value after `key:`, say what happened and how to write it: the key
/// and the sentence.
fn indicator_hint(text: &str, loc: Location) -> Option<(String, String)> {
    let line = text
        .lines()
        .nth(usize::try_from(loc.line()).ok()?.checked_sub(1)?)?;
    let col = usize::try_from(loc.column()).ok()?.checked_sub(1)?;
    let (before, value) = line.split_at(line.char_indices().nth(col)?.0);
    let why = match value.chars().next()? {
        '*' => "YAML reads an unquoted value starting with * as an alias",
        '@' => "YAML reserves @ at the start of an unquoted value",
        _ => return None,
    };
    let key = before.trim_end().strip_suffix(':')?;
    // The key is the last word before the colon: `schedule`, `- schedule`, `{ttft`.
    let key = key
        .rsplit(|c: char| c.is_whitespace() || c == '{' || c == ',')
        .next()
        .filter(|k| !k.is_empty())?
        .to_string();
    // A flow mapping's value ends at `,` or `}`; a block value runs to a comment or the line's end.
    let value = if before.contains('{') {
        value.split([',', '}']).next().unwrap_or(value)
    } else {
        value.split(" #").next().unwrap_or(value)
    }
    .trim();
    let hint = format!("{why}: quote it ({key}: \"{}\")", value.escape_debug());
    Some((key, hint))
}

/// serde-saphyr's wording for users (not its hints for developers, such as "set
/// DuplicateKeyPolicy"), with numbers described instead of Rust types, and no position:
/// ours stands in front of the message.
struct Wording;

struct NoPosition;

impl Localizer for NoPosition {
    fn attach_location<'a>(&self, base: Cow<'a, str>, _loc: Location) -> Cow<'a, str> {
        base
    }
}

impl MessageFormatter for Wording {
    fn localizer(&self) -> &dyn Localizer {
        &NoPosition
    }

    fn format_message<'a>(&self, err: &'a serde_saphyr::Error) -> Cow<'a, str> {
        if let serde_saphyr::Error::InvalidScalar { ty, .. } = err {
            match *ty {
                "u8" | "u16" | "u32" | "u64" | "usize" => {
                    return "expected a whole number, 0 or more".into()
                }
                "i8" | "i16" | "i32" | "i64" | "isize" => return "expected a whole number".into(),
                "f32" | "f64" | "floating point" => return "expected a number".into(),
                _ => {}
            }
        }
        UserMessageFormatter
            .with_localizer(&NoPosition)
            .format_message(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{raw, Source};

    /// The error `text` gives as a `T` read from the file `path`.
    fn error_as<T: serde::de::DeserializeOwned>(path: &str, text: &str) -> String {
        let src = Source {
            path: Path::new(path),
            text,
        };
        match src.parse::<T>() {
            Ok(_) => "(parsed)".into(),
            Err(e) => e.to_string(),
        }
    }

    fn main_error(text: &str) -> String {
        error_as::<raw::RawMain>("c.yaml", text)
    }

    #[test]
    fn parser_errors_name_the_field_they_were_read_at() {
        assert_eq!(
            main_error("agent:\n  concurrency: many\ntargets: []\n"),
            "c.yaml:2:16: field agent.concurrency: expected a whole number"
        );
        assert_eq!(
            main_error(
                "targets:\n  - {name: t, base_url: x, model: m}\n  - {name: u, base_url: x}\n"
            ),
            "c.yaml:3:15: field targets[1].model: missing field `model`"
        );
        assert_eq!(
            main_error("targets: []\nagent: {labels: {env: [1]}}\n"),
            "c.yaml:2:23: field agent.labels.env: expected string scalar"
        );
        // A user's key may be called `value`, as a field of serde-saphyr's `Spanned` is.
        assert_eq!(
            main_error("targets: []\nagent: {labels: {value: [1]}}\n"),
            "c.yaml:2:25: field agent.labels.value: expected string scalar"
        );
        assert_eq!(
            main_error("targets: []\nprobes_dir: a\nprobes_dir: b\n"),
            "c.yaml:3:1: field probes_dir: duplicate mapping key `probes_dir` is not allowed here"
        );
    }

    #[test]
    fn the_field_is_the_one_serde_was_reading_at_the_error() {
        let probe = |text: &str| error_as::<raw::RawProbe>("p.yaml", text);
        let probes = |text: &str| error_as::<Vec<raw::RawProbe>>("p.yaml", text);
        // A block mapping begins where its first key does: the mapping is the wrong kind, and
        // so is a sequence that begins where its first element does.
        assert_eq!(
            main_error("targets:\n  a: b\n"),
            "c.yaml:2:3: field targets: expected sequence start"
        );
        assert_eq!(
            probe("name: p\nprompt: q.txt\ntimeouts:\n- total: 5s\n"),
            "p.yaml:4:3: field timeouts: expected mapping start"
        );
        // Where the key is the value's: serde-saphyr puts a mismatch serde finds at its key.
        assert_eq!(
            probe("name: p\nprompt: q.txt\nchecks:\n  repetition: [1]\n"),
            "p.yaml:4:3: field checks.repetition: invalid type: sequence, expected `default`, `off` or a map of thresholds"
        );
        // The wrong kind of element, where the sequence begins where the element does.
        assert_eq!(
            probes("- name: p\n  prompt: q.txt\n  targets:\n  - {name: x}\n"),
            "p.yaml:4:5: field [0].targets[0]: expected string scalar"
        );
        // An enum's unknown variant names the enum's field.
        assert_eq!(
            main_error("targets:\n  - {name: t, base_url: x, model: m, api: {chat: 1}}\n"),
            "c.yaml:2:44: field targets[0].api: unknown variant `chat`, expected one of openai-chat, openai-completions, openai-responses, anthropic-messages, ollama, azure-openai, gemini, bedrock"
        );
        // A missing field in a block mapping with one key.
        assert_eq!(
            main_error("targets:\n  - name: t\n"),
            "c.yaml:2:5: field targets[0].base_url: missing field `base_url`"
        );
        // The parser fails in a value before serde-saphyr hands serde its key.
        assert_eq!(
            probe("name: p\nprompt: \"q.txt\n"),
            "p.yaml:2:9: field (document): unclosed quote"
        );
        // A tag the parser refuses names the field it stands on.
        assert_eq!(
            probe("name: p\nprompt: q.txt\ntargets: !!str [t]\n"),
            "p.yaml:3:16: field targets: unsupported tag `!!str`"
        );
        // A key in a nested mapping repeated.
        assert_eq!(
            main_error("targets: []\nagent:\n  labels: {a: x, a: y}\n"),
            "c.yaml:3:18: field agent.labels.a: duplicate mapping key `a` is not allowed here"
        );
    }

    #[test]
    fn an_unquoted_cron_gets_a_hint_to_quote_it() {
        let probe = |text: &str| error_as::<raw::RawProbe>("p.yaml", text);
        assert_eq!(
            probe("name: p\nschedule: */5 * * * *\nprompt: q.txt\n"),
            "p.yaml:2:11: field schedule: YAML reads an unquoted value starting with * as an alias: quote it (schedule: \"*/5 * * * *\")"
        );
        assert_eq!(
            probe("name: p\nschedule: * * * * * # every second\nprompt: q.txt\n"),
            "p.yaml:2:11: field schedule: YAML reads an unquoted value starting with * as an alias: quote it (schedule: \"* * * * *\")"
        );
        assert_eq!(
            probe("name: p\nprompt: q.txt\ntimeouts: {ttft: *x, total: 5s}\n"),
            "p.yaml:3:18: field timeouts.ttft: YAML reads an unquoted value starting with * as an alias: quote it (ttft: \"*x\")"
        );
        // Quoted, it is a cron expression.
        assert_eq!(
            probe("name: p\nschedule: \"*/5 * * * *\"\nprompt: q.txt\n"),
            "(parsed)"
        );
    }

    #[test]
    fn parser_messages_stay_on_one_line() {
        let e = main_error("\"a\\nb\": 1\n");
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("c.yaml:1:1: field a"), "{e}");
    }

    #[test]
    fn paths_read_as_written() {
        let p = FieldPath::root().key("targets").index(1).key("labels");
        assert_eq!(p.to_string(), "targets[1].labels");
        assert_eq!(
            FieldPath::root().index(0).key("role").to_string(),
            "[0].role"
        );
        assert_eq!(FieldPath::root().to_string(), "(document)");
    }
}
