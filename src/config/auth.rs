//! What the agent's outputs (`push:` and `remote_write:`) share: the URL's rules, and HTTP
//! auth, basic or bearer, with the secret read from an environment variable or a file, never
//! from the config text.

use std::path::Path;

use serde_saphyr::{Location, Spanned};

use super::error::ConfigError;
use super::field::FieldPath;
use super::source::{read_secret, Source};
use crate::secret::Secret;

#[derive(Debug, Clone)]
pub enum PushAuth {
    Basic { username: String, password: Secret },
    Bearer(Secret),
}

/// The auth keys of an output's mapping, as written.
pub(super) struct AuthKeys {
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub bearer_token_env: Option<Spanned<String>>,
    pub bearer_token_file: Option<Spanned<String>>,
}

/// The auth keys of an output's raw mapping (`push:`, `remote_write:`, `otlp:` write them
/// alike; serde cannot flatten them into a mapping that refuses unknown keys).
macro_rules! auth_keys {
    ($raw:expr) => {
        $crate::config::auth::AuthKeys {
            username: $raw.username,
            password_env: $raw.password_env,
            password_file: $raw.password_file,
            bearer_token_env: $raw.bearer_token_env,
            bearer_token_file: $raw.bearer_token_file,
        }
    };
}
pub(super) use auth_keys;

/// Basic auth, a bearer token, or none. `what` names the output in errors (`push`,
/// `remote_write`); `url_at` is where a lone password's error points when nothing better is.
pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    keys: AuthKeys,
    base: &Path,
    what: &str,
    url_at: (FieldPath, Location),
) -> Result<Option<PushAuth>, ConfigError> {
    // Where the password was given, for the error if nobody goes with it.
    let password_at = match (&keys.password_env, &keys.password_file) {
        (Some(s), _) => Some((at.key("password_env"), s.referenced)),
        (None, Some(s)) => Some((at.key("password_file"), s.referenced)),
        (None, None) => None,
    };
    let password = read_secret(
        src,
        at,
        keys.password_env,
        keys.password_file,
        base,
        "password",
    )?;
    let bearer = read_secret(
        src,
        at,
        keys.bearer_token_env,
        keys.bearer_token_file,
        base,
        "bearer_token",
    )?;
    match (keys.username, password, bearer) {
        (Some(u), _, Some(_)) => Err(src.err(
            &at.key("username"),
            u.referenced,
            "set username and password, or a bearer token, not both",
        )),
        (Some(u), Some(password), None) => Ok(Some(PushAuth::Basic {
            username: u.value,
            password,
        })),
        (Some(u), None, None) => Err(src.err(
            &at.key("username"),
            u.referenced,
            "username needs password_env or password_file",
        )),
        (None, Some(_), _) => {
            let (field, loc) = password_at.unwrap_or(url_at);
            Err(src.err(&field, loc, format!("a {what} password needs a username")))
        }
        (None, None, Some(token)) => Ok(Some(PushAuth::Bearer(token))),
        (None, None, None) => Ok(None),
    }
}

/// An output's `url` (the mapping at `at`), without a trailing slash: http(s), a host, no
/// credentials.
pub(super) fn url(
    src: &Source,
    at: &FieldPath,
    url: &Spanned<String>,
    what: &str,
) -> Result<String, ConfigError> {
    let text = url.value.trim().trim_end_matches('/').to_string();
    match plain_http_url(&text) {
        true => Ok(text),
        false => Err(src.err(&at.key("url"), url.referenced, bad_url(what, &url.value))),
    }
}

/// An http(s) URL with a host and no credentials in it: what every output may send to.
pub(super) fn plain_http_url(text: &str) -> bool {
    reqwest::Url::parse(text).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host().is_some()
            && u.username().is_empty()
            && u.password().is_none()
    })
}

/// Why an output's `url` is refused. A URL holding credentials is not echoed: they are
/// secrets, and errors are printed and logged.
fn bad_url(what: &str, raw: &str) -> String {
    let has_credentials = reqwest::Url::parse(raw)
        .map(|u| !u.username().is_empty() || u.password().is_some())
        .unwrap_or(false);
    if has_credentials {
        format!("{what} url must not hold credentials: set username with password_env or password_file, or a bearer token")
    } else {
        format!("{what} url {raw:?} must be an http(s) URL without credentials")
    }
}

/// An output's `job` label (`push:`, `remote_write:`): `llm_canary` unless given, never empty.
pub(super) fn job(
    src: &Source,
    at: &FieldPath,
    job: Option<Spanned<String>>,
) -> Result<String, ConfigError> {
    match job {
        Some(j) if j.value.is_empty() => {
            Err(src.err(&at.key("job"), j.referenced, "job must not be empty"))
        }
        Some(j) => Ok(j.value),
        None => Ok("llm_canary".into()),
    }
}
