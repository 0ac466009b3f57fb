//! A config file being loaded, and the readings every part of the config shares: the file's
//! text, a secret from the environment or a file, a bounded count, a time zone.

use std::path::Path;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::duration::Dur;
use super::error::ConfigError;
use super::field::FieldPath;
use crate::secret::Secret;

/// A file being loaded: its path and text, to turn positions into errors.
pub(crate) struct Source<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

impl Source<'_> {
    pub(crate) fn err(
        &self,
        field: &FieldPath,
        loc: Location,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::at(self.path, field, loc, message)
    }

    /// Whether the file holds nothing but blank lines, comments and `---`.
    pub(crate) fn is_blank(&self) -> bool {
        !self
            .text
            .lines()
            .map(str::trim)
            .any(|l| !l.is_empty() && !l.starts_with('#') && l != "---")
    }

    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        if self.is_blank() {
            return Err(ConfigError::file(self.path, "the file is empty"));
        }
        let options = serde_saphyr::options! { with_snippet: false };
        serde_saphyr::with_deserializer_from_str_with_options(self.text, options, |de| {
            T::deserialize(de)
        })
        .map_err(|e| ConfigError::from_yaml(self.path, self.text, &e))
    }
}

pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::file(path, format!("cannot read the file: {}", io_reason(&e))))
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// A `timezone:` value (UTC when absent).
pub(super) fn time_zone(
    src: &Source,
    field: &FieldPath,
    tz: Option<&Spanned<String>>,
) -> Result<jiff::tz::TimeZone, ConfigError> {
    let Some(tz) = tz else {
        return Ok(jiff::tz::TimeZone::UTC);
    };
    jiff::tz::TimeZone::get(&tz.value).map_err(|_| {
        src.err(
            field,
            tz.referenced,
            format!("unknown time zone {:?}", tz.value),
        )
    })
}

/// A whole number from 1 to `max`, the value of `key` in the mapping at `parent`.
pub(super) fn positive(
    src: &Source,
    parent: &FieldPath,
    key: &str,
    v: &Spanned<i64>,
    max: i64,
) -> Result<i64, ConfigError> {
    if v.value < 1 || v.value > max {
        return Err(src.err(
            &parent.key(key),
            v.referenced,
            format!("{key} must be between 1 and {max}, found {}", v.value),
        ));
    }
    Ok(v.value)
}

/// A secret from an environment variable or a file (relative to the config file).
/// `what` names the pair of keys, `{what}_env` and `{what}_file`, of the mapping at `at`.
pub(super) fn read_secret(
    src: &Source,
    at: &FieldPath,
    env: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    base: &Path,
    what: &str,
) -> Result<Option<Secret>, ConfigError> {
    let env_field = at.key(&format!("{what}_env"));
    let file_field = at.key(&format!("{what}_file"));
    match (env, file) {
        (Some(_), Some(f)) => Err(src.err(
            &file_field,
            f.referenced,
            format!("set {what}_env or {what}_file, not both"),
        )),
        (Some(env), None) => match std::env::var(&env.value) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_string()))),
            _ => Err(src.err(
                &env_field,
                env.referenced,
                format!("environment variable {} is not set", env.value),
            )),
        },
        (None, Some(file)) => {
            let written = crate::secret::credential_path(&file.value)
                .map_err(|e| src.err(&file_field, file.referenced, e))?;
            let p = base.join(written.as_ref());
            match std::fs::read_to_string(&p) {
                Ok(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_string()))),
                Ok(_) => Err(src.err(
                    &file_field,
                    file.referenced,
                    format!("{what} file {} is empty", p.display()),
                )),
                Err(e) => Err(src.err(
                    &file_field,
                    file.referenced,
                    format!("cannot read {what} file {}: {}", p.display(), io_reason(&e)),
                )),
            }
        }
        (None, None) => Ok(None),
    }
}

pub(super) fn nonzero(
    src: &Source,
    at: &FieldPath,
    key: &str,
    d: Option<Spanned<Dur>>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match d {
        Some(s) if s.value.0.is_zero() => Err(src.err(
            &at.key(key),
            s.referenced,
            format!("{key} must be longer than zero"),
        )),
        Some(s) => Ok(s.value.0),
        None => Ok(default),
    }
}
