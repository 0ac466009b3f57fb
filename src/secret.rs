//! A secret value (an API key, the admin token) whose `Debug` and `Display` print `***`, so it
//! cannot leak into logs, errors or results by accident. The only ways to the value are
//! `expose()` and `matches()`, a comparison whose time does not depend on where a guess differs.

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

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
