//! A secret value (an API key) whose `Debug` and `Display` print `***`, so it cannot leak into
//! logs, errors or results by accident. The only way to the value is `expose()`.

use std::borrow::Cow;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// Where systemd puts a service's `LoadCredential=` files, in the service's environment.
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// A secret file's path as written, with a leading `$CREDENTIALS_DIRECTORY` (or
/// `${CREDENTIALS_DIRECTORY}`) replaced by that variable. systemd hands credentials to the
/// running service only, under a path it chooses; naming the folder by the variable lets the
/// same config be checked before the service exists, with the variable pointing at the key files.
pub fn credential_path(written: &str) -> Result<Cow<'_, str>, String> {
    let Some(rest) = ["${CREDENTIALS_DIRECTORY}", "$CREDENTIALS_DIRECTORY"]
        .iter()
        .find_map(|v| written.strip_prefix(v))
    else {
        return Ok(Cow::Borrowed(written));
    };
    match std::env::var(CREDENTIALS_DIRECTORY) {
        Ok(dir) if !dir.is_empty() => Ok(Cow::Owned(format!("{dir}{rest}"))),
        _ => Err(format!(
            "{written}: ${CREDENTIALS_DIRECTORY} is not set (systemd sets it for a service with LoadCredential=; to check the config outside the service, point it at the key files: sudo env {CREDENTIALS_DIRECTORY}=/etc/llm-canary/credentials llm-canary check)"
        )),
    }
}

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_credential_path_follows_the_variable() {
        // The only test in this crate that touches the variable, so setting it races no other.
        std::env::remove_var(super::CREDENTIALS_DIRECTORY);
        assert_eq!(super::credential_path("keys/a").unwrap(), "keys/a");
        let unset = super::credential_path("$CREDENTIALS_DIRECTORY/a").unwrap_err();
        assert!(unset.starts_with("$CREDENTIALS_DIRECTORY/a: $CREDENTIALS_DIRECTORY is not set"));
        std::env::set_var(super::CREDENTIALS_DIRECTORY, "/run/credentials/x.service");
        for written in ["$CREDENTIALS_DIRECTORY/a", "${CREDENTIALS_DIRECTORY}/a"] {
            assert_eq!(
                super::credential_path(written).unwrap(),
                "/run/credentials/x.service/a"
            );
        }
        std::env::remove_var(super::CREDENTIALS_DIRECTORY);
    }

    #[test]
    fn never_prints() {
        let s = super::Secret::new("sk-live-123".into());
        assert_eq!(format!("{s} {s:?} {:?}", Some(&s)), "*** *** Some(***)");
        assert_eq!(s.expose(), "sk-live-123");
    }
}
