//! A secret value (an API key, the admin token) whose `Debug` and `Display` print `***`, so it
//! cannot leak into logs, errors or results by accident. The only ways to the value are
//! `expose()` and `matches()`, a comparison whose time does not depend on where a guess differs.

use std::borrow::Cow;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// Where systemd puts a service's `LoadCredential=` files, in the service's environment.
pub(crate) const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";

/// A secret file's path as written, with a leading `$CREDENTIALS_DIRECTORY` (or
/// `${CREDENTIALS_DIRECTORY}`) replaced by that variable. systemd hands credentials to the
/// running service only, under a path it chooses; naming the folder by the variable lets the
/// same config be checked before the service exists, with the variable pointing at the key files.
pub(crate) fn credential_path(written: &str) -> Result<Cow<'_, str>, String> {
    let Some(rest) = ["${CREDENTIALS_DIRECTORY}", "$CREDENTIALS_DIRECTORY"]
        .iter()
        .find_map(|v| written.strip_prefix(v))
    else {
        return Ok(Cow::Borrowed(written));
    };
    match std::env::var(CREDENTIALS_DIRECTORY) {
        Ok(dir) if !dir.is_empty() => Ok(Cow::Owned(format!("{dir}{rest}"))),
        _ => Err(format!(
            "{written}: ${CREDENTIALS_DIRECTORY} is not set (systemd sets it for a service with LoadCredential=; to check the config outside the service, point it at the key files: sudo env {CREDENTIALS_DIRECTORY}=/etc/llm-canary/credentials llm-canary check -c /etc/llm-canary/llm-canary.yaml)"
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

    /// Whether `presented` is the secret, in time that tells nothing about how much of it was
    /// right: both are signed with a fresh random HMAC key and ring compares the tags in
    /// constant time (its plain constant-time comparison is deprecated), so neither a common
    /// prefix nor a length difference shows.
    pub fn matches(&self, presented: &[u8]) -> bool {
        use ring::hmac;
        let rng = ring::rand::SystemRandom::new();
        let Ok(key) = hmac::Key::generate(hmac::HMAC_SHA256, &rng) else {
            return false;
        };
        let tag = hmac::sign(&key, self.0.as_bytes());
        hmac::verify(&key, presented, tag.as_ref()).is_ok()
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

    #[test]
    fn matches_only_the_whole_value() {
        let s = super::Secret::new("tok-123".into());
        assert!(s.matches(b"tok-123"));
        for wrong in [&b""[..], b"tok-12", b"tok-1234", b"tok-124", b"TOK-123"] {
            assert!(!s.matches(wrong), "{:?}", String::from_utf8_lossy(wrong));
        }
    }
}
