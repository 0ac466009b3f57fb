//! A probe's `checks:` (and the tool a `tool_call` check requires), validated at load.

use std::path::Path;
use std::sync::Arc;

use serde_saphyr::Spanned;

use super::super::raw;
use super::super::{probe_files, ConfigError, FieldPath, Source};
use crate::checks::repetition::Thresholds;
use crate::checks::tool_call::{self, Tool};
use crate::checks::{CheckSpec, Reference, DEFAULT_MIN_SIMILARITY};

pub(super) fn load_checks(
    src: &Source,
    at: &FieldPath,
    c: raw::RawChecks,
    (base, unrecorded_ok): (&Path, bool),
    tools: Option<&[Tool]>,
) -> Result<CheckSpec, ConfigError> {
    let Lengths {
        min_chars,
        max_chars,
        max_lines,
    } = lengths(src, at, &c)?;
    let (repetition, stop_on_repetition) = repetition(src, at, c.repetition, c.stop_on_repetition)?;
    let json_schema = match &c.json_schema {
        Some(file) => Some(Arc::new(
            probe_files::schema(&base.join(&file.value))
                .map_err(|e| src.err(&at.key("json_schema"), file.referenced, e))?,
        )),
        None => None,
    };
    let tool_call = match &c.tool_call {
        Some(name) => Some(required_tool(src, &at.key("tool_call"), name, tools)?),
        None => None,
    };
    Ok(CheckSpec {
        min_chars,
        max_chars,
        max_lines,
        expect: c.expect.map(|r| r.0),
        forbid: c.forbid.map(|r| r.0),
        repetition,
        stop_on_repetition,
        allow_truncation: c.allow_truncation.unwrap_or(false),
        // A schema is a JSON check with more to say.
        json: c.json.unwrap_or(false) || json_schema.is_some(),
        json_schema,
        tool_call,
        needle: None,
        reference: c
            .reference
            .map(|r| reference(src, &at.key("reference"), r, base, unrecorded_ok))
            .transpose()?,
    })
}

/// The length checks: characters at least and at most, lines at most.
struct Lengths {
    min_chars: Option<usize>,
    max_chars: Option<usize>,
    max_lines: Option<usize>,
}

/// `min_chars` and `max_chars` (0 or more, the least no more than the most) and `max_lines`
/// (1 or more).
fn lengths(src: &Source, at: &FieldPath, c: &raw::RawChecks) -> Result<Lengths, ConfigError> {
    let chars = |v: &Option<Spanned<i64>>, what: &str| -> Result<Option<usize>, ConfigError> {
        match v {
            Some(s) if s.value < 0 => Err(src.err(
                &at.key(what),
                s.referenced,
                format!("{what} must be 0 or more, found {}", s.value),
            )),
            Some(s) => Ok(Some(s.value as usize)),
            None => Ok(None),
        }
    };
    let min_chars = chars(&c.min_chars, "min_chars")?;
    let max_chars = chars(&c.max_chars, "max_chars")?;
    if let (Some(min), Some(max), Some(m)) = (min_chars, max_chars, &c.max_chars) {
        if min > max {
            return Err(src.err(
                &at.key("max_chars"),
                m.referenced,
                format!("max_chars ({max}) is below min_chars ({min})"),
            ));
        }
    }
    let max_lines = match &c.max_lines {
        Some(s) if s.value < 1 => {
            return Err(src.err(
                &at.key("max_lines"),
                s.referenced,
                format!("max_lines must be 1 or more, found {}", s.value),
            ))
        }
        Some(s) => Some(s.value as usize),
        None => None,
    };
    Ok(Lengths {
        min_chars,
        max_chars,
        max_lines,
    })
}

/// `repetition:` (the default thresholds unless `off` or written) and `stop_on_repetition`,
/// which needs the check on.
fn repetition(
    src: &Source,
    at: &FieldPath,
    written: Option<raw::Repetition>,
    stop: Option<Spanned<bool>>,
) -> Result<(Option<Thresholds>, bool), ConfigError> {
    let repetition = match written.unwrap_or(raw::Repetition::Default) {
        raw::Repetition::Default => Some(Default::default()),
        raw::Repetition::Off => None,
        raw::Repetition::Custom(t) => Some(t),
    };
    let stop = match stop {
        Some(s) if s.value && repetition.is_none() => {
            return Err(src.err(
                &at.key("stop_on_repetition"),
                s.referenced,
                "stop_on_repetition needs the repetition check: remove `repetition: off`",
            ))
        }
        Some(s) => s.value,
        None => false,
    };
    Ok((repetition, stop))
}

/// `checks.reference`: its file read now. A file not written yet is an error that says how to
/// write it, except to `record`, which writes it.
fn reference(
    src: &Source,
    at: &FieldPath,
    r: raw::RawReference,
    base: &Path,
    unrecorded_ok: bool,
) -> Result<Reference, ConfigError> {
    let min_similarity = match &r.min_similarity {
        Some(m) if !(0.0..=1.0).contains(&m.value) => {
            return Err(src.err(
                &at.key("min_similarity"),
                m.referenced,
                format!("min_similarity must be between 0 and 1, found {}", m.value),
            ))
        }
        Some(m) => m.value,
        None => DEFAULT_MIN_SIMILARITY,
    };
    let path = base.join(&r.file.value);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) if t.trim().is_empty() => {
            return Err(src.err(
                &at.key("file"),
                r.file.referenced,
                format!("reference file {} is empty", path.display()),
            ))
        }
        Ok(t) => Some(Arc::from(t.as_str())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && unrecorded_ok => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(src.err(
                &at.key("file"),
                r.file.referenced,
                format!(
                    "reference file {} does not exist: `llm-canary record -c CONFIG --target TARGET` writes it from a healthy target's answer",
                    path.display()
                ),
            ))
        }
        Err(e) => {
            return Err(src.err(
                &at.key("file"),
                r.file.referenced,
                format!("cannot read reference file {}: {e}", path.display()),
            ))
        }
    };
    Ok(Reference {
        file: path,
        text,
        min_similarity,
    })
}

/// `checks.tool_call`: one of the probe's tools.
fn required_tool(
    src: &Source,
    field: &FieldPath,
    name: &Spanned<String>,
    tools: Option<&[Tool]>,
) -> Result<tool_call::Required, ConfigError> {
    let Some(tools) = tools else {
        return Err(src.err(
            field,
            name.referenced,
            "tool_call needs the probe's tools: add `tools: FILE`",
        ));
    };
    let Some(tool) = tools.iter().find(|t| t.name == name.value) else {
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return Err(src.err(
            field,
            name.referenced,
            format!(
                "no tool {:?} in the probe's tools ({})",
                name.value,
                known.join(", ")
            ),
        ));
    };
    Ok(tool_call::Required {
        name: tool.name.clone(),
        schema: tool.schema.clone(),
    })
}
