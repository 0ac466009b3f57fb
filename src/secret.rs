//! A secret value (an API key) whose `Debug` and `Display` print `***`, so it cannot leak into
//! logs, errors or results by accident. The only way to the value is `expose()`.

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

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
    fn never_prints() {
        let s = super::Secret::new("sk-live-123".into());
        assert_eq!(format!("{s} {s:?} {:?}", Some(&s)), "*** *** Some(***)");
        assert_eq!(s.expose(), "sk-live-123");
    }
}
